"""Case memory (``cases``), ``hybrid-cases`` and the per-regulation hybrid presets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privacy_ci.ci import Flow
from privacy_ci.retrieval import (
    BEST_HYBRID,
    HYBRID_PRESETS,
    CaseMemoryConfig,
    CasesHybridRetriever,
    Hit,
    MemoryCase,
    NoCaseMemoryError,
    RetrievalError,
    RetrievalQuery,
    build_retriever,
    dev_split,
    fuse,
    hybrid_preset,
    memory_cases,
    refine_into,
    retriever_names,
    vote_node,
)
from tests.retrieval import toy_kb


@dataclass
class Case:
    id: str
    text: str
    gold_nodes: tuple[str, ...]
    label: str = "permit"
    flow: Flow = field(default_factory=Flow)


MEMORY = [
    Case("c1", "the court ordered the hospital to hand over the medical records", ("1(a)",)),
    Case("c2", "police asked the clinic to identify a suspect from its files", ("1(b)",)),
    Case("c3", "the pharmacy sold patient lists to a marketing firm", ("2(a)",)),
    Case("c4", "a worker's injury report went from the clinic to the employer", ("3(a)",)),
    Case("c5", "a subpoena from a lawyer reached the hospital records office", ("1", "1(a)")),
]


class Ranked:
    """A retriever that answers a fixed ranking."""

    def __init__(self, name: str, ids: list[str], kb: Any = None) -> None:
        self.name = name
        self.ids = ids
        self.kb = kb

    def retrieve(self, query: Any, k: int = 10) -> list[Hit]:
        return [Hit(n, 1.0 / (i + 1)) for i, n in enumerate(self.ids[:k])]


# -- pure parts ------------------------------------------------------------------------
def test_memory_cases_keep_only_applicable_cases_with_known_gold() -> None:
    kb = toy_kb()
    cases = [
        *MEMORY,
        Case("na", "not applicable at all", ("1(a)",), label="not applicable"),
        Case("nogold", "no gold ids", ()),
        Case("outside", "cites only what the tree lacks", ("9(z)",)),
        Case("mixed", "cites one known and one unknown id", ("9(z)", "2(b)")),
        Case("empty", "   ", ("1(a)",)),
    ]
    kept = memory_cases(cases, kb)
    assert [m.case_id for m in kept] == ["c1", "c2", "c3", "c4", "c5", "mixed"]
    assert kept[-1].gold == ("2(b)",)
    assert all(isinstance(m.query, RetrievalQuery) for m in kept)


def test_refine_into_takes_the_best_base_node_inside_each_vote() -> None:
    kb = toy_kb()
    base = [Hit("3(b)", 9), Hit("1(b)", 8), Hit("1(a)", 7), Hit("2(a)", 6)]
    voted = [Hit("1", 5.0), Hit("1(a)", 4.0), Hit("2", 3.0), Hit("3(a)", 2.0), Hit("1(b)", 1.0)]
    got = refine_into(voted, base, kb)
    # "1" -> its best base node 1(b); 1(a) is itself; "2" -> 2(a); 3(a) has no base node
    # inside it and stays; 1(b) is taken already and is not repeated
    assert [(h.node_id, h.score) for h in got] == [
        ("1(b)", 5.0),
        ("1(a)", 4.0),
        ("2(a)", 3.0),
        ("3(a)", 2.0),
    ]
    assert refine_into([Hit("unknown", 1.0)], base, kb) == [Hit("unknown", 1.0)]


def test_cases_hybrid_is_rrf_of_base_and_refined_votes() -> None:
    kb = toy_kb()
    base = Ranked("hybrid", ["3(b)", "1(b)", "1(a)"], kb)
    memory = Ranked("cases", ["1", "2(a)"], kb)
    r = CasesHybridRetriever(base, memory, weights=(1.0, 2.0))  # type: ignore[arg-type]
    got = r.retrieve("anything", 10)
    want = fuse([base.retrieve("", 100), [Hit("1(b)", 1.0), Hit("2(a)", 0.5)]], 60, (1.0, 2.0))
    assert got == want
    assert got[0].node_id == "1(b)"  # in both rankings
    assert math.isclose(got[0].score, 1 / 62 + 2 / 61)
    assert len(r.retrieve("anything", 2)) == 2
    with pytest.raises(RetrievalError):
        r.retrieve("anything", 0)


def test_vote_node_is_one_level_below_the_section() -> None:
    kb = toy_kb()
    assert vote_node(kb, "1(a)") == "1(a)"  # a child of section 1 already
    assert vote_node(kb, "1") == "1" and vote_node(kb, "TOY") == "TOY"
    assert vote_node(kb, "not-a-node") == "not-a-node"


def test_config_is_checked() -> None:
    with pytest.raises(RetrievalError, match="neighbours"):
        CaseMemoryConfig(neighbours=0)
    with pytest.raises(RetrievalError, match="temperature"):
        CaseMemoryConfig(temperature=0)
    with pytest.raises(RetrievalError, match="vote_level"):
        CaseMemoryConfig(vote_level="section")  # type: ignore[arg-type]


def test_hybrid_presets_per_regulation() -> None:
    assert hybrid_preset("hipaa") is BEST_HYBRID
    assert hybrid_preset("a-regulation-without-one") is BEST_HYBRID
    assert hybrid_preset("ai_act")["members"] == ("bm25-plus",)
    assert hybrid_preset("gdpr")["members"] == ("bm25-plus", "dense", "bm25-paper")
    for preset in HYBRID_PRESETS.values():
        assert len(preset["members"]) == len(preset["weights"])
        assert set(preset["members"]) <= set(retriever_names())


def test_dev_split_is_a_stable_third() -> None:
    ids = [f"case-{i}" for i in range(3000)]
    dev = [i for i in ids if dev_split(i)]
    assert dev == [i for i in ids if dev_split(i)]  # deterministic
    assert 900 < len(dev) < 1100
    assert dev_split("case-0") is dev_split("case-0")


def test_a_regulation_without_training_cases_has_no_memory(tmp_path: Path) -> None:
    from privacy_ci.cli.retrieval import _build

    kb = toy_kb()
    with pytest.raises(NoCaseMemoryError, match="no labelled training cases"):
        build_retriever("cases", kb, tmp_path)
    with pytest.raises(NoCaseMemoryError):
        build_retriever("hybrid-cases", kb, tmp_path)
    # retrieval eval's default comparison skips it; naming it explicitly fails
    assert [r.name for r in _build(["bm25-plus", "cases"], kb, None, strict=False)] == ["bm25-plus"]
    with pytest.raises(NoCaseMemoryError):
        _build(["cases"], kb, None, strict=True)


# -- with the packaged embedding model ----------------------------------------------------
@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("onnxruntime")
    from privacy_ci.retrieval import DenseRetriever

    return DenseRetriever(toy_kb(), cache=tmp_path_factory.mktemp("dense"))


def _memory(dense: Any, cache: Any, config: CaseMemoryConfig | None = None) -> Any:
    from privacy_ci.retrieval import CaseMemoryRetriever

    return CaseMemoryRetriever(
        dense, memory_cases(MEMORY, dense.kb), config, cache=cache, source="toy"
    )


def test_votes_are_the_softmax_weights_of_the_nearest_cases(dense: Any, tmp_path: Path) -> None:
    config = CaseMemoryConfig(neighbours=3, temperature=0.1)
    memory = _memory(dense, tmp_path, config)
    query = "a judge told the records office of the hospital to produce the file"
    q = dense.query_vector(query).mean(axis=0)
    sims = memory.matrix @ (q / np.linalg.norm(q))
    nearest = np.argsort(-sims)[:3]
    want: dict[str, float] = {}
    for i in nearest:
        for g in MEMORY[i].gold_nodes:
            want[g] = want.get(g, 0.0) + math.exp(float(sims[i]) / 0.1)
    got = memory.votes(query)
    assert {h.node_id for h in got} == set(want)
    total = sum(want.values())
    for h in got:
        assert math.isclose(h.score, want[h.node_id] / total, rel_tol=1e-5)
    assert math.isclose(sum(h.score for h in got), 1.0, rel_tol=1e-6)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    assert got[0].node_id == "1(a)"  # cited by both court-order cases
    assert memory.retrieve(query, 1) == got[:1]
    with pytest.raises(RetrievalError):
        memory.retrieve(query, 0)


def test_a_case_never_votes_for_itself(dense: Any, tmp_path: Path) -> None:
    memory = _memory(dense, tmp_path, CaseMemoryConfig(neighbours=1))
    own = MEMORY[2].text  # the only case citing 2(a)
    assert "2(a)" not in [h.node_id for h in memory.votes(own)]
    assert "2(a)" not in [h.node_id for h in memory.votes("  " + own.replace(" ", "\n") + " ")]
    # a slightly different text is not the case itself
    assert memory.votes(own + " again")[0].node_id == "2(a)"


def test_case_vectors_are_cached_and_rebuilt_when_cases_change(dense: Any, tmp_path: Path) -> None:
    first = _memory(dense, tmp_path)
    assert first.cache_path is not None and (first.cache_path / "vectors.npy").is_file()
    assert first.cache_path.is_relative_to(tmp_path / "cases")
    second = _memory(dense, tmp_path)
    assert np.array_equal(second.matrix, first.matrix)
    (second.cache_path / "vectors.npy").write_bytes(b"not an array")  # damaged: rebuilt
    third = _memory(dense, tmp_path)
    assert np.allclose(third.matrix, first.matrix)
    from privacy_ci.retrieval import CaseMemoryRetriever

    fewer = CaseMemoryRetriever(
        dense, memory_cases(MEMORY[:3], dense.kb), cache=tmp_path, source="toy"
    )
    assert fewer.matrix.shape[0] == 3
    assert not first.cache_path.exists()  # the stale entry of the same family is pruned
    with pytest.raises(NoCaseMemoryError):
        CaseMemoryRetriever(dense, [], cache=False)
    assert isinstance(memory_cases(MEMORY, dense.kb)[0], MemoryCase)


def test_a_source_named_like_a_path_stays_inside_the_cache(dense: Any, tmp_path: Path) -> None:
    from privacy_ci.retrieval import CaseMemoryRetriever

    cache = tmp_path / "cache"
    memory = CaseMemoryRetriever(
        dense, memory_cases(MEMORY, dense.kb), cache=cache, source="../../../etc/my cases.jsonl"
    )
    assert memory.cache_path is not None and memory.cache_path.parent == cache / "cases"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]
    assert [p.name for p in (cache / "cases").iterdir()] == [memory.cache_path.name]


# -- on the real data ---------------------------------------------------------------------
@pytest.mark.slow
def test_hipaa_memory_is_the_synthetic_training_set_and_eval_is_leave_one_out(
    shared_data: Path,
) -> None:
    pytest.importorskip("onnxruntime")
    from privacy_ci.knowledge import load_knowledge_base
    from privacy_ci.regulations import find_regulation
    from privacy_ci.retrieval import CaseMemoryRetriever, load_eval_cases

    spec = find_regulation("hipaa")
    assert spec is not None and spec.training_cases == "synthetic"
    kb = load_knowledge_base("hipaa")
    memory = build_retriever("cases", kb)
    assert isinstance(memory, CaseMemoryRetriever)
    assert len(memory.cases) == 309 and memory.source == "synthetic"
    assert memory.config.vote_level == "paragraph"
    assert vote_node(kb, "164.512(e)(1)(ii)") == "164.512(e)"
    assert vote_node(kb, "164.512") == "164.512" and vote_node(kb, "HIPAA") == "HIPAA"
    voters: dict[str, int] = {}
    for m in memory.cases:
        for v in {vote_node(kb, g) for g in m.gold}:
            voters[v] = voters.get(v, 0) + 1
    synthetic = [c for c in load_eval_cases("synthetic") if c.applicable and c.gold_nodes]
    checked = 0
    for case in synthetic:
        own = {vote_node(kb, g) for g in case.gold_nodes}
        unique = {v for v in own if voters.get(v) == 1}
        if not unique:
            continue
        voted = {h.node_id for h in memory.votes(RetrievalQuery.from_case(case))}
        assert not voted & unique, case.id  # only the case itself votes for them
        assert voted, case.id  # its neighbours still vote
        checked += 1
    assert checked >= 5


# -- your own cases as the memory -----------------------------------------------------------
def test_memory_from_a_case_file_a_dataset_and_bad_sources(
    shared_data: Path, tmp_path: Path
) -> None:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.knowledge import load_knowledge_base
    from privacy_ci.retrieval._registry import _memory_source

    kb = load_knowledge_base("hipaa")
    lines = (shared_data / "cases" / "privaci_bench" / "hipaa.jsonl").read_text().splitlines()
    permits = [line for line in lines if '"permit"' in line][:3]
    mine = tmp_path / "my-precedents.jsonl"
    mine.write_text("\n".join(permits) + "\n")
    cases = _memory_source(mine, kb)
    assert len(cases) == 3
    kept = memory_cases(cases, kb)
    assert len(kept) == 3 and all(m.gold for m in kept)
    assert len(_memory_source("synthetic", kb)) == 618
    with pytest.raises(NoCaseMemoryError, match="neither a dataset"):
        _memory_source(tmp_path / "missing.jsonl", kb)
    with pytest.raises(NoCaseMemoryError, match="holds gdpr cases, not hipaa"):
        _memory_source("privaci-gdpr", kb)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"case_content": "a story without a label"}\n')
    with pytest.raises(PrivacyCIError):
        _memory_source(broken, kb)


def test_cli_names_a_memory_it_cannot_use(shared_data: Path, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from privacy_ci.cli.retrieval import app

    root = typer.Typer()
    root.add_typer(app, name="retrieval")
    res = CliRunner().invoke(
        root,
        ["retrieval", "eval", "-d", "privaci-gdpr", "-r", "cases", "--memory", "/nope.jsonl"],
        env={"PRIVACY_CI_DATA": str(shared_data), "PRIVACY_CI_CACHE": str(tmp_path)},
    )
    assert res.exit_code == 2 and "neither a dataset" in res.output
