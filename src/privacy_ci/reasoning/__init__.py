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
    "VERDICT_RULE",
    "Applicability",
    "CIReasoner",
    "Catalogue",
    "CatalogueError",
    "Condition",
    "ConditionCheck",
    "Cues",
    "Effect",
    "Evidence",
    "Ground",
    "NLPUnavailable",
    "NormCheck",
    "NormEntry",
    "Pattern",
    "Reasoning",
    "Status",
    "catalogue_path",
    "load_catalogue",
]
