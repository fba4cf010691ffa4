"""One thin database layer for SQLite and PostgreSQL: same schema, same SQL.

Statements are written once with ``?`` placeholders; for PostgreSQL they become
``%s``. The DDL differs only in three spellings (an auto-numbered key, a binary
column, the append-only trigger), filled in from `Dialect`. Everything else is
plain SQL both engines accept (``INSERT ... ON CONFLICT``, ``IN (...)``).

A `Database` holds one connection, used under a lock (the service's threads share
it), in autocommit mode with explicit transactions:

* `Database.write()`: a write transaction that serialises with every other writer
  (``BEGIN IMMEDIATE`` on SQLite; on PostgreSQL a transaction plus the advisory
  lock `WRITE_LOCK`, so hash-chained audit appends never interleave);
* `Database.read()`: a read snapshot (a deferred ``BEGIN`` on SQLite in WAL mode,
  ``REPEATABLE READ`` on PostgreSQL), so related rows are read consistently.

``Database(url, readonly=True)`` opens an existing store without the right to
change it (SQLite ``mode=ro``, a read-only PostgreSQL session), creating nothing:
a mistyped path is an error, not a new empty store. A new SQLite file is created
with mode 0600 (its -wal and -shm files follow the file's mode).

psycopg is imported only when a PostgreSQL URL is opened.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from privacy_ci.errors import PrivacyCIError

Engine = Literal["sqlite", "postgresql"]
Row = tuple[Any, ...]

WRITE_LOCK = 0x5052_4356  # pg_advisory_xact_lock key held by every write transaction
SCHEMA_VERSION = "2"
"""2: `labels.in_force` (the approved body the gate applies, kept while a change awaits
review). A version-1 store is upgraded in place when it is opened for writing."""


class StoreError(PrivacyCIError):
    """The store cannot be opened or used (bad URL, missing driver, database error)."""


@dataclass(frozen=True)
class Dialect:
    """The few spellings that differ between the two engines."""

    engine: Engine
    serial_key: str
    blob: str
    placeholder: str


SQLITE = Dialect("sqlite", "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", "?")
POSTGRESQL = Dialect("postgresql", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA", "%s")

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS store_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS policy (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    body TEXT NOT NULL,
    version TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agents (
    agent_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_roles (
    agent_id TEXT NOT NULL REFERENCES agents (agent_id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    context TEXT NOT NULL,
    PRIMARY KEY (agent_id, role)
);
CREATE TABLE IF NOT EXISTS assignments (
    agent_id TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    PRIMARY KEY (agent_id, subject_id)
);
CREATE TABLE IF NOT EXISTS labels (
    doc_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('proposed', 'approved', 'revoked')),
    version INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    in_force TEXT,
    in_force_version INTEGER
);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    content_sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS doc_terms (
    doc_id TEXT PRIMARY KEY,
    terms TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS embeddings (
    doc_id TEXT NOT NULL,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector {blob} NOT NULL,
    PRIMARY KEY (doc_id, model)
);
CREATE TABLE IF NOT EXISTS history (
    seq {serial_key},
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    seq BIGINT PRIMARY KEY,
    at TEXT NOT NULL,
    request_id TEXT NOT NULL,
    requester TEXT NOT NULL,
    role TEXT,
    context TEXT,
    action TEXT NOT NULL,
    doc_id TEXT,
    decision TEXT NOT NULL,
    rule TEXT,
    policy_version TEXT NOT NULL,
    label_version INTEGER,
    store_version BIGINT NOT NULL,
    detail TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
{revoked_tokens}
"""

REVOKED_TOKENS_TABLE = """CREATE TABLE IF NOT EXISTS revoked_tokens (
    token_hash TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL,
    revoked_at TEXT NOT NULL,
    revoked_by TEXT NOT NULL
)"""
"""Signed-out tokens (`privacy_ci.store._sessions`), each kept until it expires. Added
without a schema version: a store opened for writing gains it (IF NOT EXISTS)."""

_SQLITE_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END",
]
_PG_TRIGGERS = [
    "CREATE OR REPLACE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$",
    "DROP TRIGGER IF EXISTS audit_no_change ON audit",
    "CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit"
    " FOR EACH ROW EXECUTE FUNCTION audit_append_only()",
    "DROP TRIGGER IF EXISTS audit_no_truncate ON audit",
    "CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit"
    " FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only()",
]


def schema_statements(dialect: Dialect) -> list[str]:
    """The DDL that creates every table (idempotent), in this dialect."""
    tables = _TABLES.format(
        serial_key=dialect.serial_key, blob=dialect.blob, revoked_tokens=REVOKED_TOKENS_TABLE
    )
    statements = [s.strip() for s in tables.split(";") if s.strip()]
    return statements + (_SQLITE_TRIGGERS if dialect.engine == "sqlite" else _PG_TRIGGERS)


def parse_url(url: str | Path) -> tuple[Dialect, str]:
    """Which engine a store URL names, and what to connect to.

    Args:
        url: ``postgresql://...`` (or ``postgres://``, ``postgresql+psycopg://``);
            ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or
            ``sqlite:///:memory:`` (SQLAlchemy's spelling); or a plain file path.

    Returns:
        The dialect and the connection target (a libpq URL or a SQLite path).

    Raises:
        StoreError: for a scheme that is neither.
    """
    text = str(url).strip()
    if not text:
        raise StoreError("empty store URL: give a file path, sqlite:///FILE or postgresql://...")
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return POSTGRESQL, "postgresql://" + text.split("://", 1)[1]
    if scheme == "sqlite":
        rest = text.split("://", 1)[1]
        if not rest.startswith("/"):
            raise StoreError(
                f"bad SQLite URL {text!r}: write sqlite:///relative.db or sqlite:////abs/path.db"
            )
        path = rest[1:]
        if not path:
            raise StoreError(f"bad SQLite URL {text!r}: no file name")
        return SQLITE, path
    if scheme:
        raise StoreError(
            f"unsupported store URL scheme {scheme!r} in {text!r}:"
            " use a file path, sqlite:///FILE or postgresql://..."
        )
    return SQLITE, text


def utc_now() -> str:
    """The current time as ISO 8601 UTC with microseconds (how the store writes times)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def canonical_json(value: Any) -> str:
    """`value` as the store writes JSON: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def redact(url: str) -> str:
    """A PostgreSQL URL without user name and password (safe for messages)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host).geturl()


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


class Database:
    """One connection to SQLite or PostgreSQL with the dialect shim.

    Args:
        url: a store URL or SQLite path (see `parse_url`).
        readonly: open an existing database without the right to write to it
            (SQLite: the file must exist; it is opened ``mode=ro``).

    Raises:
        StoreError: it cannot be opened (for `readonly`: no such SQLite file).
    """

    def __init__(self, url: str | Path, *, readonly: bool = False) -> None:
        self.dialect, target = parse_url(url)
        self.url = str(url)
        self.readonly = readonly
        # what messages name: the SQLite path, or the server without credentials
        self.name = target if self.dialect.engine == "sqlite" else redact(target)
        self._lock = threading.RLock()
        self._depth = 0
        self._writing = False
        self._version_bumped = False
        self._errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        if self.dialect.engine == "sqlite":
            opener = self._open_sqlite_readonly if readonly else self._open_sqlite
            self._conn: Any = opener(target)
        else:
            import psycopg

            self._conn = self._open_postgresql(target, readonly=readonly)
            self._errors = (psycopg.Error,)

    # -- opening ----------------------------------------------------------------------
    @staticmethod
    def _open_sqlite(path: str) -> sqlite3.Connection:
        if path != ":memory:":
            parent = Path(path).expanduser().resolve().parent
            if not parent.is_dir():
                raise StoreError(
                    f"cannot open SQLite store {path!r}: folder {parent} does not exist"
                )
            # Create a new file owner-only before SQLite would create it world-readable
            # (umask); an existing file keeps its mode.
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass
            except OSError as exc:
                raise StoreError(f"cannot create SQLite store {path!r}: {exc.strerror}") from None
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            if path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {path!r}: {exc}") from None
        return conn

    @staticmethod
    def _open_sqlite_readonly(path: str) -> sqlite3.Connection:
        """Open an existing SQLite file read-only; never create or change one."""
        if path == ":memory:":
            raise StoreError("no store at :memory: (a new in-memory store is empty)")
        file = Path(path)
        if not file.exists():
            raise StoreError(f"no store at {path}")
        if not file.is_file() or file.stat().st_size == 0:
            raise StoreError(f"{path} is not a privacy-ci store")
        # mode=ro: SQLite refuses every write; no journal_mode pragma (that one writes)
        uri = file.resolve().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {path!r}: {exc}") from None
        return conn

    @staticmethod
    def _open_postgresql(url: str, *, readonly: bool = False) -> Any:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - psycopg is a dependency of the store
            raise StoreError(
                "PostgreSQL stores need psycopg 3: pip install 'psycopg[binary]'"
            ) from None
        try:
            conn = psycopg.connect(url, autocommit=True)
            if readonly:
                conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            return conn
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL at {redact(url)}: {exc}") from None

    @property
    def engine(self) -> Engine:
        return self.dialect.engine

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- statements -------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql if self.dialect.placeholder == "?" else sql.replace("?", "%s")

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Driver errors become `StoreError`s naming the database's message."""
        try:
            yield
        except self._errors as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"{self.engine} error: {message}") from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement (inside the current transaction, if any)."""
        with self._lock, self._translated():
            self._conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each parameter row."""
        if not rows:
            return
        with self._lock, self._translated():
            if self.engine == "sqlite":
                self._conn.executemany(sql, [tuple(r) for r in rows])
            else:
                with self._conn.cursor() as cur:
                    cur.executemany(self._sql(sql), [tuple(r) for r in rows])

    def bulk_write(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        key: Sequence[str] = (),
    ) -> None:
        """Write many rows into `table` inside the current write transaction.

        SQLite: one prepared ``INSERT`` run for every row (``executemany``).
        PostgreSQL: ``COPY`` (psycopg 3 ``cursor.copy``); with `key`, the rows are
        copied into a temporary table first and moved over with one
        ``INSERT ... SELECT ... ON CONFLICT``.

        Args:
            table / columns: where the rows go (trusted names, never user input).
            rows: the values, one sequence per row, in `columns` order.
            key: the conflict key: a row whose key is already stored replaces that
                row's other columns (empty: plain appends, e.g. the history).

        Raises:
            StoreError: outside `write()`, or the database refuses a row (then the
                whole transaction rolls back).
        """
        if not rows:
            return
        names = ", ".join(columns)
        upsert = ""
        if key:
            others = [c for c in columns if c not in key]
            action = (
                "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in others)
                if others
                else "DO NOTHING"
            )
            upsert = f" ON CONFLICT ({', '.join(key)}) {action}"
        with self._lock, self._translated():
            if not (self._depth and self._writing):
                raise StoreError("bulk_write needs a write transaction (Database.write())")
            if self.engine == "sqlite":
                marks = ", ".join("?" * len(columns))
                self._conn.executemany(
                    f"INSERT INTO {table} ({names}) VALUES ({marks}){upsert}",
                    [tuple(r) for r in rows],
                )
                return
            target = table
            if key:
                target = f"privacy_ci_bulk_{table}"
                self._conn.execute(
                    f"CREATE TEMPORARY TABLE {target} ON COMMIT DROP AS"
                    f" SELECT {names} FROM {table} WITH NO DATA"
                )
            with self._conn.cursor() as cur:
                with cur.copy(f"COPY {target} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                if key:
                    cur.execute(
                        f"INSERT INTO {table} ({names}) SELECT {names} FROM {target}{upsert}"
                    )
                    cur.execute(f"DROP TABLE {target}")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one query and return every row as a tuple."""
        with self._lock, self._translated():
            cur = self._conn.execute(self._sql(sql), tuple(params))
            rows: list[Row] = [tuple(r) for r in cur.fetchall()]
            return rows

    def stream(
        self, sql: str, params: Sequence[Any] = (), batch: int = 5000
    ) -> Generator[Row, None, None]:
        """Run one query and yield its rows, fetched `batch` at a time.

        Call it inside `read()` or `write()` and close the iterator before that
        ends (PostgreSQL reads through a server-side cursor of that transaction).
        Unlike keyset paging (``WHERE key > last``) it never compares stored values
        with parameters, so rows of any stored type are read as they are; SQLite
        text that is not UTF-8 comes back as bytes instead of failing the read.
        """
        with self._lock, self._translated():
            if self.engine == "sqlite":
                factory = self._conn.text_factory
                self._conn.text_factory = _text_or_bytes
                cur = self._conn.execute(sql, tuple(params))
            else:
                cur = self._conn.cursor(name=f"privacy_ci_{uuid.uuid4().hex[:12]}")
                cur.execute(self._sql(sql), tuple(params))
            try:
                while rows := cur.fetchmany(batch):
                    yield from (tuple(r) for r in rows)
            finally:
                cur.close()
                if self.engine == "sqlite":
                    self._conn.text_factory = factory

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """Run one query and return its first row (None when it returns none)."""
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def run_script(self, statements: Sequence[str]) -> None:
        """Run DDL statements, each as sent (no placeholders)."""
        with self._lock, self._translated():
            for statement in statements:
                self._conn.execute(statement)

    @staticmethod
    def placeholders(n: int) -> str:
        """``?, ?, ...`` for an ``IN (...)`` list of `n` values."""
        return ", ".join("?" * n)

    # -- transactions -----------------------------------------------------------------
    def bump_version(self) -> None:
        """Advance the store version, once per write transaction.

        Readers only ever see committed states, so one bump per transaction is
        enough; more would cost a bulk load dearly on PostgreSQL, where every update
        of the one version row leaves a dead row version the next update must walk.
        """
        with self._lock:
            if self._depth and self._version_bumped:
                return
            self.execute("UPDATE store_version SET version = version + 1 WHERE id = 1")
            self._version_bumped = bool(self._depth)

    @contextmanager
    def write(self) -> Iterator[Database]:
        """A serialised write transaction: commit on success, roll back on error."""
        if self.engine == "sqlite":
            begin: tuple[tuple[str, tuple[Any, ...]], ...] = (("BEGIN IMMEDIATE", ()),)
        else:
            # one round trip: two statements in one simple query (the key is a constant)
            begin = ((f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK:d})", ()),)
        with self._transaction(begin, commit=True):
            yield self

    @contextmanager
    def read(self) -> Iterator[Database]:
        """A consistent read snapshot (rolled back at the end: it changes nothing)."""
        statement = "BEGIN" if self.engine == "sqlite" else "BEGIN ISOLATION LEVEL REPEATABLE READ"
        with self._transaction(((statement, ()),), commit=False):
            yield self

    @contextmanager
    def _transaction(
        self, begin: tuple[tuple[str, tuple[Any, ...]], ...], *, commit: bool
    ) -> Iterator[None]:
        """Open a transaction, or join the one already open on this connection.

        Args:
            begin: the statements that open it.
            commit: commit on success (writes) or always roll back (reads); a
                failure always rolls back.
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            for sql, params in begin:
                if params:
                    self._conn.execute(sql, params)
                else:
                    self._conn.execute(sql)
            self._depth = 1
            self._writing = commit  # a read rolls back: nothing may be written in it
            self._version_bumped = False
            try:
                yield
            except BaseException:
                self._depth = 0
                self._writing = False
                self._version_bumped = False
                self._conn.execute("ROLLBACK")
                raise
            self._depth = 0
            self._writing = False
            self._version_bumped = False
            self._conn.execute("COMMIT" if commit else "ROLLBACK")
