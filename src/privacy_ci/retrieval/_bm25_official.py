"""``bm25-paper``: BM25 exactly as the Privacy Checklist's released code ran it.

The authors' retrieval (``agents/agents.py`` ``AgentSearch`` with ``agents/bm25.py``
of ``HKUST-KnowComp/privacy_checklist``) differs from a textbook BM25 over our tree
in four ways, all reproduced here (facts taken from that code; the code is ours):

* corpus: the entries of the annotated knowledge base (HIPAA: the 591 entries of
  ``kb_annotated.json``; GDPR and the AI Act: the PrivaCI-Bench KB files, the same
  format), in file order, each by its ``text`` (the path from the section heading
  down to the leaf), not the ~1,600 leaves of the tree;
* tokens: documents are ``text.split()``, queries ``text.split(" ")`` (no case
  folding, punctuation attached, a double space gives an empty token that matches
  nothing); every query token counts, repeats included;
* IDF: ``ln(N - n + 0.5) - ln(n + 0.5)``; a negative IDF (a word in more than half
  the documents) is replaced by ``0.25`` x the mean IDF over the vocabulary (taken
  before the replacement), not floored at 0;
* ties: documents are sorted by score with a stable sort, so equal scores keep
  corpus order, and the top ``k`` always has ``k`` entries (zero scores included).

Scores are accumulated per query token in query order, with each term's
contribution computed by the same expression as the original
(``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``), so they are
bit-for-bit the original's and so are its ties. k1 = 1.5, b = 0.75.

The index over ~600 short documents builds in a few milliseconds, so it is not
cached on disk.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from privacy_ci.retrieval._base import Hit, RetrievalError, RetrievalQuery, as_query, check_k

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = [
    "OFFICIAL_B",
    "OFFICIAL_EPSILON",
    "OFFICIAL_K1",
    "OfficialBM25",
    "OfficialBM25Retriever",
    "bm25_paper",
]

OFFICIAL_K1 = 1.5
OFFICIAL_B = 0.75
OFFICIAL_EPSILON = 0.25
"""A negative IDF becomes this fraction of the mean IDF."""


class OfficialBM25:
    """The released code's BM25 over pre-tokenised documents.

    Args:
        corpus: one token list per document.
        k1, b: the BM25 parameters.
        epsilon: the negative-IDF replacement, as a fraction of the mean IDF.

    Raises:
        RetrievalError: the corpus is empty.
    """

    def __init__(
        self,
        corpus: Sequence[Sequence[str]],
        k1: float = OFFICIAL_K1,
        b: float = OFFICIAL_B,
        epsilon: float = OFFICIAL_EPSILON,
    ) -> None:
        if not corpus:
            raise RetrievalError("BM25 needs at least one document")
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = len(corpus)
        self.doc_len = [len(doc) for doc in corpus]
        self.avgdl = float(sum(self.doc_len)) / self.corpus_size
        self.doc_freqs: list[dict[str, int]] = []
        nd: dict[str, int] = {}  # word -> documents containing it, in first-seen order
        for doc in corpus:
            freqs: dict[str, int] = {}
            for word in doc:
                freqs[word] = freqs.get(word, 0) + 1
            self.doc_freqs.append(freqs)
            for word in freqs:
                nd[word] = nd.get(word, 0) + 1
        self.idf: dict[str, float] = {}
        idf_sum = 0.0
        negative = []
        for word, n in nd.items():  # summed in the original's order: the same mean, bit for bit
            idf = math.log(self.corpus_size - n + 0.5) - math.log(n + 0.5)
            self.idf[word] = idf
            idf_sum += idf
            if idf < 0:
                negative.append(word)
        self.average_idf = idf_sum / len(self.idf) if self.idf else 0.0
        for word in negative:
            self.idf[word] = self.epsilon * self.average_idf
        # word -> (documents, contributions): one vector add per query token
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for index, freqs in enumerate(self.doc_freqs):
            for word, tf in freqs.items():
                docs, values = postings.setdefault(word, ([], []))
                docs.append(index)
                values.append(self.term_score(word, tf, index))
        self._postings = {
            w: (np.asarray(d, dtype=np.int64), np.asarray(v, dtype=np.float64))
            for w, (d, v) in postings.items()
        }

    def term_score(self, word: str, tf: int, index: int) -> float:
        """One query word's contribution to one document (the original's expression)."""
        k1, b, dl = self.k1, self.b, self.doc_len[index]
        return self.idf[word] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / self.avgdl))

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """Every document's score for a tokenised query (repeated tokens count again)."""
        out = np.zeros(self.corpus_size, dtype=np.float64)
        for word in query:
            posting = self._postings.get(word)
            if posting is not None:
                docs, values = posting
                out[docs] += values  # a document occurs once per posting list
        return out

    def top(self, query: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The ``k`` best (document index, score), ties in corpus order."""
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order]


class OfficialBM25Retriever:
    """``bm25-paper``: `OfficialBM25` over a knowledge base's annotated entries.

    Args:
        kb: the knowledge base (its `norms`, in file order, are the corpus).

    Attributes:
        name: ``bm25-paper``.
        ids: the entries' node ids, in corpus order.
        build_seconds: time spent building the index.
    """

    name = "bm25-paper"

    def __init__(self, kb: KnowledgeBase) -> None:
        start = time.perf_counter()
        self.kb = kb
        norms = list(kb.norms.values())
        if not norms:
            raise RetrievalError(f"{kb.regulation}: the knowledge base has no annotated entries")
        self.ids = [n.id for n in norms]
        self.index = OfficialBM25([self.document_tokens(n.text) for n in norms])
        self.build_seconds = time.perf_counter() - start

    @staticmethod
    def document_tokens(text: str) -> list[str]:
        """A document's tokens: stripped, newlines to spaces, split on whitespace."""
        return text.strip().replace("\n", " ").split()

    @staticmethod
    def query_tokens(query: str | RetrievalQuery) -> list[str]:
        """A query's tokens: its text split on single spaces (empty tokens kept)."""
        return as_query(query).text.split(" ")

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """The top ``k`` entries, as the original ranks them.

        Args:
            query: free text or a `RetrievalQuery` (its CI fields are not read).
            k: how many (always that many, or the corpus size: zero scores included).

        Returns:
            Hits, best first; equal scores in corpus order.

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        check_k(k)
        tokens = self.query_tokens(query)
        return [Hit(self.ids[i], s) for i, s in self.index.top(tokens, k)]

    def retrieve_many(
        self, queries: Iterable[str | RetrievalQuery], k: int = 10
    ) -> list[list[Hit]]:
        """`retrieve` for several queries."""
        return [self.retrieve(q, k) for q in queries]

    def __repr__(self) -> str:
        return f"OfficialBM25Retriever({self.kb.regulation}, {len(self.ids)} entries)"


def bm25_paper(kb: KnowledgeBase) -> OfficialBM25Retriever:
    """The Privacy Checklist's BM25 as released, ``bm25-paper`` (see the module docstring).

    Args:
        kb: the knowledge base (its annotated entries are the corpus).

    Returns:
        The retriever.

    Raises:
        RetrievalError: the knowledge base has no annotated entries.
    """
    return OfficialBM25Retriever(kb)
