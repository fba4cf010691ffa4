"""Retrieval evaluation: recall@k, any-hit@k, MRR and nDCG@10 against gold regulation ids.

`evaluate_retrieval` runs one retriever over the *applicable* cases of a dataset
that have gold ids, and `evaluate_many` runs several on the same cases.

Hit rule. Gold ids are often sections (``164.512``) while retrievers return
leaves (``164.512(e)(1)(i)``). A retrieved node ``r`` *hits* a gold id ``g`` when
``r == g`` or ``r`` lies in ``g``'s subtree (``g`` is an ancestor of ``r``). A
retrieved section therefore does not hit a gold paragraph inside it.

Metrics, for a case with gold set ``G`` and ranking ``r_1, r_2, ...``:

* ``recall@k = |{g in G : some r_i with i <= k hits g}| / |G|``, the fraction of
  the gold ids hit within the top k, averaged over cases (macro average);
* ``any_hit@k``: 1 if at least one gold id is hit within the top k, averaged;
* ``mrr``: ``1 / i`` for the first ``r_i`` that hits any gold id (0 if none
  within the top ``max(ks)``), averaged;
* ``ndcg@10``: binary gain ``1`` at rank ``i`` when ``r_i`` hits a gold id that no
  earlier result hit (repeats of an already-covered id earn nothing),
  ``DCG = sum gain_i / log2(i + 1)`` over the top 10, divided by the ideal
  ``sum_{i=1..min(10, |G|)} 1 / log2(i + 1)`` (each of the ``|G|`` gold ids can be
  covered by its own rank: retrieve the broadest gold id itself first).

Cases come from `privacy_ci.cases.load_dataset` (`load_eval_cases`); any object
with ``text``, the CI fields, ``gold_nodes`` (canonical tree ids) and
``applicable`` (a property or a method) will do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from privacy_ci.regulations import RegistryView, find_regulation, regulations
from privacy_ci.retrieval._base import RetrievalError, RetrievalQuery, Retriever

if TYPE_CHECKING:
    from privacy_ci.regulations import RegulationTree

__all__ = [
    "DATASETS",
    "DATASET_REGULATION",
    "CaseMetrics",
    "PairedDifference",
    "RetrievalResult",
    "case_metrics",
    "dataset_regulation",
    "evaluate_many",
    "evaluate_retrieval",
    "format_results",
    "gold_of",
    "is_applicable",
    "load_eval_cases",
    "paired_difference",
]

DATASET_REGULATION: Mapping[str, str] = RegistryView(
    lambda: {name: spec.key for spec in regulations() for name in spec.eval_datasets}
)
"""The regulation (knowledge base) each dataset is judged against, read from the
registry (`privacy_ci.regulations.RegulationSpec.eval_datasets`)."""

DATASETS: tuple[str, ...] = tuple(DATASET_REGULATION)
"""The datasets `load_eval_cases` knows (as imported; `dataset_regulation` also knows
regulations registered since)."""

QueryMode = Literal["text", "ci"]


# ---------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------
def dataset_regulation(dataset: str) -> str:
    """The regulation (knowledge base) a dataset is judged against.

    Args:
        dataset: a `privacy_ci.cases` dataset name.

    Returns:
        A registered regulation key (``hipaa``, ``gdpr``, ``ai_act``, ...).

    Raises:
        RetrievalError: the dataset is unknown or has no regulation tree (``privaci-aclu``).
    """
    if dataset in DATASET_REGULATION:
        return DATASET_REGULATION[dataset]
    from privacy_ci.cases import DATASET_NAMES, load_dataset

    if dataset not in DATASET_NAMES:
        raise RetrievalError(
            f"unknown dataset {dataset!r}; expected one of {', '.join(DATASET_REGULATION)} "
            f"(or another of {', '.join(DATASET_NAMES)})"
        )
    regulation = load_dataset(dataset, resolve_gold=False).protocol.regulation
    if find_regulation(regulation) is None:
        raise RetrievalError(f"dataset {dataset!r} ({regulation}) has no regulation tree")
    return regulation


def load_eval_cases(dataset: str, data_dir: Path | str | None = None) -> list[Any]:
    """The cases of a dataset, from `privacy_ci.cases.load_dataset`.

    Args:
        dataset: one of `DATASETS` (or another `privacy_ci.cases` dataset with a tree).
        data_dir: the data directory (default `privacy_ci.data.data_dir()`).

    Returns:
        The `privacy_ci.cases.Case` objects, in file order (all of them: the
        evaluation itself keeps the applicable ones with gold ids).

    Raises:
        RetrievalError: unknown dataset.
        DataMissingError: the case file or tree is missing.
    """
    from privacy_ci.cases import UnknownDataset, load_dataset

    dataset_regulation(dataset)
    try:
        return list(load_dataset(dataset, data_dir))
    except UnknownDataset as exc:  # pragma: no cover - checked by dataset_regulation
        raise RetrievalError(str(exc)) from None


def gold_of(case: Any) -> tuple[str, ...]:
    """A case's gold ids (``gold_nodes``, else ``gold_ids``).

    Args:
        case: a case object or mapping.

    Returns:
        The ids, without repeats.
    """
    value = getattr(case, "gold_nodes", None)
    if value is None and isinstance(case, dict):
        value = case.get("gold_nodes")
    if value is None:
        value = getattr(case, "gold_ids", None) or ()
    return tuple(dict.fromkeys(str(v) for v in value))


def is_applicable(case: Any) -> bool:
    """Whether a case is applicable (``applicable()``, else its label).

    Args:
        case: a case object.

    Returns:
        True when the regulation applies.
    """
    method = getattr(case, "applicable", None)
    if callable(method):
        return bool(method())
    if isinstance(method, bool):
        return method
    label = str(getattr(case, "label", "")).lower()
    return label in ("permit", "prohibit", "positive_norm", "negative_norm")


# ---------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CaseMetrics:
    """The metrics of one case.

    Args:
        case_id: the case id.
        gold: the gold ids.
        ranking: the retrieved ids.
        first_hit: the 1-based rank of the first hit (0: none).
        covered_at: gold id -> 1-based rank at which it was first hit (absent: never).
    """

    case_id: str
    gold: tuple[str, ...]
    ranking: tuple[str, ...]
    first_hit: int
    covered_at: dict[str, int]

    def recall(self, k: int) -> float:
        """Fraction of the gold ids hit within the top ``k``.

        Args:
            k: the cut-off.

        Returns:
            The recall.
        """
        if not self.gold:
            return 0.0
        return sum(1 for r in self.covered_at.values() if r <= k) / len(self.gold)

    def any_hit(self, k: int) -> float:
        """1.0 if a gold id is hit within the top ``k``.

        Args:
            k: the cut-off.

        Returns:
            0.0 or 1.0.
        """
        return 1.0 if 0 < self.first_hit <= k else 0.0

    @property
    def reciprocal_rank(self) -> float:
        """``1 / first_hit`` (0 without a hit)."""
        return 1.0 / self.first_hit if self.first_hit else 0.0

    def ndcg(self, k: int = 10) -> float:
        """nDCG@k with novelty gains (see the module docstring).

        Args:
            k: the cut-off.

        Returns:
            The nDCG.
        """
        if not self.gold:
            return 0.0
        ranks = {r for r in self.covered_at.values() if r <= k}
        dcg = sum(1.0 / math.log2(r + 1) for r in ranks)
        ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(self.gold)) + 1))
        return dcg / ideal


def case_metrics(
    case_id: str,
    gold: Sequence[str],
    ranking: Sequence[str],
    ancestors_or_self: Callable[[str], Iterable[str]],
) -> CaseMetrics:
    """Match one ranking against one gold set with the subtree hit rule.

    Args:
        case_id: the case id.
        gold: the gold ids.
        ranking: the retrieved ids, best first.
        ancestors_or_self: node id -> the node and its ancestors (e.g. ``tree.path``).

    Returns:
        The per-case metrics.
    """
    gold_set = set(gold)
    covered: dict[str, int] = {}
    first = 0
    for rank, node_id in enumerate(ranking, start=1):
        hits = gold_set.intersection(ancestors_or_self(node_id))
        if hits and not first:
            first = rank
        for g in hits:
            covered.setdefault(g, rank)
    return CaseMetrics(case_id, tuple(gold), tuple(ranking), first, covered)


@dataclass
class RetrievalResult:
    """One retriever's figures on one dataset.

    Args:
        name: the retriever's name.
        dataset: the dataset name (may be empty).
        query: ``text`` or ``ci``.
        ks: the recall cut-offs.
        n_cases: applicable cases with gold ids that were evaluated.
        skipped: cases left out (not applicable or without gold ids).
        recall: k -> mean recall@k.
        any_hit: k -> mean any-hit@k.
        mrr: mean reciprocal rank (within the top ``max(ks)``).
        ndcg10: mean nDCG@10.
        seconds: wall time of the retrieval calls.
        per_case: the per-case metrics.
    """

    name: str
    dataset: str
    query: str
    ks: tuple[int, ...]
    n_cases: int
    skipped: int
    recall: dict[int, float]
    any_hit: dict[int, float]
    mrr: float
    ndcg10: float
    seconds: float
    per_case: list[CaseMetrics] = field(default_factory=list, repr=False)

    def row(self) -> dict[str, Any]:
        """A flat, JSON-able row (figures rounded to 4 places).

        Returns:
            ``{"retriever", "dataset", "query", "cases", "recall@1", ..., "any_hit@1", ...,
            "mrr", "ndcg@10", "seconds"}``.
        """
        out: dict[str, Any] = {
            "retriever": self.name,
            "dataset": self.dataset,
            "query": self.query,
            "cases": self.n_cases,
        }
        for k in self.ks:
            out[f"recall@{k}"] = round(self.recall[k], 4)
        for k in self.ks:
            out[f"any_hit@{k}"] = round(self.any_hit[k], 4)
        out["mrr"] = round(self.mrr, 4)
        out["ndcg@10"] = round(self.ndcg10, 4)
        out["seconds"] = round(self.seconds, 3)
        return out


def _tree_of(retriever: Any, tree: RegulationTree | None) -> RegulationTree:
    if tree is not None:
        return tree
    kb = getattr(retriever, "kb", None)
    found = getattr(kb, "tree", None)
    if found is None:
        raise RetrievalError(
            f"retriever {getattr(retriever, 'name', retriever)!r} has no .kb; pass tree="
        )
    tree_found: RegulationTree = found
    return tree_found


def evaluate_retrieval(
    retriever: Retriever,
    cases: Iterable[Any],
    ks: Sequence[int] = (1, 5, 10, 20),
    query: QueryMode = "text",
    tree: RegulationTree | None = None,
    dataset: str = "",
) -> RetrievalResult:
    """Evaluate one retriever on the applicable cases that have gold ids.

    Args:
        retriever: any `Retriever`.
        cases: case objects (``text``, CI fields, ``gold_nodes``, ``applicable()``).
        ks: recall cut-offs; the retriever is asked for ``max(max(ks), 10)`` hits.
        query: ``text`` (the case text alone) or ``ci`` (text plus CI fields).
        tree: the tree for the hit rule (default ``retriever.kb.tree``).
        dataset: a name for the result rows.

    Returns:
        The figures (see the module docstring for the definitions).

    Raises:
        RetrievalError: bad ``ks`` or ``query``, or no tree.
    """
    if query not in ("text", "ci"):
        raise RetrievalError(f"query must be 'text' or 'ci', not {query!r}")
    ks = tuple(sorted(set(int(k) for k in ks)))
    if not ks or ks[0] < 1:
        raise RetrievalError(f"ks must be positive integers, not {ks!r}")
    the_tree = _tree_of(retriever, tree)
    depth = max(max(ks), 10)
    paths: dict[str, frozenset[str]] = {}

    def ancestors_or_self(node_id: str) -> frozenset[str]:
        found = paths.get(node_id)
        if found is None:
            found = (
                frozenset(the_tree.path(node_id))
                if node_id in the_tree.nodes
                else frozenset((node_id,))
            )
            paths[node_id] = found
        return found

    per_case: list[CaseMetrics] = []
    skipped = 0
    elapsed = 0.0
    for i, case in enumerate(cases):
        gold = gold_of(case)
        if not gold or not is_applicable(case):
            skipped += 1
            continue
        q = RetrievalQuery.from_case(case, use_ci=query == "ci")
        start = time.perf_counter()
        hits = retriever.retrieve(q, depth) if not q.is_empty() else []
        elapsed += time.perf_counter() - start
        case_id = str(getattr(case, "id", "") or f"{dataset}:{i}")
        per_case.append(case_metrics(case_id, gold, [h.node_id for h in hits], ancestors_or_self))
    n = len(per_case)

    def mean(values: Iterable[float]) -> float:
        vals = list(values)
        return sum(vals) / len(vals) if vals else 0.0

    return RetrievalResult(
        name=str(getattr(retriever, "name", type(retriever).__name__)),
        dataset=dataset,
        query=query,
        ks=ks,
        n_cases=n,
        skipped=skipped,
        recall={k: mean(c.recall(k) for c in per_case) for k in ks},
        any_hit={k: mean(c.any_hit(k) for c in per_case) for k in ks},
        mrr=mean(c.reciprocal_rank for c in per_case),
        ndcg10=mean(c.ndcg(10) for c in per_case),
        seconds=elapsed,
        per_case=per_case,
    )


def evaluate_many(
    retrievers: Sequence[Retriever],
    cases: Iterable[Any],
    ks: Sequence[int] = (1, 5, 10, 20),
    query: QueryMode = "text",
    tree: RegulationTree | None = None,
    dataset: str = "",
) -> list[RetrievalResult]:
    """`evaluate_retrieval` for several retrievers on the same cases.

    Args:
        retrievers: the retrievers, in table order.
        cases: the cases (materialised once).
        ks: recall cut-offs.
        query: ``text`` or ``ci``.
        tree: the tree for the hit rule (default each retriever's).
        dataset: a name for the result rows.

    Returns:
        One result per retriever.
    """
    materialised = list(cases)
    return [
        evaluate_retrieval(r, materialised, ks=ks, query=query, tree=tree, dataset=dataset)
        for r in retrievers
    ]


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """A retriever's metric minus the baseline's on the same cases, with a paired
    bootstrap interval (the cases are resampled together for both retrievers).

    Args:
        metric: ``recall@10`` or ``any_hit@10`` (any ``recall@K`` / ``any_hit@K``).
        value: the mean difference.
        low, high: the interval's bounds.
        level: its confidence level.
        cases: the cases both were measured on.
        resamples: bootstrap resamples.
    """

    metric: str
    value: float
    low: float
    high: float
    level: float
    cases: int
    resamples: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": round(self.value, 4),
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "level": self.level,
            "cases": self.cases,
            "resamples": self.resamples,
            "method": "paired percentile bootstrap over cases",
        }

    def text(self) -> str:
        """``+13.5 [+8.1, +19.0]`` (points)."""
        return f"{100 * self.value:+.1f} [{100 * self.low:+.1f}, {100 * self.high:+.1f}]"


def paired_difference(
    result: RetrievalResult,
    baseline: RetrievalResult,
    metric: str = "recall@10",
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> PairedDifference:
    """How far `result` is from `baseline` on a metric, with a paired bootstrap interval.

    Args:
        result, baseline: two retrievers' results on the same dataset and query mode.
        metric: ``recall@K`` or ``any_hit@K``.
        resamples: bootstrap resamples (a fixed seed: the interval is reproducible).
        level: the confidence level.
        seed: the resampling seed.

    Returns:
        The `PairedDifference`.

    Raises:
        RetrievalError: an unknown metric, or no case in common.
    """
    import numpy as np

    name, _, cut = metric.partition("@")
    if name not in ("recall", "any_hit") or not cut.isdigit():
        raise RetrievalError(f"metric must be recall@K or any_hit@K, not {metric!r}")
    k = int(cut)
    base = {c.case_id: c for c in baseline.per_case}
    pairs = [(c, base[c.case_id]) for c in result.per_case if c.case_id in base]
    if not pairs:
        raise RetrievalError(f"{result.name} and {baseline.name} share no case")

    def value(c: CaseMetrics) -> float:
        return c.recall(k) if name == "recall" else c.any_hit(k)

    diffs = np.array([value(a) - value(b) for a, b in pairs])
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, len(diffs), size=(resamples, len(diffs)))
    means = diffs[samples].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return PairedDifference(
        metric, float(diffs.mean()), float(low), float(high), level, len(diffs), resamples
    )


def format_results(results: Sequence[RetrievalResult], baseline: str = "bm25-paper") -> str:
    """A plain-text table of results, with recall@10 relative to the baseline.

    Args:
        results: the results (one dataset and query mode).
        baseline: the name of the row the ``Δr@10`` column compares against.

    Returns:
        The table.
    """
    if not results:
        return "(no results)"
    ks = results[0].ks
    base = next((r for r in results if r.name == baseline), None)
    head = ["retriever", *(f"R@{k}" for k in ks), "MRR", "nDCG@10", "Δr@10", "cases"]
    rows: list[list[str]] = []
    for r in results:
        delta = ""
        if base is not None and 10 in r.recall and 10 in base.recall:
            delta = f"{100 * (r.recall[10] - base.recall[10]):+.1f}"
        rows.append(
            [
                r.name,
                *(f"{100 * r.recall[k]:.1f}" for k in ks),
                f"{r.mrr:.3f}",
                f"{r.ndcg10:.3f}",
                delta,
                str(r.n_cases),
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(head, widths, strict=True))
        )
    ]
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)
