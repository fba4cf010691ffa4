"""Loaders for the published regulation trees (GraphML).

* the Privacy Checklist / GoldCoin HIPAA trees (`hipaa/regulation_tree*.graphml`):
  node attribute `text`, edge attribute `relation` in subsume / subsumedBy /
  refer / referencedBy;
* the PrivaCI-Bench law trees (`law_trees/{hipaa,gdpr,ai_act}.graphml`): node
  attribute `data` = JSON `{"content", "refer_list"}`.

Known defects are repaired and reported in `LoadReport` rather than hidden.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from privacy_ci.regulations._ids import IdSyntax, cfr_kind, dotted_parent, id_kind, syntax_of
from privacy_ci.regulations._tree import NodeKind, RegulationTree, TreeError, tree_from_parent_map

_NS = "{http://graphml.graphdrawing.org/xmlns}"


@dataclass
class LoadReport:
    """What a loader found and repaired."""

    source: str
    notes: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    stubs: list[str] = field(default_factory=list)
    extra_parents: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class _Graph:
    nodes: dict[str, dict[str, str]]  # id -> attr name -> value
    edges: list[tuple[str, str, dict[str, str]]]


def _read_graphml(path: Path) -> _Graph:
    """Parse GraphML with the standard library (fast, and errors name the file)."""
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise TreeError(f"{path}: file not found") from None
    except ET.ParseError as exc:
        raise TreeError(f"{path}: not valid GraphML/XML ({exc})") from None
    keys: dict[str, str] = {
        k.get("id") or "": k.get("attr.name") or "" for k in root.iter(f"{_NS}key")
    }
    graph = root.find(f"{_NS}graph")
    if graph is None:
        raise TreeError(f"{path}: no <graph> element")
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    for el in graph:
        attrs: dict[str, str] = {
            keys.get(d.get("key") or "", d.get("key") or ""): d.text or ""
            for d in el.findall(f"{_NS}data")
        }
        if el.tag == f"{_NS}node":
            nid = el.get("id")
            if nid is None:
                raise TreeError(f"{path}: a node has no id")
            nodes[nid] = attrs
        elif el.tag == f"{_NS}edge":
            src, tgt = el.get("source"), el.get("target")
            if src is None or tgt is None:
                raise TreeError(f"{path}: an edge lacks source or target")
            for end in (src, tgt):
                nodes.setdefault(end, {})
            edges.append((src, tgt, attrs))
    return _Graph(nodes, edges)


def _tree_parents(
    graph: _Graph, root: str, relation_key: str, report: LoadReport
) -> tuple[dict[str, str | None], dict[str, list[str]]]:
    """Child -> parent from subsume edges; refer edges kept apart."""
    parents: dict[str, str | None] = {}
    refs: dict[str, list[str]] = {}
    for src, tgt, attrs in graph.edges:
        rel = attrs.get(relation_key, "")
        if rel == "subsume":
            if tgt in parents and parents[tgt] != src:
                report.extra_parents.setdefault(tgt, []).append(src)
                continue
            parents[tgt] = src
        elif rel == "refer" and src != tgt:
            refs.setdefault(src, []).append(tgt)
    return parents, refs


def load_hipaa_graphml(
    path: Path, regulation: str = "hipaa", root: str = "HIPAA"
) -> tuple[RegulationTree, LoadReport]:
    """Load a Checklist/GoldCoin HIPAA tree (node attribute `text`, CFR ids).

    Nodes not reachable from the root (the 23 curly-quoted orphan parents and
    their paragraphs in the Checklist tree, and the text-less reference stubs)
    are kept as stubs outside the tree and listed in the report.

    Args:
        path: the GraphML file.
        regulation: the regulation key of the tree.
        root: the root node id (another regulation's tree in the same format).
    """
    graph = _read_graphml(path)
    report = LoadReport(str(path))
    if root not in graph.nodes:
        raise TreeError(f"{path}: no root node {root!r}")
    parents, refs = _tree_parents(graph, root, "relation", report)
    if report.extra_parents:
        child, others = next(iter(report.extra_parents.items()))
        raise TreeError(
            f"{path}: node {child!r} has several parents ({parents[child]}, {', '.join(others)});"
            " the subsumption edges must form a tree"
        )
    parent_map: dict[str, str | None] = {}
    order = list(graph.nodes)
    for nid in order:
        if nid == root:
            continue
        parent_map[nid] = parents.get(nid)
    # Nodes whose chain of parents does not reach the root become stubs.
    reach: dict[str, bool] = {root: True}

    def reaches(nid: str) -> bool:
        seen = []
        cur: str | None = nid
        while cur is not None and cur not in reach:
            if cur in seen:
                raise TreeError(f"{path}: the subsumption edges form a cycle through {cur!r}")
            seen.append(cur)
            cur = parent_map.get(cur)
        ok = cur is not None and reach[cur]
        for s in seen:
            reach[s] = ok
        return ok

    for nid in order:
        if nid != root and not reaches(nid):
            if parent_map.get(nid) is None and not graph.nodes[nid].get("text"):
                report.stubs.append(nid)
            else:
                report.orphans.append(nid)
            parent_map[nid] = None
    texts = {nid: graph.nodes[nid].get("text", "").strip() for nid in order}
    outside = set(report.stubs) | set(report.orphans)
    kinds = {nid: NodeKind.STUB if nid in outside else cfr_kind(nid, root) for nid in order}
    if report.orphans:
        report.notes.append(
            f"{len(report.orphans)} node(s) are not reachable from the root (kept as stubs)"
        )
    tree = tree_from_parent_map(
        regulation, root, parent_map, texts, kinds, refs, str(path), order=order
    )
    return tree, report


def _privaci_payload(attrs: dict[str, str], path: Path, nid: str) -> tuple[str, list[str]]:
    raw = attrs.get("data", "")
    if not raw:
        return "", []
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TreeError(f"{path}: node {nid!r}: attribute 'data' is not JSON ({exc.msg})") from None
    if not isinstance(payload, dict):
        raise TreeError(f"{path}: node {nid!r}: attribute 'data' is not a JSON object")
    refer = payload.get("refer_list") or []
    return str(payload.get("content") or ""), [str(r) for r in refer]


def _own_text(content: str, parent_content: str) -> str:
    """PrivaCI AI Act contents repeat every ancestor; keep the node's own lines."""
    if parent_content and content.startswith(parent_content + "\n"):
        return content[len(parent_content) + 1 :]
    return content


def load_privaci_law_tree(path: Path, regulation: str) -> tuple[RegulationTree, LoadReport]:
    """Load a PrivaCI-Bench law tree (HIPAA, GDPR, EU AI Act or another registered one).

    The root and the id syntax come from the regulation's registry entry (an
    unregistered regulation: the first node without a parent, ``article`` ids).

    * Dotted ids (AI Act): the `subsume` edges are a string-prefix closure
      (``chapter1`` also "subsumes" ``chapter10``); the true parent is the longest
      dotted prefix that is a node, which gives the transitive reduction.
    * Otherwise (GDPR): recitals hang under several articles; the first is kept as
      the tree parent and the others become references from those articles. An
      orphan root (``Recital 172``) is attached to the root and reported.
    """
    from privacy_ci.regulations._registry import find_regulation

    graph = _read_graphml(path)
    report = LoadReport(str(path))
    contents: dict[str, str] = {}
    for nid, attrs in graph.nodes.items():
        contents[nid], _ = _privaci_payload(attrs, path, nid)
    subsume_targets: dict[str, list[str]] = {}
    refs: dict[str, list[str]] = {}
    for src, tgt, attrs in graph.edges:
        rel = attrs.get("relation", "")
        if rel == "subsume":
            subsume_targets.setdefault(tgt, []).append(src)
        elif rel == "refer" and src != tgt:
            refs.setdefault(src, []).append(tgt)
    roots = [n for n in graph.nodes if n not in subsume_targets]
    spec = find_regulation(regulation)
    declared_root = spec.root if spec is not None else None
    root = declared_root if declared_root in graph.nodes else (roots[0] if roots else None)
    if root is None:
        raise TreeError(f"{path}: no root node")
    parents: dict[str, str | None] = {}
    syntax = syntax_of(regulation)
    if syntax is IdSyntax.DOTTED:
        for nid in graph.nodes:
            if nid == root:
                continue
            parent = dotted_parent(nid, graph.nodes)
            claimed = subsume_targets.get(nid, [])
            if parent is not None and claimed and parent not in claimed:
                report.notes.append(
                    f"{nid}: longest-prefix parent {parent} not among subsume sources"
                )
            parents[nid] = parent if parent is not None else root
        closure = sum(len(v) for v in subsume_targets.values())
        report.notes.append(
            f"subsume edges are a prefix closure ({closure}); reduced to {len(parents)} tree edges"
        )
    else:
        for nid in graph.nodes:
            if nid == root:
                continue
            sources = subsume_targets.get(nid, [])
            if not sources:
                if contents.get(nid):
                    report.orphans.append(nid)
                    parents[nid] = root
                else:
                    report.stubs.append(nid)
                    parents[nid] = None
                continue
            parents[nid] = sources[0]
            if len(sources) > 1:
                report.extra_parents[nid] = sources[1:]
                for other in sources[1:]:
                    refs.setdefault(other, []).append(nid)
        if report.orphans:
            report.notes.append(f"orphan roots attached to {root}: {', '.join(report.orphans)}")
        if report.extra_parents:
            report.notes.append(
                f"{len(report.extra_parents)} node(s) had several parents; the first was kept"
                " and the others recorded as references"
            )
    # cycle / structure checks happen in tree_from_parent_map
    texts = {}
    for nid in graph.nodes:
        parent = parents.get(nid)
        texts[nid] = _own_text(contents.get(nid, ""), contents.get(parent, "") if parent else "")
    kinds = {nid: id_kind(nid, syntax, root) for nid in graph.nodes}
    for nid in report.stubs:
        kinds[nid] = NodeKind.STUB
    tree = tree_from_parent_map(
        regulation, root, parents, texts, kinds, refs, str(path), order=list(graph.nodes)
    )
    return tree, report


def node_ids_in(paths: Iterable[Path]) -> set[str]:
    """All node ids of some GraphML files (for quick membership checks in tests)."""
    out: set[str] = set()
    for p in paths:
        out |= set(_read_graphml(p).nodes)
    return out
