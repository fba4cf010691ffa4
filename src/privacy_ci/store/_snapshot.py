"""`Snapshot`: what a request needs from the store, at one store version.

Every write bumps the store version and appends history rows in its transaction.
A `Snapshot` holds the policy, its gate, the agents and the assignments, and the
store's `AccessIndex` (the access partitions and their postings); every request
reads the version first, and when it moved, `refresh_snapshot` applies only the
history since the last version seen, re-reading only what it names. So a
revocation takes effect on the very next request, in this process or any other
sharing the database, and a write costs in proportion to what it changed: no
whole-store copy is built on the request path.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from privacy_ci.conductor import Gate, Policy, Requester
from privacy_ci.store._agents import AgentRecord, RoleNotHeld, UnknownAgent, read_agents
from privacy_ci.store._assignments import read_assignments
from privacy_ci.store._base import StoreBase
from privacy_ci.store._index import REBUILD_FRACTION, AccessIndex, embeddings_version
from privacy_ci.store._sql import Database


@dataclass(frozen=True)
class Snapshot:
    """The policy, agents and assignments at one store version, and the access index.

    The `index` is shared by consecutive snapshots and moved forward in place
    (under its lock); read it through its lock.
    """

    version: int
    policy: Policy
    gate: Gate
    agents: dict[str, AgentRecord]
    assignments: dict[str, frozenset[str]]
    index: AccessIndex

    @property
    def policy_version(self) -> str:
        return self.policy.version

    def requester(
        self, agent_id: str, role: str | None = None, context: str | None = None
    ) -> Requester:
        """The requester an agent of the store becomes, acting in `role` and `context`.

        The roles held, the context each is held in, and the assignments come from
        the store only: a role or a context the store does not record for this agent
        is refused, so a token minted before a role moved to another context stops
        working at the next request.

        Args:
            agent_id: the agent (a verified identity).
            role: the role acted in (default: the agent's only role).
            context: the context acted in (default: the context the store records
                for that role of that agent; any other is refused).

        Raises:
            UnknownAgent: the store has no such agent.
            RoleNotHeld: the agent does not hold `role`, or not in `context`.
        """
        agent = self.agents.get(agent_id)
        if agent is None:
            raise UnknownAgent(f"unknown agent {agent_id!r}: the store's agents table lacks it")
        if role is None:
            if len(agent.roles) != 1:
                held = ", ".join(sorted(agent.roles)) or "none"
                raise RoleNotHeld(f"agent {agent_id!r} holds roles {held}: name the role acted in")
            role = next(iter(agent.roles))
        if role not in agent.roles:
            held = ", ".join(sorted(agent.roles)) or "none"
            raise RoleNotHeld(
                f"agent {agent_id!r} does not hold role {role!r} (the store records: {held})"
            )
        held_in = agent.roles[role]
        if context is not None and context != held_in:
            raise RoleNotHeld(
                f"agent {agent_id!r} holds role {role!r} in context {held_in!r},"
                f" not in {context!r} (the store records it so)"
            )
        return Requester(
            id=agent_id,
            roles=frozenset(agent.roles),
            active_role=role,
            active_context=held_in,
            assignments=self.assignments.get(agent_id, frozenset()),
        )


def load_snapshot(db: Database) -> Snapshot:
    """Build a `Snapshot` from scratch in one read transaction.

    Raises:
        StoreError: the store has no policy yet.
    """
    with db.read():
        index = AccessIndex.load(db)
        agents = read_agents(db)
        assignments = read_assignments(db)
    return Snapshot(index.version, index.policy, index.gate, agents, assignments, index)


def refresh_snapshot(db: Database, prior: Snapshot) -> Snapshot:
    """Move `prior` to the current store version, applying only the history since it.

    A policy change, or more changed documents than `REBUILD_FRACTION` of the
    store, rebuilds instead.
    """
    index = prior.index
    with db.read():
        row = db.query_one("SELECT version FROM store_version WHERE id = 1")
        version = int(row[0]) if row else 0
        if version == prior.version:
            return prior
        top = db.query_one("SELECT COALESCE(MAX(seq), 0) FROM history")
        seq = int(top[0]) if top else 0
        if seq - index.history_seq > max(1000, REBUILD_FRACTION * len(index.ids)):
            return _rebuilt(db)
        changes = db.query(
            "SELECT target_kind, target FROM history WHERE seq > ? AND seq <= ? ORDER BY seq",
            (index.history_seq, seq),
        )
        kinds = {kind for kind, _ in changes}
        if "policy" in kinds:
            return _rebuilt(db)
        agents, assignments = prior.agents, prior.assignments
        if "agent" in kinds:
            agents = read_agents(db)
        moved = [t for kind, t in changes if kind == "assignment"]
        if moved:
            assignments = dict(assignments)
            named = [t.split("->") for t in moved]
            if all(len(parts) == 2 for parts in named):
                for agent_id in {parts[0] for parts in named}:
                    held = frozenset(
                        r[0]
                        for r in db.query(
                            "SELECT subject_id FROM assignments WHERE agent_id = ?", (agent_id,)
                        )
                    )
                    if held:
                        assignments[agent_id] = held
                    else:
                        assignments.pop(agent_id, None)
            else:  # an id holding "->" makes the target ambiguous: read them all
                assignments = read_assignments(db)
        docs = [t for kind, t in changes if kind in ("label", "document")]
        vectors = embeddings_version(db)
        with index.lock:
            if docs:
                index.apply(db, docs)
            if vectors != index.embeddings_version:
                index.drop_vectors()
                index.embeddings_version = vectors
            index.version, index.history_seq = version, seq
    return Snapshot(version, prior.policy, prior.gate, agents, assignments, index)


def _rebuilt(db: Database) -> Snapshot:
    index = AccessIndex.load(db)
    return Snapshot(
        index.version, index.policy, index.gate, read_agents(db), read_assignments(db), index
    )


class SnapshotMixin(StoreBase):
    """`DocumentStore`'s current `Snapshot` (moved forward when the store version moves)."""

    _snapshot: Snapshot | None
    _snapshot_lock: threading.Lock

    def snapshot(self) -> Snapshot:
        """The state at the current store version (brought up to date after any write).

        Raises:
            StoreError: the store has no policy yet.
        """
        current = self.version()
        snap = self._snapshot
        if snap is not None and snap.version == current:
            return snap
        with self._snapshot_lock:
            snap = self._snapshot
            if snap is not None and snap.version >= current:
                return snap
            try:
                snap = load_snapshot(self.db) if snap is None else refresh_snapshot(self.db, snap)
            except BaseException:
                # a refresh that failed half-way leaves the shared index unknown: rebuild next
                self._snapshot = None
                raise
            self._snapshot = snap
            return snap
