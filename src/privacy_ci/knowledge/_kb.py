"""`KnowledgeBase`: one regulation's Privacy Checklist (sections 3.1-3.4).

It bundles the regulation tree, the annotated norms, the definition dictionary
and, for HIPAA, the role and attribute graphs. `load_knowledge_base` builds it
from the files the regulation's registry entry names
(`privacy_ci.regulations.RegulationSpec`); the built-in ones:

* hipaa: ``hipaa/regulation_tree_goldcoin.graphml`` + ``hipaa/kb_annotated.json``
  (strict) + definitions + role and attribute graphs;
* gdpr: ``law_trees/gdpr.graphml`` + ``kb/privaci_bench/gdpr.jsonl`` (lenient)
  + ``law_trees/definitions/gdpr.json``;
* ai_act: ``law_trees/ai_act.graphml`` + ``kb/privaci_bench/ai_act.jsonl``
  (lenient) + ``law_trees/definitions/ai_act.json``.

`PAPER_STATS` records section 3.4's numbers as printed, `KnowledgeBase.stats`
counts ours, and `KnowledgeBase.paper_comparison` puts them side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from privacy_ci.errors import PrivacyCIError
from privacy_ci.knowledge._definitions import Definitions, load_definitions
from privacy_ci.knowledge._graphs import (
    AttributeGraph,
    RoleGraph,
    load_attribute_graph,
    load_role_graph,
)
from privacy_ci.knowledge._norms import (
    KBLoadReport,
    Norm,
    Reference,
    Resolver,
    alias_resolver,
    load_checklist_kb,
    load_privaci_kb,
)
from privacy_ci.knowledge._vocabulary import NormType, ReferenceKind, normalise_norm_type
from privacy_ci.regulations import (
    LoadReport,
    RegistryView,
    RegulationTree,
    get_regulation,
    load_regulation_tree,
    regulations,
)

__all__ = [
    "KB_FILES",
    "PAPER_STATS",
    "PAPER_STATS_NOTES",
    "KnowledgeBase",
    "load_knowledge_base",
]

KB_FILES: Mapping[str, dict[str, str]] = RegistryView(
    lambda: {spec.key: spec.kb_files() for spec in regulations()}
)
"""The source files of each regulation's knowledge base, relative to the data directory
(read from the registry: `privacy_ci.regulations.RegulationSpec.kb_files`)."""

PAPER_STATS: dict[str, int] = {
    "tree_internal_nodes": 642,
    "tree_leaves": 1673,
    "subsumption_edges": 2098,
    "cross_references": 761,
    "positive_norms": 231,
    "negative_norms": 32,
    "general_definitions": 328,
    "role_graph_nodes": 296,
    "role_graph_edges": 318,
    "attribute_graph_nodes": 211,
    "attribute_graph_edges": 485,
    "definitions": 54,
}
"""Section 3.4 of the Privacy Checklist paper (HIPAA), as printed."""

PAPER_STATS_NOTES: dict[str, str] = {
    "role_graph_nodes": "the paper appears to swap the two graphs: the released role graph "
    "has 211 nodes / 485 edges and the attribute graph 296 nodes / 318 edges",
    "role_graph_edges": "see role_graph_nodes; 485 counts both 'subsume' and 'is subsumed by' "
    "edges (242 distinct subsumptions after merging reverse twins and dropping a self-loop)",
    "attribute_graph_nodes": "see role_graph_nodes",
    "attribute_graph_edges": "see role_graph_nodes",
    "tree_leaves": "the released GoldCoin tree has 1,632 leaves reachable from HIPAA; the"
    " paper's 1,673 equals 1,632 plus the 41 text-less nodes of the Checklist file"
    " (2,315 nodes - 642 internal), i.e. it counted every non-internal node as a leaf",
    "subsumption_edges": "the released tree has 2,273 subsume edges (one per non-root tree node)",
    "cross_references": "the published trees hold the 761 references linked on the eCFR pages;"
    " our eCFR tree (the default) also reads citations from the text (unlinked citations,"
    " the middle of ranges, parts and subparts): 911, a superset of the 760 distinct links",
    "definitions": "the paper says 'defined in HIPAA 164.103'; the file's sources are spread "
    "over 160.103, 164.501, 164.103 and others, and one key ('Header.') is not a term",
}
"""Why our counts differ from `PAPER_STATS`."""


@dataclass
class KnowledgeBase:
    """One regulation's checklist: tree, norms, definitions and (HIPAA) graphs.

    Args:
        regulation: a registered regulation key (``hipaa``, ``gdpr``, ``ai_act``, ...).
        tree: the regulation tree.
        norms: norm id -> norm, in KB file order.
        definitions: the definition dictionary (None if not loaded).
        role_graph: the role graph (HIPAA only, else None).
        attribute_graph: the attribute graph (HIPAA only, else None).
        norms_report: what the KB loader read, skipped and normalised.
        tree_report: what the tree loader repaired.
        sources: the files it was built from (role -> path).
    """

    regulation: str
    tree: RegulationTree
    norms: dict[str, Norm]
    definitions: Definitions | None = None
    role_graph: RoleGraph | None = None
    attribute_graph: AttributeGraph | None = None
    norms_report: KBLoadReport | None = None
    tree_report: LoadReport | None = None
    sources: dict[str, str] = field(default_factory=dict)
    _cited_by: dict[str, list[tuple[str, ReferenceKind]]] | None = field(
        default=None, repr=False, compare=False
    )

    def __len__(self) -> int:
        return len(self.norms)

    def __contains__(self, norm_id: object) -> bool:
        return norm_id in self.norms

    def norm(self, norm_id: str) -> Norm:
        """The norm annotated on a node.

        Args:
            norm_id: the tree node id.

        Returns:
            The norm.

        Raises:
            KeyError: no norm has that id (the message says whether the node exists).
        """
        try:
            return self.norms[norm_id]
        except KeyError:
            where = "a tree node without a norm" if norm_id in self.tree else "not a tree node"
            raise KeyError(f"{self.regulation}: no norm {norm_id!r} ({where})") from None

    def norms_of_type(self, norm_type: NormType | str) -> list[Norm]:
        """The norms of one type, in file order.

        Args:
            norm_type: a `NormType` or a spelling such as ``positive_norm`` or ``Permit``.

        Returns:
            The norms.

        Raises:
            PrivacyCIError: unknown norm type.
        """
        wanted = norm_type if isinstance(norm_type, NormType) else normalise_norm_type(norm_type)
        if wanted is None:
            raise PrivacyCIError(
                f"unknown norm type {norm_type!r}; expected one of"
                f" {', '.join(t.value for t in NormType)}"
            )
        return [n for n in self.norms.values() if n.norm_type is wanted]

    def references(self, node_id: str) -> tuple[Reference, ...]:
        """The annotated references (support/exception) of a node's norm.

        Args:
            node_id: a tree node id.

        Returns:
            The references; empty for a node that has no norm.

        Raises:
            KeyError: the id is not a tree node.
        """
        if node_id in self.norms:
            return self.norms[node_id].references
        self.tree[node_id]  # raises KeyError for unknown nodes
        return ()

    def referenced_by(self, node_id: str, kind: ReferenceKind | None = None) -> list[Norm]:
        """The norms whose annotated references point at `node_id`.

        Args:
            node_id: a tree node id.
            kind: only references of this kind (support/exception); None for all.

        Returns:
            The citing norms, in file order.

        Raises:
            KeyError: the id is not a tree node.
        """
        self.tree[node_id]
        if self._cited_by is None:
            cited: dict[str, list[tuple[str, ReferenceKind]]] = {}
            for norm in self.norms.values():
                for ref in norm.references:
                    cited.setdefault(ref.target_id, []).append((norm.id, ref.kind))
            self._cited_by = cited
        return [
            self.norms[src]
            for src, k in self._cited_by.get(node_id, [])
            if kind is None or k is kind
        ]

    def full_specification(self, node_id: str) -> str:
        """The text from the root down to a node, from the tree (section 3.2).

        Args:
            node_id: a tree node id.

        Returns:
            The concatenated text.
        """
        return self.tree.full_specification(node_id)

    def stats(self) -> dict[str, int]:
        """Our counts, with the keys of `PAPER_STATS` (plus a few more).

        Graph edges are raw file edges (``*_edges``, comparable to the paper) and
        DAG subsumptions after merging reverse twins (``*_subsumptions``). Graph
        counts are 0 when the regulation has no graphs.

        Returns:
            The counts.
        """
        tree = self.tree.stats()
        out = {
            "tree_internal_nodes": tree["internal_nodes"],
            "tree_leaves": tree["leaves"],
            "subsumption_edges": tree["subsumption_edges"],
            "cross_references": tree["references"],
            "norms": len(self.norms),
            "positive_norms": len(self.norms_of_type(NormType.POSITIVE)),
            "negative_norms": len(self.norms_of_type(NormType.NEGATIVE)),
            "general_definitions": len(self.norms_of_type(NormType.GENERAL_DEFINITION)),
            "annotated_references": sum(len(n.references) for n in self.norms.values()),
            "definitions": len(self.definitions) if self.definitions is not None else 0,
        }
        for name, graph in (
            ("role_graph", self.role_graph),
            ("attribute_graph", self.attribute_graph),
        ):
            out[f"{name}_nodes"] = len(graph) if graph is not None else 0
            out[f"{name}_edges"] = graph.report.raw_edges if graph is not None else 0
            out[f"{name}_subsumptions"] = graph.number_of_edges if graph is not None else 0
        return out

    def paper_comparison(self) -> list[tuple[str, int, int, str]]:
        """Our counts next to section 3.4's (meaningful for HIPAA).

        Returns:
            Rows ``(key, paper, ours, note)`` in `PAPER_STATS` order.
        """
        ours = self.stats()
        return [
            (key, paper, ours.get(key, 0), PAPER_STATS_NOTES.get(key, ""))
            for key, paper in PAPER_STATS.items()
        ]


# ---------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------
def load_knowledge_base(
    regulation: str,
    data_dir: Path | str | None = None,
    resolve: Callable[[RegulationTree], Resolver] | None = None,
    hipaa_tree: str = "ecfr",
) -> KnowledgeBase:
    """Load a regulation's knowledge base from the published files.

    HIPAA uses the GoldCoin tree and ``kb_annotated.json`` (strict); GDPR and the
    AI Act use the PrivaCI-Bench law trees and KBs (lenient: defective entries and
    references are skipped into ``norms_report``). Ids and reference targets go
    through `alias_resolver` by default, so ``article_89`` reaches ``Article 89``.

    Loading HIPAA takes about 0.08 s (0.18 s in a fresh process, imports
    included), so there is no cache.

    Args:
        regulation: a registered regulation key (``hipaa``, ``gdpr``, ``ai_act``, ...).
        data_dir: the data directory; default `privacy_ci.data.data_dir()`.
        resolve: builds the id resolver from the tree (e.g. `exact_resolver`).
        hipaa_tree: for a regulation with eCFR pages (HIPAA), ``ecfr`` (parsed from
            them, the default) or ``published`` (its GraphML tree); ignored otherwise.

    Returns:
        The knowledge base.

    Raises:
        UnknownRegulation: unknown regulation (a `ValueError`).
        RegistryError: unknown ``hipaa_tree`` (a `ValueError`).
        DataMissingError: a source file is missing.
        ValidationFailed: a source file is invalid.
    """
    spec = get_regulation(regulation)
    variant = spec.check_tree(hipaa_tree)
    from privacy_ci import data as data_module
    from privacy_ci.errors import DataMissingError

    root = Path(data_dir) if data_dir is not None else data_module.data_dir()
    files = spec.kb_files()
    missing = [rel for rel in files.values() if not (root / rel).is_file()]
    if missing:
        raise DataMissingError(
            f"{len(missing)} data file(s) missing from {root}: {', '.join(missing)}. "
            f"Run `{data_module.FETCH_COMMAND}` or set {data_module.DATA_ENV}."
        )
    paths = {role: root / rel for role, rel in files.items()}
    tree, tree_report = load_regulation_tree(spec.key, root, variant)
    if variant == "ecfr":
        # Our tree from the official eCFR pages; the KB's GoldCoin-spelled ids and
        # reference targets resolve to its canonical ids through the tree's aliases.
        paths["tree"] = root / Path(spec.ecfr[0]).parent
        resolver = resolve(tree) if resolve is not None else tree.resolve
    else:
        resolver = (resolve or alias_resolver)(tree)
    if spec.kb_format == "checklist":
        norms, report = load_checklist_kb(paths["norms"], tree, resolver, spec.kb_strict)
    else:
        norms, report = load_privaci_kb(paths["norms"], spec.key, tree, resolver, spec.kb_strict)
    return KnowledgeBase(
        regulation=spec.key,
        tree=tree,
        norms={n.id: n for n in norms},
        definitions=load_definitions(spec.key, root),
        role_graph=load_role_graph(paths["role_graph"]) if "role_graph" in paths else None,
        attribute_graph=(
            load_attribute_graph(paths["attribute_graph"]) if "attribute_graph" in paths else None
        ),
        norms_report=report,
        tree_report=tree_report,
        sources={role: str(p) for role, p in paths.items()},
    )
