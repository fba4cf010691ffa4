"""Regulation text as trees with cross-references (Privacy Checklist section 3.1).

* `RegulationTree` / `Node`: the tree model (`_tree`).
* `parse_ecfr_html` / `load_ecfr_tree`: HIPAA from the official eCFR pages, with
  cross-references resolved from links and text (`_ecfr`, `_references`).
* `load_hipaa_graphml` / `load_privaci_law_tree`: the published trees (`_graphml`).
* `RegulationSpec`, `register_regulation`, `get_regulation`, `regulations`: the
  registry of regulations, their files, roots and id syntaxes (`_registry`).
* Every id spelling rule (`_ids`): `canonical_id`, `resolve_id` (CFR spellings,
  ours and GoldCoin's), `alias_resolver` (any syntax), `parse_article_mention`,
  `verify_ids` / `extract_citations` (ids in free text), `IdSyntax`.
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
    ArticleRef,
    IdSyntax,
    RejectedId,
    Resolver,
    VerifiedIds,
    alias_index,
    alias_resolver,
    article_index,
    article_node,
    canonical_id,
    exact_resolver,
    extract_citations,
    has_article_keyword,
    id_kind,
    is_malformed_id,
    loose_key,
    parse_article_mention,
    reduce_to_ancestor,
    resolve_id,
    roman_to_int,
    split_id,
    syntax_of,
    to_goldcoin_id,
    verify_ids,
)
from privacy_ci.regulations._references import Citation, find_citations, resolve_references
from privacy_ci.regulations._registry import (
    RegistryError,
    RegistryView,
    RegulationCases,
    RegulationSpec,
    UnknownRegulation,
    find_regulation,
    get_regulation,
    load_regulation_tree,
    register_regulation,
    regulation_keys,
    regulations,
    unregister_regulation,
)
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
    "ArticleRef",
    "Citation",
    "Difference",
    "EcfrFetchError",
    "EcfrReport",
    "IdSyntax",
    "LoadReport",
    "Node",
    "NodeKind",
    "RegistryError",
    "RegistryView",
    "RegulationCases",
    "RegulationSpec",
    "RegulationTree",
    "RejectedId",
    "Resolver",
    "TreeBuilder",
    "TreeError",
    "UnknownRegulation",
    "VerifiedIds",
    "agreement_with_goldcoin",
    "alias_index",
    "alias_resolver",
    "article_index",
    "article_node",
    "canonical_id",
    "compare_with_published",
    "exact_resolver",
    "extract_citations",
    "fetch_cfr_part",
    "find_citations",
    "find_regulation",
    "get_regulation",
    "has_article_keyword",
    "id_kind",
    "is_malformed_id",
    "load_ecfr",
    "load_ecfr_tree",
    "load_hipaa_graphml",
    "load_privaci_law_tree",
    "load_regulation_tree",
    "loose_key",
    "parse_article_mention",
    "parse_ecfr",
    "parse_ecfr_html",
    "part_url",
    "reduce_to_ancestor",
    "register_regulation",
    "regulation_keys",
    "regulations",
    "resolve_id",
    "resolve_references",
    "roman_to_int",
    "split_id",
    "syntax_of",
    "to_goldcoin_id",
    "tree_from_parent_map",
    "unregister_regulation",
    "verify_ids",
]
