"""Store backends for the tests: SQLite always, PostgreSQL when PRIVACY_CI_TEST_PG_URL is set.

Each PostgreSQL store gets a schema of its own (``search_path`` set through the
URL's ``options``), dropped afterwards, so tests never see each other's rows.
Start a server with ``eval "$(scripts/ci_postgres.sh start)"``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from privacy_ci.conductor import Corpus
from privacy_ci.store import DocumentStore, load_corpus_into

PG_ENV = "PRIVACY_CI_TEST_PG_URL"
PG_URL = os.environ.get(PG_ENV, "").strip()

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param(
        "postgresql",
        id="postgresql",
        marks=pytest.mark.skipif(
            not PG_URL, reason=f"{PG_ENV} is not set (scripts/ci_postgres.sh start)"
        ),
    ),
]


@contextmanager
def store_url(backend: str, folder: Path) -> Iterator[str]:
    """A URL for a fresh, empty store on `backend` (removed afterwards)."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / f'store-{uuid.uuid4().hex[:8]}.db'}"
        return
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def drop_audit_guards(store: DocumentStore) -> None:
    """Remove the append-only triggers (what an attacker with database rights could do)."""
    if store.engine == "sqlite":
        store.db.run_script(
            ["DROP TRIGGER IF EXISTS audit_no_update", "DROP TRIGGER IF EXISTS audit_no_delete"]
        )
    else:
        store.db.run_script(
            [
                "DROP TRIGGER IF EXISTS audit_no_change ON audit",
                "DROP TRIGGER IF EXISTS audit_no_truncate ON audit",
            ]
        )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend name: ``sqlite`` or ``postgresql``."""
    return str(request.param)


@pytest.fixture
def empty_store(backend: str, tmp_path: Path) -> Iterator[DocumentStore]:
    """A fresh, empty store on the backend."""
    with store_url(backend, tmp_path) as url:
        store = DocumentStore(url)
        try:
            yield store
        finally:
            store.close()


@pytest.fixture(scope="session")
def riverside_template(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus) -> Path:
    """A SQLite file with Riverside loaded, built once per session and copied per test."""
    path = tmp_path_factory.mktemp("riverside") / "template.db"
    store = DocumentStore(path)
    load_corpus_into(store, corpus)
    store.close()
    return path


@pytest.fixture
def riverside(
    backend: str, tmp_path: Path, corpus: Corpus, riverside_template: Path
) -> Iterator[DocumentStore]:
    """A store holding the Riverside corpus with approved labels and rendered content."""
    if backend == "sqlite":
        yield from _sqlite_copy(tmp_path, riverside_template)
        return
    with store_url(backend, tmp_path) as url:
        store = DocumentStore(url)
        try:
            load_corpus_into(store, corpus)
            yield store
        finally:
            store.close()


@pytest.fixture
def sqlite_riverside(tmp_path: Path, riverside_template: Path) -> Iterator[DocumentStore]:
    """Riverside on SQLite only, for what only SQLite can show (its file, its text
    encoding): a test with this fixture runs once, instead of skipping on PostgreSQL."""
    yield from _sqlite_copy(tmp_path, riverside_template)


def _sqlite_copy(tmp_path: Path, template: Path) -> Iterator[DocumentStore]:
    path = tmp_path / "riverside.db"
    shutil.copyfile(template, path)
    store = DocumentStore(path)
    try:
        yield store
    finally:
        store.close()
