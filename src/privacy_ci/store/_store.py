"""`DocumentStore`: labels with a lifecycle, content, index terms, embeddings, the
assignment relation, the policy, the agents, the change history and the audit log.

One schema and one code path for SQLite (a file, zero setup) and PostgreSQL (a
``postgresql://`` URL, psycopg 3); see `privacy_ci.store._sql`.

Each record kind lives in its own module, as a mixin `DocumentStore` composes:
`_policy` (the policy), `_agents` (agents and their roles), `_assignments` (the
assignment relation), `_labels` (labels and their lifecycle), `_history` (the
change history every write appends to), `_documents` (content, index terms and
embeddings), `_snapshot` (the derived state a request reads), `_review` (the
Policy Authority's review of proposals, with their consequence) and `_sessions`
(the revocation list of signed-out tokens). The audit log
(`_audit_log`, over the chain of `_audit`) needs the database only.

Label lifecycle. A label is ``proposed`` (drafted, e.g. by a model: it grants
nothing), ``approved`` (by the Policy Authority: only approved labels reach the
gate) or ``revoked``. Proposing, editing (an edit makes the label ``proposed``
again, so it must be re-approved), approving and revoking each bump the label's
version and append a row, with who and when, to the ``history`` table; so do
changes to assignments, agents, the policy and content.

Freshness. Every write also bumps the store version, in the same transaction.
What a request needs (the policy, agents, assignments and the access index of
`_index`: access partitions, their postings and aggregates) lives in a `Snapshot`
at that version; every request reads the version first and, when it moved,
applies the history since the last version seen, re-reading only what it names.
So a revocation takes effect on the very next request, in this process or any
other sharing the database, and a write costs what it changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from privacy_ci.store._agents import AgentRecord, AgentsMixin, RoleNotHeld, UnknownAgent
from privacy_ci.store._assignments import AssignmentsMixin
from privacy_ci.store._audit_log import AuditLog
from privacy_ci.store._documents import DocumentsMixin
from privacy_ci.store._history import HistoryEntry, HistoryMixin
from privacy_ci.store._labels import LabelRecord, LabelsMixin, LabelState, UnknownDocument
from privacy_ci.store._policy import PolicyMixin
from privacy_ci.store._review import ReviewMixin
from privacy_ci.store._sessions import SessionsMixin, ensure_sessions_table
from privacy_ci.store._snapshot import Snapshot, SnapshotMixin
from privacy_ci.store._sql import SCHEMA_VERSION, Database, StoreError, schema_statements

# Re-exported: modules importing from here keep working (e.g. store._load).
__all__ = [
    "AgentRecord",
    "AuditLog",
    "DocumentStore",
    "HistoryEntry",
    "LabelRecord",
    "LabelState",
    "RoleNotHeld",
    "Snapshot",
    "UnknownAgent",
    "UnknownDocument",
]


def _upgrade_from_1(db: Database) -> None:
    # Version 1 had no label in force apart from the row's own body and state: an
    # approved row's body is in force, anything else grants nothing (as it did).
    db.execute("ALTER TABLE labels ADD COLUMN in_force TEXT")
    db.execute("ALTER TABLE labels ADD COLUMN in_force_version INTEGER")
    db.execute(
        "UPDATE labels SET in_force = body, in_force_version = version WHERE state = 'approved'"
    )


UPGRADES: dict[str, Callable[[Database], None]] = {"1": _upgrade_from_1}
"""Schema version -> the step that brings it to the next one (applied in order)."""


class DocumentStore(
    ReviewMixin,
    PolicyMixin,
    AgentsMixin,
    AssignmentsMixin,
    LabelsMixin,
    HistoryMixin,
    DocumentsMixin,
    SnapshotMixin,
    SessionsMixin,
):
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
        self._snapshot = None
        self._snapshot_lock = threading.Lock()
        if readonly or create:
            try:
                self._check_store() if readonly else self.init_schema()
            except BaseException:
                self.db.close()
                raise
        self.audit = AuditLog(self.db)

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
            elif found[0] in UPGRADES:
                for since in sorted(UPGRADES, key=int):
                    if int(since) >= int(found[0]):
                        UPGRADES[since](db)
                db.run_script(statements[1:])  # tables added since (all IF NOT EXISTS)
                db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,)
                )
                found = (SCHEMA_VERSION,)
            elif found[0] == SCHEMA_VERSION:
                ensure_sessions_table(db)  # the revocation list came without a new version
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
        if found[0] in UPGRADES:
            raise StoreError(
                f"store {self.db.name} has schema version {found[0]!r}, older than this"
                f" privacy-ci's {SCHEMA_VERSION}: open it once for writing to upgrade it"
                " (privacy-ci store init --db ...)"
            )
        if found[0] != SCHEMA_VERSION:
            raise StoreError(
                f"store {self.db.name} has schema version {found[0]!r};"
                f" this privacy-ci reads version {SCHEMA_VERSION}"
            )

    @contextmanager
    def reading(self) -> Iterator[DocumentStore]:
        """A consistent read snapshot for several reads (see `Database.read`)."""
        with self.db.read():
            yield self

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for health and status output)."""
        out = {}
        for table in ("labels", "documents", "agents", "assignments", "audit", "history"):
            row = self.db.query_one(f"SELECT COUNT(*) FROM {table}")
            out[table] = int(row[0]) if row else 0
        return out
