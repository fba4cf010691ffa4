"""The role graph G^r and the attribute graph G^a (section 3.3) as DAGs.

Both are held as networkx ``DiGraph`` objects with edges parent -> child
(the broader term subsumes the narrower one).

* `RoleGraph` from ``hipaa/role_graph.graphml``: 211 nodes, 485 edges with
  ``relation`` ``subsume`` (u subsumes v) or ``is subsumed by`` (u is subsumed by
  v, the reverse), plus one self-loop ``health plan -> health plan`` that is
  dropped and reported. Edge ``source`` is ``wordnet`` or a Python-literal list
  with one HHS page title; roles that subsume something on an HHS page are the
  *regulation roles* (``cover entity``, ``health care provider``, ...).
* `AttributeGraph` from ``hipaa/attribute_graph.graphml``: 296 nodes, 318 edges
  with ``label`` ``"has subclass"``/``"has individual"`` (literal double quotes,
  stripped and counted), node ``domain`` one or two ontology IRIs in angle
  brackets (``<a> & <b>`` for 8 nodes).

A cycle in the subsumption edges raises `ValidationFailed` naming the file.

Node names are lemmatised ("cover entity", "bill address"), so `match` compares
lemma-ish keys (`term_key`), then token overlap and difflib similarity, and
always reports a score: a case role that is not in the graph is matched to its
nearest terms, never silently dropped.
"""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from privacy_ci.errors import ValidationFailed
from privacy_ci.knowledge._vocabulary import similarity, term_key

TermSimilarity = Callable[[str, Sequence[str]], Sequence[float]]
"""(query, terms) -> one similarity in [0, 1] per term, e.g. embedding cosine
(`privacy_ci.retrieval.embedding_similarity`); the knowledge base itself never
loads a model."""

__all__ = [
    "AttributeGraph",
    "Classification",
    "GraphReport",
    "RoleGraph",
    "TaxonomyGraph",
    "TermMatch",
    "load_attribute_graph",
    "load_role_graph",
]

_NS = "{http://graphml.graphdrawing.org/xmlns}"
_ROLE_RELATIONS = {"subsume": False, "is subsumed by": True}  # value: reversed?
_ATTRIBUTE_LABELS = ("has subclass", "has individual")
_IRI = re.compile(r"<([^<>]+)>")


@dataclass(frozen=True, slots=True)
class TermMatch:
    """A graph term matched to a query.

    Args:
        term: the graph term.
        score: 1.0 for exact/normalised, else the similarity (0..1).
        method: ``exact`` (same string), ``normalised`` (same lemma key),
            ``token`` (token overlap), ``fuzzy`` (difflib ratio) or ``embedding``
            (a `TermSimilarity`, e.g. sentence-embedding cosine).
    """

    term: str
    score: float
    method: str


@dataclass(frozen=True, slots=True)
class Classification:
    """A matched term and its ancestors (what the query "falls under").

    Args:
        match: the graph term matched to the query.
        ancestors: the matched term's ancestors, nearest first.
    """

    match: TermMatch
    ancestors: tuple[str, ...]


@dataclass
class GraphReport:
    """What a graph loader found and repaired.

    Args:
        source: the file.
        raw_nodes: nodes in the file.
        raw_edges: edges in the file.
        dropped_self_loops: self-loop edges dropped, as ``(node, relation)``.
        merged_reverse_edges: ``is subsumed by`` edges merged with their ``subsume`` twin.
        reverse_only_edges: ``is subsumed by`` edges without a ``subsume`` twin (kept).
        relation_counts: raw relation/label values and their counts.
        unquoted_labels: labels whose literal double quotes were stripped.
        empty_names: nodes whose name is empty or blank.
        lemma_variants: groups of distinct nodes that share a lemma key
            (e.g. ``health care clearinghouse`` / ``health care clearinghouses``).
        notes: other observations.
    """

    source: str
    raw_nodes: int = 0
    raw_edges: int = 0
    dropped_self_loops: list[tuple[str, str]] = field(default_factory=list)
    merged_reverse_edges: int = 0
    reverse_only_edges: list[tuple[str, str]] = field(default_factory=list)
    relation_counts: Counter[str] = field(default_factory=Counter)
    unquoted_labels: int = 0
    empty_names: list[str] = field(default_factory=list)
    lemma_variants: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _RawGraph:
    nodes: dict[str, dict[str, str]]
    edges: list[tuple[str, str, dict[str, str]]]


def _read_graphml(path: Path) -> _RawGraph:
    """Parse GraphML with the standard library; errors name the file."""
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise ValidationFailed([f"{path}: file not found"]) from None
    except ET.ParseError as exc:
        raise ValidationFailed([f"{path}: not valid GraphML/XML ({exc})"]) from None
    keys = {k.get("id") or "": k.get("attr.name") or "" for k in root.iter(f"{_NS}key")}
    graph = root.find(f"{_NS}graph")
    if graph is None:
        raise ValidationFailed([f"{path}: no <graph> element"])
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    problems: list[str] = []
    for el in graph:
        attrs = {
            keys.get(d.get("key") or "", d.get("key") or ""): d.text or ""
            for d in el.findall(f"{_NS}data")
        }
        if el.tag == f"{_NS}node":
            nid = el.get("id")
            if nid is None:
                problems.append(f"{path}: a <node> has no id")
                continue
            nodes[nid] = attrs
        elif el.tag == f"{_NS}edge":
            src, tgt = el.get("source"), el.get("target")
            if src is None or tgt is None:
                problems.append(f"{path}: an <edge> lacks source or target")
                continue
            edges.append((src, tgt, attrs))
    for src, tgt, _ in edges:
        for end in (src, tgt):
            if end not in nodes:
                problems.append(f"{path}: edge {src!r} -> {tgt!r} names undeclared node {end!r}")
    if problems:
        raise ValidationFailed(problems)
    return _RawGraph(nodes, edges)


def _check_acyclic(graph: Any, path: Path) -> None:
    if nx.is_directed_acyclic_graph(graph):
        return
    cycle = nx.find_cycle(graph)
    chain = " -> ".join([*(u for u, _ in cycle), cycle[0][0]])
    raise ValidationFailed([f"{path}: the subsumption edges form a cycle: {chain}"])


class TaxonomyGraph:
    """A subsumption DAG over terms (parent -> child) with lookups and matching.

    Args:
        graph: a networkx DiGraph, edges parent -> child, acyclic.
        source: the file it was read from.
        report: what the loader found.
    """

    kind = "taxonomy"

    def __init__(self, graph: Any, source: str = "", report: GraphReport | None = None) -> None:
        self.graph = graph
        self.source = source
        self.report = report or GraphReport(source)
        self._keys: dict[str, list[str]] = {}
        for node in graph.nodes:
            self._keys.setdefault(term_key(node), []).append(node)
        self.report.lemma_variants = [
            tuple(sorted(v)) for k, v in self._keys.items() if k and len(v) > 1
        ]

    # -- basic -------------------------------------------------------------------------
    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.resolve(term) is not None

    def __len__(self) -> int:
        return int(self.graph.number_of_nodes())

    @property
    def terms(self) -> list[str]:
        """All terms, sorted."""
        return sorted(self.graph.nodes)

    @property
    def number_of_edges(self) -> int:
        """Subsumption edges in the DAG (after merging reverse twins and dropping self-loops)."""
        return int(self.graph.number_of_edges())

    @property
    def roots(self) -> list[str]:
        """Terms without a parent, sorted."""
        return sorted(n for n in self.graph.nodes if self.graph.in_degree(n) == 0)

    @property
    def leaves(self) -> list[str]:
        """Terms without a child, sorted (an isolated term is both root and leaf)."""
        return sorted(n for n in self.graph.nodes if self.graph.out_degree(n) == 0)

    def resolve(self, term: str) -> str | None:
        """The graph term for `term`: the same string, else the same lemma key.

        Args:
            term: e.g. ``covered entity``.

        Returns:
            e.g. ``cover entity``, or None. If several terms share the key, the
            one that is equal ignoring case and spaces wins, else the first sorted.
        """
        if term in self.graph:
            return term
        candidates = self._keys.get(term_key(term))
        if not candidates:
            return None
        plain = " ".join(term.lower().split())
        for cand in candidates:
            if cand == plain:
                return cand
        return sorted(candidates)[0]

    def _require(self, term: str) -> str:
        found = self.resolve(term)
        if found is None:
            near = ", ".join(f"{m.term} ({m.score:.2f})" for m in self.match(term, limit=3))
            raise KeyError(f"{self.kind} graph: no term {term!r}; nearest: {near}")
        return found

    def parents(self, term: str) -> list[str]:
        """The direct parents of a term, sorted.

        Args:
            term: a graph term (or a spelling `resolve` maps to one).

        Returns:
            The parents.

        Raises:
            KeyError: the term is not in the graph (the message lists the nearest terms).
        """
        return sorted(self.graph.predecessors(self._require(term)))

    def children(self, term: str) -> list[str]:
        """The direct children of a term, sorted.

        Args:
            term: a graph term.

        Returns:
            The children.

        Raises:
            KeyError: the term is not in the graph.
        """
        return sorted(self.graph.successors(self._require(term)))

    def _bfs(self, term: str, up: bool) -> list[str]:
        start = self._require(term)
        step = self.graph.predecessors if up else self.graph.successors
        seen = {start}
        order: list[str] = []
        frontier = [start]
        while frontier:
            nxt: list[str] = []
            for node in frontier:
                for other in sorted(step(node)):
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            order.extend(sorted(nxt))
            frontier = sorted(nxt)
        return order

    def ancestors(self, term: str) -> list[str]:
        """Every term that subsumes `term`, nearest first (ties sorted).

        Args:
            term: a graph term.

        Returns:
            The ancestors.

        Raises:
            KeyError: the term is not in the graph (use `classify` for free text).
        """
        return self._bfs(term, up=True)

    def descendants(self, term: str) -> list[str]:
        """Every term `term` subsumes, nearest first (ties sorted).

        Args:
            term: a graph term.

        Returns:
            The descendants.

        Raises:
            KeyError: the term is not in the graph.
        """
        return self._bfs(term, up=False)

    def path_to_root(self, term: str) -> list[str]:
        """A shortest path from `term` up to a root (``[term, parent, ..., root]``).

        With several parents the shortest route wins; ties go to the
        alphabetically first parent.

        Args:
            term: a graph term.

        Returns:
            The path, starting with the (resolved) term.

        Raises:
            KeyError: the term is not in the graph.
        """
        start = self._require(term)
        previous: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            preds = sorted(self.graph.predecessors(node))
            if not preds:
                path = [node]
                while previous[path[-1]] is not None:
                    step = previous[path[-1]]
                    assert step is not None
                    path.append(step)
                return list(reversed(path))
            for pred in preds:
                if pred not in previous:
                    previous[pred] = node
                    queue.append(pred)
        return [start]  # unreachable for a DAG

    # -- matching ----------------------------------------------------------------------
    def match(
        self,
        term: str,
        limit: int = 5,
        min_score: float = 0.0,
        scorer: TermSimilarity | None = None,
    ) -> list[TermMatch]:
        """The graph terms nearest to `term`, with scores.

        An exact or normalised (lemma key) match is returned alone with score 1.0;
        otherwise every term is scored by token overlap and difflib ratio (see
        `similarity`) and the best `limit` are returned.

        Args:
            term: free text, e.g. a case role ``surgeon`` or ``HIV status``.
            limit: at most this many matches.
            min_score: drop matches below this score (0.0 keeps the nearest even if far).
            scorer: score by meaning instead of spelling (method ``embedding``), so
                ``HIV status`` can land on a health term rather than ``social status``.

        Returns:
            Matches, best first (ties sorted by term).
        """
        if term in self.graph:
            return [TermMatch(term, 1.0, "exact")]
        found = self.resolve(term)
        if found is not None:
            return [TermMatch(found, 1.0, "normalised")]
        scored = []
        nodes = [node for node in self.graph.nodes if node.strip()]
        if scorer is not None:
            values = scorer(term, nodes)
            for node, value in zip(nodes, values, strict=True):
                score = max(0.0, min(1.0, float(value)))
                if score >= min_score:
                    scored.append(TermMatch(node, score, "embedding"))
        for node in nodes if scorer is None else ():
            score, method = similarity(term, node)
            if score >= min_score:
                scored.append(TermMatch(node, score, method))
        scored.sort(key=lambda m: (-m.score, m.term))
        return scored[:limit]

    def classify(
        self,
        term: str,
        limit: int = 3,
        min_score: float = 0.0,
        scorer: TermSimilarity | None = None,
    ) -> list[Classification]:
        """What `term` falls under: its matched graph term(s) and their ancestors.

        Args:
            term: free text.
            limit: how many nearest terms to use when there is no exact match.
            min_score: ignore matches below this score.
            scorer: match by meaning (see `match`).

        Returns:
            One `Classification` per matched term, best first.
        """
        return [
            Classification(m, tuple(self.ancestors(m.term)))
            for m in self.match(term, limit=limit, min_score=min_score, scorer=scorer)
        ]

    def stats(self) -> dict[str, int]:
        """Counts: nodes, DAG edges, raw edges, roots, leaves, multi-parent nodes, depth.

        Returns:
            The counts.
        """
        return {
            "nodes": len(self),
            "edges": self.number_of_edges,
            "raw_edges": self.report.raw_edges,
            "roots": len(self.roots),
            "leaves": len(self.leaves),
            "multi_parent_nodes": sum(1 for n in self.graph if self.graph.in_degree(n) > 1),
            "longest_path": int(nx.dag_longest_path_length(self.graph)),
        }


class RoleGraph(TaxonomyGraph):
    """The HIPAA role graph (social roles; WordNet hypernyms plus HHS page roles)."""

    kind = "role"

    @property
    def regulation_roles(self) -> list[str]:
        """Roles that subsume something on an HHS page (not only in WordNet), sorted."""
        out = set()
        for parent, _, data in self.graph.edges(data=True):
            if any(s != "wordnet" for s in data.get("sources", ())):
                out.add(parent)
        return sorted(out)

    def regulation_roles_of(self, term: str) -> list[str]:
        """The regulation roles `term` falls under (itself included), nearest first.

        Args:
            term: a graph role (e.g. ``surgeon``).

        Returns:
            e.g. ``["health care provider", "cover entity"]``.

        Raises:
            KeyError: the term is not in the graph (use `classify` first).
        """
        roles = set(self.regulation_roles)
        node = self._require(term)
        return [r for r in [node, *self.ancestors(node)] if r in roles]

    def edge_sources(self, parent: str, child: str) -> tuple[str, ...]:
        """Where an edge comes from: ``wordnet`` and/or HHS page titles.

        Args:
            parent: the subsuming role.
            child: the subsumed role.

        Returns:
            The sources, sorted.
        """
        return tuple(self.graph.edges[parent, child].get("sources", ()))


class AttributeGraph(TaxonomyGraph):
    """The HIPAA attribute graph (information types; DPV and OPPO ontology terms)."""

    kind = "attribute"

    def domains(self, term: str) -> tuple[str, ...]:
        """The ontology IRIs of a term (angle brackets removed; some nodes have two).

        Args:
            term: a graph term.

        Returns:
            e.g. ``("http://umaine.edu/oppo/core/v1#Age",
            "https://w3id.org/dpv/dpv-owl/dpv-pd#Age")``; empty if the file gives none.
        """
        return tuple(self.graph.nodes[self._require(term)].get("domains", ()))

    def edge_label(self, parent: str, child: str) -> str:
        """``has subclass`` or ``has individual`` (quotes removed).

        Args:
            parent: the broader term.
            child: the narrower term.

        Returns:
            The label.
        """
        return str(self.graph.edges[parent, child].get("label", ""))


def _parse_sources(raw: str) -> list[str]:
    raw = raw.strip()
    if raw.startswith("["):
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return [raw]
        if isinstance(value, list):
            return [str(v) for v in value]
    return [raw] if raw else []


def _empty_names(nodes: Iterable[str]) -> list[str]:
    return [n for n in nodes if not n.strip()]


def load_role_graph(path: Path | str) -> RoleGraph:
    """Load ``hipaa/role_graph.graphml`` as a parent -> child DAG.

    ``subsume`` edges are kept as they are, ``is subsumed by`` edges are reversed
    and merged with their twin, self-loops are dropped; all counted in the report.

    Args:
        path: the GraphML file.

    Returns:
        The role graph.

    Raises:
        ValidationFailed: unreadable file, an edge with another relation, or a cycle.
    """
    path = Path(path)
    raw = _read_graphml(path)
    report = GraphReport(str(path), raw_nodes=len(raw.nodes), raw_edges=len(raw.edges))
    graph = nx.DiGraph(source=str(path))
    graph.add_nodes_from(raw.nodes)
    problems: list[str] = []
    subsume_pairs = {
        (s, t) for s, t, a in raw.edges if a.get("relation", "").strip() == "subsume" and s != t
    }
    for src, tgt, attrs in raw.edges:
        relation = attrs.get("relation", "").strip()
        report.relation_counts[relation] += 1
        if relation not in _ROLE_RELATIONS:
            problems.append(
                f"{path}: edge {src!r} -> {tgt!r} has relation {relation!r} "
                "(expected 'subsume' or 'is subsumed by')"
            )
            continue
        if src == tgt:
            report.dropped_self_loops.append((src, relation))
            continue
        parent, child = (tgt, src) if _ROLE_RELATIONS[relation] else (src, tgt)
        if _ROLE_RELATIONS[relation]:
            if (parent, child) in subsume_pairs:
                report.merged_reverse_edges += 1
            else:
                report.reverse_only_edges.append((parent, child))
        sources = set(_parse_sources(attrs.get("source", "")))
        if graph.has_edge(parent, child):
            data = graph.edges[parent, child]
            data["sources"] = tuple(sorted(set(data["sources"]) | sources))
            data["relations"] = tuple(sorted(set(data["relations"]) | {relation}))
        else:
            graph.add_edge(parent, child, sources=tuple(sorted(sources)), relations=(relation,))
    if problems:
        raise ValidationFailed(problems)
    _check_acyclic(graph, path)
    report.empty_names = _empty_names(graph.nodes)
    if report.dropped_self_loops:
        report.notes.append(
            f"{len(report.dropped_self_loops)} self-loop(s) dropped: "
            + ", ".join(f"{n} ({r})" for n, r in report.dropped_self_loops)
        )
    if report.empty_names:
        report.notes.append(f"{len(report.empty_names)} node(s) with an empty name (kept)")
    return RoleGraph(graph, str(path), report)


def load_attribute_graph(path: Path | str) -> AttributeGraph:
    """Load ``hipaa/attribute_graph.graphml`` as a parent -> child DAG.

    Edge labels ``"has subclass"``/``"has individual"`` carry literal double
    quotes in the file; they are stripped (counted). Node ``domain`` IRIs lose
    their angle brackets.

    Args:
        path: the GraphML file.

    Returns:
        The attribute graph.

    Raises:
        ValidationFailed: unreadable file, an edge with another label, or a cycle.
    """
    path = Path(path)
    raw = _read_graphml(path)
    report = GraphReport(str(path), raw_nodes=len(raw.nodes), raw_edges=len(raw.edges))
    graph = nx.DiGraph(source=str(path))
    for node, attrs in raw.nodes.items():
        raw_domain = attrs.get("domain", "").strip()
        domains = tuple(_IRI.findall(raw_domain)) or ((raw_domain,) if raw_domain else ())
        graph.add_node(node, domain=raw_domain, domains=domains)
    problems: list[str] = []
    for src, tgt, attrs in raw.edges:
        label = attrs.get("label", "").strip()
        report.relation_counts[label] += 1
        if len(label) >= 2 and label[0] == label[-1] == '"':
            label = label[1:-1].strip()
            report.unquoted_labels += 1
        if label not in _ATTRIBUTE_LABELS:
            problems.append(
                f"{path}: edge {src!r} -> {tgt!r} has label {label!r} "
                "(expected 'has subclass' or 'has individual')"
            )
            continue
        if src == tgt:
            report.dropped_self_loops.append((src, label))
            continue
        graph.add_edge(src, tgt, label=label)
    if problems:
        raise ValidationFailed(problems)
    _check_acyclic(graph, path)
    report.empty_names = _empty_names(graph.nodes)
    missing = sum(1 for _, d in graph.nodes(data=True) if not d["domains"])
    if missing:
        report.notes.append(f"{missing} node(s) without a domain IRI")
    return AttributeGraph(graph, str(path), report)
