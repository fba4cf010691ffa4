"""How far our eCFR tree agrees with a published HIPAA tree (GoldCoin / Checklist).

`compare_with_published(ours, published)` maps every published id onto ours
through `AliasIndex` (``164.501Payment(2)`` -> ``164.501(Payment)(2)``, the
``160.103(ANSI)(1)`` erratum, the ``45 CFR 164.512`` stubs, ...) and measures:

* node ids: matched, ours-only, theirs-only (Jaccard, precision, recall);
* node text: exact after whitespace normalisation, and a similarity ratio for the rest;
* parents: the same parent after mapping;
* reference edges: the published edges taken as the reference, ours as the
  prediction (``ref_recall`` = share of published edges we also have,
  ``ref_precision`` = share of ours that the published tree also has);
* explained differences: each residual difference sorted into a named category
  (id spellings, printed-id errata, text-less stubs, orphan nodes, citations
  that only the text carries, part/subpart targets, ranges, ...).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci.regulations._ids import PRINTED_ID_ERRATA, AliasIndex, split_id, to_goldcoin_id
from privacy_ci.regulations._references import find_citations
from privacy_ci.regulations._tree import NodeKind, RegulationTree

__all__ = ["AgreementReport", "Difference", "agreement_with_goldcoin", "compare_with_published"]

GOLDCOIN_TREE = "hipaa/regulation_tree_goldcoin.graphml"
"""The published GoldCoin tree, relative to the data directory."""


def _norm(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Difference:
    """One category of explained differences.

    Attributes:
        category: a short name, e.g. ``id spelling: whitespace-stripped term``.
        count: how many nodes or edges fall in it.
        note: why it differs.
        examples: a few members (ids, or ``source -> target`` for edges).
    """

    category: str
    count: int
    note: str
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict.

        Returns:
            ``category``, ``count``, ``note`` and ``examples``.
        """
        return {
            "category": self.category,
            "count": self.count,
            "note": self.note,
            "examples": list(self.examples),
        }


@dataclass
class AgreementReport:
    """The comparison of our tree with a published one (see the module docstring).

    Attributes:
        ours_source: where our tree came from.
        theirs_source: where the published tree came from.
        ours_nodes: our nodes reachable from the root.
        theirs_nodes: published nodes with text or children (text-less stubs excluded).
        theirs_stubs: published text-less stubs (reference sources only).
        ids_matched: published nodes that map onto one of our nodes.
        ids_exact: of those, how many use our spelling exactly.
        ids_ours_only: our tree nodes no published node maps to.
        ids_theirs_only: published nodes that map onto none of ours.
        text_compared: matched nodes whose texts were compared.
        text_exact: of those, equal after whitespace normalisation.
        text_mean_ratio: mean difflib ratio over all compared nodes.
        text_differences: (their id, our id, ratio) for the texts that differ.
        parents_compared: matched non-root nodes with a parent on both sides.
        parents_agree: of those, the same parent after mapping.
        parent_differences: (our id, their parent mapped, our parent).
        refs_theirs: published reference edges after mapping (self-loops excluded).
        refs_ours: our reference edges between nodes that both trees have.
        refs_common: edges in both.
        refs_theirs_only: published edges we lack (``source -> target``, our ids).
        refs_ours_only: our edges the published tree lacks.
        refs_unmappable: published edges whose ends map onto no node of ours.
        explained: the residual differences by category.
    """

    ours_source: str
    theirs_source: str
    ours_nodes: int = 0
    theirs_nodes: int = 0
    theirs_stubs: int = 0
    ids_matched: int = 0
    ids_exact: int = 0
    ids_ours_only: list[str] = field(default_factory=list)
    ids_theirs_only: list[str] = field(default_factory=list)
    text_compared: int = 0
    text_exact: int = 0
    text_mean_ratio: float = 0.0
    text_differences: list[tuple[str, str, float]] = field(default_factory=list)
    parents_compared: int = 0
    parents_agree: int = 0
    parent_differences: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    refs_theirs: int = 0
    refs_ours: int = 0
    refs_common: int = 0
    refs_theirs_only: list[tuple[str, str]] = field(default_factory=list)
    refs_ours_only: list[tuple[str, str]] = field(default_factory=list)
    refs_unmappable: list[tuple[str, str]] = field(default_factory=list)
    explained: list[Difference] = field(default_factory=list)

    # -- rates ------------------------------------------------------------------------
    @property
    def id_agreement(self) -> float:
        """Matched / (matched + ours-only + theirs-only): the Jaccard index of the id sets."""
        union = self.ids_matched + len(self.ids_ours_only) + len(self.ids_theirs_only)
        return self.ids_matched / union if union else 1.0

    @property
    def id_recall(self) -> float:
        """Share of published nodes that map onto ours."""
        return self.ids_matched / self.theirs_nodes if self.theirs_nodes else 1.0

    @property
    def id_precision(self) -> float:
        """Share of our nodes that a published node maps onto."""
        matched_ours = self.ours_nodes - len(self.ids_ours_only)
        return matched_ours / self.ours_nodes if self.ours_nodes else 1.0

    @property
    def text_exact_rate(self) -> float:
        """Share of compared texts that are equal after whitespace normalisation."""
        return self.text_exact / self.text_compared if self.text_compared else 1.0

    @property
    def parent_agreement(self) -> float:
        """Share of compared nodes with the same parent."""
        return self.parents_agree / self.parents_compared if self.parents_compared else 1.0

    @property
    def ref_recall(self) -> float:
        """Share of the published reference edges that our tree also has."""
        return self.refs_common / self.refs_theirs if self.refs_theirs else 1.0

    @property
    def ref_precision(self) -> float:
        """Share of our reference edges that the published tree also has."""
        return self.refs_common / self.refs_ours if self.refs_ours else 1.0

    # -- output -----------------------------------------------------------------------
    def as_dict(self, max_examples: int = 10) -> dict[str, Any]:
        """A JSON-ready dict: the rates, the counts, examples and the explained differences.

        Args:
            max_examples: how many members of each list to include.

        Returns:
            Nested dicts with keys ``ids``, ``text``, ``parents``, ``references``
            and ``explained``.
        """
        k = max_examples

        def edges(items: Iterable[tuple[str, str]]) -> list[str]:
            return [f"{s} -> {t}" for s, t in list(items)[:k]]

        return {
            "ours_source": self.ours_source,
            "theirs_source": self.theirs_source,
            "ids": {
                "ours": self.ours_nodes,
                "theirs": self.theirs_nodes,
                "theirs_stubs": self.theirs_stubs,
                "matched": self.ids_matched,
                "exact_spelling": self.ids_exact,
                "ours_only": len(self.ids_ours_only),
                "theirs_only": len(self.ids_theirs_only),
                "agreement": round(self.id_agreement, 6),
                "precision": round(self.id_precision, 6),
                "recall": round(self.id_recall, 6),
                "ours_only_examples": self.ids_ours_only[:k],
                "theirs_only_examples": self.ids_theirs_only[:k],
            },
            "text": {
                "compared": self.text_compared,
                "exact": self.text_exact,
                "exact_rate": round(self.text_exact_rate, 6),
                "mean_ratio": round(self.text_mean_ratio, 6),
                "differences": [
                    {"theirs": a, "ours": b, "ratio": round(r, 4)}
                    for a, b, r in self.text_differences[:k]
                ],
            },
            "parents": {
                "compared": self.parents_compared,
                "agree": self.parents_agree,
                "agreement": round(self.parent_agreement, 6),
                "differences": [list(x) for x in self.parent_differences[:k]],
            },
            "references": {
                "theirs": self.refs_theirs,
                "ours": self.refs_ours,
                "common": self.refs_common,
                "recall": round(self.ref_recall, 6),
                "precision": round(self.ref_precision, 6),
                "theirs_only": len(self.refs_theirs_only),
                "ours_only": len(self.refs_ours_only),
                "unmappable": len(self.refs_unmappable),
                "theirs_only_examples": edges(self.refs_theirs_only),
                "ours_only_examples": edges(self.refs_ours_only),
                "unmappable_examples": edges(self.refs_unmappable),
            },
            "explained": [d.as_dict() for d in self.explained],
        }

    def rows(self) -> list[tuple[str, str, str]]:
        """The headline numbers as table rows.

        Returns:
            ``(aspect, measure, value)`` triples, e.g.
            ``("node ids", "agreement (Jaccard)", "100.00% (2274 matched)")``.
        """

        def pct(x: float) -> str:
            return f"{100 * x:.2f}%"

        return [
            (
                "node ids",
                "ours / theirs (+ stubs)",
                f"{self.ours_nodes} / {self.theirs_nodes} (+{self.theirs_stubs})",
            ),
            (
                "node ids",
                "agreement (Jaccard)",
                f"{pct(self.id_agreement)} ({self.ids_matched} matched)",
            ),
            (
                "node ids",
                "ours-only / theirs-only",
                f"{len(self.ids_ours_only)} / {len(self.ids_theirs_only)}",
            ),
            ("node ids", "same spelling", f"{self.ids_exact} of {self.ids_matched}"),
            (
                "node text",
                "exact (normalised)",
                f"{pct(self.text_exact_rate)} ({self.text_exact}/{self.text_compared})",
            ),
            ("node text", "mean similarity", f"{self.text_mean_ratio:.4f}"),
            (
                "parents",
                "agreement",
                f"{pct(self.parent_agreement)} ({self.parents_agree}/{self.parents_compared})",
            ),
            (
                "references",
                "theirs / ours / common",
                f"{self.refs_theirs} / {self.refs_ours} / {self.refs_common}",
            ),
            ("references", "recall of theirs", pct(self.ref_recall)),
            ("references", "precision vs theirs", pct(self.ref_precision)),
            (
                "references",
                "theirs-only / ours-only",
                f"{len(self.refs_theirs_only)} / {len(self.refs_ours_only)}",
            ),
        ] + [("explained", d.category, str(d.count)) for d in self.explained]


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _spelling_category(their_id: str, our_id: str) -> str:
    if their_id in PRINTED_ID_ERRATA:
        return "id: printed-id erratum"
    if their_id.startswith("Appendix"):
        return "id: appendix spelling"
    if "%20" in their_id:
        return "id: %20-encoded 160.103 term"
    if "“" in their_id and " " not in their_id:
        return "id: curly-quoted Checklist parent"
    if " " in their_id or their_id.startswith("45 CFR"):
        return "id: eCFR data-title / citation spelling (stub)"
    if to_goldcoin_id(our_id) == their_id:
        return "id: whitespace-stripped term"
    return "id: other spelling"


_ID_NOTES = {
    "id: printed-id erratum": "the eCFR page prints the wrong id; the HTML nesting gives ours",
    "id: appendix spelling": "GoldCoin strips spaces from the appendix citation",
    "id: %20-encoded 160.103 term": "GoldCoin keeps the page anchor's %20; ours keeps spaces",
    "id: curly-quoted Checklist parent": "the Checklist tree's text-less parents of definitions",
    "id: eCFR data-title / citation spelling (stub)": (
        "text-less reference stubs named by the page's data-title or citation"
    ),
    "id: whitespace-stripped term": "GoldCoin strips spaces and quotes from definition terms",
    "id: other spelling": "another spelling that the alias index resolves",
}


def _classify_ours_only(ours: RegulationTree, src: str, tgt: str) -> str:
    node = ours.nodes[src]
    if node.kind == NodeKind.APPENDIX:
        return "refs: citations in the appendix table"
    if tgt.startswith("Part"):
        return "refs: part/subpart targets"
    for citation in find_citations(node.text, src, ours):
        if citation.target != tgt:
            continue
        if not citation.exact:
            return "refs: citation of a missing paragraph (nearest ancestor)"
        if "through" in citation.text or "–" in citation.text:
            return "refs: members of a range"
        if (
            split_id(citation.wanted) is not None
            and citation.wanted.split("(")[0] != src.split("(")[0]
        ):
            return "refs: other-section citation without a (working) link"
        return "refs: same-section citation without a (working) link"
    return "refs: link only"


_REF_NOTES = {
    "refs: citations in the appendix table": "the Security Rule matrix lists sections",
    "refs: part/subpart targets": "the published tree keeps section/paragraph targets only",
    "refs: citation of a missing paragraph (nearest ancestor)": (
        "the text cites a paragraph that is not a node (inline or mistyped)"
    ),
    "refs: members of a range": "'(a)(2) through (a)(5)': the page links only the ends",
    "refs: other-section citation without a (working) link": (
        "the page has no link (or a broken one) for this citation"
    ),
    "refs: same-section citation without a (working) link": (
        "the page has no link (or a broken one) for this citation"
    ),
    "refs: link only": "a link whose words our text resolver does not read the same way",
}


def compare_with_published(
    ours: RegulationTree, published: RegulationTree, *, max_examples: int = 10
) -> AgreementReport:
    """Compare our tree with a published tree (e.g. GoldCoin's), node by node and edge by edge.

    Args:
        ours: our tree (e.g. `load_ecfr_tree()`).
        published: the published tree, loaded with `load_hipaa_graphml`.
        max_examples: examples kept per explained category.

    Returns:
        The report.
    """
    index = AliasIndex.from_tree(ours)
    report = AgreementReport(ours.source, published.source)
    ours_tree = {n.id for n in ours.tree_nodes()}
    report.ours_nodes = len(ours_tree)
    mapping: dict[str, str] = {}
    spellings: dict[str, list[str]] = {}
    stubs: list[str] = []
    for node in published.nodes.values():
        is_stub = not node.text and not node.children and node.id != published.root
        target = index.resolve(node.id)
        if is_stub:
            stubs.append(node.id)
            if target is not None:
                mapping[node.id] = target
            continue
        if target is None or target not in ours_tree:
            report.ids_theirs_only.append(node.id)
            continue
        mapping[node.id] = target
        report.ids_matched += 1
        if target == node.id:
            report.ids_exact += 1
        else:
            spellings.setdefault(_spelling_category(node.id, target), []).append(node.id)
    report.theirs_stubs = len(stubs)
    report.theirs_nodes = report.ids_matched + len(report.ids_theirs_only)
    matched_ours = {mapping[n] for n in mapping if n not in stubs}
    report.ids_ours_only = [n for n in ours_tree if n not in matched_ours]

    # -- text and parents -------------------------------------------------------------
    ratios: list[float] = []
    orphans: list[str] = []
    for their_id, our_id in mapping.items():
        if their_id in stubs:
            continue
        theirs_node, ours_node = published.nodes[their_id], ours.nodes[our_id]
        if theirs_node.text:
            a, b = _norm(theirs_node.text), _norm(ours_node.text)
            report.text_compared += 1
            if a == b:
                report.text_exact += 1
                ratios.append(1.0)
            else:
                r = _ratio(a, b)
                ratios.append(r)
                report.text_differences.append((their_id, our_id, r))
        if their_id == published.root:
            continue
        their_parent = theirs_node.parent
        if their_parent is None:
            orphans.append(their_id)
            continue
        report.parents_compared += 1
        mapped_parent = mapping.get(their_parent)
        if mapped_parent == ours_node.parent:
            report.parents_agree += 1
        else:
            report.parent_differences.append((our_id, mapped_parent, ours_node.parent))
    report.text_mean_ratio = sum(ratios) / len(ratios) if ratios else 1.0
    report.text_differences.sort(key=lambda x: x[2])

    # -- references ---------------------------------------------------------------------
    theirs_edges: list[tuple[str, str]] = []
    stub_self: list[str] = []
    seen: set[tuple[str, str]] = set()
    for src, targets in published.references.items():
        for tgt in targets:
            ms, mt = mapping.get(src), mapping.get(tgt)
            if ms is None or mt is None:
                report.refs_unmappable.append((src, tgt))
                continue
            if ms == mt:
                stub_self.append(f"{src} -> {tgt}")
                continue
            if (ms, mt) not in seen:
                seen.add((ms, mt))
                theirs_edges.append((ms, mt))
    all_ours = [(s, t) for s, ts in ours.references.items() for t in ts]
    ours_edges = [(s, t) for s, t in all_ours if s in matched_ours and t in matched_ours]
    outside = [(s, t) for s, t in all_ours if not (s in matched_ours and t in matched_ours)]
    ours_set = set(ours_edges)
    report.refs_theirs = len(theirs_edges)
    report.refs_ours = len(ours_edges)
    report.refs_common = sum(1 for e in theirs_edges if e in ours_set)
    report.refs_theirs_only = [e for e in theirs_edges if e not in ours_set]
    report.refs_ours_only = [e for e in ours_edges if e not in seen]

    # -- explanations ---------------------------------------------------------------------
    k = max_examples
    for category in sorted(spellings):
        members = spellings[category]
        report.explained.append(
            Difference(
                category,
                len(members),
                _ID_NOTES[category],
                [f"{m} = {mapping[m]}" for m in members[:k]],
            )
        )
    if stubs:
        mapped = [s for s in stubs if s in mapping]
        report.explained.append(
            Difference(
                "stubs: text-less reference sources",
                len(stubs),
                "the published tree hangs some links on a stub named by the page's "
                "data-title or citation; mapped onto the real node in ours "
                f"({len(mapped)} mapped)",
                [f"{s} = {mapping.get(s)}" for s in stubs[:k]],
            )
        )
    if orphans:
        report.explained.append(
            Difference(
                "parents: orphan nodes in the published tree",
                len(orphans),
                "published nodes with no path to the root (e.g. definition paragraphs "
                "under the Checklist's curly-quoted parents)",
                orphans[:k],
            )
        )
    if stub_self:
        report.explained.append(
            Difference(
                "refs: stub reference onto itself",
                len(stub_self),
                "a stub whose reference points at the node the stub stands for",
                stub_self[:k],
            )
        )
    for their_id, our_id, ratio in report.text_differences:
        del ratio
        node = ours.nodes[our_id]
        if our_id == ours.root:
            category, note = "text: root", "the dummy root's description"
        elif node.kind == NodeKind.APPENDIX:
            category, note = "text: appendix table", "ours keeps the matrix rows after the heading"
        elif _norm(published.nodes[their_id].text) in _norm(node.text):
            category, note = (
                "text: ours keeps unlabelled blocks",
                "ours appends div.extract / unlabelled paragraphs the published text drops",
            )
        else:
            category, note = "text: other", "different text"
        _add(report.explained, category, note, our_id, k)
    if outside:
        report.explained.append(
            Difference(
                "refs: ends outside the published tree",
                len(outside),
                "our edges from or to nodes the published tree does not have (not compared)",
                [f"{s} -> {t}" for s, t in outside[:k]],
            )
        )
    for src, tgt in report.refs_ours_only:
        category = _classify_ours_only(ours, src, tgt)
        _add(report.explained, category, _REF_NOTES[category], f"{src} -> {tgt}", k)
    for src, tgt in report.refs_theirs_only:
        _add(
            report.explained,
            "refs: published only",
            "an edge of the published tree that ours lacks",
            f"{src} -> {tgt}",
            k,
        )
    return report


def _add(explained: list[Difference], category: str, note: str, example: str, k: int) -> None:
    for item in explained:
        if item.category == category:
            item.count += 1
            if len(item.examples) < k:
                item.examples.append(example)
            return
    explained.append(Difference(category, 1, note, [example]))


def agreement_with_goldcoin(data_dir: Path | None = None, cache: bool = True) -> AgreementReport:
    """Parse (or load) our tree and compare it with ``hipaa/regulation_tree_goldcoin.graphml``.

    Args:
        data_dir: the data directory (default `privacy_ci.data.data_dir()`).
        cache: use the parsed-tree cache.

    Returns:
        The report.

    Raises:
        DataMissingError: a needed file is missing.
        TreeError: a file cannot be parsed.
    """
    from privacy_ci.data import require
    from privacy_ci.regulations._ecfr import load_ecfr_tree
    from privacy_ci.regulations._graphml import load_hipaa_graphml

    ours = load_ecfr_tree(data_dir, cache)
    root = require(GOLDCOIN_TREE) if data_dir is None else Path(data_dir)
    published, _ = load_hipaa_graphml(root / GOLDCOIN_TREE)
    return compare_with_published(ours, published)
