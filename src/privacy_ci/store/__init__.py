"""The document store and the gated retrieval path of the Privacy Conductor.

Typical use::

    from privacy_ci.conductor import load_corpus
    from privacy_ci.store import DocumentStore, load_corpus_into, retrieve_for

    store = DocumentStore("sqlite:///riverside.db")    # or "postgresql://..."
    load_corpus_into(store, load_corpus())
    requester = store.snapshot().requester("D01")      # roles, assignments: from the store
    result = retrieve_for(store, requester, "lipid panel results", k=5)
    [d.doc_id for d in result.admitted], result.withheld_rules()
    store.audit.verify().ok                            # the hash-chained decision log
"""

from privacy_ci.store._agents import AgentRecord, RoleNotHeld, UnknownAgent
from privacy_ci.store._audit import AuditEntry, AuditRecord, AuditReport, verify_records
from privacy_ci.store._audit_log import AuditLog
from privacy_ci.store._history import HistoryEntry
from privacy_ci.store._labels import (
    LabelConflict,
    LabelRecord,
    LabelState,
    PriorLabel,
    UnknownDocument,
)
from privacy_ci.store._load import load_corpus_into
from privacy_ci.store._ranking import (
    BM25Ranker,
    Embedder,
    EmbeddingRanker,
    HashingEmbedder,
    tokenize,
)
from privacy_ci.store._retrieval import (
    BATCH_DECISION,
    MAX_K,
    AdmittedDocument,
    FlowDecision,
    GatedRetrieval,
    Withheld,
    WithheldDocuments,
    batch_decisions,
    decide_batch_for,
    decide_for,
    decide_label,
    retrieve_for,
)
from privacy_ci.store._review import (
    AccessChange,
    AccessDiff,
    BulkApprovalRefused,
    PendingReview,
    Principal,
    ReviewOutcome,
    ReviewVerdict,
    WideningNotAccepted,
    access_diff,
)
from privacy_ci.store._snapshot import Snapshot
from privacy_ci.store._sql import StoreError, parse_url
from privacy_ci.store._store import DocumentStore

__all__ = [
    "BATCH_DECISION",
    "MAX_K",
    "AccessChange",
    "AccessDiff",
    "AdmittedDocument",
    "AgentRecord",
    "AuditEntry",
    "AuditLog",
    "AuditRecord",
    "AuditReport",
    "BM25Ranker",
    "BulkApprovalRefused",
    "DocumentStore",
    "Embedder",
    "EmbeddingRanker",
    "FlowDecision",
    "GatedRetrieval",
    "HashingEmbedder",
    "HistoryEntry",
    "LabelConflict",
    "LabelRecord",
    "LabelState",
    "PendingReview",
    "Principal",
    "PriorLabel",
    "ReviewOutcome",
    "ReviewVerdict",
    "RoleNotHeld",
    "Snapshot",
    "StoreError",
    "UnknownAgent",
    "UnknownDocument",
    "WideningNotAccepted",
    "Withheld",
    "WithheldDocuments",
    "access_diff",
    "batch_decisions",
    "decide_batch_for",
    "decide_for",
    "decide_label",
    "load_corpus_into",
    "parse_url",
    "retrieve_for",
    "tokenize",
    "verify_records",
]
