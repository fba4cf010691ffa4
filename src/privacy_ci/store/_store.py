"""`DocumentStore`: labels with a lifecycle, content, index terms, embeddings, the
assignment relation, the policy, the agents, the change history and the audit log.

One schema and one code path for SQLite (a file, zero setup) and PostgreSQL (a
``postgresql://`` URL, psycopg 3); see `privacy_ci.store._sql`.

Label lifecycle. A label is ``proposed`` (drafted, e.g. by a model: it grants
nothing), ``approved`` (by the Policy Authority: only approved labels reach the
gate) or ``revoked``. Proposing, editing (an edit makes the label ``proposed``
again, so it must be re-approved), approving and revoking each bump the label's
version and append a row, with who and when, to the ``history`` table; so do
changes to assignments, agents, the policy and content.

Freshness. Every write also bumps the store version, in the same transaction.
Everything derived from the store (the compiled approved labels, the agents and
assignments, the ranking indexes) lives in a `Snapshot` keyed by that version,
and every request reads the version first, so a revocation takes effect on the
very next request, in this process or any other sharing the database.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from privacy_ci.conductor import CompiledLabels, Gate, Label, Policy, Requester
from privacy_ci.conductor._labels import format_validation_error
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.store._audit import (
    COLUMNS_SQL,
    GENESIS,
    AuditEntry,
    AuditRecord,
    AuditReport,
    parse_head,
    verify_records,
)
from privacy_ci.store._ranking import BM25Ranker, Embedder, EmbeddingRanker, tokenize
from privacy_ci.store._sql import SCHEMA_VERSION, Database, StoreError, schema_statements

RANKER_CACHE_SIZE = 256


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


class UnknownAgent(PrivacyCIError):
    """An agent id the store's agents table does not hold."""


class RoleNotHeld(PrivacyCIError):
    """A role an agent claims but does not hold according to the store."""


def utc_now() -> str:
    """The current time as ISO 8601 UTC with microseconds (how the store writes times)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


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


def _label_record(row: tuple[Any, ...]) -> LabelRecord:
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


class DocumentStore:
    """Labels, content, embeddings, assignments, policy, agents and audit in one database.

    Args:
        url: ``postgresql://...``, ``sqlite:///FILE`` or a plain file path
            (``sqlite:///:memory:`` for a private in-memory store).
        create: create the tables when they are missing (idempotent).
        readonly: open an existing store for reading only (`create` is ignored):
            nothing is created or changed, and every write fails. For read-only
            commands, so that a mistyped path is an error and not a new store.

    Raises:
        StoreError: the database cannot be opened or has another schema version;
            with `readonly`, also: there is no store there ("no store at PATH") or
            the database is not a privacy-ci store.
    """

    def __init__(self, url: str | Path, *, create: bool = True, readonly: bool = False) -> None:
        self.db = Database(url, readonly=readonly)
        self.url = self.db.url
        self._snapshot: Snapshot | None = None
        self._snapshot_lock = threading.Lock()
        if readonly or create:
            try:
                self._check_store() if readonly else self.init_schema()
            except BaseException:
                self.db.close()
                raise
        self.audit = AuditLog(self)

    @property
    def engine(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.db.engine

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> DocumentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema and version -----------------------------------------------------------
    def init_schema(self) -> None:
        """Create every table, index and trigger if the store is new; check its version.

        An initialised store is left as it is (its DDL is not re-run on every open).

        Raises:
            StoreError: the store was written by another schema version.
        """
        statements = schema_statements(self.db.dialect)
        with self.db.write() as db:
            db.run_script(statements[:1])  # the meta table
            found = db.query_one("SELECT value FROM meta WHERE key = 'schema_version'")
            if found is None:
                db.run_script(statements[1:])
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
                )
                db.execute("INSERT INTO store_version (id, version) VALUES (1, 0)")
                found = (SCHEMA_VERSION,)
        if found[0] != SCHEMA_VERSION:
            raise StoreError(
                f"store {self.db.name} has schema version {found[0]!r};"
                f" this privacy-ci reads version {SCHEMA_VERSION}"
            )

    def _check_store(self) -> None:
        """Refuse a database that holds no privacy-ci store (read-only opening)."""
        try:
            found = self.db.query_one("SELECT value FROM meta WHERE key = 'schema_version'")
        except StoreError as exc:  # no meta table, or not a database at all
            raise StoreError(f"{self.db.name} is not a privacy-ci store ({exc})") from None
        if found is None:
            raise StoreError(f"{self.db.name} is not a privacy-ci store (no schema version)")
        if found[0] != SCHEMA_VERSION:
            raise StoreError(
                f"store {self.db.name} has schema version {found[0]!r};"
                f" this privacy-ci reads version {SCHEMA_VERSION}"
            )

    def version(self) -> int:
        """The store version: bumped by every write except audit appends."""
        row = self.db.query_one("SELECT version FROM store_version WHERE id = 1")
        if row is None:
            raise StoreError(f"store {self.db.name} is not initialised: run privacy-ci store init")
        return int(row[0])

    def _changed(
        self,
        db: Database,
        actor: str,
        action: str,
        kind: str,
        target: str,
        detail: Mapping[str, Any],
    ) -> None:
        db.execute("UPDATE store_version SET version = version + 1 WHERE id = 1")
        db.execute(
            "INSERT INTO history (at, actor, action, target_kind, target, detail)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (utc_now(), _actor(actor), action, kind, target, _json(dict(detail))),
        )

    @contextmanager
    def reading(self) -> Iterator[DocumentStore]:
        """A consistent read snapshot for several reads (see `Database.read`)."""
        with self.db.read():
            yield self

    # -- policy -----------------------------------------------------------------------
    def set_policy(self, policy: Policy, by: str) -> None:
        """Install the Policy Authority's policy (replacing any previous one)."""
        body = _json(policy.model_dump(mode="json"))
        with self.db.write() as db:
            db.execute(
                "INSERT INTO policy (id, body, version, updated_by, updated_at)"
                " VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body,"
                " version = excluded.version, updated_by = excluded.updated_by,"
                " updated_at = excluded.updated_at",
                (body, policy.version, _actor(by), utc_now()),
            )
            self._changed(db, by, "set_policy", "policy", policy.name, {"version": policy.version})

    def policy(self) -> Policy | None:
        """The installed policy, or None."""
        row = self.db.query_one("SELECT body FROM policy WHERE id = 1")
        return None if row is None else Policy.model_validate(json.loads(row[0]))

    # -- agents and assignments -------------------------------------------------------
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
            self._changed(db, by, "put_agent", "agent", agent_id, {"roles": dict(roles)})

    def agents(self) -> dict[str, AgentRecord]:
        """Every agent with the roles it holds, by id."""
        with self.db.read() as db:
            return self._agents(db)

    @staticmethod
    def _agents(db: Database) -> dict[str, AgentRecord]:
        roles: dict[str, dict[str, str]] = {}
        for agent_id, role, ctx in db.query("SELECT agent_id, role, context FROM agent_roles"):
            roles.setdefault(agent_id, {})[role] = ctx
        return {
            agent_id: AgentRecord(agent_id, name, roles.get(agent_id, {}), description)
            for agent_id, name, description in db.query(
                "SELECT agent_id, name, description FROM agents ORDER BY agent_id"
            )
        }

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
            self._changed(
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
            self._changed(
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
            return self._assignments(db)

    @staticmethod
    def _assignments(db: Database) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for agent_id, subject in db.query("SELECT agent_id, subject_id FROM assignments"):
            out.setdefault(agent_id, set()).add(subject)
        return {k: frozenset(v) for k, v in out.items()}

    # -- labels -----------------------------------------------------------------------
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
                (label.doc_id, _json(body), version, _actor(by), utc_now()),
            )
            action = "propose" if row is None else "edit"
            self._changed(
                db,
                by,
                action,
                "label",
                label.doc_id,
                {"version": version, "state": "proposed", "label": body, "note": note},
            )
            return self._label(db, label.doc_id)

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
            current = self._label(db, doc_id)
            if current.state is state:
                return current
            if state is LabelState.APPROVED and current.label is None:
                raise ValidationFailed([f"label {doc_id!r} cannot be approved:", *current.errors])
            version = current.version + 1
            db.execute(
                "UPDATE labels SET state = ?, version = ?, updated_by = ?, updated_at = ?"
                " WHERE doc_id = ?",
                (state.value, version, _actor(by), utc_now(), doc_id),
            )
            action = "approve" if state is LabelState.APPROVED else "revoke"
            self._changed(
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
            return self._label(db, doc_id)

    def label(self, doc_id: str) -> LabelRecord:
        """The stored label of `doc_id`, in any state.

        Raises:
            UnknownDocument: no label with that id.
        """
        return self._label(self.db, doc_id)

    @staticmethod
    def _label(db: Database, doc_id: str) -> LabelRecord:
        row = db.query_one(
            "SELECT doc_id, body, state, version, updated_by, updated_at FROM labels"
            " WHERE doc_id = ?",
            (doc_id,),
        )
        if row is None:
            raise UnknownDocument([doc_id])
        return _label_record(row)

    def labels(self, state: LabelState | str | None = None) -> list[LabelRecord]:
        """Every label, or those in one lifecycle state.

        Args:
            state: ``proposed``, ``approved`` or ``revoked`` (None: all).

        Returns:
            The records, ordered by document id.
        """
        sql = "SELECT doc_id, body, state, version, updated_by, updated_at FROM labels"
        params: tuple[Any, ...] = ()
        if state is not None:
            sql += " WHERE state = ?"
            params = (LabelState(state).value,)
        return [_label_record(r) for r in self.db.query(sql + " ORDER BY doc_id", params)]

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
            "SELECT doc_id, body, state, version, updated_by, updated_at FROM labels"
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
            out[row[0]] = prior if same and prior is not None else _label_record(row)
        return out

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

    # -- content, index terms and embeddings ------------------------------------------
    def put_document(self, doc_id: str, content: str, by: str) -> None:
        """Store a document's content and its index terms (tokenized now, once).

        Args:
            doc_id: the document.
            content: its text (read again only by the authorized fetch).
            by: who stores it.
        """
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        terms = _json(tokenize(content))
        with self.db.write() as db:
            db.execute(
                "INSERT INTO documents (doc_id, content, content_sha256) VALUES (?, ?, ?)"
                " ON CONFLICT (doc_id) DO UPDATE SET content = excluded.content,"
                " content_sha256 = excluded.content_sha256",
                (doc_id, content, digest),
            )
            db.execute(
                "INSERT INTO doc_terms (doc_id, terms) VALUES (?, ?)"
                " ON CONFLICT (doc_id) DO UPDATE SET terms = excluded.terms",
                (doc_id, terms),
            )
            self._changed(db, by, "put_document", "document", doc_id, {"sha256": digest})

    def fetch_content(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Read document content: the authorized fetch of the retrieval path.

        Args:
            doc_ids: the documents to read (only ones the gate permitted).

        Returns:
            doc_id -> content (ids without content are absent).
        """
        if not doc_ids:
            return {}
        rows = self.db.query(
            "SELECT doc_id, content FROM documents"
            f" WHERE doc_id IN ({Database.placeholders(len(doc_ids))})",
            list(doc_ids),
        )
        return {doc_id: content for doc_id, content in rows}

    def put_embedding(self, doc_id: str, model: str, vector: npt.ArrayLike) -> None:
        """Store a document's vector in the space `model` (float32)."""
        vec = np.asarray(vector, dtype=np.float32).ravel()
        with self.db.write() as db:
            db.execute(
                "INSERT INTO embeddings (doc_id, model, dim, vector) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (doc_id, model) DO UPDATE SET dim = excluded.dim,"
                " vector = excluded.vector",
                (doc_id, model, int(vec.size), vec.tobytes()),
            )
            db.execute("UPDATE store_version SET version = version + 1 WHERE id = 1")

    def embed_documents(self, embedder: Embedder, batch: int = 64) -> int:
        """Compute and store every document's vector with `embedder` (an ingest step).

        Returns:
            How many documents were embedded.
        """
        ids = [r[0] for r in self.db.query("SELECT doc_id FROM documents ORDER BY doc_id")]
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            content = self.fetch_content(chunk)
            vectors = embedder.embed([content[d] for d in chunk])
            for doc_id, vec in zip(chunk, vectors, strict=True):
                self.put_embedding(doc_id, embedder.model, vec)
        return len(ids)

    def embeddings(self, model: str, doc_ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The stored vectors of `doc_ids` in the space `model`."""
        if not doc_ids:
            return {}
        rows = self.db.query(
            "SELECT doc_id, vector FROM embeddings WHERE model = ?"
            f" AND doc_id IN ({Database.placeholders(len(doc_ids))})",
            [model, *doc_ids],
        )
        return {d: np.frombuffer(bytes(v), dtype=np.float32) for d, v in rows}

    def embedding_ranker(self, authorized: Sequence[str], embedder: Embedder) -> EmbeddingRanker:
        """A cosine ranker over the authorized documents' stored vectors."""
        return EmbeddingRanker(authorized, self.embeddings(embedder.model, authorized), embedder)

    # -- snapshot ---------------------------------------------------------------------
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
            snap = self._load_snapshot()
            self._snapshot = snap
            return snap

    def _load_snapshot(self) -> Snapshot:
        with self.db.read() as db:
            row = db.query_one("SELECT version FROM store_version WHERE id = 1")
            version = int(row[0]) if row else 0
            prow = db.query_one("SELECT body FROM policy WHERE id = 1")
            if prow is None:
                raise StoreError(
                    f"store {self.db.name} has no policy: load one first"
                    " (privacy-ci store load-riverside, or DocumentStore.set_policy)"
                )
            policy = Policy.model_validate(json.loads(prow[0]))
            labels = {
                r[0]: _label_record(r)
                for r in db.query(
                    "SELECT doc_id, body, state, version, updated_by, updated_at FROM labels"
                    " ORDER BY doc_id"
                )
            }
            agents = self._agents(db)
            assignments = self._assignments(db)
            terms = {
                d: tuple(json.loads(t)) for d, t in db.query("SELECT doc_id, terms FROM doc_terms")
            }
        gate = Gate(policy)
        approved = tuple(d for d, rec in labels.items() if rec.state is LabelState.APPROVED)
        compiled = gate.compile([labels[d].body for d in approved])
        return Snapshot(
            version, policy, gate, labels, approved, compiled, agents, assignments, terms
        )

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for health and status output)."""
        out = {}
        for table in ("labels", "documents", "agents", "assignments", "audit", "history"):
            row = self.db.query_one(f"SELECT COUNT(*) FROM {table}")
            out[table] = int(row[0]) if row else 0
        return out


def _actor(by: str) -> str:
    actor = (by or "").strip()
    if not actor:
        raise ValidationFailed(["every change must name who makes it (by=...)"])
    return actor


class AuditLog:
    """The store's append-only, hash-chained decision log (see `privacy_ci.store._audit`).

    Args:
        store: the store whose ``audit`` table this is.
    """

    def __init__(self, store: DocumentStore) -> None:
        self.store = store

    def append(self, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append decisions as one transaction, chained after the current head.

        Returns:
            The sealed records, with sequence numbers and hashes.
        """
        if not entries:
            return []
        with self.store.db.write() as db:
            head = db.query_one("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
            seq, prev = (int(head[0]), str(head[1])) if head else (0, GENESIS)
            at = utc_now()
            records = []
            for entry in entries:
                seq += 1
                record = AuditRecord.seal(seq, at, entry, prev)
                prev = record.hash
                records.append(record)
            db.executemany(
                f"INSERT INTO audit ({COLUMNS_SQL}) VALUES ({Database.placeholders(17)})",
                [r.row() for r in records],
            )
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('audit_head', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (f"{seq}:{prev}",),
            )
        return records

    def records(self, after: int = 0, limit: int | None = None) -> list[AuditRecord]:
        """Stored records in sequence order, typed (see `AuditRecord.from_row`).

        Args:
            after: only records with a larger sequence number.
            limit: at most this many.

        Returns:
            The records.

        Raises:
            StoreError: a stored value has the wrong type (use `verify` to locate it).
        """
        sql = f"SELECT {COLUMNS_SQL} FROM audit WHERE seq > ? ORDER BY seq"
        params: list[Any] = [after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [AuditRecord.from_row(r) for r in self.store.db.query(sql, params)]

    def iter_records(self, batch: int = 5000) -> Iterable[AuditRecord]:
        """Every record in sequence order, read in batches (typed, as `records`)."""
        after = 0
        while True:
            chunk = self.records(after, batch)  # a retyped seq raises here, typed
            yield from chunk
            if len(chunk) < batch:
                return
            after = chunk[-1].seq

    def raw_rows(self, batch: int = 5000) -> Generator[tuple[Any, ...], None, None]:
        """Every stored row in ``seq`` order, values exactly as stored (for `verify`).

        Call inside ``store.db.read()`` and close the iterator before it ends.
        """
        return self.store.db.stream(f"SELECT {COLUMNS_SQL} FROM audit ORDER BY seq", (), batch)

    def recorded_head(self) -> tuple[int, str] | None:
        """The head (seq, hash) written to the meta table with the last append.

        Raises:
            StoreError: the stored head is not ``SEQ:HASH`` (it was changed).
        """
        row = self.store.db.query_one("SELECT value FROM meta WHERE key = 'audit_head'")
        if row is None:
            return None
        head = parse_head(row[0]) if isinstance(row[0], str) else None
        if head is None:
            raise StoreError(
                f"the audit log's recorded head is {row[0]!r}, not SEQ:HASH"
                " (run privacy-ci audit verify)"
            )
        return head

    def verify(self, expect_head: str | None = None) -> AuditReport:
        """Re-compute the hash chain over the whole log, from the rows as stored.

        Args:
            expect_head: a head hash kept outside the database, which the log must end with.

        Returns:
            The report; ``first_bad_seq`` names the first edited, deleted, reordered,
            inserted or retyped record.
        """
        with self.store.db.read() as db:
            row = db.query_one("SELECT value FROM meta WHERE key = 'audit_head'")
            # the stored text goes to the verifier unparsed: a garbled head is reported
            head: tuple[int, str] | str = (0, GENESIS) if row is None else str(row[0])
            with closing(self.raw_rows()) as rows:
                return verify_records(rows, recorded_head=head, expect_head=expect_head)
