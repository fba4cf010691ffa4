"""Regulation text as trees with cross-references (Privacy Checklist section 3.1).

* `RegulationTree` / `Node`: the tree model (`_tree`).
* `parse_ecfr_html` / `load_ecfr_tree`: HIPAA from the official eCFR pages, with
  cross-references resolved from links and text (`_ecfr`, `_references`).
* `load_hipaa_graphml` / `load_privaci_law_tree`: the published trees (`_graphml`).
* `canonical_id`, `resolve_id`: node-id spellings (ours, GoldCoin's) (`_ids`).
* `compare_with_published`: agreement with the GoldCoin tree (`_agreement`).
* `fetch_cfr_part`: other CFR parts from the eCFR service (`_ecfr_fetch`).
"""

from privacy_ci.regulations._agreement import (
    AgreementReport,
    Difference,
    agreement_with_goldcoin,
    compare_with_published,
)
from privacy_ci.regulations._ecfr import (
    ECFR_FILES,
    PARSER_VERSION,
    EcfrReport,
    load_ecfr,
    load_ecfr_tree,
    parse_ecfr,
    parse_ecfr_html,
)
from privacy_ci.regulations._ecfr_fetch import EcfrFetchError, fetch_cfr_part, part_url
from privacy_ci.regulations._graphml import LoadReport, load_hipaa_graphml, load_privaci_law_tree
from privacy_ci.regulations._ids import (
    AliasIndex,
    alias_index,
    canonical_id,
    resolve_id,
    split_id,
    to_goldcoin_id,
)
from privacy_ci.regulations._references import Citation, find_citations, resolve_references
from privacy_ci.regulations._tree import (
    Node,
    NodeKind,
    RegulationTree,
    TreeBuilder,
    TreeError,
    tree_from_parent_map,
)

__all__ = [
    "ECFR_FILES",
    "PARSER_VERSION",
    "AgreementReport",
    "AliasIndex",
    "Citation",
    "Difference",
    "EcfrFetchError",
    "EcfrReport",
    "LoadReport",
    "Node",
    "NodeKind",
    "RegulationTree",
    "TreeBuilder",
    "TreeError",
    "agreement_with_goldcoin",
    "alias_index",
    "canonical_id",
    "compare_with_published",
    "fetch_cfr_part",
    "find_citations",
    "load_ecfr",
    "load_ecfr_tree",
    "load_hipaa_graphml",
    "load_privaci_law_tree",
    "parse_ecfr",
    "parse_ecfr_html",
    "part_url",
    "resolve_id",
    "resolve_references",
    "split_id",
    "to_goldcoin_id",
    "tree_from_parent_map",
]
