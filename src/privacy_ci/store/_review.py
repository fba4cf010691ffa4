"""The Policy Authority's verdicts on labels: the queue, each proposal's consequence,
and approve / reject / revoke through one guarded path, recorded in the history and
the audit log.

The consequence of a proposal is computed by the gate of the store's policy (the
`Snapshot`'s, the one every request is decided by) for every agent of the store,
acting in every role it holds in the context the store records, with the store's
assignments: the decision under the label in force and under the proposal.
Principals permitted only after gain access, those permitted only before lose it.
Because assignments change without review (`store assign`), the consequence also
covers every assignment that could follow: a principal *would gain if assigned*
when assigning it to the proposal's subject would grant it the document under the
proposal but not under the label in force, and a role gains *latently* when any
requester acting in it (an agent the store does not have yet included), assigned
to the subject or not, would. A proposal *widens* access when anyone gains, now or
latently; such a proposal is never approved in bulk, and a single approval of it
must say that it accepts the widening (the review page does, after showing it).

Every verdict goes through `ReviewMixin._decide`: one write transaction that
checks the version the reviewer saw (a label changed since is refused,
`LabelConflict`), applies the widening rule, performs the lifecycle operation
(which appends to the history) and appends an audit record (action ``review``,
decision ``approve``, ``reject`` or ``revoke``, the reviewer's role and context,
the label version, who gained and lost access; never content or titles). The
store's `approve_label`, `reject_label`, `approve_edited_label` and
`revoke_label`, the CLI, ``/v1/labels/...`` and ``/review`` all take this path.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
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
    read_label,
)
from privacy_ci.store._snapshot import Snapshot, SnapshotMixin
from privacy_ci.store._sql import Database, StoreError, canonical_json

REVIEW_ACTION = "review"
VIEW_ACTION = "review_view"
"""The audit action of the authority reading a document under review."""
AUDIT_IDS = 50
"""At most this many principals per list in a review's audit record (counts are exact)."""
NO_POLICY = "none"
"""The policy version audited when the store has no policy yet."""

Reviewer = Requester | str
"""Who gives a verdict: a requester (the service's verified Policy Authority) or, for
the store's own API and CLI, the name of the operator acting (audited without a
role or context)."""


class ReviewVerdict(StrEnum):
    """What the Policy Authority decides about a label."""

    APPROVE = "approve"
    REJECT = "reject"
    REVOKE = "revoke"


class BulkApprovalRefused(LabelConflict):
    """A bulk approval that includes a label widening access (each must be reviewed alone)."""


class WideningNotAccepted(LabelConflict):
    """An approval that widens access without saying it accepts the widening (HTTP 409)."""


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
        if_assigned: principals denied now either way, who would gain access if
            assigned to the proposal's subject (an assignment needs no review).
        latent_roles: roles in which some requester (any agent, assigned to the
            subject or not) would be permitted under the proposal and not under the
            label in force: the proposal widens access whoever holds them later.
    """

    doc_id: str
    gained: tuple[AccessChange, ...]
    lost: tuple[AccessChange, ...]
    kept: tuple[AccessChange, ...]
    denied: int
    policy_version: str
    store_version: int
    if_assigned: tuple[AccessChange, ...] = ()
    latent_roles: tuple[str, ...] = ()

    @property
    def widens(self) -> bool:
        """Whether anyone gains access now, or could under some assignment (such a
        proposal is never approved in bulk)."""
        return bool(self.gained or self.if_assigned or self.latent_roles)

    @property
    def changes(self) -> bool:
        return bool(self.gained or self.lost or self.if_assigned or self.latent_roles)

    def describe_gains(self, limit: int = 5) -> str:
        """Who gains, for messages: principals now, if assigned, and latent roles."""
        parts = []
        if self.gained:
            who = ", ".join(c.principal.key for c in self.gained[:limit])
            parts.append(f"{len(self.gained)} gain it now: {who}")
        if self.if_assigned:
            who = ", ".join(c.principal.key for c in self.if_assigned[:limit])
            parts.append(f"{len(self.if_assigned)} would gain it if assigned: {who}")
        if self.latent_roles:
            parts.append(f"roles that gain it: {', '.join(self.latent_roles)}")
        return "; ".join(parts)

    def audit_detail(self) -> dict[str, Any]:
        """Who gains and loses, as ``agent:role`` keys (capped; the counts are exact)."""
        return {
            "gained": [c.principal.key for c in self.gained[:AUDIT_IDS]],
            "gained_count": len(self.gained),
            "lost": [c.principal.key for c in self.lost[:AUDIT_IDS]],
            "lost_count": len(self.lost),
            "if_assigned": [c.principal.key for c in self.if_assigned[:AUDIT_IDS]],
            "if_assigned_count": len(self.if_assigned),
            "latent_roles": list(self.latent_roles),
        }


def _needs_assignment(snapshot: Snapshot, label: Label | None) -> str | None:
    """The subject a requester must be assigned to for `label` (None: no assignment)."""
    if label is None or label.subject is None:
        return None
    return label.subject if snapshot.gate.tier_requires.get(label.sensitivity_tier) else None


def _permits(snapshot: Snapshot, requester: Requester, label: Label | None) -> bool:
    return label is not None and snapshot.gate.decide(requester, label).permitted


def access_diff(
    snapshot: Snapshot, doc_id: str, before: Label | None, after: Label | None
) -> AccessDiff:
    """Decide `before` and `after` for every principal of the store, with the store's
    gate, now and under the assignments that could follow.

    Args:
        snapshot: the store's state (its gate, agents and assignments).
        doc_id: the document.
        before: the label in force (None: the document is granted to nobody).
        after: the proposed label (None: it does not validate, so it grants nothing).

    Returns:
        The `AccessDiff`, principals ordered by agent id and role.
    """
    gate = snapshot.gate
    unlock = _needs_assignment(snapshot, after)
    gained, lost, kept, if_assigned = [], [], [], []
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
                if unlock is not None and unlock not in requester.assignments:
                    assigned = requester.model_copy(
                        update={"assignments": requester.assignments | {unlock}}
                    )
                    if _permits(snapshot, assigned, after) and not _permits(
                        snapshot, assigned, before
                    ):
                        if_assigned.append(change)
    order = lambda c: (c.principal.agent_id, c.principal.role)  # noqa: E731
    return AccessDiff(
        doc_id,
        tuple(sorted(gained, key=order)),
        tuple(sorted(lost, key=order)),
        tuple(sorted(kept, key=order)),
        denied,
        snapshot.policy_version,
        snapshot.version,
        tuple(sorted(if_assigned, key=order)),
        _latent_roles(snapshot, before, after, unlock),
    )


def _latent_roles(
    snapshot: Snapshot, before: Label | None, after: Label | None, unlock: str | None
) -> tuple[str, ...]:
    """Roles in which a requester with no assignment, or assigned to the proposal's
    subject, is permitted under `after` and not under `before`.

    The gate only grows with assignments, so these two cover every assignment set:
    the least one that lets `after` permit gives `before` the least chance.
    """
    if after is None:
        return ()
    policy = snapshot.policy
    found = []
    for role in policy.roles:
        for assigned in (frozenset(), frozenset({unlock}) if unlock else None):
            if assigned is None:
                continue
            requester = Requester(
                id="(any requester)",
                roles=frozenset({role}),
                active_role=role,
                active_context=policy.authoritative_context[role],
                assignments=assigned,
            )
            if _permits(snapshot, requester, after) and not _permits(snapshot, requester, before):
                found.append(role)
                break
    return tuple(found)


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
    def in_force(self) -> Label | None:
        """The label the gate applies while the proposal awaits review."""
        return self.record.in_force

    @property
    def widens(self) -> bool:
        return self.diff.widens

    def as_dict(self) -> dict[str, Any]:
        """The proposal, the label in force and the consequence, JSON-ready."""
        diff, record = self.diff, self.record

        def listed(changes: Sequence[AccessChange]) -> list[dict[str, str]]:
            return [
                {
                    "agent_id": c.principal.agent_id,
                    "role": c.principal.role,
                    "context": c.principal.context,
                }
                for c in changes
            ]

        return {
            "doc_id": record.doc_id,
            "version": record.version,
            "in_force_version": record.in_force_version,
            "proposed": record.body,
            "in_force": record.in_force_body,
            "widens": diff.widens,
            "gained": listed(diff.gained),
            "lost": listed(diff.lost),
            "kept": listed(diff.kept),
            "if_assigned": listed(diff.if_assigned),
            "latent_roles": list(diff.latent_roles),
            "policy_version": diff.policy_version,
        }


@dataclass(frozen=True)
class ReviewOutcome:
    """A verdict as recorded: the label now, the consequence, the audit record's number."""

    verdict: ReviewVerdict
    record: LabelRecord
    diff: AccessDiff | None
    edited: bool
    audit_seq: int


@dataclass(frozen=True)
class _Review:
    doc_id: str
    verdict: ReviewVerdict
    version: int | None
    edited: Label | None = None
    note: str = ""


class ReviewMixin(LabelsMixin, SnapshotMixin):
    """`DocumentStore`'s verdicts on labels, by the Policy Authority, on one path."""

    audit: AuditLog

    # -- the queue -----------------------------------------------------------------------
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
        return PendingReview(
            record, prior, access_diff(snap, record.doc_id, record.in_force, proposal)
        )

    def view_under_review(
        self, doc_id: str, reviewer: Reviewer, *, request_id: str | None = None
    ) -> str | None:
        """A document's text for the authority reviewing its proposal; audited.

        The authority receives documents only while they are under review: a label
        not awaiting review is refused, and every view is an audit record.

        Raises:
            UnknownDocument: no label with that id.
            LabelConflict: the label is not awaiting review.
        """
        with self.db.write() as db:
            record = self._pending(db, doc_id, None)
            row = db.query_one("SELECT content FROM documents WHERE doc_id = ?", (doc_id,))
            text = None if row is None else str(row[0])
            who, role, context = _reviewer(reviewer)
            self.audit.append(
                [
                    AuditEntry(
                        request_id=request_id or uuid.uuid4().hex,
                        requester=who,
                        role=role,
                        context=context,
                        action=VIEW_ACTION,
                        doc_id=doc_id,
                        decision="view",
                        rule=None,
                        policy_version=self._policy_version(),
                        label_version=record.version,
                        store_version=self.version(),
                        detail=canonical_json({"has_text": text is not None}),
                    )
                ]
            )
        return text

    # -- the verdicts ----------------------------------------------------------------------
    def review_label(
        self,
        doc_id: str,
        verdict: ReviewVerdict | str,
        reviewer: Reviewer,
        *,
        version: int | None,
        edited: Label | None = None,
        note: str = "",
        accept_widening: bool = True,
        request_id: str | None = None,
    ) -> ReviewOutcome:
        """Approve (as proposed, or as `edited`), reject or revoke one label, at `version`.

        Args:
            doc_id: the document.
            verdict: ``approve``, ``reject`` or ``revoke``.
            reviewer: the Policy Authority acting (audited).
            version: the label version the reviewer saw (None: the label as it is now;
                the CLI and the service always name one).
            edited: the reviewer's edit of the proposal (approve only).
            note: why.
            accept_widening: approve even when the approval widens access (anyone
                gains, now or if assigned); False refuses such an approval.
            request_id: the audit record's request id (default: a new one).

        Raises:
            UnknownDocument: no label with that id.
            LabelConflict: not awaiting review (approve: nor revoked; revoke: revoked
                already), or changed since `version`.
            WideningNotAccepted: the approval widens access and `accept_widening` is False.
            ValidationFailed: the proposal (or the edit) does not validate, or an
                edit names another document or comes with another verdict.
        """
        review = _Review(doc_id, ReviewVerdict(verdict), version, edited, note)
        return self._decide([review], reviewer, request_id, accept_widening=accept_widening)[0]

    def approve_labels(
        self,
        items: Sequence[tuple[str, int]],
        reviewer: Reviewer,
        *,
        note: str = "",
        request_id: str | None = None,
    ) -> list[ReviewOutcome]:
        """Approve several proposals at once, none of which may widen access.

        All or nothing: one transaction, refused whole when any label widens access
        (now or under an assignment), is not awaiting review, or is not at the
        version given.

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
        return self._decide(reviews, reviewer, request_id, accept_widening=False, bulk=True)

    # The store's own verbs, each a verdict on the one path (and so audited).
    def approve_label(
        self, doc_id: str, by: Reviewer, note: str = "", *, version: int | None = None
    ) -> LabelRecord:
        """Approve a label (a proposal, or a revoked label reinstated): from the next
        request on it is in force. Without `version`, approving an approved label
        changes nothing (idempotent). See `review_label`."""
        if version is None:
            current = self.label(doc_id)
            if current.state is LabelState.APPROVED:
                return current
        try:
            return self.review_label(
                doc_id, ReviewVerdict.APPROVE, by, version=version, note=note
            ).record
        except LabelConflict:
            # unversioned and approved meanwhile by another writer: nothing to do
            current = self.label(doc_id)
            if version is None and current.state is LabelState.APPROVED:
                return current
            raise

    def approve_edited_label(
        self, label: Label | Mapping[str, Any], by: Reviewer, note: str = "", *, version: int
    ) -> LabelRecord:
        """Edit a proposal and approve the edit, in one transaction (the history shows
        both: an ``edit`` and an ``approve`` by the reviewer). See `review_label`.

        Raises:
            ValidationFailed: the edited label does not validate.
        """
        label = self._checked_label(label, "edited label")
        return self.review_label(
            label.doc_id, ReviewVerdict.APPROVE, by, version=version, edited=label, note=note
        ).record

    def reject_label(
        self, doc_id: str, by: Reviewer, note: str = "", *, version: int | None = None
    ) -> LabelRecord:
        """Reject a proposal: the label returns to what it was before it (a label never
        anything but proposed is revoked); the label in force never changed."""
        return self.review_label(
            doc_id, ReviewVerdict.REJECT, by, version=version, note=note
        ).record

    def revoke_label(
        self, doc_id: str, by: Reviewer, note: str = "", *, version: int | None = None
    ) -> LabelRecord:
        """Revoke a label: the document is denied from the next request on (a proposal
        awaiting review is dropped with it). Without `version`, revoking a revoked
        label changes nothing (idempotent)."""
        if version is None:
            current = self.label(doc_id)
            if current.state is LabelState.REVOKED:
                return current
        try:
            return self.review_label(
                doc_id, ReviewVerdict.REVOKE, by, version=version, note=note
            ).record
        except LabelConflict:
            # unversioned and revoked meanwhile by another writer: nothing to do
            current = self.label(doc_id)
            if version is None and current.state is LabelState.REVOKED:
                return current
            raise

    def _policy_version(self) -> str:
        try:
            return self.snapshot().policy_version
        except StoreError:  # no policy yet
            return NO_POLICY

    def _decide(
        self,
        reviews: Sequence[_Review],
        reviewer: Reviewer,
        request_id: str | None,
        *,
        accept_widening: bool,
        bulk: bool = False,
    ) -> list[ReviewOutcome]:
        """Every verdict's one path: version, widening rule, lifecycle row, audit record."""
        if not reviews:
            raise ValidationFailed(["no label to review"])
        if len({r.doc_id for r in reviews}) != len(reviews):
            raise ValidationFailed(["a label is named twice in one review"])
        who, role, context = _reviewer(reviewer)
        rid = request_id or uuid.uuid4().hex
        done: list[tuple[_Review, LabelRecord, AccessDiff | None, bool]] = []
        with self.db.write() as db:
            # inside the write transaction: the store cannot move between the check
            # of what the reviewer saw and the verdict
            try:
                snap: Snapshot | None = self.snapshot()
            except StoreError:  # no policy: no consequence can be computed
                snap = None
            for review in reviews:
                current = self._checked(db, review)
                diff: AccessDiff | None = None
                edited = False
                if review.verdict is ReviewVerdict.APPROVE:
                    proposal = review.edited if review.edited is not None else current.label
                    if snap is not None:
                        diff = access_diff(snap, review.doc_id, current.in_force, proposal)
                    widens = diff is None or diff.widens
                    if widens and bulk:
                        gains = diff.describe_gains() if diff else "the store has no policy"
                        raise BulkApprovalRefused(
                            f"label {review.doc_id!r} widens access ({gains}): it must be"
                            " reviewed on its own; nothing was approved"
                        )
                    if widens and not accept_widening:
                        gains = diff.describe_gains() if diff else "the store has no policy"
                        raise WideningNotAccepted(
                            f"approving label {review.doc_id!r} widens access ({gains}):"
                            " review the gains and approve again accepting the widening;"
                            " nothing was approved"
                        )
                    if review.edited is not None:
                        edited = review.edited.model_dump(mode="json") != current.body
                        if edited:
                            current = self._propose_row(db, review.edited, who, review.note)
                    record = self._approve_row(db, current, who, review.note)
                elif review.verdict is ReviewVerdict.REJECT:
                    if snap is not None:  # what the rejected proposal would have done
                        diff = access_diff(snap, review.doc_id, current.in_force, current.label)
                    record = self._reject_row(db, current, who, review.note)
                else:
                    if snap is not None:
                        diff = access_diff(snap, review.doc_id, current.in_force, None)
                    record = self._revoke_row(db, current, who, review.note)
                done.append((review, record, diff, edited))
            store_version = self.version()
            entries = [
                AuditEntry(
                    request_id=rid,
                    requester=who,
                    role=role,
                    context=context,
                    action=REVIEW_ACTION,
                    doc_id=review.doc_id,
                    decision=review.verdict.value,
                    rule=None,
                    policy_version=snap.policy_version if snap is not None else NO_POLICY,
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

    def _checked(self, db: Database, review: _Review) -> LabelRecord:
        """The label a verdict applies to, in a state that verdict can take."""
        if review.edited is not None:
            if review.verdict is not ReviewVerdict.APPROVE:
                raise ValidationFailed(["an edited label can only be approved"])
            if review.edited.doc_id != review.doc_id:
                named = review.edited.doc_id
                raise ValidationFailed([f"the edited label names {named!r}, not {review.doc_id!r}"])
        if review.verdict is ReviewVerdict.APPROVE:
            if review.edited is not None:  # an edit is of a proposal, never of a revoked label
                return self._pending(db, review.doc_id, review.version)
            return self._approvable(db, review.doc_id, review.version)
        if review.verdict is ReviewVerdict.REJECT:
            return self._pending(db, review.doc_id, review.version)
        current = read_label(db, review.doc_id)
        if current.state is LabelState.REVOKED:
            raise LabelConflict(
                f"label {review.doc_id!r} is revoked already (version {current.version})"
            )
        if review.version is not None and current.version != review.version:
            raise LabelConflict(
                f"label {review.doc_id!r} changed since version {review.version}: it is now"
                f" version {current.version}; review it again"
            )
        return current


def _reviewer(reviewer: Reviewer) -> tuple[str, str | None, str | None]:
    """Who, in which role and context, for the audit record."""
    if isinstance(reviewer, Requester):
        return reviewer.id, reviewer.active_role, reviewer.active_context
    return reviewer, None, None


def _audit_detail(
    review: _Review, record: LabelRecord, diff: AccessDiff | None, edited: bool, bulk: bool
) -> dict[str, Any]:
    """A verdict's audit detail: who gained and lost access (an approval, a revocation),
    or who the rejected proposal would have let in and shut out (a rejection)."""
    out: dict[str, Any] = {
        "reviewed_version": review.version,
        "state": record.state.value,
        "edited": edited,
        "bulk": bulk,
    }
    if diff is None:
        out["consequence"] = "unknown: the store has no policy"
    elif review.verdict is ReviewVerdict.REJECT:
        out["refused"] = diff.audit_detail()
    else:
        out.update(diff.audit_detail())
    return out
