"""The store's assignment relation: which agent may see which data subject's records."""

from __future__ import annotations

from privacy_ci.errors import PrivacyCIError
from privacy_ci.store._base import StoreBase
from privacy_ci.store._history import record_change
from privacy_ci.store._sql import Database


def read_assignments(db: Database) -> dict[str, frozenset[str]]:
    """The assignment relation, agent id -> subject ids (inside the caller's transaction)."""
    out: dict[str, set[str]] = {}
    for agent_id, subject in db.query("SELECT agent_id, subject_id FROM assignments"):
        out.setdefault(agent_id, set()).add(subject)
    return {k: frozenset(v) for k, v in out.items()}


class AssignmentsMixin(StoreBase):
    """`DocumentStore`'s assignments (need-to-know relationships)."""

    def assign(self, agent_id: str, subject_id: str, by: str, note: str = "") -> None:
        """Record that `agent_id` holds an authorized relationship with `subject_id`.

        Args:
            agent_id: the requester.
            subject_id: the data subject.
            by: who makes the change (recorded in the history).
            note: why.
        """
        with self.db.write() as db:
            db.execute(
                "INSERT INTO assignments (agent_id, subject_id) VALUES (?, ?)"
                " ON CONFLICT (agent_id, subject_id) DO NOTHING",
                (agent_id, subject_id),
            )
            record_change(
                db,
                by,
                "assign",
                "assignment",
                f"{agent_id}->{subject_id}",
                {"note": note} if note else {},
            )

    def unassign(self, agent_id: str, subject_id: str, by: str, note: str = "") -> None:
        """Revoke an assignment; effective on the next request.

        Raises:
            PrivacyCIError: there is no such assignment.
        """
        with self.db.write() as db:
            found = db.query_one(
                "SELECT 1 FROM assignments WHERE agent_id = ? AND subject_id = ?",
                (agent_id, subject_id),
            )
            if found is None:
                raise PrivacyCIError(f"{agent_id!r} is not assigned to {subject_id!r}")
            db.execute(
                "DELETE FROM assignments WHERE agent_id = ? AND subject_id = ?",
                (agent_id, subject_id),
            )
            record_change(
                db,
                by,
                "revoke",
                "assignment",
                f"{agent_id}->{subject_id}",
                {"note": note} if note else {},
            )

    def assignments(self) -> dict[str, frozenset[str]]:
        """The assignment relation: agent id -> subject ids."""
        with self.db.read() as db:
            return read_assignments(db)
