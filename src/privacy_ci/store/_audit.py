"""The audit log: every gate decision, append-only and hash-chained.

Each record names the requester (id, acting role and context), the document, the
decision, the deciding rule, the policy version, the label version and the store
version, with the time and the request it belongs to. It never holds document
content or titles: a record identifies a flow, it does not carry it.

Chaining: ``content_hash = sha256(canonical JSON of the record's fields)``, and
``hash = sha256(prev_hash + content_hash)``, where ``prev_hash`` is the previous
record's ``hash`` (64 zeros for the first). The store's ``meta`` table keeps the
head (last sequence number and hash), written in the same transaction as each
append. `verify_records` recomputes the chain and names the first bad record:
an edited record fails its content hash, a deleted one leaves a gap in the
sequence numbers, a reordered or inserted one breaks the link to its
predecessor, and a removed tail disagrees with the recorded head.

The chain uses plain SHA-256: it detects changes made without rewriting every
later record. Anchor the head (`AuditReport.head_hash`) outside the database,
e.g. with ``privacy-ci audit verify --expect-head``, to detect a rewritten tail.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

GENESIS = "0" * 64

# Columns in table order; `hashed` columns enter the content hash.
COLUMNS = (
    "seq",
    "at",
    "request_id",
    "requester",
    "role",
    "context",
    "action",
    "doc_id",
    "decision",
    "rule",
    "policy_version",
    "label_version",
    "store_version",
    "detail",
    "prev_hash",
    "content_hash",
    "hash",
)
HASHED = COLUMNS[:15]  # everything up to and including prev_hash
COLUMNS_SQL = ", ".join(COLUMNS)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One decision to log (the store adds sequence number, time and hashes).

    Args:
        request_id: the request the decision belongs to.
        requester: the requester's id.
        role / context: the role and context the requester acted in.
        action: what was asked: ``decide``, ``decide_batch``, ``retrieve``, ``ask``.
        doc_id: the document decided (None for a retrieval's scope record).
        decision: ``permit``, ``deny`` or ``scope`` (the authorized-set summary
            of a retrieval, whose `detail` gives the counts).
        rule: the deciding rule's key.
        policy_version: the policy the gate applied.
        label_version: the version of the document's label (None if none).
        store_version: the store version the decision was taken at.
        detail: short machine-written JSON (never content or titles).
    """

    request_id: str
    requester: str
    role: str | None
    context: str | None
    action: str
    doc_id: str | None
    decision: str
    rule: str | None
    policy_version: str
    label_version: int | None
    store_version: int
    detail: str = ""


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """A stored audit record: the entry plus sequence number, time and chain hashes."""

    seq: int
    at: str
    request_id: str
    requester: str
    role: str | None
    context: str | None
    action: str
    doc_id: str | None
    decision: str
    rule: str | None
    policy_version: str
    label_version: int | None
    store_version: int
    detail: str
    prev_hash: str
    content_hash: str
    hash: str

    @classmethod
    def seal(cls, seq: int, at: str, entry: AuditEntry, prev_hash: str) -> AuditRecord:
        """The record for `entry` at position `seq`, chained after `prev_hash`."""
        fields: dict[str, Any] = {
            "seq": seq,
            "at": at,
            "request_id": entry.request_id,
            "requester": entry.requester,
            "role": entry.role,
            "context": entry.context,
            "action": entry.action,
            "doc_id": entry.doc_id,
            "decision": entry.decision,
            "rule": entry.rule,
            "policy_version": entry.policy_version,
            "label_version": entry.label_version,
            "store_version": entry.store_version,
            "detail": entry.detail,
            "prev_hash": prev_hash,
        }
        content = content_hash(fields)
        return cls(**fields, content_hash=content, hash=chain_hash(prev_hash, content))

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> AuditRecord:
        values = dict(zip(COLUMNS, row, strict=True))
        values["seq"] = int(values["seq"])
        values["store_version"] = int(values["store_version"])
        if values["label_version"] is not None:
            values["label_version"] = int(values["label_version"])
        return cls(**values)

    def row(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in COLUMNS)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def content_hash(fields: dict[str, Any]) -> str:
    """SHA-256 of a record's hashed fields as canonical JSON (sorted keys, no spaces)."""
    payload = {name: fields[name] for name in HASHED}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, content: str) -> str:
    """The link hash: SHA-256 over the previous hash and this record's content hash."""
    return hashlib.sha256((prev_hash + content).encode("ascii")).hexdigest()


@dataclass(frozen=True)
class AuditReport:
    """The outcome of re-computing the chain.

    Args:
        ok: whether every record checks out.
        records: how many records were read.
        first_bad_seq: the sequence number of the first bad record (None when ok).
        problem: what is wrong with it.
        head_seq / head_hash: the last record's sequence number and hash.
    """

    ok: bool
    records: int
    first_bad_seq: int | None = None
    problem: str | None = None
    head_seq: int = 0
    head_hash: str = GENESIS

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify_records(
    records: Iterable[AuditRecord],
    *,
    recorded_head: tuple[int, str] | None = None,
    expect_head: str | None = None,
) -> AuditReport:
    """Re-compute the hash chain over records in sequence order.

    Args:
        records: the stored records, ordered by ``seq``.
        recorded_head: (seq, hash) of the head as written in the store's meta table.
        expect_head: a head hash anchored elsewhere, which the log must end with.

    Returns:
        An `AuditReport` naming the first bad record, if any.
    """
    prev_hash, expected_seq, count, last_seq = GENESIS, 1, 0, 0
    for rec in records:
        count += 1
        problem: str | None = None
        bad_seq = rec.seq
        if rec.seq < expected_seq:
            problem = f"record {rec.seq} is out of order (expected {expected_seq})"
        elif rec.seq > expected_seq:
            bad_seq = expected_seq
            missing = (
                f"record {expected_seq} is missing"
                if rec.seq == expected_seq + 1
                else f"records {expected_seq}-{rec.seq - 1} are missing"
            )
            problem = f"{missing} (deleted): the log jumps to {rec.seq}"
        elif content_hash({n: getattr(rec, n) for n in HASHED}) != rec.content_hash:
            problem = f"record {rec.seq} was changed: its content hash does not match"
        elif rec.prev_hash != prev_hash:
            problem = (
                f"record {rec.seq} does not follow record {rec.seq - 1}: the chain link is"
                " broken (records reordered, inserted or deleted)"
            )
        elif chain_hash(rec.prev_hash, rec.content_hash) != rec.hash:
            problem = f"record {rec.seq} has a wrong chain hash"
        if problem is not None:
            return AuditReport(False, count, bad_seq, problem, last_seq, prev_hash)
        prev_hash, last_seq, expected_seq = rec.hash, rec.seq, rec.seq + 1
    if recorded_head is not None and recorded_head != (last_seq, prev_hash):
        head_seq, head_hash = recorded_head
        if head_seq > last_seq:
            problem = (
                f"the log ends at record {last_seq} but the store recorded record {head_seq}"
                " as written (records at the end were deleted)"
            )
            return AuditReport(False, count, last_seq + 1, problem, last_seq, prev_hash)
        problem = (
            f"the log's last record ({last_seq}) is not the head the store recorded"
            f" (record {head_seq}, {head_hash[:12]}...)"
        )
        return AuditReport(False, count, min(head_seq + 1, last_seq), problem, last_seq, prev_hash)
    if expect_head is not None and expect_head != prev_hash:
        problem = (
            f"the log ends with hash {prev_hash[:12]}... (record {last_seq}), not the"
            f" expected head {expect_head[:12]}..."
        )
        return AuditReport(False, count, last_seq, problem, last_seq, prev_hash)
    return AuditReport(True, count, None, None, last_seq, prev_hash)
