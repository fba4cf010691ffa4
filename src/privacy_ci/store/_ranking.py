"""Candidate ranking over the requester's authorized set only (BM25, optionally embeddings).

Ranking happens after authorization (paper, section III-C): a `BM25Ranker` is
built over exactly the documents the requester may receive, so its IDF and
length statistics come from that set alone. Whether the store also holds
documents the requester may not see changes neither the ranking, nor the number
of results, nor a single bit of their scores.

Documents are tokenized once, when they enter the store (`tokenize`: lower case,
English stop words removed, Snowball stems: `privacy_ci._tokenize.STORE_TOKENIZER`);
the resolver reads those token lists, never the content. The vocabulary is
sorted, so an index over the same documents is the same in every process.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from privacy_ci._tokenize import STORE_TOKENIZER


def tokenize(text: str) -> list[str]:
    """Index terms of a text: lower-cased words of 2+ characters, stop words dropped, stemmed.

    The store's configuration of the package's one tokenizer (`STORE_TOKENIZER`;
    see `privacy_ci._tokenize` for how it differs from the regulation retrievers').

    Args:
        text: a document or a query.

    Returns:
        The terms in text order (repeats kept: they are term frequencies).
    """
    return STORE_TOKENIZER(text)


class BM25Ranker:
    """BM25 (Lucene variant, k1=1.5, b=0.75, via bm25s) over one fixed document set.

    Args:
        doc_ids: the documents to index (the requester's authorized set), in a
            stable order (the store passes them sorted by id).
        terms: doc_id -> index terms, for at least every id in `doc_ids`.
    """

    def __init__(self, doc_ids: Sequence[str], terms: Mapping[str, Sequence[str]]) -> None:
        bm25s = importlib.import_module("bm25s")
        self.doc_ids = tuple(doc_ids)
        self.vocab: dict[str, int] = {}
        self._index: Any = None
        if not self.doc_ids:
            return
        vocab = sorted({t for d in self.doc_ids for t in terms[d]})
        self.vocab = {t: i for i, t in enumerate(vocab)}
        ids = [[self.vocab[t] for t in terms[d]] for d in self.doc_ids]
        if not self.vocab:  # every document is empty: nothing can match
            return
        index = bm25s.BM25()
        index.index((ids, dict(self.vocab)), show_progress=False)
        self._index = index

    def __len__(self) -> int:
        return len(self.doc_ids)

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """The BM25 score of every indexed document for `query` (0 where nothing matches)."""
        ids = [self.vocab[t] for t in tokenize(query) if t in self.vocab]
        if self._index is None or not ids:
            return np.zeros(len(self.doc_ids), dtype=np.float32)
        scores: npt.NDArray[np.float32] = self._index.get_scores_from_ids(ids)
        return scores

    def top_k(self, query: str, k: int) -> list[tuple[str, float]]:
        """The `k` best matches with a positive score, best first (ties by document id)."""
        return top_k(self.doc_ids, self.scores(query), k)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (one row per text). `model` names the vector space."""

    model: str

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class HashingEmbedder:
    """A dependency-free embedder: feature-hashed stems, L2-normalised.

    Deterministic in every process (SHA-256 buckets, no `hash()`); a stand-in where
    no embedding model is installed, and the reference for tests.

    Args:
        dim: the vector length.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.model = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in tokenize(text):
                digest = hashlib.sha256(term.encode("utf-8")).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out


class EmbeddingRanker:
    """Cosine similarity over the authorized documents that have a vector for `embedder`.

    Args:
        doc_ids: the authorized documents, in a stable order.
        vectors: doc_id -> vector (documents without one are not ranked).
        embedder: embeds the query into the same space.
    """

    def __init__(
        self,
        doc_ids: Sequence[str],
        vectors: Mapping[str, npt.NDArray[np.float32]],
        embedder: Embedder,
    ) -> None:
        self.embedder = embedder
        self.doc_ids = tuple(d for d in doc_ids if d in vectors)
        dim = len(next(iter(vectors.values()))) if vectors else 0
        matrix = np.zeros((len(self.doc_ids), dim), dtype=np.float32)
        for i, doc_id in enumerate(self.doc_ids):
            vec = np.asarray(vectors[doc_id], dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            matrix[i] = vec / norm if norm else vec
        self.matrix = matrix

    def top_k(self, query: str, k: int) -> list[tuple[str, float]]:
        if not self.doc_ids:
            return []
        q = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if not norm:
            return []
        scores = (self.matrix @ (q / norm)).astype(np.float32)
        return top_k(self.doc_ids, scores, k)


def top_k(
    doc_ids: Sequence[str], scores: npt.NDArray[np.float32], k: int
) -> list[tuple[str, float]]:
    """The `k` highest positive scores, best first; equal scores ordered by document id."""
    if k <= 0 or not len(doc_ids):
        return []
    positive = np.flatnonzero(scores > 0)
    ranked = sorted(positive.tolist(), key=lambda i: (-float(scores[i]), doc_ids[i]))
    return [(doc_ids[i], float(scores[i])) for i in ranked[:k]]
