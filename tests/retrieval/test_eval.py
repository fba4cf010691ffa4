"""Evaluation metrics on toy data, computed by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from privacy_ci.ci import Flow
from privacy_ci.retrieval import (
    Hit,
    RetrievalError,
    RetrievalQuery,
    case_metrics,
    evaluate_many,
    evaluate_retrieval,
    format_results,
)
from tests.retrieval import toy_kb

TREE = toy_kb().tree


@dataclass
class ToyCase:
    id: str
    text: str
    gold_nodes: tuple[str, ...]
    applicable: bool = True
    recipient_role: str | None = None

    @property
    def flow(self) -> Flow:
        return Flow.of(recipient_role=self.recipient_role)


class Fixed:
    """A retriever that returns a fixed ranking per query text."""

    name = "fixed"

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings = rankings
        self.kb = toy_kb()
        self.queries: list[RetrievalQuery] = []

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        q = query if isinstance(query, RetrievalQuery) else RetrievalQuery(query)
        self.queries.append(q)
        ids = self.rankings.get(q.text, [])
        return [Hit(n, 1.0 / (i + 1)) for i, n in enumerate(ids[:k])]


def test_subtree_hit_rule_and_per_case_metrics() -> None:
    # gold: section 1 and leaf 2(a); 1(b) is inside section 1, 1(a) repeats it, 2(a) is exact
    m = case_metrics("A", ["1", "2(a)"], ["3(a)", "1(b)", "1(a)", "2(a)"], TREE.path)
    assert m.first_hit == 2 and m.covered_at == {"1": 2, "2(a)": 4}
    assert [m.recall(k) for k in (1, 2, 3, 4, 10)] == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert (m.any_hit(1), m.any_hit(2)) == (0.0, 1.0)
    assert m.reciprocal_rank == 0.5
    dcg = 1 / math.log2(3) + 1 / math.log2(5)  # new gold ids at ranks 2 and 4; rank 3 repeats
    ideal = 1 + 1 / math.log2(3)  # two gold ids
    assert m.ndcg(10) == pytest.approx(dcg / ideal) == pytest.approx(0.650921, abs=1e-6)

    # a retrieved *section* does not hit a gold paragraph inside it
    m = case_metrics("B", ["3(b)"], ["3"], TREE.path)
    assert (m.first_hit, m.recall(10), m.ndcg(10)) == (0, 0.0, 0.0)

    # two leaves of one gold section: the second one earns nothing
    m = case_metrics("C", ["2"], ["2(b)", "2(a)"], TREE.path)
    assert (m.first_hit, m.recall(1), m.ndcg(10)) == (1, 1.0, 1.0)


def test_evaluate_retrieval_averages_over_applicable_cases_with_gold() -> None:
    cases = [
        ToyCase("A", "qa", ("1", "2(a)")),
        ToyCase("B", "qb", ("3(b)",)),
        ToyCase("C", "qc", ("2",), recipient_role="court"),
        ToyCase("D", "qd", ("1",), applicable=False),  # skipped: not applicable
        ToyCase("E", "qe", ()),  # skipped: no gold ids
    ]
    ret = Fixed({"qa": ["3(a)", "1(b)", "1(a)", "2(a)"], "qb": ["3"], "qc": ["2(b)", "2(a)"]})
    res = evaluate_retrieval(ret, cases, ks=(1, 5), query="text", dataset="toy")
    assert (res.n_cases, res.skipped) == (3, 2)
    assert res.recall[1] == pytest.approx((0 + 0 + 1) / 3)
    assert res.recall[5] == pytest.approx((1 + 0 + 1) / 3)
    assert res.any_hit[5] == pytest.approx(2 / 3)
    assert res.mrr == pytest.approx((0.5 + 0 + 1) / 3)
    assert res.ndcg10 == pytest.approx((0.650921 + 0 + 1) / 3, abs=1e-6)
    assert all(q.flow.recipient.role is None for q in ret.queries)  # text mode: no CI fields
    row = res.row()
    assert row["retriever"] == "fixed" and row["cases"] == 3 and row["recall@5"] == 0.6667
    assert "any_hit@1" in row and "ndcg@10" in row

    ret.queries.clear()
    evaluate_retrieval(ret, cases, query="ci")
    assert any(q.flow.recipient.role == "court" for q in ret.queries)

    table = format_results(evaluate_many([ret], cases, ks=(1, 5, 10, 20)))
    assert "fixed" in table and "R@10" in table


def test_bad_arguments() -> None:
    ret = Fixed({})
    with pytest.raises(RetrievalError):
        evaluate_retrieval(ret, [], query="llm")  # type: ignore[arg-type]
    with pytest.raises(RetrievalError):
        evaluate_retrieval(ret, [], ks=(0,))
    res = evaluate_retrieval(ret, [])
    assert res.n_cases == 0 and res.recall[10] == 0.0 and res.mrr == 0.0
