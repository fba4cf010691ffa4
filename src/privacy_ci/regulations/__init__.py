"""Regulation text as trees with cross-references (Privacy Checklist section 3.1)."""

from privacy_ci.regulations._tree import (
    Node,
    NodeKind,
    RegulationTree,
    TreeBuilder,
    TreeError,
    tree_from_parent_map,
)

__all__ = ["Node", "NodeKind", "RegulationTree", "TreeBuilder", "TreeError", "tree_from_parent_map"]

from privacy_ci.regulations._graphml import (
    LoadReport,
    load_hipaa_graphml,
    load_privaci_law_tree,
)

__all__ += ["LoadReport", "load_hipaa_graphml", "load_privaci_law_tree"]
