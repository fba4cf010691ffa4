"""Opening a store: read-only commands never create or change one (a mistyped path
is an error, not a new empty store), and a new SQLite file is owner-only."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cli.audit import app as audit_app
from privacy_ci.cli.store import app as store_app
from privacy_ci.conductor import Corpus
from privacy_ci.store import DocumentStore, StoreError
from privacy_ci.store._sql import Database
from tests.store.backends import store_url

app = typer.Typer()
app.add_typer(store_app, name="store")
app.add_typer(audit_app, name="audit")
runner = CliRunner()

READ_ONLY_COMMANDS = [
    ["audit", "verify"],
    ["audit", "tail"],
    ["store", "labels"],
    ["store", "history"],
]


def _untouched(url: str) -> bool:
    """Whether a bare database is still bare: a 0-byte SQLite file, a schema without tables."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///")).stat().st_size == 0
    db = Database(url)  # a bare PostgreSQL connection creates nothing
    try:
        row = db.query_one(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    finally:
        db.close()
    return row is not None and int(row[0]) == 0


@pytest.fixture
def bare_database(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL of a database that holds no store: a 0-byte SQLite file, an empty schema."""
    with store_url(backend, tmp_path) as url:
        if backend == "sqlite":
            Path(url.removeprefix("sqlite:///")).touch()
        yield url


# -- DocumentStore(readonly=True) -----------------------------------------------------
def test_readonly_refuses_a_missing_sqlite_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    for url in (str(missing), f"sqlite:///{missing}"):
        with pytest.raises(StoreError, match=f"no store at {missing}$"):
            DocumentStore(url, readonly=True)
    assert not missing.exists()
    assert not list(tmp_path.iterdir())  # no -wal, -shm or journal either


@pytest.mark.parametrize(
    "content", [b"", b"not a database at all\n"], ids=["empty-file", "text-file"]
)
def test_readonly_refuses_a_file_that_is_not_a_store(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "other.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match=f"^{path} is not a privacy-ci store"):
        DocumentStore(path, readonly=True)
    assert path.read_bytes() == content


def test_readonly_refuses_another_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = Database(path)
    db.execute("CREATE TABLE things (x INTEGER)")
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"is not a privacy-ci store.*no such table: meta"):
        DocumentStore(path, readonly=True)
    assert path.read_bytes() == before


def test_readonly_refuses_a_database_without_the_tables(backend: str, bare_database: str) -> None:
    with pytest.raises(StoreError, match="is not a privacy-ci store"):
        DocumentStore(bare_database, readonly=True)
    assert _untouched(bare_database)


def test_readonly_store_reads_and_refuses_writes(riverside: DocumentStore) -> None:
    version = riverside.version()
    reader = DocumentStore(riverside.url, readonly=True)
    try:
        assert len(reader.labels()) == 105 and reader.version() == version
        assert reader.audit.verify().ok
        with pytest.raises(StoreError, match=r"read-?only"):
            reader.db.execute("UPDATE store_version SET version = version + 1 WHERE id = 1")
    finally:
        reader.close()
    assert riverside.version() == version


def test_readonly_open_leaves_the_sqlite_file_unchanged(
    sqlite_riverside: DocumentStore,
) -> None:
    riverside = sqlite_riverside
    riverside.close()  # checkpoints the WAL into the file
    path = Path(riverside.url)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for args in READ_ONLY_COMMANDS:
        result = runner.invoke(app, [*args, "--db", riverside.url])
        assert result.exit_code == 0, result.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


# -- the read-only commands ------------------------------------------------------------
@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_read_only_commands_do_not_create_a_missing_store(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "missing.db"
    result = runner.invoke(app, [*command, "--db", f"sqlite:///{missing}"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.strip() == f"error: no store at {missing}"
    assert not missing.exists()


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_read_only_commands_refuse_a_database_without_a_store(
    backend: str, bare_database: str, command: list[str]
) -> None:
    result = runner.invoke(app, [*command, "--db", bare_database])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "is not a privacy-ci store" in lines[0]
    assert _untouched(bare_database)


def test_read_only_commands_print_stored_text_as_written(
    empty_store: DocumentStore, corpus: Corpus
) -> None:
    label = next(iter(corpus.labels)).model_copy(update={"doc_id": "[/x]", "subject": "[i]P01"})
    empty_store.propose_label(label, by="[bold]alice")
    labels = runner.invoke(app, ["store", "labels", "--db", empty_store.url])
    assert labels.exit_code == 0, labels.output
    for text in ("[/x]", "[bold]alice", "[i]P01"):
        assert text in labels.output
    history = runner.invoke(app, ["store", "history", "--db", empty_store.url])
    assert history.exit_code == 0 and "[bold]alice" in history.output and "[/x]" in history.output


# -- the SQLite file's mode ------------------------------------------------------------
@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that lets files be created world-readable (as on most systems)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_new_sqlite_store_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    store = DocumentStore(path)
    try:
        store.assign("A01", "P01", by="test")  # a write: the -wal file exists now
        assert _mode(path) == 0o600
        wal = Path(f"{path}-wal")
        assert wal.exists() and _mode(wal) == 0o600
    finally:
        store.close()


@pytest.mark.usefixtures("open_umask")
def test_existing_sqlite_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch()
    path.chmod(0o640)
    DocumentStore(path).close()
    assert _mode(path) == 0o640
