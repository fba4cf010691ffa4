"""The store's documents: content, index terms (tokenized once, at ingest) and embeddings."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from privacy_ci.store._base import StoreBase
from privacy_ci.store._history import record_change
from privacy_ci.store._index import StoredVectors, embeddings_version
from privacy_ci.store._ranking import Embedder, tokenize
from privacy_ci.store._sql import Database, canonical_json


class DocumentsMixin(StoreBase):
    """`DocumentStore`'s document content, index terms and vectors."""

    def put_document(self, doc_id: str, content: str, by: str) -> None:
        """Store a document's content and its index terms (tokenized now, once).

        Args:
            doc_id: the document.
            content: its text (read again only by the authorized fetch).
            by: who stores it.
        """
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        terms = canonical_json(tokenize(content))
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
            record_change(db, by, "put_document", "document", doc_id, {"sha256": digest})

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
            # a new vector changes rankings: bump the version (no history row: derived data)
            # and the vectors' own counter, which tells readers to drop cached vectors
            db.bump_version()
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('embeddings_version', '1')"
                " ON CONFLICT (key) DO UPDATE"
                " SET value = CAST(CAST(meta.value AS INTEGER) + 1 AS TEXT)"
            )

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

    def stored_vectors(self, model: str) -> StoredVectors:
        """Every stored vector in the space `model`, with the embeddings version read
        with them (for the access index's cache)."""
        with self.db.read() as db:
            rows = db.query("SELECT doc_id, vector FROM embeddings WHERE model = ?", (model,))
            version = embeddings_version(db)
        return StoredVectors(model, version, [(d, bytes(v)) for d, v in rows])
