"""The store's labels and their lifecycle: proposed, approved, revoked.

A label is ``proposed`` (drafted, e.g. by a model: it grants nothing), ``approved``
(by the Policy Authority: only approved labels reach the gate) or ``revoked``.
Proposing, editing (an edit makes the label ``proposed`` again, so it must be
re-approved), approving and revoking each bump the label's version and record
the change, with who and when, in the history.

Review. A proposal is approved (as proposed, or edited by the authority first:
`approve_edited_label`) or rejected (`reject_label`): rejecting restores the
label as it stood before the proposal (`label_before_proposal`, read from the
history), or revokes a label that was never anything but proposed. Each of these
takes the version the reviewer saw; a label changed since is refused
(`LabelConflict`), so nobody approves what they did not see.
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

LABEL_COLUMNS_SQL = "doc_id, body, state, version, updated_by, updated_at"


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
    """A stored label with its lifecycle state.

    Args:
        doc_id: the document.
        body: the label's fields as stored (JSON).
        label: the validated label (None when the stored body does not validate).
        errors: why it does not validate.
        state: proposed, approved or revoked.
        version: bumped by every change (edit, approval, revocation).
        updated_by / updated_at: who made the last change, and when.
    """

    doc_id: str
    body: dict[str, Any]
    label: Label | None
    errors: tuple[str, ...]
    state: LabelState
    version: int
    updated_by: str
    updated_at: str

    @property
    def title(self) -> str:
        return str(self.body.get("title", ""))

    @property
    def approved(self) -> bool:
        return self.state is LabelState.APPROVED and self.label is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "state": self.state.value,
            "version": self.version,
            "updated_by": self.updated_by,
            "updated_at": self.updated_at,
            "label": self.body,
            "errors": list(self.errors),
        }


def label_record(row: tuple[Any, ...]) -> LabelRecord:
    """The record a ``labels`` row holds (columns as in `LABEL_COLUMNS_SQL`)."""
    doc_id, body_text, state, version, updated_by, updated_at = row
    label: Label | None = None
    errors: tuple[str, ...] = ()
    try:
        body = json.loads(body_text)
    except ValueError as exc:  # a row edited outside the store: an invalid label, denied
        body = {}
        errors = (f"store: label {doc_id!r}: the stored body is not JSON ({exc})",)
    if not errors:
        try:
            label = Label.model_validate(body)
        except ValidationError as exc:
            errors = tuple(format_validation_error("store", f"label {doc_id!r}", exc))
    return LabelRecord(
        doc_id, body, label, errors, LabelState(state), int(version), updated_by, updated_at
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
    """`DocumentStore`'s labels and their lifecycle."""

    def propose_label(
        self, label: Label | Mapping[str, Any], by: str, note: str = ""
    ) -> LabelRecord:
        """Add a label, or edit one, in state ``proposed`` (it grants nothing yet).

        Editing an approved label suspends it until it is approved again.

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
        body = label.model_dump(mode="json")
        with self.db.write() as db:
            row = db.query_one("SELECT version FROM labels WHERE doc_id = ?", (label.doc_id,))
            version = 1 if row is None else int(row[0]) + 1
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

    def approve_label(
        self, doc_id: str, by: str, note: str = "", *, version: int | None = None
    ) -> LabelRecord:
        """Approve a label (the Policy Authority's act): from now on it grants access.

        Args:
            doc_id: the document.
            by: who approves.
            note: why.
            version: the proposal the reviewer saw: the label must still be
                ``proposed`` at exactly this version (None: approve whatever is stored).

        Raises:
            UnknownDocument: no label with that id.
            ValidationFailed: the stored label does not validate.
            LabelConflict: `version` is given and the label is not that proposal.
        """
        return self._set_state(doc_id, LabelState.APPROVED, by, note, version)

    def approve_edited_label(
        self, label: Label | Mapping[str, Any], by: str, note: str = "", *, version: int
    ) -> LabelRecord:
        """Edit a proposal and approve the edit, in one transaction (the history shows
        both: an ``edit`` and an ``approve`` by the reviewer).

        Args:
            label: the label as the reviewer edited it (its ``doc_id`` names the proposal).
            by: who edits and approves.
            note: why.
            version: the proposal the reviewer edited (it must still be ``proposed``
                at this version).

        Raises:
            UnknownDocument: no label with that id.
            ValidationFailed: the edited label does not validate.
            LabelConflict: the label is not that proposal any more.
        """
        checked = self._checked_label(label, "edited label")
        with self.db.write() as db:
            current = self._pending(db, checked.doc_id, version)
            if checked.model_dump(mode="json") != current.body:  # an unchanged edit is no edit
                self.propose_label(checked, by, note)
            return self._set_state(checked.doc_id, LabelState.APPROVED, by, note)

    def reject_label(
        self, doc_id: str, by: str, note: str = "", *, version: int | None = None
    ) -> LabelRecord:
        """Reject a proposal: what it proposed grants nothing, now or later.

        The label returns to what it was before the proposal (the approved or
        revoked version, body and state, `label_before_proposal`); a label that was
        never anything but proposed is revoked. Either way the change is a
        ``reject`` in the history, which keeps the rejected proposal.

        Args:
            doc_id: the document.
            by: who rejects.
            note: why.
            version: the proposal the reviewer saw (None: the current one).

        Raises:
            UnknownDocument: no label with that id.
            LabelConflict: the label is not awaiting review, or not at `version`.
        """
        with self.db.write() as db:
            current = self._pending(db, doc_id, version)
            prior = label_before_proposal(db, doc_id)
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
                    doc_id,
                ),
            )
            record_change(
                db,
                by,
                "reject",
                "label",
                doc_id,
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
            return read_label(db, doc_id)

    def prior_label(self, doc_id: str) -> PriorLabel | None:
        """The label as it stood before the proposal awaiting review
        (`label_before_proposal`).

        Returns:
            None when the label is not proposed, or was never anything else.
        """
        with self.db.read() as db:
            return label_before_proposal(db, doc_id)

    def revoke_label(self, doc_id: str, by: str, note: str = "") -> LabelRecord:
        """Revoke a label: the document is denied from the next request on.

        Raises:
            UnknownDocument: no label with that id.
        """
        return self._set_state(doc_id, LabelState.REVOKED, by, note)

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
        if version is not None and current.version != version:
            raise LabelConflict(
                f"label {doc_id!r} changed since version {version}: it is now version"
                f" {current.version}; review it again"
            )
        return current

    def _set_state(
        self, doc_id: str, state: LabelState, by: str, note: str, version: int | None = None
    ) -> LabelRecord:
        with self.db.write() as db:
            if version is not None:
                self._pending(db, doc_id, version)
            current = read_label(db, doc_id)
            if current.state is state:
                return current
            if state is LabelState.APPROVED and current.label is None:
                raise ValidationFailed([f"label {doc_id!r} cannot be approved:", *current.errors])
            version = current.version + 1
            db.execute(
                "UPDATE labels SET state = ?, version = ?, updated_by = ?, updated_at = ?"
                " WHERE doc_id = ?",
                (state.value, version, require_actor(by), utc_now(), doc_id),
            )
            action = "approve" if state is LabelState.APPROVED else "revoke"
            record_change(
                db,
                by,
                action,
                "label",
                doc_id,
                {
                    "version": version,
                    "state": state.value,
                    "from": current.state.value,
                    "note": note,
                },
            )
            return read_label(db, doc_id)

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
