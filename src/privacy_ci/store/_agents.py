"""The store's agents: who can make requests, and the roles (with contexts) each holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.store._base import StoreBase
from privacy_ci.store._history import record_change
from privacy_ci.store._sql import Database


class UnknownAgent(PrivacyCIError):
    """An agent id the store's agents table does not hold."""


class RoleNotHeld(PrivacyCIError):
    """A role an agent claims but does not hold according to the store."""


@dataclass(frozen=True)
class AgentRecord:
    """An agent and the roles it holds (role -> the context it acts in with that role)."""

    agent_id: str
    name: str
    roles: Mapping[str, str]
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "name": self.name,
            "roles": dict(self.roles),
            "description": self.description,
        }


def read_agents(db: Database) -> dict[str, AgentRecord]:
    """Every agent with the roles it holds, by id (inside the caller's transaction)."""
    roles: dict[str, dict[str, str]] = {}
    for agent_id, role, ctx in db.query("SELECT agent_id, role, context FROM agent_roles"):
        roles.setdefault(agent_id, {})[role] = ctx
    return {
        agent_id: AgentRecord(agent_id, name, roles.get(agent_id, {}), description)
        for agent_id, name, description in db.query(
            "SELECT agent_id, name, description FROM agents ORDER BY agent_id"
        )
    }


class AgentsMixin(StoreBase):
    """`DocumentStore`'s agents and their roles."""

    def put_agent(
        self,
        agent_id: str,
        name: str,
        roles: Mapping[str, str],
        by: str,
        description: str = "",
    ) -> None:
        """Create or replace an agent and the roles it holds.

        Args:
            agent_id: the agent's identifier (a token's ``sub``).
            name: display name.
            roles: role -> the context the agent acts in with that role.
            by: who makes the change.
            description: free text.
        """
        if not agent_id.strip():
            raise ValidationFailed(["agent id must not be empty"])
        with self.db.write() as db:
            db.execute(
                "INSERT INTO agents (agent_id, name, description) VALUES (?, ?, ?)"
                " ON CONFLICT (agent_id) DO UPDATE SET name = excluded.name,"
                " description = excluded.description",
                (agent_id, name, description),
            )
            db.execute("DELETE FROM agent_roles WHERE agent_id = ?", (agent_id,))
            db.executemany(
                "INSERT INTO agent_roles (agent_id, role, context) VALUES (?, ?, ?)",
                [(agent_id, role, ctx) for role, ctx in sorted(roles.items())],
            )
            record_change(db, by, "put_agent", "agent", agent_id, {"roles": dict(roles)})

    def agents(self) -> dict[str, AgentRecord]:
        """Every agent with the roles it holds, by id."""
        with self.db.read() as db:
            return read_agents(db)
