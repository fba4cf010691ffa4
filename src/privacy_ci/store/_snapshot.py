"""`Snapshot`: everything a request needs from the store, read at one store version.

Every write bumps the store version in its transaction; everything derived from
the store (the compiled approved labels, the agents and assignments, the ranking
indexes) lives in a `Snapshot` keyed by that version, and every request reads the
version first, so a revocation takes effect on the very next request, in this
process or any other sharing the database.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from privacy_ci.conductor import CompiledLabels, Gate, Policy, Requester
from privacy_ci.store._agents import AgentRecord, RoleNotHeld, UnknownAgent, read_agents
from privacy_ci.store._assignments import read_assignments
from privacy_ci.store._base import StoreBase
from privacy_ci.store._labels import LABEL_COLUMNS_SQL, LabelRecord, LabelState, label_record
from privacy_ci.store._ranking import BM25Ranker
from privacy_ci.store._sql import Database, StoreError

RANKER_CACHE_SIZE = 256


@dataclass
class Snapshot:
    """Everything a request needs from the store, read at one store version.

    Built once per version and shared by every request at that version; never
    mutated except for its cache of ranking indexes (one per authorized set).
    """

    version: int
    policy: Policy
    gate: Gate
    labels: dict[str, LabelRecord]
    approved_ids: tuple[str, ...]
    compiled: CompiledLabels
    agents: dict[str, AgentRecord]
    assignments: dict[str, frozenset[str]]
    terms: dict[str, tuple[str, ...]]
    _rankers: OrderedDict[tuple[str, ...], BM25Ranker] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

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

    def ranker(self, authorized: Sequence[str]) -> BM25Ranker:
        """The BM25 index over exactly `authorized` (built once per set and version)."""
        key = tuple(d for d in authorized if d in self.terms)
        with self._lock:
            hit = self._rankers.get(key)
            if hit is not None:
                self._rankers.move_to_end(key)
                return hit
        built = BM25Ranker(key, self.terms)
        with self._lock:
            self._rankers[key] = built
            while len(self._rankers) > RANKER_CACHE_SIZE:
                self._rankers.popitem(last=False)
        return built


def load_snapshot(db: Database) -> Snapshot:
    """Read a `Snapshot` in one read transaction.

    Raises:
        StoreError: the store has no policy yet.
    """
    with db.read():
        row = db.query_one("SELECT version FROM store_version WHERE id = 1")
        version = int(row[0]) if row else 0
        prow = db.query_one("SELECT body FROM policy WHERE id = 1")
        if prow is None:
            raise StoreError(
                f"store {db.name} has no policy: load one first"
                " (privacy-ci store load-riverside, or DocumentStore.set_policy)"
            )
        policy = Policy.model_validate(json.loads(prow[0]))
        labels = {
            r[0]: label_record(r)
            for r in db.query(f"SELECT {LABEL_COLUMNS_SQL} FROM labels ORDER BY doc_id")
        }
        agents = read_agents(db)
        assignments = read_assignments(db)
        terms = {
            d: tuple(json.loads(t)) for d, t in db.query("SELECT doc_id, terms FROM doc_terms")
        }
    gate = Gate(policy)
    approved = tuple(d for d, rec in labels.items() if rec.state is LabelState.APPROVED)
    compiled = gate.compile([labels[d].body for d in approved])
    return Snapshot(version, policy, gate, labels, approved, compiled, agents, assignments, terms)


class SnapshotMixin(StoreBase):
    """`DocumentStore`'s cached `Snapshot` (rebuilt when the store version moves)."""

    _snapshot: Snapshot | None
    _snapshot_lock: threading.Lock

    def snapshot(self) -> Snapshot:
        """The derived state at the current store version (rebuilt after any write).

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
            snap = load_snapshot(self.db)
            self._snapshot = snap
            return snap
