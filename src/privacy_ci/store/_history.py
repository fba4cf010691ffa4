"""The change history: who changed which label, assignment, agent, policy or document.

Every write of the store goes through `record_change`, which bumps the store
version and appends a ``history`` row in the writer's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from privacy_ci.errors import ValidationFailed
from privacy_ci.store._base import StoreBase
from privacy_ci.store._sql import Database, canonical_json, utc_now


@dataclass(frozen=True)
class HistoryEntry:
    """One recorded change: who did what to which label, assignment, agent or policy."""

    seq: int
    at: str
    actor: str
    action: str
    target_kind: str
    target: str
    detail: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "target_kind": self.target_kind,
            "target": self.target,
            "detail": self.detail,
        }


def require_actor(by: str) -> str:
    """Who makes a change, stripped.

    Raises:
        ValidationFailed: `by` is empty.
    """
    actor = (by or "").strip()
    if not actor:
        raise ValidationFailed(["every change must name who makes it (by=...)"])
    return actor


def record_change(
    db: Database,
    actor: str,
    action: str,
    kind: str,
    target: str,
    detail: Mapping[str, Any],
) -> None:
    """Bump the store version and append a history row (call inside ``db.write()``)."""
    db.bump_version()
    db.execute(
        "INSERT INTO history (at, actor, action, target_kind, target, detail)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (utc_now(), require_actor(actor), action, kind, target, canonical_json(dict(detail))),
    )


class HistoryMixin(StoreBase):
    """`DocumentStore`'s reading of the change history."""

    def history(self, target: str | None = None, kind: str | None = None) -> list[HistoryEntry]:
        """Recorded changes, oldest first.

        Args:
            target: only changes to this document id or ``agent->subject`` pair.
            kind: only ``label``, ``assignment``, ``agent``, ``policy`` or ``document``.

        Returns:
            The history entries.
        """
        sql = "SELECT seq, at, actor, action, target_kind, target, detail FROM history"
        where, params = [], []
        if target is not None:
            where.append("target = ?")
            params.append(target)
        if kind is not None:
            where.append("target_kind = ?")
            params.append(kind)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.db.query(sql + " ORDER BY seq", params)
        return [
            HistoryEntry(int(s), at, actor, action, k, t, json.loads(d))
            for s, at, actor, action, k, t, d in rows
        ]
