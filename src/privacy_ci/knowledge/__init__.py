"""The Privacy Checklist knowledge base (sections 3.2-3.4 of the paper).

* `Norm`, `Reference`, `NormType`, `Ternary`, `ReferenceKind`: annotated norms.
* `load_checklist_kb` (``hipaa/kb_annotated.json``) and `load_privaci_kb`
  (PrivaCI-Bench ``kb/privaci_bench/*.jsonl``): both formats, validated, with a
  `KBLoadReport` and a `NormalisationReport`.
* `Definitions` (``lookup`` exact then fuzzy), `RoleGraph` and `AttributeGraph`
  (DAGs with ancestors/descendants/match/classify).
* `KnowledgeBase` and `load_knowledge_base(key)` for any regulation of the registry
  (`privacy_ci.regulations.regulations`; built in: ``hipaa``, ``gdpr``, ``ai_act``),
  with `PAPER_STATS` (section 3.4 as printed) for comparison.
* `load_kb_folder` / `open_knowledge_base`: a knowledge base folder built by
  ``privacy-ci kb build`` (``kb.json`` + the published formats).
"""

from privacy_ci.knowledge._definitions import (
    DEFINITION_FILES,
    Definition,
    DefinitionMatch,
    Definitions,
    DefinitionsReport,
    definition_key,
    load_definitions,
    load_flat_definitions,
    load_hipaa_definitions,
)
from privacy_ci.knowledge._folder import (
    KB_FOLDER_FILE,
    KB_FOLDER_FORMAT,
    is_kb_folder,
    load_kb_folder,
    open_knowledge_base,
    read_kb_manifest,
)
from privacy_ci.knowledge._graphs import (
    AttributeGraph,
    Classification,
    GraphReport,
    RoleGraph,
    TaxonomyGraph,
    TermMatch,
    load_attribute_graph,
    load_role_graph,
)
from privacy_ci.knowledge._kb import (
    KB_FILES,
    PAPER_STATS,
    PAPER_STATS_NOTES,
    KnowledgeBase,
    load_knowledge_base,
)
from privacy_ci.knowledge._norms import (
    CHECKLIST_FIELDS,
    PRIVACI_FIELDS,
    STRICT_DEFAULTS,
    DroppedReference,
    KBLoadReport,
    Norm,
    Reference,
    Resolver,
    SkippedEntry,
    alias_resolver,
    exact_resolver,
    load_checklist_kb,
    load_privaci_kb,
)
from privacy_ci.knowledge._vocabulary import (
    CONSENT_FORMS,
    NormalisationReport,
    NormType,
    ReferenceKind,
    Ternary,
    UnnormalisedValue,
    clean_text,
    is_placeholder,
    normalise_consent_form,
    normalise_list,
    normalise_norm_type,
    normalise_reference_kind,
    normalise_scalar,
    normalise_ternary,
    similarity,
    term_key,
    term_tokens,
)

__all__ = [
    "CHECKLIST_FIELDS",
    "CONSENT_FORMS",
    "DEFINITION_FILES",
    "KB_FILES",
    "KB_FOLDER_FILE",
    "KB_FOLDER_FORMAT",
    "PAPER_STATS",
    "PAPER_STATS_NOTES",
    "PRIVACI_FIELDS",
    "STRICT_DEFAULTS",
    "AttributeGraph",
    "Classification",
    "Definition",
    "DefinitionMatch",
    "Definitions",
    "DefinitionsReport",
    "DroppedReference",
    "GraphReport",
    "KBLoadReport",
    "KnowledgeBase",
    "Norm",
    "NormType",
    "NormalisationReport",
    "Reference",
    "ReferenceKind",
    "Resolver",
    "RoleGraph",
    "SkippedEntry",
    "TaxonomyGraph",
    "TermMatch",
    "Ternary",
    "UnnormalisedValue",
    "alias_resolver",
    "clean_text",
    "definition_key",
    "exact_resolver",
    "is_kb_folder",
    "is_placeholder",
    "load_attribute_graph",
    "load_checklist_kb",
    "load_definitions",
    "load_flat_definitions",
    "load_hipaa_definitions",
    "load_kb_folder",
    "load_knowledge_base",
    "load_privaci_kb",
    "load_role_graph",
    "normalise_consent_form",
    "normalise_list",
    "normalise_norm_type",
    "normalise_reference_kind",
    "normalise_scalar",
    "normalise_ternary",
    "open_knowledge_base",
    "read_kb_manifest",
    "similarity",
    "term_key",
    "term_tokens",
]
