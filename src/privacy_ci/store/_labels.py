"""The store's labels and their lifecycle: proposed, approved, revoked.

A label is ``proposed`` (drafted, e.g. by a model: it grants nothing), ``approved``
(by the Policy Authority: only approved labels reach the gate) or ``revoked``.
Proposing, editing (an edit makes the label ``proposed`` again, so it must be
re-approved), approving and revoking each bump the label's version and record
the change, with who and when, in the history.
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
    body = json.loads(body_text)
    label: Label | None = None
    errors: tuple[str, ...] = ()
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
        if not isinstance(label, Label):
            try:
                label = Label.model_validate(label)
            except ValidationError as exc:
                raise ValidationFailed(
                    format_validation_error("label", "proposed label", exc)
                ) from None
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

    def approve_label(self, doc_id: str, by: str, note: str = "") -> LabelRecord:
        """Approve a label (the Policy Authority's act): from now on it grants access.

        Raises:
            UnknownDocument: no label with that id.
            ValidationFailed: the stored label does not validate.
        """
        return self._set_state(doc_id, LabelState.APPROVED, by, note)

    def revoke_label(self, doc_id: str, by: str, note: str = "") -> LabelRecord:
        """Revoke a label: the document is denied from the next request on.

        Raises:
            UnknownDocument: no label with that id.
        """
        return self._set_state(doc_id, LabelState.REVOKED, by, note)

    def _set_state(self, doc_id: str, state: LabelState, by: str, note: str) -> LabelRecord:
        with self.db.write() as db:
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

    def read_labels(
        self, doc_ids: Sequence[str], known: Mapping[str, LabelRecord] | None = None
    ) -> dict[str, LabelRecord]:
        """The current stored labels of `doc_ids` (missing ids are absent).

        Args:
            doc_ids: the documents.
            known: records already parsed (e.g. a snapshot's); one whose version
                and state match the stored row is reused instead of re-parsed.
        """
        if not doc_ids:
            return {}
        rows = self.db.query(
            f"SELECT {LABEL_COLUMNS_SQL} FROM labels"
            f" WHERE doc_id IN ({Database.placeholders(len(doc_ids))})",
            list(doc_ids),
        )
        out = {}
        for row in rows:
            prior = known.get(row[0]) if known is not None else None
            same = (
                prior is not None
                and prior.version == int(row[3])
                and prior.state.value == row[2]
                and json.loads(row[1]) == prior.body
            )
            out[row[0]] = prior if same and prior is not None else label_record(row)
        return out
