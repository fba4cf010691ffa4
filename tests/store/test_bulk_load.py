"""`load_corpus_into` writes in bulk what the one-at-a-time methods would write."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from privacy_ci.conductor import Corpus, load_corpus, render_corpus
from privacy_ci.conductor._corpus import riverside_dir
from privacy_ci.store import DocumentStore, LabelState, load_corpus_into
from privacy_ci.store._load import load_directory
from privacy_ci.store._sql import StoreError
from tests.store.backends import store_url

# every table the load writes, with the columns that must match (times excluded)
TABLES = {
    "policy": "id, body, version, updated_by",
    "agents": "agent_id, name, description",
    "agent_roles": "agent_id, role, context",
    "assignments": "agent_id, subject_id",
    "labels": "doc_id, body, state, version, updated_by",
    "documents": "doc_id, content, content_sha256",
    "doc_terms": "doc_id, terms",
    "store_version": "id, version",
}


def load_one_at_a_time(
    store: DocumentStore, corpus: Corpus, state: LabelState, content: bool = True
) -> None:
    """The row-by-row load through the store's public methods (the reference)."""
    texts = {d: corpus.document_text(d) for d in [*corpus.labels.ids, *corpus.unlabelled]}
    authority = corpus.policy.authority
    source = f"corpus-file:{corpus.source.name if corpus.source else 'memory'}"
    with store.db.write():
        load_directory(store, corpus, source, authority)
        for label in corpus.labels:
            store.propose_label(label, source, "hand-authored label from the corpus files")
            if state is LabelState.APPROVED:
                store.approve_label(label.doc_id, authority, "hand-authored by the authority")
            elif state is LabelState.REVOKED:
                store.revoke_label(label.doc_id, authority)
            if content:
                store.put_document(label.doc_id, texts[label.doc_id], source)
        if content:
            for doc_id in corpus.unlabelled:
                store.put_document(doc_id, texts[doc_id], source)


def contents(store: DocumentStore) -> dict[str, Any]:
    """Every row the load writes, times and sequence numbers left out."""
    out: dict[str, Any] = {
        table: sorted(store.db.query(f"SELECT {columns} FROM {table}"))
        for table, columns in TABLES.items()
    }
    out["history"] = store.db.query(
        "SELECT actor, action, target_kind, target, detail FROM history ORDER BY seq"
    )
    return out


@contextmanager
def two_stores(backend: str, tmp_path: Path) -> Iterator[tuple[DocumentStore, DocumentStore]]:
    """Two fresh stores on `backend`: one loaded in bulk, one row by row."""
    with (
        store_url(backend, tmp_path) as bulk_url,
        store_url(backend, tmp_path) as row_url,
        DocumentStore(bulk_url) as bulk,
        DocumentStore(row_url) as rows,
    ):
        yield bulk, rows


@pytest.fixture(scope="module")
def folder_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """A corpus folder: 30 Riverside labels with their texts, and two unlabelled texts."""
    folder = tmp_path_factory.mktemp("bulk") / "corpus"
    documents = folder / "documents"
    documents.mkdir(parents=True)
    riverside = load_corpus()
    texts = render_corpus(riverside)
    for name in ("policy.yaml", "agents.yaml", "assignments.yaml"):
        shutil.copy(riverside_dir() / name, folder / name)
    labels = list(riverside.labels)[:30]
    for label in labels:
        (documents / f"{label.doc_id}.txt").write_text(texts[label.doc_id], encoding="utf-8")
    (documents / "EXTRA-1.txt").write_text("A memo nobody labelled.\n", encoding="utf-8")
    (documents / "EXTRA-2.txt").write_text("Ärztin Müller's note, ünïcode.\n", encoding="utf-8")
    with open(folder / "labels.yaml", "w", encoding="utf-8") as f:
        yaml.safe_dump({"documents": [x.model_dump(mode="json") for x in labels]}, f)
    corpus = load_corpus(folder)
    assert sorted(corpus.unlabelled) == ["EXTRA-1", "EXTRA-2"]
    return corpus


@pytest.mark.parametrize("state", list(LabelState))
def test_the_bulk_load_writes_what_the_row_by_row_load_writes(
    backend: str, tmp_path: Path, folder_corpus: Corpus, state: LabelState
) -> None:
    with two_stores(backend, tmp_path) as (bulk, rows):
        # twice: the second load edits every stored label (versions go on)
        for _ in range(2):
            assert load_corpus_into(bulk, folder_corpus, state=state) == 30
            load_one_at_a_time(rows, folder_corpus, state)
            assert contents(bulk) == contents(rows)
        assert bulk.version() == 2  # one bump per load
        assert {r.state for r in bulk.labels()} == {state}


def test_riverside_loads_in_bulk_as_row_by_row(
    backend: str, tmp_path: Path, corpus: Corpus
) -> None:
    with two_stores(backend, tmp_path) as (bulk, rows):
        load_corpus_into(bulk, corpus)
        load_one_at_a_time(rows, corpus, LabelState.APPROVED)
        assert contents(bulk) == contents(rows)
        assert bulk.counts()["documents"] == len(corpus.labels)


def test_bulk_write_needs_a_write_transaction(empty_store: DocumentStore) -> None:
    with pytest.raises(StoreError, match="write transaction"):
        empty_store.db.bulk_write("assignments", ("agent_id", "subject_id"), [("a", "b")])
    # a read transaction rolls back at its end: a bulk write there would vanish silently
    with empty_store.db.read() as db, pytest.raises(StoreError, match="write transaction"):
        db.bulk_write("assignments", ("agent_id", "subject_id"), [("a", "b")])
    with empty_store.db.write() as db:
        db.bulk_write("assignments", ("agent_id", "subject_id"), [("a", "b"), ("c", "d")])
        db.bulk_write(
            "assignments", ("agent_id", "subject_id"), [("a", "b")], key=("agent_id", "subject_id")
        )
    assert empty_store.assignments() == {"a": frozenset({"b"}), "c": frozenset({"d"})}
