"""The store's policy: the Policy Authority's one installed `Policy`."""

from __future__ import annotations

import json

from privacy_ci.conductor import Policy
from privacy_ci.store._base import StoreBase
from privacy_ci.store._history import record_change, require_actor
from privacy_ci.store._sql import canonical_json, utc_now


class PolicyMixin(StoreBase):
    """`DocumentStore`'s policy row."""

    def set_policy(self, policy: Policy, by: str) -> None:
        """Install the Policy Authority's policy (replacing any previous one)."""
        body = canonical_json(policy.model_dump(mode="json"))
        with self.db.write() as db:
            db.execute(
                "INSERT INTO policy (id, body, version, updated_by, updated_at)"
                " VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body,"
                " version = excluded.version, updated_by = excluded.updated_by,"
                " updated_at = excluded.updated_at",
                (body, policy.version, require_actor(by), utc_now()),
            )
            record_change(db, by, "set_policy", "policy", policy.name, {"version": policy.version})

    def policy(self) -> Policy | None:
        """The installed policy, or None."""
        row = self.db.query_one("SELECT body FROM policy WHERE id = 1")
        return None if row is None else Policy.model_validate(json.loads(row[0]))
