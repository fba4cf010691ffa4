"""Privacy Conductor: CI labels, the authority's policy, and the deterministic gate.

Typical use::

    from privacy_ci.conductor import Gate, load_corpus

    corpus = load_corpus()                       # the Riverside Medical Clinic
    gate = Gate(corpus.policy)
    decision = gate.decide(corpus.requester("D01"), corpus.label("RMC-LAB-001"))
    decision.permitted, decision.rule.key        # (True, 'permit')
    corpus.content("RMC-LAB-001")                # the document's text

A corpus's documents come from its folder: ``content/`` (templates and tables, from
which each document is generated from its label) or ``documents/`` (one plain
``<doc_id>.txt`` or ``.md`` per document); see `ContentSource`.
"""

from privacy_ci.conductor._analysis import describe_flow
from privacy_ci.conductor._content import (
    GeneratedContent,
    content_attributes,
    corpus_digest,
    render_corpus,
    render_document,
    write_corpus_documents,
    write_documents,
)
from privacy_ci.conductor._corpus import Corpus, load_corpus, riverside_dir, validate_corpus
from privacy_ci.conductor._flows import TABLE_VI, FlowClass, classify_flow
from privacy_ci.conductor._gate import (
    BatchDecision,
    CompiledLabels,
    Decision,
    Effect,
    Gate,
    Rule,
)
from privacy_ci.conductor._labels import (
    Label,
    LabelSet,
    SensitivityTier,
    SubjectType,
    load_labels,
    parse_labels,
)
from privacy_ci.conductor._policy import (
    POLICY_AUTHORITY_ROLE,
    Agent,
    AuthorityMember,
    Directory,
    Policy,
    Requester,
    TierRule,
    load_assignments,
    load_directory,
    load_policy,
)
from privacy_ci.conductor._sources import ContentSource, DocumentFolder, content_source_for

__all__ = [
    "POLICY_AUTHORITY_ROLE",
    "TABLE_VI",
    "Agent",
    "AuthorityMember",
    "BatchDecision",
    "CompiledLabels",
    "ContentSource",
    "Corpus",
    "Decision",
    "Directory",
    "DocumentFolder",
    "Effect",
    "FlowClass",
    "Gate",
    "GeneratedContent",
    "Label",
    "LabelSet",
    "Policy",
    "Requester",
    "Rule",
    "SensitivityTier",
    "SubjectType",
    "TierRule",
    "classify_flow",
    "content_attributes",
    "content_source_for",
    "corpus_digest",
    "describe_flow",
    "load_assignments",
    "load_corpus",
    "load_directory",
    "load_labels",
    "load_policy",
    "parse_labels",
    "render_corpus",
    "render_document",
    "riverside_dir",
    "validate_corpus",
    "write_corpus_documents",
    "write_documents",
]
