"""The gated retrieval path (paper, section III-C and Table II), and audited decisions.

`retrieve_for` runs, in this order:

a. **scope**: the requester's authorized set, from approved labels and the
   store's assignments only, as the access partitions of `AccessIndex` (Algorithm
   1's checks over indexed label fields; counts from maintained aggregates);
b. **candidate resolution**: BM25 (or embedding) ranking over that set only, from
   index terms, never content; a request reads only its requester's partitions,
   so unauthorized documents cannot move a score, a rank, the number of results,
   or the work done;
c. **policy decision**: each candidate is decided again by `Gate.decide`, on its
   label as stored now (a revocation since (a) is honoured);
d. **authorized fetch and admission**: only permitted candidates' content is read,
   and only they are admitted.

Every decision of (c), plus one summary record of (a), is appended to the audit
log. Request text is never an input of a decision: the query reaches step (b) only.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privacy_ci.conductor import Decision, Effect, Gate, Requester, Rule
from privacy_ci.errors import PrivacyCIError
from privacy_ci.store._audit import AuditEntry
from privacy_ci.store._labels import LabelRecord, LabelState, UnknownDocument
from privacy_ci.store._ranking import Embedder
from privacy_ci.store._snapshot import Snapshot
from privacy_ci.store._store import DocumentStore

MAX_K = 100
_RULES = {int(rule): rule for rule in Rule}


@dataclass(frozen=True)
class FlowDecision:
    """The gate's decision on one document for one requester, as the store applied it.

    Args:
        doc_id: the document.
        decision: the gate's `Decision` (effect, rule, policy version, errors).
        label_version: the version of the label decided on (None: no label).
        label_state: the label's lifecycle state then.
        score: the candidate's ranking score (retrievals only).
    """

    doc_id: str
    decision: Decision
    label_version: int | None
    label_state: str | None
    score: float | None = None

    @property
    def permitted(self) -> bool:
        return self.decision.permitted

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"doc_id": self.doc_id, **self.decision.as_dict()}
        out["label_version"] = self.label_version
        out["label_state"] = self.label_state
        if self.score is not None:
            out["score"] = self.score
        return out


@dataclass(frozen=True)
class AdmittedDocument:
    """A document admitted to the assistant's context: permitted, then fetched."""

    doc_id: str
    title: str
    content: str
    score: float
    label_version: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "content": self.content,
            "score": self.score,
            "label_version": self.label_version,
        }


@dataclass(frozen=True)
class Withheld:
    """A document the requester does not receive, and the rule that withholds it.

    Args:
        doc_id: the document (never shown to the model).
        rule: the deciding rule.
        stage: ``scope`` (outside the authorized set; never ranked) or
            ``candidate`` (ranked, then denied on the re-check of step (c)).
    """

    doc_id: str
    rule: Rule
    stage: str


@dataclass(frozen=True)
class WithheldDocuments:
    """The documents a request withholds, kept compact.

    Counting them costs the same whatever their number: the counts per rule come
    from aggregates the store's access index keeps, so neither the work nor the
    latency of a request grows with the number of documents the requester may not
    see (a timing side channel on exactly what the gate hides). `Withheld` objects
    are built only when listed, which reads the whole index.

    Args:
        counts: rule -> how many documents outside the authorized set it withholds.
        list_scope: lists those documents with their rules, by id (called only
            when the documents are listed).
        candidates: candidates denied on the re-check of step (c).
    """

    counts: Mapping[Rule, int]
    list_scope: Callable[[], list[tuple[str, Rule]]]
    candidates: tuple[Withheld, ...] = ()

    @property
    def count(self) -> int:
        return sum(self.counts.values()) + len(self.candidates)

    def rule_counts(self) -> dict[str, int]:
        """How many documents each rule withholds (rule key -> count), largest first."""
        counts: Counter[str] = Counter({rule.key: n for rule, n in self.counts.items() if n})
        counts.update(w.rule.key for w in self.candidates)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def listed(self) -> tuple[Withheld, ...]:
        """Every withheld document with its rule: the scope's by id, then candidates."""
        out = [Withheld(doc_id, rule, "scope") for doc_id, rule in self.list_scope()]
        return (*out, *self.candidates)


@dataclass(frozen=True)
class GatedRetrieval:
    """What the retrieval path admitted for one requester and query.

    Args:
        request_id: identifies the request in the audit log.
        requester: the verified requester.
        query: the query (an input of ranking only).
        k: how many candidates were asked for.
        policy_version: the policy the gate applied.
        store_version: the store version of the scope.
        authorized_count: the size of the authorized set that was ranked.
        admitted: the admitted documents, best first.
        decisions: the decision on each candidate, in rank order.
        withheld_documents: documents not received, compact (`withheld` lists them).
    """

    request_id: str
    requester: Requester
    query: str
    k: int
    policy_version: str
    store_version: int
    authorized_count: int
    admitted: tuple[AdmittedDocument, ...]
    decisions: tuple[FlowDecision, ...]
    withheld_documents: WithheldDocuments = field(repr=False)

    @property
    def admitted_ids(self) -> list[str]:
        return [d.doc_id for d in self.admitted]

    @functools.cached_property
    def withheld(self) -> tuple[Withheld, ...]:
        """Every document not received, with its rule (built on first use)."""
        return self.withheld_documents.listed()

    @property
    def withheld_count(self) -> int:
        """How many documents are not received (without listing them)."""
        return self.withheld_documents.count

    def withheld_rules(self) -> dict[str, int]:
        """How many documents each rule withholds (rule key -> count), largest first."""
        return self.withheld_documents.rule_counts()

    def as_dict(self, *, withheld_ids: bool = False) -> dict[str, Any]:
        """JSON-ready result; withheld documents as counts per rule unless `withheld_ids`."""
        out: dict[str, Any] = {
            "request_id": self.request_id,
            "requester": self.requester.id,
            "role": self.requester.active_role,
            "context": self.requester.active_context,
            "k": self.k,
            "policy_version": self.policy_version,
            "store_version": self.store_version,
            "authorized_count": self.authorized_count,
            "documents": [d.as_dict() for d in self.admitted],
            "decisions": [d.as_dict() for d in self.decisions],
            "withheld": {"count": self.withheld_count, "rules": self.withheld_rules()},
        }
        if withheld_ids:
            out["withheld"]["documents"] = [
                {"doc_id": w.doc_id, "rule": w.rule.key, "stage": w.stage} for w in self.withheld
            ]
        return out


def decide_label(
    gate: Gate,
    requester: Requester,
    record: LabelRecord | None,
    doc_id: str,
    score: float | None = None,
) -> FlowDecision:
    """Decide one document on its stored label in force: only an approved, valid label
    can permit (a proposal awaiting review changes nothing until it is approved).

    Args:
        gate: the gate of the current policy.
        requester: the verified requester.
        record: the stored label (None when the document has none).
        doc_id: the document.
        score: its ranking score, for candidates.

    Returns:
        The `FlowDecision`; a document with no label in force is denied with
        `Rule.INVALID_LABEL` and says why.
    """
    if record is None:
        decision = Decision(
            Effect.DENY, Rule.INVALID_LABEL, gate.version, (f"document {doc_id!r} has no label",)
        )
        return FlowDecision(doc_id, decision, None, None, score)
    if record.in_force_body is None:
        decision = Decision(
            Effect.DENY,
            Rule.INVALID_LABEL,
            gate.version,
            (f"label state is {record.state.value!r}: only approved labels grant access",),
        )
        return FlowDecision(doc_id, decision, record.version, record.state.value, score)
    if record.in_force is None:
        decision = Decision(Effect.DENY, Rule.INVALID_LABEL, gate.version, record.in_force_errors)
    else:
        decision = gate.decide(requester, record.in_force)
    return FlowDecision(doc_id, decision, record.in_force_version, LabelState.APPROVED.value, score)


def _who(request_id: str, requester: Requester, action: str) -> dict[str, Any]:
    """The fields every audit entry of a request shares: who asked, and for what."""
    return {
        "request_id": request_id,
        "requester": requester.id,
        "role": requester.active_role,
        "context": requester.active_context,
        "action": action,
    }


def _entry(
    request_id: str, requester: Requester, action: str, flow: FlowDecision, store_version: int
) -> AuditEntry:
    return AuditEntry(
        **_who(request_id, requester, action),
        doc_id=flow.doc_id,
        decision=flow.decision.effect.value,
        rule=flow.decision.rule.key,
        policy_version=flow.decision.policy_version,
        label_version=flow.label_version,
        store_version=store_version,
    )


def decide_for(
    store: DocumentStore,
    requester: Requester,
    doc_id: str,
    *,
    request_id: str | None = None,
    unknown: str = "raise",
) -> FlowDecision:
    """Decide one flow (document -> requester) on the current approved labels; audited.

    Args:
        unknown: ``raise`` (`UnknownDocument`) or ``deny`` (an unknown id is a
            denial, audited like any other: a requester then cannot tell an unknown
            id from a denied one).

    Raises:
        UnknownDocument: the store holds no label for `doc_id` (``unknown="raise"``).
    """
    return decide_batch_for(
        store, requester, [doc_id], request_id=request_id, action="decide", unknown=unknown
    )[0]


def decide_batch_for(
    store: DocumentStore,
    requester: Requester,
    doc_ids: Sequence[str],
    *,
    request_id: str | None = None,
    action: str = "decide_batch",
    unknown: str = "raise",
    compact: bool = False,
) -> list[FlowDecision]:
    """Decide a batch of candidate documents for one requester; every decision audited.

    Args:
        store: the document store.
        requester: the verified requester.
        doc_ids: candidate document ids (duplicates are decided once each time listed).
        request_id: an id for the audit log (a fresh one by default).
        action: the action name recorded in the audit log.
        unknown: ``raise`` or ``deny`` an id the store holds no label for.
        compact: record the whole batch as ONE audit record whose `detail` lists
            every decision (see `batch_decisions`), instead of one record each: a
            batch cannot multiply the audit log, and every decision stays under the
            record's hash.

    Returns:
        One `FlowDecision` per id, in order.

    Raises:
        UnknownDocument: naming every id the store holds no label for (nothing is
            decided or audited; ``unknown="raise"`` only).
    """
    if unknown not in ("raise", "deny"):
        # a programming error (callers pass a constant), not a user error
        raise ValueError("unknown must be 'raise' or 'deny'")
    snap = store.snapshot()
    distinct = list(dict.fromkeys(doc_ids))
    if unknown == "raise":
        # the operator's view (explained denials): every label read, its errors named
        labels = store.read_labels(distinct)
        missing = [d for d in distinct if d not in labels]
        if missing:
            raise UnknownDocument(missing)
        flows = [decide_label(snap.gate, requester, labels.get(d), d) for d in doc_ids]
    else:
        flows = _decide_from_index(snap, requester, distinct, doc_ids)
    rid = request_id or uuid.uuid4().hex
    if compact:
        store.audit.append([_batch_entry(rid, requester, action, flows, snap)])
    else:
        store.audit.append([_entry(rid, requester, action, f, snap.version) for f in flows])
    return flows


def _decide_from_index(
    snap: Snapshot, requester: Requester, distinct: Sequence[str], doc_ids: Sequence[str]
) -> list[FlowDecision]:
    """Decisions from the access index's columns: the same work for every id, known
    or not, so neither the answers nor the time tell which requested ids exist."""
    index = snap.index
    with index.lock:
        scope = index.scope(requester)
        rules, versions = index.decide_ids(scope, distinct)
    version = snap.gate.version
    decided = {
        doc_id: FlowDecision(
            doc_id,
            Decision(Effect.PERMIT if rule is Rule.PERMIT else Effect.DENY, rule, version),
            label_version,
            LabelState.APPROVED.value if rule is Rule.PERMIT else None,
        )
        for doc_id, rule, label_version in zip(distinct, rules, versions, strict=True)
    }
    return [decided[d] for d in doc_ids]


BATCH_DECISION = "batch"
"""The `decision` of a compact batch record (its `detail` holds the decisions)."""


def _batch_entry(
    request_id: str,
    requester: Requester,
    action: str,
    flows: Sequence[FlowDecision],
    snap: Any,
) -> AuditEntry:
    rows = [
        [f.doc_id, f.decision.effect.value, f.decision.rule.key, f.label_version] for f in flows
    ]
    return AuditEntry(
        **_who(request_id, requester, action),
        doc_id=None,
        decision=BATCH_DECISION,
        rule=None,
        policy_version=snap.gate.version,
        label_version=None,
        store_version=snap.version,
        detail=json.dumps(
            {"columns": ["doc_id", "decision", "rule", "label_version"], "decisions": rows},
            ensure_ascii=False,
            separators=(",", ":"),
        ),
    )


def batch_decisions(detail: str) -> list[dict[str, Any]]:
    """The decisions of a compact batch audit record, one dict per document.

    Args:
        detail: the record's `detail` (covered by its content hash, so a decision
            edited here breaks the chain like any other edit).

    Raises:
        PrivacyCIError: `detail` is not a batch record's.
    """
    try:
        data = json.loads(detail)
        columns, rows = data["columns"], data["decisions"]
        return [dict(zip(columns, row, strict=True)) for row in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise PrivacyCIError(f"not a batch audit record's detail: {exc}") from None


def retrieve_for(
    store: DocumentStore,
    requester: Requester,
    query: str,
    k: int = 5,
    *,
    embedder: Embedder | None = None,
    request_id: str | None = None,
    action: str = "retrieve",
) -> GatedRetrieval:
    """The gated retrieval path: scope, rank within scope, re-decide, fetch, admit.

    Args:
        store: the document store.
        requester: the verified requester (identity, acting role and context,
            assignments from the store).
        query: the query text; it only ranks documents, it never decides.
        k: how many candidates to rank (1-100).
        embedder: rank by cosine similarity of stored vectors instead of BM25.
        request_id: an id for the audit log (a fresh one by default).
        action: the action recorded in the audit log (``retrieve``, ``ask``).

    Returns:
        The `GatedRetrieval`.

    Raises:
        PrivacyCIError: `k` out of range.
    """
    if not 1 <= k <= MAX_K:
        raise PrivacyCIError(f"k must be between 1 and {MAX_K}, got {k}")
    snap = store.snapshot()
    gate = snap.gate
    index = snap.index

    # (a) scope: the authorized set, from approved labels and assignments only, as
    # the requester's access partitions; (b) candidate resolution within them only
    # (index terms, no content). The index's lock makes (a) and (b) one state.
    vector = None if embedder is None else np.asarray(embedder.embed([query])[0], np.float32)
    for _ in range(3):
        stored = None
        if embedder is not None and not index.has_vectors(embedder.model):
            stored = store.stored_vectors(embedder.model)  # read outside the index's lock
        with index.lock:
            store_version = index.version
            scope = index.scope(requester)
            if embedder is None or vector is None:
                ranked: list[tuple[str, float]] | None = index.top_k(scope, query, k)
            else:
                ranked = index.top_k_vectors(scope, vector, embedder.model, stored, k)
        if ranked is not None:  # None: vectors written meanwhile, read them again
            break
    candidates = ranked or []

    def list_scope() -> list[tuple[str, Rule]]:
        with index.lock:
            return index.listed(scope)

    withheld: list[Withheld] = []  # candidates denied on the re-check

    # (c) decide each candidate again on its label as stored now; (d) fetch the permitted.
    ids = [d for d, _ in candidates]
    with store.reading():
        fresh = store.read_labels(ids)
        flows = [decide_label(gate, requester, fresh.get(d), d, s) for d, s in candidates]
        permitted = [f.doc_id for f in flows if f.permitted]
        content = store.fetch_content(permitted)
    admitted = []
    for flow in flows:
        if flow.permitted and flow.doc_id in content and flow.label_version is not None:
            in_force = fresh[flow.doc_id].in_force_body or {}
            admitted.append(
                AdmittedDocument(
                    flow.doc_id,
                    str(in_force.get("title", "")),
                    content[flow.doc_id],
                    float(flow.score or 0.0),
                    flow.label_version,
                )
            )
        elif not flow.permitted:
            withheld.append(Withheld(flow.doc_id, flow.decision.rule, "candidate"))

    rid = request_id or uuid.uuid4().hex
    summary = AuditEntry(
        **_who(rid, requester, action),
        doc_id=None,
        decision="scope",
        rule=None,
        policy_version=gate.version,
        label_version=None,
        store_version=store_version,
        detail=json.dumps(
            {
                "authorized": scope.authorized,
                "denied": sum(scope.withheld.values()) - scope.not_approved,
                "not_approved": scope.not_approved,
                "candidates": len(candidates),
                "k": k,
            },
            sort_keys=True,
            separators=(",", ":"),
        ),
    )
    entries = [_entry(rid, requester, action, f, store_version) for f in flows]
    store.audit.append([summary, *entries])
    return GatedRetrieval(
        request_id=rid,
        requester=requester,
        query=query,
        k=k,
        policy_version=gate.version,
        store_version=store_version,
        authorized_count=scope.authorized,
        admitted=tuple(admitted),
        decisions=tuple(flows),
        withheld_documents=WithheldDocuments(scope.withheld, list_scope, tuple(withheld)),
    )
