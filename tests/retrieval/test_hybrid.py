"""Reciprocal rank fusion by hand, hybrid retrieval and expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.knowledge import load_knowledge_base
from privacy_ci.retrieval import (
    BEST_HYBRID,
    EmptyQueryError,
    Expansion,
    Hit,
    HybridRetriever,
    RetrievalError,
    RetrievalQuery,
    bm25_leaves,
    bm25_plus,
    build_retriever,
    definition_nodes,
    expand,
    fuse,
)
from tests.retrieval import toy_kb


def hits(*ids: str) -> list[Hit]:
    return [Hit(n, 10.0 - i) for i, n in enumerate(ids)]


def test_rrf_on_toy_rankings() -> None:
    fused = fuse([hits("a", "b", "c"), hits("b", "c", "d")], k=60)
    assert [h.node_id for h in fused] == ["b", "c", "a", "d"]
    scores = {h.node_id: h.score for h in fused}
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)


def test_rrf_weights_k_ties_and_repeats() -> None:
    fused = fuse([hits("a", "b"), hits("b", "a")], k=0, weights=[2.0, 1.0])
    assert {h.node_id: h.score for h in fused} == {"a": 2 / 1 + 1 / 2, "b": 2 / 2 + 1 / 1}
    tie = fuse([hits("x"), hits("y")])
    assert [h.node_id for h in tie] == ["x", "y"]  # equal scores: first appearance first
    repeat = fuse([hits("a", "a", "b")], k=60)
    assert {h.node_id: h.score for h in repeat} == pytest.approx({"a": 1 / 61, "b": 1 / 62})
    assert fuse([]) == [] and fuse([[]]) == []
    assert len(fuse([hits("a", "b", "c")], limit=2)) == 2
    with pytest.raises(ValueError):
        fuse([hits("a")], weights=[1.0, 2.0])
    with pytest.raises(ValueError):
        fuse([hits("a")], k=-1)


class Stub:
    def __init__(self, name: str, ids: list[str]) -> None:
        self.name = name
        self.ids = ids
        self.kb = toy_kb()

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        return hits(*self.ids)[:k]


def test_hybrid_fuses_and_expands_support_references() -> None:
    kb = toy_kb()
    h = HybridRetriever([Stub("x", ["1(a)", "3(b)"]), Stub("y", ["3(b)", "2(b)"])], kb=kb)
    assert [x.node_id for x in h.retrieve("q", 5)] == ["3(b)", "1(a)", "2(b)"]
    assert len(h.retrieve("q", 1)) == 1
    with pytest.raises(EmptyQueryError):
        h.retrieve(" ", 5)
    with pytest.raises(RetrievalError):
        h.retrieve("q", 0)

    # 1(a)'s norm has a support reference to 2(a): added at half of 1(a)'s score
    expanded = expand(hits("1(a)", "3(b)"), kb, Expansion(decay=0.5))
    scores = {x.node_id: x.score for x in expanded}
    assert scores["2(a)"] == pytest.approx(0.5 * scores["1(a)"])
    assert [x.node_id for x in expanded] == ["1(a)", "3(b)", "2(a)"]
    assert expand(hits("1(a)"), kb, Expansion(support=False)) == hits("1(a)")
    assert len(expand(hits("1(a)"), kb, Expansion(max_added=0))) == 1
    hx = HybridRetriever([Stub("x", ["1(a)"])], kb=kb, expansion=Expansion())
    assert [x.node_id for x in hx.retrieve("q", 5)] == ["1(a)", "2(a)"]


def test_hybrid_of_real_retrievers_on_the_toy_kb(tmp_path: Path) -> None:
    kb = toy_kb()
    h = HybridRetriever([bm25_leaves(kb, tmp_path), bm25_plus(kb, tmp_path)], weights=[1.0, 0.5])
    top = h.retrieve("an order of a court in a judicial proceeding", 3)
    assert top[0].node_id == "1(a)"
    with pytest.raises(RetrievalError):
        HybridRetriever([])
    with pytest.raises(RetrievalError):
        HybridRetriever([Stub("x", [])], weights=[1.0, 2.0])


def test_build_retriever_names(tmp_path: Path) -> None:
    kb = toy_kb()
    assert build_retriever("bm25-paper", kb, tmp_path).name == "bm25-paper"
    assert build_retriever("bm25-plus", kb, tmp_path).name == "bm25-plus"
    with pytest.raises(RetrievalError):
        build_retriever("tf-idf", kb)
    assert set(BEST_HYBRID["members"]) <= {"bm25-plus", "dense", "roles"}


def test_definition_nodes_on_hipaa(shared_data: Path) -> None:
    kb = load_knowledge_base("hipaa", data_dir=shared_data)
    nodes = definition_nodes(kb)
    assert nodes["Covered entity"] == "160.103(Covered entity)"
    assert nodes["Protected health information"] == "160.103(Protected health information)"
    assert all(n in kb.tree.nodes for n in nodes.values())
    gdpr = load_knowledge_base("gdpr", data_dir=shared_data)
    assert definition_nodes(gdpr).get("personal_data", "").startswith("Article 4")
