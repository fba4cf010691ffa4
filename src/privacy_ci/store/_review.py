"""The Policy Authority's review of proposed labels: the queue, each proposal's
consequence, and the verdict, recorded in the history and the audit log.

The consequence of a proposal is computed by the gate of the store's policy (the
`Snapshot`'s, the one every request is decided by) over the store's agents, each
acting in every role it holds in the context the store records, with the store's
assignments: for each such principal, the decision under the label in force
before the proposal (`label_before_proposal`; nothing when the label was never
approved) and the decision under the proposal. Principals permitted only after
gain access, those permitted only before lose it. A proposal that makes anyone
gain access *widens* it, and is never approved in bulk: `approve_labels` refuses
the whole batch.

Each verdict is one write transaction: the label lifecycle operation (approve,
edit then approve, reject), which appends to the history, and an audit record
(action ``review``, decision ``approve`` or ``reject``, the reviewer's role and
context, the new label version, and who gained and lost access; never content or
titles).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from privacy_ci.conductor import Decision, Label, Requester
from privacy_ci.errors import ValidationFailed
from privacy_ci.store._audit import AuditEntry
from privacy_ci.store._audit_log import AuditLog
from privacy_ci.store._labels import (
    LabelConflict,
    LabelRecord,
    LabelsMixin,
    LabelState,
    PriorLabel,
    label_before_proposal,
)
from privacy_ci.store._snapshot import Snapshot, SnapshotMixin
from privacy_ci.store._sql import canonical_json

REVIEW_ACTION = "review"
AUDIT_IDS = 50
"""At most this many principals per list in a review's audit record (counts are exact)."""


class ReviewVerdict(StrEnum):
    """What the Policy Authority decides about a proposal."""

    APPROVE = "approve"
    REJECT = "reject"


class BulkApprovalRefused(LabelConflict):
    """A bulk approval that includes a label widening access (each must be reviewed alone)."""


@dataclass(frozen=True)
class Principal:
    """An agent of the store acting in one of its roles, in the context the store records."""

    agent_id: str
    name: str
    role: str
    context: str

    @property
    def key(self) -> str:
        return f"{self.agent_id}:{self.role}"


@dataclass(frozen=True)
class AccessChange:
    """One principal's decision before and after a proposal.

    Args:
        principal: who.
        before: the gate's decision under the label in force (None: no label was).
        after: the gate's decision under the proposal (None: it does not validate).
    """

    principal: Principal
    before: Decision | None
    after: Decision | None

    @property
    def permitted_before(self) -> bool:
        return self.before is not None and self.before.permitted

    @property
    def permitted_after(self) -> bool:
        return self.after is not None and self.after.permitted

    @property
    def rule_after(self) -> str:
        return "invalid_label" if self.after is None else self.after.rule.key


@dataclass(frozen=True)
class AccessDiff:
    """Who gains and who loses access to one document if a proposal is approved.

    Args:
        doc_id: the document.
        gained: principals denied before and permitted after.
        lost: principals permitted before and denied after.
        kept: principals permitted before and after.
        denied: how many principals are denied before and after.
        policy_version / store_version: what the gate decided against.
    """

    doc_id: str
    gained: tuple[AccessChange, ...]
    lost: tuple[AccessChange, ...]
    kept: tuple[AccessChange, ...]
    denied: int
    policy_version: str
    store_version: int

    @property
    def widens(self) -> bool:
        """Whether anyone gains access (such a proposal is never approved in bulk)."""
        return bool(self.gained)

    @property
    def changes(self) -> bool:
        return bool(self.gained or self.lost)

    def audit_detail(self) -> dict[str, Any]:
        """Who gains and loses, as ``agent:role`` keys (capped; the counts are exact)."""
        return {
            "gained": [c.principal.key for c in self.gained[:AUDIT_IDS]],
            "gained_count": len(self.gained),
            "lost": [c.principal.key for c in self.lost[:AUDIT_IDS]],
            "lost_count": len(self.lost),
        }


def access_diff(
    snapshot: Snapshot, doc_id: str, before: Label | None, after: Label | None
) -> AccessDiff:
    """Decide `before` and `after` for every principal of the store, with the store's gate.

    Args:
        snapshot: the store's state (its gate, agents and assignments).
        doc_id: the document.
        before: the label in force (None: the document is granted to nobody).
        after: the proposed label (None: it does not validate, so it grants nothing).

    Returns:
        The `AccessDiff`, principals ordered by agent id and role.
    """
    gate = snapshot.gate
    gained, lost, kept = [], [], []
    denied = 0
    for agent in snapshot.agents.values():
        for role in sorted(agent.roles):
            requester = snapshot.requester(agent.agent_id, role)
            principal = Principal(agent.agent_id, agent.name, role, agent.roles[role])
            change = AccessChange(
                principal,
                None if before is None else gate.decide(requester, before),
                None if after is None else gate.decide(requester, after),
            )
            if change.permitted_before and change.permitted_after:
                kept.append(change)
            elif change.permitted_after:
                gained.append(change)
            elif change.permitted_before:
                lost.append(change)
            else:
                denied += 1
    order = lambda c: (c.principal.agent_id, c.principal.role)  # noqa: E731
    return AccessDiff(
        doc_id,
        tuple(sorted(gained, key=order)),
        tuple(sorted(lost, key=order)),
        tuple(sorted(kept, key=order)),
        denied,
        snapshot.policy_version,
        snapshot.version,
    )


@dataclass(frozen=True)
class PendingReview:
    """A proposal awaiting review, the label it would replace, and its consequence.

    Args:
        record: the proposal (state ``proposed``).
        prior: the label before the proposal (None: a new label).
        diff: who gains and loses access if it is approved as proposed.
    """

    record: LabelRecord
    prior: PriorLabel | None
    diff: AccessDiff

    @property
    def doc_id(self) -> str:
        return self.record.doc_id

    @property
    def is_change(self) -> bool:
        """A change to a label that was approved or revoked before (not a new one)."""
        return self.prior is not None

    @property
    def suspends(self) -> bool:
        """Whether the proposal suspended an approved label (granted to nobody until reviewed)."""
        return self.prior is not None and self.prior.state is LabelState.APPROVED

    @property
    def widens(self) -> bool:
        return self.diff.widens


@dataclass(frozen=True)
class ReviewOutcome:
    """A verdict as recorded: the label now, the consequence, the audit record's number."""

    verdict: ReviewVerdict
    record: LabelRecord
    diff: AccessDiff
    edited: bool
    audit_seq: int


@dataclass(frozen=True)
class _Review:
    doc_id: str
    verdict: ReviewVerdict
    version: int
    edited: Label | None = None
    note: str = ""


class ReviewMixin(LabelsMixin, SnapshotMixin):
    """`DocumentStore`'s review of proposals by the Policy Authority."""

    audit: AuditLog

    def pending_reviews(self) -> list[PendingReview]:
        """Every label awaiting review (state ``proposed``), ordered by document id."""
        snap = self.snapshot()
        return [self._pending_review(snap, record) for record in self.labels(LabelState.PROPOSED)]

    def pending_review(self, doc_id: str, edited: Label | None = None) -> PendingReview:
        """One proposal with its consequence; with `edited`, the consequence of the
        reviewer's edit instead (nothing is written).

        Raises:
            UnknownDocument: no label with that id.
            LabelConflict: the label is not awaiting review.
        """
        snap = self.snapshot()
        record = self._pending(self.db, doc_id, None)
        return self._pending_review(snap, record, edited)

    def _pending_review(
        self, snap: Snapshot, record: LabelRecord, edited: Label | None = None
    ) -> PendingReview:
        prior = self.prior_label(record.doc_id)
        proposal = edited if edited is not None else record.label
        before = prior.in_force if prior is not None else None
        return PendingReview(record, prior, access_diff(snap, record.doc_id, before, proposal))

    def review_label(
        self,
        doc_id: str,
        verdict: ReviewVerdict | str,
        reviewer: Requester,
        *,
        version: int,
        edited: Label | None = None,
        note: str = "",
        request_id: str | None = None,
    ) -> ReviewOutcome:
        """Approve (as proposed, or as `edited`) or reject one proposal, at `version`.

        Args:
            doc_id: the document.
            verdict: ``approve`` or ``reject``.
            reviewer: the Policy Authority acting (id, role and context are audited).
            version: the proposal the reviewer saw.
            edited: the reviewer's edit of the proposal (approve only).
            note: why.
            request_id: the audit record's request id (default: a new one).

        Raises:
            UnknownDocument: no label with that id.
            LabelConflict: not awaiting review, or changed since `version`.
            ValidationFailed: the proposal (or the edit) does not validate, or an
                edit names another document or comes with a rejection.
        """
        review = _Review(doc_id, ReviewVerdict(verdict), version, edited, note)
        return self._apply([review], reviewer, request_id, bulk=False)[0]

    def approve_labels(
        self,
        items: Sequence[tuple[str, int]],
        reviewer: Requester,
        *,
        note: str = "",
        request_id: str | None = None,
    ) -> list[ReviewOutcome]:
        """Approve several proposals at once, none of which may widen access.

        All or nothing: one transaction, refused whole when any label widens access,
        is not awaiting review, or is not at the version given.

        Args:
            items: (document id, the version the reviewer saw) pairs.
            reviewer: the Policy Authority acting.
            note: why.
            request_id: the audit records' request id.

        Raises:
            BulkApprovalRefused: a label widens access.
            LabelConflict / UnknownDocument / ValidationFailed: as `review_label`.
        """
        reviews = [_Review(d, ReviewVerdict.APPROVE, v, None, note) for d, v in items]
        return self._apply(reviews, reviewer, request_id, bulk=True)

    def _apply(
        self,
        reviews: Sequence[_Review],
        reviewer: Requester,
        request_id: str | None,
        *,
        bulk: bool,
    ) -> list[ReviewOutcome]:
        if not reviews:
            raise ValidationFailed(["no label to review"])
        if len({r.doc_id for r in reviews}) != len(reviews):
            raise ValidationFailed(["a label is named twice in one review"])
        snap = self.snapshot()
        rid = request_id or uuid.uuid4().hex
        done: list[tuple[_Review, LabelRecord, AccessDiff, bool]] = []
        with self.db.write() as db:
            for review in reviews:
                current = self._pending(db, review.doc_id, review.version)
                if review.edited is not None:
                    if review.verdict is not ReviewVerdict.APPROVE:
                        raise ValidationFailed(["an edited label can only be approved"])
                    if review.edited.doc_id != review.doc_id:
                        named = review.edited.doc_id
                        raise ValidationFailed(
                            [f"the edited label names {named!r}, not {review.doc_id!r}"]
                        )
                prior = label_before_proposal(db, review.doc_id)
                proposal = review.edited if review.edited is not None else current.label
                diff = access_diff(
                    snap, review.doc_id, prior.in_force if prior is not None else None, proposal
                )
                if bulk and diff.widens:
                    who = ", ".join(c.principal.key for c in diff.gained[:5])
                    raise BulkApprovalRefused(
                        f"label {review.doc_id!r} widens access ({len(diff.gained)} gain it:"
                        f" {who}): it must be reviewed on its own; nothing was approved"
                    )
                by, note, seen = reviewer.id, review.note, review.version
                edited = review.edited is not None and (
                    review.edited.model_dump(mode="json") != current.body
                )
                if review.verdict is ReviewVerdict.REJECT:
                    record = self.reject_label(review.doc_id, by, note, version=seen)
                elif review.edited is not None:
                    record = self.approve_edited_label(review.edited, by, note, version=seen)
                else:
                    record = self.approve_label(review.doc_id, by, note, version=seen)
                done.append((review, record, diff, edited))
            store_version = self.version()
            entries = [
                AuditEntry(
                    request_id=rid,
                    requester=reviewer.id,
                    role=reviewer.active_role,
                    context=reviewer.active_context,
                    action=REVIEW_ACTION,
                    doc_id=review.doc_id,
                    decision=review.verdict.value,
                    rule=None,
                    policy_version=snap.policy_version,
                    label_version=record.version,
                    store_version=store_version,
                    detail=canonical_json(_audit_detail(review, record, diff, edited, bulk)),
                )
                for review, record, diff, edited in done
            ]
            sealed = self.audit.append(entries)
        return [
            ReviewOutcome(review.verdict, record, diff, edited, audit.seq)
            for (review, record, diff, edited), audit in zip(done, sealed, strict=True)
        ]


def _audit_detail(
    review: _Review, record: LabelRecord, diff: AccessDiff, edited: bool, bulk: bool
) -> dict[str, Any]:
    """A verdict's audit detail: who gained and lost access (an approval), or who the
    rejected proposal would have let in and shut out (a rejection)."""
    out: dict[str, Any] = {
        "reviewed_version": review.version,
        "state": record.state.value,
        "edited": edited,
        "bulk": bulk,
    }
    if review.verdict is ReviewVerdict.APPROVE:
        out.update(diff.audit_detail())
    else:
        out["refused"] = diff.audit_detail()
    return out
