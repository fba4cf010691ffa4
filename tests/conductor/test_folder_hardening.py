"""A hostile corpus folder (issue 24): only regular files inside the corpus folder,
within the size limit, are read, in `conductor validate`, `store load` and
`label run --corpus` alike. A symbolic link out of the folder (a signing key), to
``/dev/zero``, a FIFO or an oversized file is one problem naming the file; nothing
is stored and nothing is sent to a model. CLI runs that could hang run in a
subprocess with a timeout."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci import _files
from privacy_ci._files import read_user_file
from privacy_ci._structured import MAX_INPUT_BYTES_ENV
from privacy_ci.cli.main import app
from privacy_ci.conductor import DocumentFolder, load_corpus
from privacy_ci.conductor._corpus import riverside_dir, starter_dir
from privacy_ci.conductor._sources import MAX_DOCUMENT_BYTES, MAX_DOCUMENT_BYTES_ENV
from privacy_ci.conductor._templates import load_pack
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.llm import GenerationSettings, LLMClient, LLMConfig, Message
from privacy_ci.llm.testing import ScriptedTestBackend

runner = CliRunner()
SECRET = "-----BEGIN PRIVATE KEY----- not for any model"
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


def label(doc_id: str) -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "title": f"Document {doc_id}",
        "document_type": "policy document",
        "sensitivity_tier": "internal",
        "permitted_receiver_roles": ["Employee"],
        "subject": None,
        "subject_type": "organization",
        "extra_sensitive": False,
        "extra_sensitive_reason": None,
        "governing_principle": "operations: staff read it",
        "originating_context": "Internal",
        "pii_attributes": [],
        "implied_attributes": [],
        "assignment_required": False,
    }


def corpus_with(tmp_path: Path, *labelled: str) -> Path:
    """The starter corpus with a label for each of `labelled` (documents EX-* unlabelled)."""
    folder = tmp_path / "corpus"
    shutil.copytree(starter_dir(), folder)
    labels = {"documents": [label(d) for d in labelled]}
    (folder / "labels.yaml").write_text(yaml.safe_dump(labels, sort_keys=False), "utf-8")
    return folder


def key_outside(tmp_path: Path) -> Path:
    key = tmp_path / "jwt.key"
    key.write_text(SECRET + "\n", encoding="utf-8")
    return key


def problems_of(folder: Path) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        load_corpus(folder)
    return caught.value.problems


def cli(*args: str, timeout: float = 20, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The real CLI in a subprocess: a read that blocked would fail the timeout, not hang."""
    done = subprocess.run(
        [sys.executable, "-m", "privacy_ci.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def error_of(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stderr.startswith("error: "), res.output
    return " ".join(res.stderr.split())


def stored_documents(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT doc_id, content FROM documents").fetchall())


# -- a symbolic link out of the folder ------------------------------------------------------
def test_a_link_out_of_the_folder_is_refused_by_validate(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "LEAK")
    link = folder / "documents" / "LEAK.txt"
    link.symlink_to(key_outside(tmp_path))
    (problem,) = problems_of(folder)  # one problem: refused, not also "missing"
    assert problem.startswith(f"{link}: a symbolic link to {(tmp_path / 'jwt.key').resolve()}")
    assert f"outside the corpus folder {folder.resolve()}" in problem
    message = error_of("conductor", "validate", str(folder))
    assert "LEAK.txt: a symbolic link" in message and SECRET not in message


def test_store_load_writes_nothing_when_a_link_leaves_the_folder(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "EX-HANDBOOK")
    db = tmp_path / "store.db"
    assert runner.invoke(app, ["store", "load", str(folder), "--db", str(db)]).exit_code == 0
    before = stored_documents(db)
    assert set(before) == {"EX-HANDBOOK", "EX-REVIEW-E01"}
    # the next load: the same folder with a link to the key, labelled and unlabelled
    (folder / "documents" / "LEAK.txt").symlink_to(key_outside(tmp_path))
    (folder / "documents" / "ALSO.txt").symlink_to(tmp_path / "jwt.key")
    (folder / "documents" / "NEW.txt").write_text("a new document\n", encoding="utf-8")
    labels = {"documents": [label("EX-HANDBOOK"), label("LEAK")]}
    (folder / "labels.yaml").write_text(yaml.safe_dump(labels, sort_keys=False), "utf-8")
    message = error_of("store", "load", str(folder), "--db", str(db))
    assert "ALSO.txt: a symbolic link" in message and "LEAK.txt: a symbolic link" in message
    assert stored_documents(db) == before  # nothing written: not even NEW
    assert SECRET not in db.read_bytes().decode("utf-8", "replace")


def test_label_run_refuses_before_asking_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Sequence[Message]] = []

    def script(messages: Sequence[Message], settings: GenerationSettings) -> str:
        asked.append(messages)
        return "{}"

    def make_client(config: LLMConfig | None = None, **_: Any) -> LLMClient:
        return LLMClient(ScriptedTestBackend(script), cache=None)

    monkeypatch.setattr("privacy_ci.llm.make_client", make_client)
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    folder = corpus_with(tmp_path, "LEAK")
    (folder / "documents" / "LEAK.txt").symlink_to(key_outside(tmp_path))
    run = tmp_path / "run"
    message = error_of("label", "run", "--corpus", str(folder), "--out", str(run))
    assert "LEAK.txt: a symbolic link" in message
    assert asked == [] and not run.exists()


def test_reading_refuses_the_link_even_without_validation(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "LEAK")
    (folder / "documents" / "LEAK.txt").symlink_to(key_outside(tmp_path))
    documents = DocumentFolder(folder / "documents", root=folder)
    with pytest.raises(PrivacyCIError, match=r"LEAK\.txt: a symbolic link to .*outside"):
        documents.content("LEAK")
    # a folder of documents on its own: its own folder is the bound
    with pytest.raises(PrivacyCIError, match="outside"):
        DocumentFolder(folder / "documents").content("LEAK")


def test_a_documents_folder_that_is_a_link_out_of_the_corpus(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "EX-HANDBOOK")
    elsewhere = tmp_path / "elsewhere"
    (folder / "documents").rename(elsewhere)
    (folder / "documents").symlink_to(elsewhere)
    (problem,) = problems_of(folder)  # not one "missing" per label
    assert problem == (
        f"{folder / 'documents'}: resolves to {elsewhere.resolve()}, outside the corpus"
        f" folder {folder.resolve()}; documents are read only from inside it"
    )


def test_a_corpus_file_that_is_a_link_out_of_the_folder(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path)
    outside = tmp_path / "policy.yaml"
    shutil.move(folder / "policy.yaml", outside)
    (folder / "policy.yaml").symlink_to(outside)
    (problem,) = problems_of(folder)
    assert problem.startswith(f"{folder / 'policy.yaml'}: a symbolic link to {outside.resolve()}")


# -- links inside the folder ----------------------------------------------------------------
def test_a_link_to_a_file_inside_the_corpus_folder_is_a_document(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "COPY")
    documents = folder / "documents"
    (documents / "COPY.txt").symlink_to("EX-HANDBOOK.txt")  # relative, inside documents/
    (folder / "notes").mkdir()
    (folder / "notes" / "n.txt").write_text("kept beside the documents\n", encoding="utf-8")
    (documents / "NOTES.txt").symlink_to(folder / "notes" / "n.txt")  # inside the corpus
    corpus = load_corpus(folder)
    handbook = (documents / "EX-HANDBOOK.txt").read_text(encoding="utf-8")
    assert corpus.content("COPY") == handbook
    assert corpus.document_text("NOTES") == "kept beside the documents\n"
    db = tmp_path / "store.db"
    assert runner.invoke(app, ["store", "load", str(folder), "--db", str(db)]).exit_code == 0
    assert stored_documents(db)["COPY"] == handbook


def test_a_broken_link_and_a_link_to_a_folder(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path)
    documents = folder / "documents"
    (documents / "GONE.txt").symlink_to(tmp_path / "nothing-here")
    (folder / "sub").mkdir()
    (documents / "DIR.txt").symlink_to(folder / "sub")
    problems = problems_of(folder)
    assert f"{documents / 'DIR.txt'}: a symbolic link to a folder, not a regular file" in problems
    assert f"{documents / 'GONE.txt'}: a symbolic link to a file that does not exist" in problems


# -- devices, FIFOs, size -------------------------------------------------------------------
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_link_to_dev_zero_is_refused_without_reading_it(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "ZERO")
    (folder / "documents" / "ZERO.txt").symlink_to("/dev/zero")
    for args in (
        ("conductor", "validate", str(folder)),
        ("store", "load", str(folder), "--db", f"sqlite:///{tmp_path / 's.db'}"),
    ):
        code, output = cli(*args)
        assert code == 2, output
        assert "ZERO.txt: a symbolic link to /dev/zero, outside the corpus folder" in output
        assert "Traceback" not in output
    assert not (tmp_path / "s.db").exists() or stored_documents(tmp_path / "s.db") == {}


@posix_only
def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "PIPE")
    os.mkfifo(folder / "documents" / "PIPE.txt")
    for args in (
        ("conductor", "validate", str(folder)),
        ("store", "load", str(folder), "--db", f"sqlite:///{tmp_path / 's.db'}"),
    ):
        code, output = cli(*args)
        assert code == 2, output
        assert "PIPE.txt: a FIFO (named pipe), not a regular file" in output
    documents = DocumentFolder(folder / "documents", root=folder)
    with pytest.raises(PrivacyCIError, match=r"PIPE\.txt: a FIFO"):
        documents.content("PIPE")


@posix_only
def test_a_fifo_swapped_in_after_the_check_cannot_hang_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the check passed (a regular file then), the FIFO is what is opened: O_NONBLOCK
    # opens it without a writer, and fstat refuses it
    fifo = tmp_path / "swapped.txt"
    os.mkfifo(fifo)
    monkeypatch.setattr(_files, "file_problem", lambda *a, **k: None)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_user_file(fifo, limit=100)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), "reading a FIFO blocked"
    (exc,) = outcome
    assert isinstance(exc, PrivacyCIError) and "a FIFO (named pipe)" in str(exc)


@posix_only
def test_a_fifo_as_a_corpus_file(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path)
    (folder / "labels.yaml").unlink()
    os.mkfifo(folder / "labels.yaml")
    code, output = cli("conductor", "validate", str(folder))
    assert code == 2 and "labels.yaml: a FIFO (named pipe), not a regular file" in output


def test_an_oversized_document_by_default(tmp_path: Path) -> None:
    folder = corpus_with(tmp_path, "BIG")
    big = folder / "documents" / "BIG.txt"
    with big.open("wb") as fh:  # sparse: no disk written
        fh.truncate(MAX_DOCUMENT_BYTES + 1)
    (problem,) = problems_of(folder)
    assert problem == (
        f"{big}: {MAX_DOCUMENT_BYTES + 1:,} bytes, over the limit of {MAX_DOCUMENT_BYTES:,}"
        f" bytes; set {MAX_DOCUMENT_BYTES_ENV} to raise the limit"
    )
    with pytest.raises(PrivacyCIError, match="over the limit"):
        DocumentFolder(folder / "documents", root=folder).content("BIG")


def test_the_limit_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = corpus_with(tmp_path, "MID")
    (folder / "documents" / "MID.txt").write_text("x" * 2000, encoding="utf-8")
    monkeypatch.setenv(MAX_DOCUMENT_BYTES_ENV, "1000")
    message = error_of("store", "load", str(folder), "--db", str(tmp_path / "s.db"))
    assert "MID.txt: 2,000 bytes, over the limit of 1,000 bytes" in message
    monkeypatch.setenv(MAX_DOCUMENT_BYTES_ENV, "2000")
    assert load_corpus(folder).content("MID") == "x" * 2000
    monkeypatch.setenv(MAX_DOCUMENT_BYTES_ENV, "-5")
    message = error_of("conductor", "validate", str(folder))
    assert f"{MAX_DOCUMENT_BYTES_ENV}='-5': expected a positive whole number of bytes" in message


def test_the_read_is_bounded_when_a_file_grows(tmp_path: Path) -> None:
    # fstat saw the size within the limit; the read stops at limit + 1 bytes all the same
    path = tmp_path / "growing.txt"
    path.write_bytes(b"x" * 50)
    real_fstat = os.fstat

    class Small:
        def __init__(self, fd: int) -> None:
            self.real = real_fstat(fd)

        def __getattr__(self, name: str) -> Any:
            return 10 if name == "st_size" else getattr(self.real, name)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_files, "file_problem", lambda *a, **k: None)  # (lstat sees 50 bytes)
        mp.setattr(os, "fstat", Small)
        with pytest.raises(PrivacyCIError, match=r"growing\.txt: 21 bytes, over the limit of 20"):
            read_user_file(path, limit=20)


# -- content/ folders -----------------------------------------------------------------------
def test_a_content_table_that_is_a_link_out_of_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "riverside"
    shutil.copytree(riverside_dir(), folder)
    table = folder / "content" / "clinic.yaml"
    outside = tmp_path / "clinic.yaml"
    shutil.move(table, outside)
    table.symlink_to(outside)
    (problem,) = problems_of(folder)
    assert problem.startswith(f"{table}: a symbolic link to {outside.resolve()}, outside the")
    with pytest.raises(PrivacyCIError, match=r"clinic\.yaml: a symbolic link"):
        load_pack(folder / "content")


def test_an_oversized_corpus_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = corpus_with(tmp_path, *[f"D{i:03d}" for i in range(20)])
    size = (folder / "labels.yaml").stat().st_size
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, str(size - 1))
    problems = problems_of(folder)
    assert f"{folder / 'labels.yaml'}: {size:,} bytes, over the limit of {size - 1:,} bytes" in (
        " ".join(problems)
    )
