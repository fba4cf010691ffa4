"""The store's labels and their lifecycle: proposed, approved, revoked.

A label is ``proposed`` (drafted, e.g. by a model, or a change awaiting review),
``approved`` (by the Policy Authority) or ``revoked``. What the gate applies is the
label **in force**: the body last approved (``labels.in_force``), kept while a
change to it awaits review, cleared by a revocation. So a proposal never changes
access: a new label grants nothing until it is approved, and a change to an
approved label leaves the approved one in force until the change is approved (it
then replaces it) or rejected (the label returns to what it was).

Proposing, editing, approving, rejecting and revoking each bump the label's
version and record the change, with who and when, in the history. The verdicts
(approve, reject, revoke) are taken through one guarded path,
`privacy_ci.store._review.ReviewMixin`, which checks the version the reviewer
saw, applies the widening rule and writes an audit record; this module holds the
row operations it is made of (`LabelRows`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from privacy_ci.conductor import Label
from privacy_ci.conductor._labels import format_validation_error
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.store._base import StoreBase
from privacy_ci.store._history import record_change, require_actor
from privacy_ci.store._sql import Database, canonical_json, utc_now

LABEL_COLUMNS_SQL = (
    "doc_id, body, state, version, updated_by, updated_at, in_force, in_force_version"
)


class LabelState(StrEnum):
    """Where a label is in its lifecycle; only ``approved`` labels grant access."""

    PROPOSED = "proposed"
    APPROVED = "approved"
    REVOKED = "revoked"


class LabelConflict(PrivacyCIError):
    """A review that no longer applies: the label changed since the reviewer saw that
    version, or it is not awaiting review (HTTP 409)."""


class UnknownDocument(PrivacyCIError):
    """A document id the store does not hold.

    Args:
        doc_ids: the unknown ids.
    """

    def __init__(self, doc_ids: Sequence[str]) -> None:
        self.doc_ids = list(doc_ids)
        names = ", ".join(repr(d) for d in self.doc_ids)
        noun = "document" if len(self.doc_ids) == 1 else "documents"
        super().__init__(f"unknown {noun} {names}: the store holds no label with that id")


@dataclass(frozen=True)
class LabelRecord:
    """A stored label with its lifecycle state and the label in force.

    Args:
        doc_id: the document.
        body: the label's fields as stored (JSON): the proposal, while one awaits review.
        label: the validated `body` (None when it does not validate).
        errors: why `body` does not validate.
        state: proposed, approved or revoked.
        version: bumped by every change (proposal, edit, approval, rejection, revocation).
        updated_by / updated_at: who made the last change, and when.
        in_force_body: the body the gate applies (the last approved one; None: nothing
            is in force, the document is granted to nobody).
        in_force: the validated `in_force_body` (None when absent or invalid).
        in_force_version: the version at which `in_force_body` was approved.
        in_force_errors: why `in_force_body` does not validate.
    """

    doc_id: str
    body: dict[str, Any]
    label: Label | None
    errors: tuple[str, ...]
    state: LabelState
    version: int
    updated_by: str
    updated_at: str
    in_force_body: dict[str, Any] | None = None
    in_force: Label | None = None
    in_force_version: int | None = None
    in_force_errors: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return str(self.body.get("title", ""))

    @property
    def approved(self) -> bool:
        """Whether a valid label is in force (it may grant access)."""
        return self.in_force is not None

    @property
    def pending(self) -> bool:
        """Whether a proposal awaits review."""
        return self.state is LabelState.PROPOSED

    def as_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "state": self.state.value,
            "version": self.version,
            "updated_by": self.updated_by,
            "updated_at": self.updated_at,
            "label": self.body,
            "errors": list(self.errors),
            "in_force": self.in_force_body,
            "in_force_version": self.in_force_version,
        }


def _parsed(
    doc_id: str, text: str, what: str
) -> tuple[dict[str, Any], Label | None, tuple[str, ...]]:
    """A stored body, its validated label and its errors (a row edited outside the
    store is an invalid label, denied, never a failed request)."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return {}, None, (f"store: label {doc_id!r}: the stored {what} is not JSON ({exc})",)
    if not isinstance(body, dict):
        return {}, None, (f"store: label {doc_id!r}: the stored {what} is not a JSON object",)
    try:
        return body, Label.model_validate(body), ()
    except ValidationError as exc:
        return body, None, tuple(format_validation_error("store", f"label {doc_id!r}", exc))


def label_record(row: tuple[Any, ...]) -> LabelRecord:
    """The record a ``labels`` row holds (columns as in `LABEL_COLUMNS_SQL`)."""
    doc_id, body_text, state, version, updated_by, updated_at, force_text, force_version = row
    body, label, errors = _parsed(doc_id, body_text, "body")
    force_body: dict[str, Any] | None = None
    force: Label | None = None
    force_errors: tuple[str, ...] = ()
    if force_text is not None:
        if force_text == body_text:  # the common case: the approved body is the row's own
            force_body, force, force_errors = body, label, errors
        else:
            force_body, force, force_errors = _parsed(doc_id, force_text, "label in force")
    return LabelRecord(
        doc_id,
        body,
        label,
        errors,
        LabelState(state),
        int(version),
        updated_by,
        updated_at,
        force_body,
        force,
        None if force_version is None else int(force_version),
        force_errors,
    )


def _check_version(current: LabelRecord, version: int | None) -> None:
    if version is not None and current.version != version:
        raise LabelConflict(
            f"label {current.doc_id!r} changed since version {version}: it is now version"
            f" {current.version}; review it again"
        )


def read_label(db: Database, doc_id: str) -> LabelRecord:
    """The stored label of `doc_id` (inside the caller's transaction).

    Raises:
        UnknownDocument: no label with that id.
    """
    row = db.query_one(f"SELECT {LABEL_COLUMNS_SQL} FROM labels WHERE doc_id = ?", (doc_id,))
    if row is None:
        raise UnknownDocument([doc_id])
    return label_record(row)


@dataclass(frozen=True)
class PriorLabel:
    """A label as it stood before the proposal now awaiting review.

    Args:
        body: its fields as stored then.
        label: the validated label (None when that body does not validate).
        state: ``approved`` or ``revoked``.
        version: its version then.
    """

    body: dict[str, Any]
    label: Label | None
    state: LabelState
    version: int

    @property
    def in_force(self) -> Label | None:
        """The label the gate applied before the proposal (None: it granted nothing)."""
        return self.label if self.state is LabelState.APPROVED else None


def _validated(body: dict[str, Any]) -> Label | None:
    try:
        return Label.model_validate(body)
    except ValidationError:
        return None


def label_before_proposal(db: Database, doc_id: str) -> PriorLabel | None:
    """The label of `doc_id` before its current run of proposals, from the history.

    Every change of a label is in the history (proposals and edits with the body,
    approvals and revocations with the state, rejections with what they restored),
    so replaying it gives the last approved or revoked version before the label
    became ``proposed``.

    Returns:
        That version, or None when the label was never anything but proposed.
    """
    rows = db.query(
        "SELECT action, detail FROM history WHERE target_kind = 'label' AND target = ?"
        " ORDER BY seq",
        (doc_id,),
    )
    body: dict[str, Any] | None = None
    state: str | None = None
    version = 0
    prior: PriorLabel | None = None
    for action, detail_text in rows:
        detail = json.loads(detail_text)
        if action in ("propose", "edit"):
            if body is not None and state in (LabelState.APPROVED, LabelState.REVOKED):
                prior = PriorLabel(body, _validated(body), LabelState(state), version)
            elif state is None:
                prior = None
            body = detail.get("label", body)
        elif action == "reject":
            body = detail.get("label", body)
        state = detail.get("state", state)
        version = int(detail.get("version", version))
    return prior if state == LabelState.PROPOSED else None


class LabelsMixin(StoreBase):
    """`DocumentStore`'s labels: proposals, reading, and the row operations of a verdict.

    The verdicts themselves (approve, reject, revoke) are `ReviewMixin`'s: one path
    that checks the reviewed version, the widening rule and writes the audit record.
    """

    def propose_label(
        self, label: Label | Mapping[str, Any], by: str, note: str = ""
    ) -> LabelRecord:
        """Add a label, or propose a change to one, in state ``proposed``.

        A proposal changes no access: a new label grants nothing until it is
        approved, and an approved label stays in force, as approved, until the
        change is approved (then the change is in force) or rejected.

        Args:
            label: the label (validated against the label schema).
            by: who proposes it (e.g. ``model:smollm2`` or a person).
            note: why.

        Returns:
            The stored record.

        Raises:
            ValidationFailed: the label does not validate.
        """
        label = self._checked_label(label, "proposed label")
        with self.db.write() as db:
            return self._propose_row(db, label, by, note)

    def _propose_row(self, db: Database, label: Label, by: str, note: str) -> LabelRecord:
        body = label.model_dump(mode="json")
        row = db.query_one("SELECT version FROM labels WHERE doc_id = ?", (label.doc_id,))
        version = 1 if row is None else int(row[0]) + 1
        # in_force is left as it is: only an approval puts a body in force
        db.execute(
            "INSERT INTO labels (doc_id, body, state, version, updated_by, updated_at)"
            " VALUES (?, ?, 'proposed', ?, ?, ?) ON CONFLICT (doc_id) DO UPDATE SET"
            " body = excluded.body, state = excluded.state, version = excluded.version,"
            " updated_by = excluded.updated_by, updated_at = excluded.updated_at",
            (label.doc_id, canonical_json(body), version, require_actor(by), utc_now()),
        )
        action = "propose" if row is None else "edit"
        record_change(
            db,
            by,
            action,
            "label",
            label.doc_id,
            {"version": version, "state": "proposed", "label": body, "note": note},
        )
        return read_label(db, label.doc_id)

    def prior_label(self, doc_id: str) -> PriorLabel | None:
        """The label as it stood before the proposal awaiting review
        (`label_before_proposal`).

        Returns:
            None when the label is not proposed, or was never anything else.
        """
        with self.db.read() as db:
            return label_before_proposal(db, doc_id)

    @staticmethod
    def _checked_label(label: Label | Mapping[str, Any], what: str) -> Label:
        if isinstance(label, Label):
            return label
        try:
            return Label.model_validate(label)
        except ValidationError as exc:
            raise ValidationFailed(format_validation_error("label", what, exc)) from None

    @staticmethod
    def _pending(db: Database, doc_id: str, version: int | None) -> LabelRecord:
        """The stored label, which must be a proposal (at `version`, when given)."""
        current = read_label(db, doc_id)
        if current.state is not LabelState.PROPOSED:
            raise LabelConflict(
                f"label {doc_id!r} is not awaiting review: it is {current.state.value}"
                f" (version {current.version})"
            )
        _check_version(current, version)
        return current

    @staticmethod
    def _approvable(db: Database, doc_id: str, version: int | None) -> LabelRecord:
        """The stored label, which must be a proposal or a revoked label (at `version`)."""
        current = read_label(db, doc_id)
        if current.state is LabelState.APPROVED:
            raise LabelConflict(
                f"label {doc_id!r} is not awaiting review: it is approved (version"
                f" {current.version}); propose a change to it first"
            )
        _check_version(current, version)
        if current.label is None:
            raise ValidationFailed([f"label {doc_id!r} cannot be approved:", *current.errors])
        return current

    def _approve_row(self, db: Database, current: LabelRecord, by: str, note: str) -> LabelRecord:
        """Put `current`'s body in force (the caller checked it may be approved)."""
        version = current.version + 1
        db.execute(
            "UPDATE labels SET state = 'approved', version = ?, updated_by = ?, updated_at = ?,"
            " in_force = body, in_force_version = ? WHERE doc_id = ?",
            (version, require_actor(by), utc_now(), version, current.doc_id),
        )
        record_change(
            db,
            by,
            "approve",
            "label",
            current.doc_id,
            {"version": version, "state": "approved", "from": current.state.value, "note": note},
        )
        return read_label(db, current.doc_id)

    def _reject_row(self, db: Database, current: LabelRecord, by: str, note: str) -> LabelRecord:
        """Undo the proposal `current`: the label as before it (`label_before_proposal`),
        or revoked when it was never anything but proposed. The label in force is
        untouched: the proposal never was."""
        prior = label_before_proposal(db, current.doc_id)
        body = current.body if prior is None else prior.body
        state = LabelState.REVOKED if prior is None else prior.state
        new_version = current.version + 1
        db.execute(
            "UPDATE labels SET body = ?, state = ?, version = ?, updated_by = ?,"
            " updated_at = ? WHERE doc_id = ?",
            (
                canonical_json(body),
                state.value,
                new_version,
                require_actor(by),
                utc_now(),
                current.doc_id,
            ),
        )
        record_change(
            db,
            by,
            "reject",
            "label",
            current.doc_id,
            {
                "version": new_version,
                "state": state.value,
                "from": current.state.value,
                "rejected_version": current.version,
                "restored_version": None if prior is None else prior.version,
                "label": body,
                "rejected": current.body,
                "note": note,
            },
        )
        return read_label(db, current.doc_id)

    def _revoke_row(self, db: Database, current: LabelRecord, by: str, note: str) -> LabelRecord:
        """Take the label out of force (a proposal awaiting review is dropped with it)."""
        version = current.version + 1
        db.execute(
            "UPDATE labels SET state = 'revoked', version = ?, updated_by = ?, updated_at = ?,"
            " in_force = NULL, in_force_version = NULL WHERE doc_id = ?",
            (version, require_actor(by), utc_now(), current.doc_id),
        )
        record_change(
            db,
            by,
            "revoke",
            "label",
            current.doc_id,
            {"version": version, "state": "revoked", "from": current.state.value, "note": note},
        )
        return read_label(db, current.doc_id)

    def label(self, doc_id: str) -> LabelRecord:
        """The stored label of `doc_id`, in any state.

        Raises:
            UnknownDocument: no label with that id.
        """
        return read_label(self.db, doc_id)

    def labels(self, state: LabelState | str | None = None) -> list[LabelRecord]:
        """Every label, or those in one lifecycle state.

        Args:
            state: ``proposed``, ``approved`` or ``revoked`` (None: all).

        Returns:
            The records, ordered by document id.
        """
        sql = f"SELECT {LABEL_COLUMNS_SQL} FROM labels"
        params: tuple[Any, ...] = ()
        if state is not None:
            sql += " WHERE state = ?"
            params = (LabelState(state).value,)
        return [label_record(r) for r in self.db.query(sql + " ORDER BY doc_id", params)]

    def read_labels(self, doc_ids: Sequence[str]) -> dict[str, LabelRecord]:
        """The current stored labels of `doc_ids` (missing ids are absent)."""
        if not doc_ids:
            return {}
        rows = self.db.query(
            f"SELECT {LABEL_COLUMNS_SQL} FROM labels"
            f" WHERE doc_id IN ({Database.placeholders(len(doc_ids))})",
            list(doc_ids),
        )
        return {row[0]: label_record(row) for row in rows}

    def label_counts(self) -> dict[str, int]:
        """How many labels the store holds: ``in_force`` (a body approved and not revoked,
        what the gate applies), ``proposed`` (awaiting review; a proposal on an
        approved label leaves it in force, so a document can be in both), ``revoked``
        and ``total`` (one per document). Counted in SQL: no label is parsed."""
        row = self.db.query_one(
            "SELECT COUNT(*),"
            " SUM(CASE WHEN in_force IS NOT NULL THEN 1 ELSE 0 END),"
            " SUM(CASE WHEN state = ? THEN 1 ELSE 0 END),"
            " SUM(CASE WHEN state = ? THEN 1 ELSE 0 END) FROM labels",
            (LabelState.PROPOSED.value, LabelState.REVOKED.value),
        )
        total, in_force, proposed, revoked = (int(v or 0) for v in (row or (0, 0, 0, 0)))
        return {"in_force": in_force, "proposed": proposed, "revoked": revoked, "total": total}

    def in_force_ids(self) -> set[str]:
        """The documents with a label in force (granted to whom that label names)."""
        return {
            row[0] for row in self.db.query("SELECT doc_id FROM labels WHERE in_force IS NOT NULL")
        }
