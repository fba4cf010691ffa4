"""A checklist that reasons: a regulation's norms compiled into condition checklists
(the catalogue), and the model-free judge that checks them against a narrative.

    from privacy_ci.reasoning import CIReasoner, load_catalogue
    catalogue = load_catalogue("hipaa")          # validated against the tree and graphs
    reasoning = CIReasoner().judge("A hospital sent ...", flow)   # verdict, norm, evidence
    print(reasoning.explanation())
"""

from privacy_ci.reasoning._catalogue import (
    Catalogue,
    CatalogueError,
    Condition,
    Cues,
    Effect,
    Ground,
    NormEntry,
    Pattern,
    catalogue_path,
    load_catalogue,
)
from privacy_ci.reasoning._evidence import Evidence, NLPUnavailable
from privacy_ci.reasoning._facts import (
    FactError,
    Facts,
    FactSchema,
    FactSpec,
    FactValue,
    Source,
    ValueSpec,
    load_fact_schema,
    load_facts_file,
    parse_fact_args,
)
from privacy_ci.reasoning._judge import FactJudge, FactJudgment
from privacy_ci.reasoning._law import (
    PRECEDENCE,
    Branch,
    LawBook,
    LawDecision,
    NearMiss,
    Question,
    Rule,
    apply_law,
    load_law,
)
from privacy_ci.reasoning._reading import FactReader, load_reading_guide
from privacy_ci.reasoning._reasoner import (
    VERDICT_RULE,
    Applicability,
    CIReasoner,
    ConditionCheck,
    NormCheck,
    Reasoning,
    Status,
)

__all__ = [
    "PRECEDENCE",
    "VERDICT_RULE",
    "Applicability",
    "Branch",
    "CIReasoner",
    "Catalogue",
    "CatalogueError",
    "Condition",
    "ConditionCheck",
    "Cues",
    "Effect",
    "Evidence",
    "FactError",
    "FactJudge",
    "FactJudgment",
    "FactReader",
    "FactSchema",
    "FactSpec",
    "FactValue",
    "Facts",
    "Ground",
    "LawBook",
    "LawDecision",
    "NLPUnavailable",
    "NearMiss",
    "NormCheck",
    "NormEntry",
    "Pattern",
    "Question",
    "Reasoning",
    "Rule",
    "Source",
    "Status",
    "ValueSpec",
    "apply_law",
    "catalogue_path",
    "load_catalogue",
    "load_fact_schema",
    "load_facts_file",
    "load_law",
    "load_reading_guide",
    "parse_fact_args",
]
