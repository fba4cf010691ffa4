"""The worked example of docs/architecture.md, "Adding a regulation": a toy regulation
registered from the fixture files in ``toy_act_data/`` through the registry alone, and
``kb stats``, ``retrieve``, ``judge``, datasets and retrieval evaluation working on it.

``toy_act_data/`` is a data directory in the published formats: a PrivaCI-Bench law
tree and KB, flat definitions, Checklist-format role and attribute graphs, and a
PrivaCI-Bench case file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import GenerationSettings, LLMClient, Message
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.regulations import (
    ArticleRef,
    IdSyntax,
    RegistryError,
    RegulationCases,
    RegulationSpec,
    UnknownRegulation,
    get_regulation,
    parse_article_mention,
    register_regulation,
    regulation_keys,
    unregister_regulation,
    verify_ids,
)

DATA = Path(__file__).parent / "toy_act_data"

TOY = RegulationSpec(
    key="toy_act",
    name="Toy Privacy Act",
    root="TOY_ACT",
    tree="toy_act/tree.graphml",
    kb="toy_act/kb.jsonl",
    definitions="toy_act/definitions.json",
    role_graph="toy_act/role_graph.graphml",
    attribute_graph="toy_act/attribute_graph.graphml",
    ids=IdSyntax.ARTICLE,
    aliases={"Definitions": "Article 1"},
    titles=("Toy Privacy Act",),
    cases=RegulationCases(
        "cases/toy_act.jsonl", "three_way", "Toy cases, three-way", "docs/architecture.md"
    ),
)
"""The one registry entry the toy regulation needs."""

EMPLOYER = "Riverside Clinic sends Alex's health record to Alex's employer without written consent."

runner = CliRunner()


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RegulationSpec]:
    """The toy regulation registered, with its data directory and a private cache."""
    from privacy_ci.cases import clear_tree_cache

    monkeypatch.setenv("PRIVACY_CI_DATA", str(DATA))
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    register_regulation(TOY)
    try:
        yield TOY
    finally:
        unregister_regulation(TOY.key)
        clear_tree_cache()


def _cli(*args: str) -> Any:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_kb_stats_and_listing(toy: RegulationSpec) -> None:
    stats = _cli("kb", "stats", "-r", "toy_act")["toy_act"]
    assert stats["tree_source"] == str(DATA / "toy_act/tree.graphml")
    assert stats["skipped_entries"] == 0 and stats["dropped_references"] == 0
    assert {k: stats["ours"][k] for k in ("norms", "positive_norms", "negative_norms")} == {
        "norms": 5,
        "positive_norms": 2,
        "negative_norms": 1,
    }
    assert stats["ours"]["general_definitions"] == 2
    assert stats["ours"]["tree_leaves"] == 6 and stats["ours"]["cross_references"] == 2
    assert stats["ours"]["definitions"] == 3
    assert stats["ours"]["role_graph_nodes"] == 9 and stats["ours"]["attribute_graph_nodes"] == 5
    listed = _cli("kb", "regulations")
    assert list(listed) == ["hipaa", "gdpr", "ai_act", "toy_act"]
    assert listed["toy_act"]["ids"] == "article"
    assert listed["toy_act"]["datasets"] == ["privaci-toy_act"]


def test_kb_show_define_and_roles(toy: RegulationSpec) -> None:
    shown = _cli("kb", "show", "Article 2(2)", "-r", "toy_act")
    assert shown["norm"]["norm_type"] == "negative"
    assert shown["norm"]["references"] == [{"target": "Article 1", "kind": "support"}]  # alias
    assert shown["referenced_by_norms"] == [{"id": "Article 3(1)", "kind": "exception"}]
    defined = _cli("kb", "define", "health record", "-r", "toy_act")
    assert defined["matches"][0]["term"] == "health_record"
    roles = _cli("kb", "roles", "dental clinic", "-r", "toy_act")
    assert "clinic" in roles["matches"][0]["ancestors"]


def test_retrieve(toy: RegulationSpec) -> None:
    for retriever in ("bm25-paper", "bm25-plus"):
        hits = _cli("retrieve", EMPLOYER, "--regulation", "toy_act", "-r", retriever, "-k", "3")
        assert hits["regulation"] == "toy_act"
        assert hits["hits"][0]["id"] == "Article 2(2)", retriever


def _answer(messages: Sequence[Message], settings: GenerationSettings) -> str:
    """The event restated when asked to explain it; else relevant, cites the employer
    article, prohibited."""
    if settings.json_schema is not None:
        return json.dumps({k: "x" for k in settings.json_schema.get("properties", {})})
    if messages[-1].content.startswith("I will provide you with an event"):
        return EMPLOYER
    return "Yes. Article 2(2) applies.\nChoice: A. Prohibited"


def test_judge(toy: RegulationSpec) -> None:
    from privacy_ci.ci import Verdict
    from privacy_ci.judging import Event, JudgeConfig, build_method

    client = LLMClient(ScriptedTestBackend(_answer, model="toy"), cache=None)
    config = JudgeConfig(regulation="toy_act")  # the method loads the toy KB itself
    event = Event(text=EMPLOYER)
    content = asyncio.run(build_method("bm25-content", client, config=config).judge(event))
    assert content.verdict is Verdict.PROHIBIT and content.error is None
    retrieved = next(s for s in content.steps if s.name == "retrieve").retrieved_ids
    assert retrieved[0] == "Article 2(2)"
    agent = asyncio.run(build_method("agent-id", client, config=config).judge(event))
    assert agent.verdict is Verdict.PROHIBIT and agent.cited_ids == ["Article 2(2)"]


def test_ids_datasets_and_retrieval_eval(toy: RegulationSpec) -> None:
    from privacy_ci.cases import load_dataset
    from privacy_ci.knowledge import load_knowledge_base
    from privacy_ci.retrieval import build_retriever, dataset_regulation, evaluate_retrieval

    kb = load_knowledge_base("toy_act")
    found = verify_ids(
        ["Art. 2(1)", "Article 2(1)(b)", "Recital 1", "Definitions", "164.502"], kb.tree
    )
    assert found.valid == ("Article 2(1)", "Recital 1", "Article 1")
    assert found.coarsened == (("Article 2(1)(b)", "Article 2(1)"),)
    assert found.rejected[0].reason == "164.502 is a CFR section; this is the toy_act tree"

    # the law's own title is not "another law"; a point below the tree is coarsened
    assert parse_article_mention("Article 3(1)(a) of the Toy Privacy Act") == (
        [ArticleRef(3, 1, "a")],
        "",
    )
    dataset = load_dataset("privaci-toy_act")
    assert dataset.report.reductions == {
        (
            "Article 3(1)(a) of the Toy Privacy Act",
            "finer than the tree; reduced to Article 3(1)",
        ): 1
    }
    assert [c.gold_nodes for c in dataset] == [
        ("Article 2(1)",),
        ("Article 2(2)",),
        ("Article 3(1)", "Article 1"),
        (),
    ]
    assert dataset_regulation("privaci-toy_act") == "toy_act"
    result = evaluate_retrieval(build_retriever("bm25-paper", kb), list(dataset), ks=(1, 5))
    assert result.n_cases == 3 and result.recall[5] > 0


def test_registry_is_the_only_list(toy: RegulationSpec) -> None:
    from privacy_ci.cases import TREE_FILES, list_datasets
    from privacy_ci.data import SOURCES_BY_PATH
    from privacy_ci.knowledge import DEFINITION_FILES, KB_FILES
    from privacy_ci.retrieval import DATASET_REGULATION

    assert KB_FILES["toy_act"]["role_graph"] == "toy_act/role_graph.graphml"
    assert TREE_FILES["toy_act"] == "toy_act/tree.graphml"
    assert DEFINITION_FILES["toy_act"] == "toy_act/definitions.json"
    assert DATASET_REGULATION["privaci-toy_act"] == "toy_act"
    assert "privaci-toy_act" in list_datasets()
    assert "toy_act/tree.graphml" not in SOURCES_BY_PATH  # no manifest entry declared
    unregister_regulation("toy_act")
    try:
        assert "toy_act" not in KB_FILES and "privaci-toy_act" not in list_datasets()
    finally:
        register_regulation(TOY)


def test_manifest_entries_of_a_registered_regulation(toy: RegulationSpec) -> None:
    from dataclasses import replace

    from privacy_ci.data import SOURCES, SOURCES_BY_PATH, Source, manifest, select

    entry = Source(
        "toy_act/tree.graphml", "example/toy", "0" * 40, "tree.graphml", "0" * 64, 1, "MIT"
    )
    register_regulation(replace(TOY, sources=(entry,)), replace=True)
    assert manifest() == (*SOURCES, entry)
    assert SOURCES_BY_PATH["toy_act/tree.graphml"] is entry
    assert select(["toy_act/"]) == [entry]


def test_registry_errors(toy: RegulationSpec) -> None:
    from dataclasses import replace

    with pytest.raises(UnknownRegulation, match="unknown regulation 'ccpa'; expected one of"):
        get_regulation("ccpa")
    assert issubclass(UnknownRegulation, PrivacyCIError)
    assert issubclass(UnknownRegulation, ValueError)  # what the loaders raised before
    with pytest.raises(RegistryError, match="already registered"):
        register_regulation(replace(TOY, name="Another"))
    with pytest.raises(RegistryError, match=r"key 'Toy Act'.*tree_format 'xml'.*relative"):
        register_regulation(
            replace(TOY, key="Toy Act", tree_format="xml", kb="/abs/kb.jsonl")  # type: ignore[arg-type]
        )
    assert regulation_keys() == ("hipaa", "gdpr", "ai_act", "toy_act")
    unregister_regulation("toy_act")
    try:  # unregistered, the title names another law
        assert parse_article_mention("Article 3 of the Toy Privacy Act")[1].startswith(
            "cites another law"
        )
    finally:
        register_regulation(TOY)
    result = runner.invoke(app, ["kb", "stats", "-r", "ccpa"])
    assert result.exit_code == 2 and "unknown regulation 'ccpa'" in result.output
