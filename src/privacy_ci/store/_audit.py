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
predecessor, and a removed tail disagrees with the recorded head. A record
re-sealed in place (edited, hashes recomputed) breaks the link to its successor
and is named itself (a re-linked successor looks the same). Stored values are
type-checked and hashed as stored, never cast, so a value retyped in the
database (text or a real where an integer belongs) is reported, not rounded.

The chain uses plain SHA-256: it detects changes made without rewriting every
later record. Anchor the head (`AuditReport.head_hash`) outside the database,
e.g. with ``privacy-ci audit verify --expect-head``, to detect a rewritten tail.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from privacy_ci.store._sql import StoreError

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
ENTRY_COLUMNS = COLUMNS[2:14]  # the `AuditEntry` fields, request_id to detail
COLUMNS_SQL = ", ".join(COLUMNS)

# The type each column must hold; the verifier checks stored values against these
# rather than casting them, so a retyped value can neither crash it nor pass as valid.
_INTEGER = ("seq", "store_version")
_OPTIONAL_INTEGER = ("label_version",)
_OPTIONAL_TEXT = ("role", "context", "doc_id", "rule")
_DIGESTS = ("prev_hash", "content_hash", "hash")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEAD = re.compile(r"([1-9][0-9]*):([0-9a-f]{64})")


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
    """A stored audit record: the entry plus sequence number, time and chain hashes.

    The entry's fields read through the record as well (``record.requester``,
    ``record.decision``, ...), and `row` / `as_dict` give the columns flat.
    """

    seq: int
    at: str
    entry: AuditEntry
    prev_hash: str
    content_hash: str
    hash: str

    # -- the entry's fields, read through -----------------------------------------------
    @property
    def request_id(self) -> str:
        return self.entry.request_id

    @property
    def requester(self) -> str:
        return self.entry.requester

    @property
    def role(self) -> str | None:
        return self.entry.role

    @property
    def context(self) -> str | None:
        return self.entry.context

    @property
    def action(self) -> str:
        return self.entry.action

    @property
    def doc_id(self) -> str | None:
        return self.entry.doc_id

    @property
    def decision(self) -> str:
        return self.entry.decision

    @property
    def rule(self) -> str | None:
        return self.entry.rule

    @property
    def policy_version(self) -> str:
        return self.entry.policy_version

    @property
    def label_version(self) -> int | None:
        return self.entry.label_version

    @property
    def store_version(self) -> int:
        return self.entry.store_version

    @property
    def detail(self) -> str:
        return self.entry.detail

    @classmethod
    def seal(cls, seq: int, at: str, entry: AuditEntry, prev_hash: str) -> AuditRecord:
        """The record for `entry` at position `seq`, chained after `prev_hash`."""
        fields: dict[str, Any] = {
            "seq": seq,
            "at": at,
            **{name: getattr(entry, name) for name in ENTRY_COLUMNS},
            "prev_hash": prev_hash,
        }
        content = content_hash(fields)
        return cls(seq, at, entry, prev_hash, content, chain_hash(prev_hash, content))

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> AuditRecord:
        """The record a stored row holds, its values used as stored (never cast).

        Raises:
            StoreError: a value has the wrong type (the row was tampered with; run
                ``privacy-ci audit verify`` to locate it).
        """
        values = dict(zip(COLUMNS, row, strict=True))
        problem = field_problem(values)
        if problem is not None:
            raise StoreError(
                f"audit record {values['seq']!r} is malformed: {problem}"
                " (run privacy-ci audit verify)"
            )
        entry = AuditEntry(**{name: values[name] for name in ENTRY_COLUMNS})
        return cls(
            values["seq"],
            values["at"],
            entry,
            values["prev_hash"],
            values["content_hash"],
            values["hash"],
        )

    def row(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in COLUMNS)

    def as_dict(self) -> dict[str, Any]:
        """The columns, flat and in table order (the entry's fields inline)."""
        return {c: getattr(self, c) for c in COLUMNS}


def content_hash(fields: dict[str, Any]) -> str:
    """SHA-256 of a record's hashed fields as canonical JSON (sorted keys, no spaces)."""
    payload = {name: fields[name] for name in HASHED}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, content: str) -> str:
    """The link hash: SHA-256 over the previous hash and this record's content hash."""
    return hashlib.sha256((prev_hash + content).encode("ascii")).hexdigest()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: object) -> str:
    """A stored value and its Python type, for messages (long values cut)."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} (a {type(value).__name__})"


def field_problem(values: Mapping[str, Any]) -> str | None:
    """Why a stored row's values are not an audit record's types (None when they are).

    Args:
        values: column name -> the value exactly as the database returned it.
    """
    for name in COLUMNS:
        value = values[name]
        if name in _INTEGER:
            ok, wanted = _is_int(value), "an integer"
        elif name in _OPTIONAL_INTEGER:
            ok, wanted = value is None or _is_int(value), "an integer or null"
        elif name in _OPTIONAL_TEXT:
            ok, wanted = value is None or isinstance(value, str), "text or null"
        elif name in _DIGESTS:
            ok = isinstance(value, str) and _HEX64.fullmatch(value) is not None
            wanted = "a SHA-256 hex digest"
        else:
            ok, wanted = isinstance(value, str), "text"
        if not ok:
            return f"its {name} is {_show(value)}, not {wanted}"
    return None


def parse_head(text: str) -> tuple[int, str] | None:
    """The (seq, hash) of a head stored as ``SEQ:HASH``; None when it is not that."""
    match = _HEAD.fullmatch(text)
    return (int(match[1]), match[2]) if match else None


@dataclass(frozen=True)
class AuditReport:
    """The outcome of re-computing the chain.

    Args:
        ok: whether every record checks out.
        records: how many records were read.
        first_bad_seq: the sequence number of the first bad record (None when ok,
            or when what is wrong is the recorded head itself).
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
    records: Iterable[AuditRecord | Sequence[Any]],
    *,
    recorded_head: tuple[int, str] | str | None = None,
    expect_head: str | None = None,
) -> AuditReport:
    """Re-compute the hash chain over records in sequence order.

    Stored values are type-checked and hashed exactly as stored, never cast: a
    value retyped in the database (text or a real where an integer belongs) is
    reported, with its field and type, rather than crashing the check or being
    rounded back into a valid-looking record.

    Args:
        records: the stored records, ordered by ``seq``: `AuditRecord` objects, or
            raw rows (values in `COLUMNS` order, as the database returned them).
        recorded_head: the head written in the store's meta table: (seq, hash), or
            the stored ``SEQ:HASH`` text; (0, GENESIS) when the store recorded none.
        expect_head: a head hash anchored elsewhere, which the log must end with.

    Returns:
        An `AuditReport` naming the first bad record, if any (``first_bad_seq`` is
        None when the problem is the recorded head itself).
    """
    rows: Iterator[dict[str, Any]] = (
        dict(zip(COLUMNS, r.row() if isinstance(r, AuditRecord) else r, strict=True))
        for r in records
    )
    prev_hash, expected_seq, count, last_seq = GENESIS, 1, 0, 0
    good_seq, good_hash = 0, GENESIS  # the record before the last one accepted
    misplaced: list[dict[str, Any]] = []  # rows whose seq is not an integer
    problem: str | None
    for values in rows:
        count += 1
        seq = values["seq"]
        if not _is_int(seq):
            # A non-integer seq sorts away from its place (in SQLite, text after every
            # number): hold the row until the walk reaches the gap it left.
            misplaced.append(values)
            if values["prev_hash"] == prev_hash:
                problem = _renumbered(expected_seq, seq)
                return AuditReport(False, count, expected_seq, problem, last_seq, prev_hash)
            continue
        problem = None
        bad_seq = seq
        if seq < expected_seq:
            problem = f"record {seq} is out of order (expected {expected_seq})"
        elif seq > expected_seq:
            bad_seq = expected_seq
            for rest in rows:  # the record that left the gap may sort last
                count += 1
                if not _is_int(rest["seq"]):
                    misplaced.append(rest)
            linked = _linked(misplaced, prev_hash)
            if linked is not None:
                problem = _renumbered(expected_seq, linked["seq"])
            else:
                missing = (
                    f"record {expected_seq} is missing"
                    if seq == expected_seq + 1
                    else f"records {expected_seq}-{seq - 1} are missing"
                )
                problem = f"{missing} (deleted): the log jumps to {seq}"
                if misplaced:
                    problem += f"; a record's seq is not an integer ({_show(misplaced[0]['seq'])})"
        elif (wrong_type := field_problem(values)) is not None:
            problem = f"record {seq} was changed: {wrong_type}"
        elif content_hash(values) != values["content_hash"]:
            problem = f"record {seq} was changed: its content hash does not match"
        elif values["prev_hash"] != prev_hash:
            if seq == 1:
                problem = (
                    "record 1 does not start the chain: its prev_hash is not the genesis"
                    " hash (it was re-sealed after another predecessor)"
                )
            else:
                # Re-sealing N (hashes recomputed) and re-linking N+1 leave the same
                # trace; naming N puts a forged in-place rewrite at the forged record.
                bad_seq = seq - 1
                problem = (
                    f"the chain breaks between record {seq - 1} and record {seq}: record"
                    f" {seq}'s prev_hash is not record {seq - 1}'s hash. Record {seq - 1}"
                    f" was re-sealed (rewritten with its hashes recomputed) or record {seq}"
                    " was re-linked (or records inserted or deleted with re-sealing); the"
                    " two cannot be told apart here, so the earlier record is named"
                )
                return AuditReport(False, count, bad_seq, problem, good_seq, good_hash)
        elif chain_hash(values["prev_hash"], values["content_hash"]) != values["hash"]:
            problem = (
                f"record {seq} has a wrong chain hash: its hash is not"
                " sha256(prev_hash + content_hash) (the hash column was changed)"
            )
        if problem is not None:
            return AuditReport(False, count, bad_seq, problem, last_seq, prev_hash)
        good_seq, good_hash = last_seq, prev_hash
        prev_hash, last_seq, expected_seq = values["hash"], seq, seq + 1
    if misplaced:
        linked = _linked(misplaced, prev_hash)
        if linked is not None:
            problem = _renumbered(expected_seq, linked["seq"])
        else:
            problem = (
                f"a record's seq was changed to a non-integer ({_show(misplaced[0]['seq'])})"
                f" and its prev_hash links it to no record of the log"
            )
        return AuditReport(False, count, expected_seq, problem, last_seq, prev_hash)
    if isinstance(recorded_head, str):
        parsed = parse_head(recorded_head)
        if parsed is None:
            problem = (
                f"the recorded head (meta 'audit_head') is {_show(recorded_head)}, not"
                " SEQ:HASH: it was changed outside privacy-ci"
            )
            return AuditReport(False, count, None, problem, last_seq, prev_hash)
        recorded_head = parsed
    if recorded_head is not None and recorded_head != (last_seq, prev_hash):
        head_seq, head_hash = recorded_head
        if head_seq == 0:
            problem = (
                f"the store recorded no head (meta 'audit_head' is missing) but the log"
                f" holds records up to {last_seq}: the head was deleted"
            )
            return AuditReport(False, count, None, problem, last_seq, prev_hash)
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


def _renumbered(position: int, seq: object) -> str:
    return (
        f"record {position}'s seq was changed to a non-integer: it is {_show(seq)}"
        f" (its chain link puts it at position {position})"
    )


def _linked(misplaced: Sequence[dict[str, Any]], prev_hash: str) -> dict[str, Any] | None:
    """The held-back row whose chain link puts it right after `prev_hash`, if any."""
    return next((values for values in misplaced if values["prev_hash"] == prev_hash), None)
