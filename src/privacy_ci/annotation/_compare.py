"""How close a built knowledge base comes to a published one (``privacy-ci kb compare``).

Over the norms both have (same node id):

* norm type: agreement and the confusion matrix (rows published, columns built);
* each CI field: exact agreement (the loaded, cleaned values equal; actor lists as
  sets), normalised (lemma keys equal, `term_key`) and, with a scorer, semantic
  (normalised, or the cosine of the two values' sentence embeddings at least
  `SEMANTIC_THRESHOLD`, with the packaged `SEMANTIC_MODEL`). Two empty values agree;
* sender/recipient-is-subject: agreement;
* references: over the targets both annotate, support/exception agreement; and how
  many targets only one side annotates;

and over the graphs, the overlap of nodes, edges and ancestor pairs (by lemma key).
The same measures for a trivial baseline (every norm a general definition, every
field empty, "not sure", every reference "support") stand beside them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from privacy_ci.ci import FIELDS
from privacy_ci.knowledge import (
    KnowledgeBase,
    Norm,
    NormType,
    ReferenceKind,
    TaxonomyGraph,
    Ternary,
    term_key,
)

__all__ = [
    "SEMANTIC_MODEL",
    "SEMANTIC_THRESHOLD",
    "Comparison",
    "baseline_norms",
    "compare_knowledge_bases",
    "compare_norms",
    "graph_overlap",
]

SEMANTIC_MODEL = "all-MiniLM-L6-v2"
"""The sentence-embedding model of the semantic match (the packaged MiniLM)."""
SEMANTIC_THRESHOLD = 0.7
"""Cosine similarity at or above which two different values count as the same meaning."""

Scorer = Callable[[str, Sequence[str]], Sequence[float]]
LIST_FIELDS = ("sender", "recipient", "subject")


def _value(norm: Norm, name: str) -> tuple[str, ...] | str | None:
    value = getattr(norm, name)
    return tuple(value) if isinstance(value, tuple) else value


def _empty(value: tuple[str, ...] | str | None) -> bool:
    return not value


def _text(value: tuple[str, ...] | str | None) -> str:
    if isinstance(value, tuple):
        return "; ".join(value)
    return value or ""


def _exact(a: tuple[str, ...] | str | None, b: tuple[str, ...] | str | None) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return set(a or ()) == set(b or ())
    return (a or None) == (b or None)


def _normalised(a: tuple[str, ...] | str | None, b: tuple[str, ...] | str | None) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return {term_key(x) for x in a or ()} == {term_key(x) for x in b or ()}
    return term_key(a or "") == term_key(b or "")


def _rate(hits: int, n: int) -> float | None:
    return None if n == 0 else round(hits / n, 4)


@dataclass
class Comparison:
    """The agreement of a built KB with a published one (`as_dict` for ``--json``)."""

    regulation: str
    coverage: dict[str, Any]
    norm_type: dict[str, Any]
    fields: dict[str, dict[str, Any]]
    is_subject: dict[str, dict[str, Any]]
    references: dict[str, Any]
    differences: list[dict[str, Any]] = field(default_factory=list)
    role_graph: dict[str, Any] | None = None
    attribute_graph: dict[str, Any] | None = None
    semantic: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "regulation": self.regulation,
            "coverage": self.coverage,
            "norm_type": self.norm_type,
            "fields": self.fields,
            "is_subject": self.is_subject,
            "references": self.references,
            "role_graph": self.role_graph,
            "attribute_graph": self.attribute_graph,
            "semantic": self.semantic,
            "baseline": self.baseline,
            "notes": self.notes,
            "differences": self.differences,
        }


def compare_norms(
    built: dict[str, Norm],
    published: dict[str, Norm],
    scorer: Scorer | None = None,
    threshold: float = SEMANTIC_THRESHOLD,
) -> dict[str, Any]:
    """The norm-level measures over the ids both have (see the module docstring).

    Returns:
        ``coverage``, ``norm_type``, ``fields``, ``is_subject``, ``references`` and
        ``differences`` (per common norm, the fields whose normalised values differ).
    """
    common = [i for i in published if i in built]
    coverage = {
        "built": len(built),
        "published": len(published),
        "both": len(common),
        "only_built": sorted(set(built) - set(published)),
        "only_published": len(set(published) - set(built)),
    }
    types = [t.value for t in NormType]
    confusion = {p: dict.fromkeys(types, 0) for p in types}
    for i in common:
        confusion[published[i].norm_type.value][built[i].norm_type.value] += 1
    agree = sum(confusion[t][t] for t in types)
    norm_type = {"n": len(common), "agreement": _rate(agree, len(common)), "confusion": confusion}

    fields: dict[str, dict[str, Any]] = {}
    differing: dict[str, dict[str, Any]] = {i: {} for i in common}
    for name in FIELDS:
        exact = normal = semantic = both_empty = 0
        for i in common:
            b, p = _value(built[i], name), _value(published[i], name)
            if _empty(b) and _empty(p):
                both_empty += 1
            is_exact, is_normal = _exact(b, p), _normalised(b, p)
            exact += is_exact
            normal += is_normal
            if is_normal:
                semantic += 1
            elif scorer is not None and not _empty(b) and not _empty(p):
                semantic += float(scorer(_text(b), [_text(p)])[0]) >= threshold
            if not is_normal:
                differing[i][name] = {"built": _text(b) or None, "published": _text(p) or None}
        n = len(common)
        fields[name] = {
            "n": n,
            "both_empty": both_empty,
            "exact": _rate(exact, n),
            "normalised": _rate(normal, n),
            "semantic": _rate(semantic, n) if scorer is not None else None,
        }
    is_subject: dict[str, dict[str, Any]] = {}
    for name in ("sender_is_subject", "recipient_is_subject"):
        hits = 0
        for i in common:
            b, p = getattr(built[i], name), getattr(published[i], name)
            hits += b is p
            if b is not p:
                differing[i][name] = {"built": b.value, "published": p.value}
        is_subject[name] = {"n": len(common), "agreement": _rate(hits, len(common))}
    shared = same = only_b = only_p = 0
    kinds = {k.value: dict.fromkeys((x.value for x in ReferenceKind), 0) for k in ReferenceKind}
    for i in common:
        b_refs = {r.target_id: r.kind for r in built[i].references}
        p_refs = {r.target_id: r.kind for r in published[i].references}
        only_b += len(set(b_refs) - set(p_refs))
        only_p += len(set(p_refs) - set(b_refs))
        for target in set(b_refs) & set(p_refs):
            shared += 1
            same += b_refs[target] is p_refs[target]
            kinds[p_refs[target].value][b_refs[target].value] += 1
            if b_refs[target] is not p_refs[target]:
                differing[i].setdefault("references", {})[target] = {
                    "built": b_refs[target].value,
                    "published": p_refs[target].value,
                }
    references = {
        "both": shared,
        "agreement": _rate(same, shared),
        "confusion": kinds,
        "only_built": only_b,
        "only_published": only_p,
    }
    for i in common:
        if built[i].norm_type is not published[i].norm_type:
            differing[i]["norm_type"] = {
                "built": built[i].norm_type.value,
                "published": published[i].norm_type.value,
            }
    differences = [{"id": i, "fields": d} for i, d in differing.items() if d]
    return {
        "coverage": coverage,
        "norm_type": norm_type,
        "fields": fields,
        "is_subject": is_subject,
        "references": references,
        "differences": differences,
    }


def baseline_norms(published: dict[str, Norm], ids: Iterable[str]) -> dict[str, Norm]:
    """The trivial annotator: every norm a general definition, every field empty,
    "not sure" twice, every reference the published one's target as "support"."""
    out: dict[str, Norm] = {}
    for i in ids:
        norm = published[i]
        out[i] = Norm(
            id=i,
            regulation=norm.regulation,
            norm_type=NormType.GENERAL_DEFINITION,
            text=norm.text,
            sender_is_subject=Ternary.UNSURE,
            recipient_is_subject=Ternary.UNSURE,
            references=tuple(replace(r, kind=ReferenceKind.SUPPORT) for r in norm.references),
        )
    return out


def _closure(graph: Any) -> set[tuple[str, str]]:
    return {(term_key(a), term_key(n)) for n in graph.nodes for a in nx.ancestors(graph, n)}


def _overlap(ours: set[Any], theirs: set[Any]) -> dict[str, Any]:
    both = len(ours & theirs)
    union = len(ours | theirs)
    return {
        "built": len(ours),
        "published": len(theirs),
        "both": both,
        "precision": _rate(both, len(ours)),
        "recall": _rate(both, len(theirs)),
        "jaccard": _rate(both, union),
    }


def graph_overlap(built: TaxonomyGraph, published: TaxonomyGraph) -> dict[str, Any]:
    """Nodes, edges and ancestor pairs both graphs have (compared by lemma key)."""
    b, p = built.graph, published.graph
    return {
        "nodes": _overlap({term_key(n) for n in b.nodes}, {term_key(n) for n in p.nodes}),
        "edges": _overlap(
            {(term_key(u), term_key(v)) for u, v in b.edges},
            {(term_key(u), term_key(v)) for u, v in p.edges},
        ),
        "ancestor_pairs": _overlap(_closure(b), _closure(p)),
    }


def compare_knowledge_bases(
    built: KnowledgeBase,
    published: KnowledgeBase,
    *,
    scorer: Scorer | None = None,
    threshold: float = SEMANTIC_THRESHOLD,
    model: str = SEMANTIC_MODEL,
) -> Comparison:
    """Compare a built knowledge base with a published one of the same regulation.

    Args:
        built: the built KB (`privacy_ci.knowledge.load_kb_folder`).
        published: the reference KB (`privacy_ci.knowledge.load_knowledge_base`).
        scorer: ``(value, [other]) -> [cosine]`` for the semantic match (e.g.
            `privacy_ci.retrieval.embedding_similarity`); None skips it.
        threshold: the semantic match's least cosine.
        model: the scorer's model, as reported.

    Raises:
        ValueError: the two are different regulations' KBs.
    """
    if built.regulation != published.regulation:
        raise ValueError(
            f"cannot compare a {built.regulation} knowledge base with a {published.regulation} one"
        )
    measures = compare_norms(built.norms, published.norms, scorer, threshold)
    common = [i for i in published.norms if i in built.norms]
    base = compare_norms(
        baseline_norms(published.norms, common), published.norms, scorer, threshold
    )
    comparison = Comparison(
        regulation=built.regulation,
        coverage=measures["coverage"],
        norm_type=measures["norm_type"],
        fields=measures["fields"],
        is_subject=measures["is_subject"],
        references=measures["references"],
        differences=measures["differences"],
        semantic=None if scorer is None else {"model": model, "threshold": threshold},
        baseline={k: base[k] for k in ("norm_type", "fields", "is_subject", "references")},
    )
    if built.role_graph is not None and published.role_graph is not None:
        comparison.role_graph = graph_overlap(built.role_graph, published.role_graph)
    if built.attribute_graph is not None and published.attribute_graph is not None:
        comparison.attribute_graph = graph_overlap(built.attribute_graph, published.attribute_graph)
        comparison.notes.append(
            "the built attribute graph is drawn from the published one (the taxonomy"
            " fallback: no offline DPV); its overlap is no independent evidence"
        )
    if not common:
        comparison.notes.append("no norm id is in both knowledge bases: nothing to compare")
    counts = Counter(n.norm_type.value for n in published.norms.values() if n.id in built.norms)
    comparison.coverage["published_types_of_common"] = dict(counts)
    return comparison
