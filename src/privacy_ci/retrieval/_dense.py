"""Dense retrieval (section 4.2, "embedding similarity").

The paper embeds contexts and regulations with ``all-mpnet-base-v2`` and ranks by
cosine similarity. We default to ``all-MiniLM-L6-v2`` (``minilm``), offer the paper's
model as ``mpnet``, and accept a local folder; models come from PyPI packages and
run on ONNX Runtime by default (`privacy_ci.embeddings`), nothing is downloaded, and
a model that is not installed raises `ModelUnavailableError` naming its packages.

Documents are built by a `DocumentRecipe` (default: ``path`` text, the headings
of the leaf's part, subpart and section plus the paragraphs' own text down to
the leaf, so the leaf's words survive the model's 256-token limit). Their
normalised embeddings are cached as ``embeddings.npy`` (with a ``meta.json``)
under ``cache_dir()/retrieval/dense/<regulation>-<model hash>-<recipe hash>-<KB hash>/``
(the model hash covers the model and the backend); an entry built from another KB is
deleted when the new one is written. The one-time embedding shows a progress bar on
a terminal.

A long query is cut into windows of ``window_words`` words (25 % overlap, at
most ``max_windows`` of them); each window is embedded and a document's score is the maximum cosine
over the windows (``query_pooling="max"``) or the cosine with the normalised
mean of the window embeddings (``"mean"``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from privacy_ci.embeddings import (
    DEFAULT_MODEL,
    PAPER_MODEL,
    EmbeddingModel,
    choose_backend,
    load_embedding_model,
    resolve_model,
)
from privacy_ci.retrieval._base import (
    Hit,
    RetrievalError,
    RetrievalQuery,
    as_query,
    check_k,
    config_hash,
    kb_fingerprint,
    load_array_entry,
    retrieval_cache_dir,
    save_array_entry,
)
from privacy_ci.retrieval._bm25 import DocumentRecipe, build_documents, rank_with_tree

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = [
    "DEFAULT_MODEL",
    "PAPER_MODEL",
    "DenseConfig",
    "DenseRetriever",
    "EmbeddingModel",
    "load_embedding_model",
    "resolve_model",
]


@contextmanager
def _embedding_progress(total: int, label: str) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr for a one-time embedding (only on a terminal, so that
    --json output and logs stay clean)."""
    if total < 256 or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.advance(task, done)


@dataclass(frozen=True, slots=True)
class DenseConfig:
    """Everything that defines a dense retriever.

    Args:
        name: the retriever's name in tables.
        model: a model name or folder (default the packaged MiniLM).
        recipe: how documents are built.
        query_ci: append the query's CI characteristics to its text.
        window_words: words per query window (0: the model's limit).
        max_windows: at most this many windows, evenly spaced over a longer query
            (a 10,000-word query costs as much as a 2,000-word one).
        query_pooling: ``max`` (best window) or ``mean`` (mean window embedding).
        diversify: per-parent quota in the ranking (see `rank_with_tree`).
        batch_size: encoding batch size.
        device: torch device (torch backend only).
        backend: ``auto``, ``onnx`` or ``torch`` (None: ``$PRIVACY_CI_EMBEDDINGS``, else auto).
    """

    name: str = "dense"
    model: str = DEFAULT_MODEL
    recipe: DocumentRecipe = field(
        default_factory=lambda: DocumentRecipe(units="leaves", text="path")
    )
    query_ci: bool = True
    window_words: int = 0
    max_windows: int = 16
    query_pooling: Literal["max", "mean"] = "mean"
    diversify: int = 0
    batch_size: int = 64
    device: str = "cpu"
    backend: str | None = None


class DenseRetriever:
    """Cosine similarity between a query and every document of a KB.

    Args:
        kb: the knowledge base.
        config: the configuration.
        cache: ``True`` for the default cache folder, a folder, or ``False``.

    Attributes:
        name: ``config.name``.
        ids: the indexed node ids.
        loaded_from_cache: whether the embeddings came from disk.
        build_seconds: time to embed (or load) the documents.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        config: DenseConfig | None = None,
        cache: bool | Path | str = True,
    ) -> None:
        self.kb = kb
        self.config = config or DenseConfig()
        self.name = self.config.name
        self.model_id = resolve_model(self.config.model)
        self.backend = choose_backend(self.config.model, self.config.backend)
        start = time.perf_counter()
        self.ids, texts = build_documents(kb, self.config.recipe)
        if not self.ids:
            raise RetrievalError(f"{kb.regulation}: the tree has no documents to embed")
        self.loaded_from_cache = False
        self.cache_path: Path | None = None
        self.kb_hash = kb_fingerprint(kb)
        self._family = ""
        if cache is not False:
            root = None if cache is True else Path(cache)
            model_slug = hashlib.sha256(f"{self.model_id}@{self.backend}".encode()).hexdigest()[:10]
            key = config_hash(
                {
                    "recipe": asdict(self.config.recipe),
                    "model": self.model_id,
                    "backend": self.backend,
                }
            )
            self._family = f"{kb.regulation}-{model_slug}-{key}-"
            self.cache_path = retrieval_cache_dir("dense", root) / (
                f"{self._family}{self.kb_hash[:16]}"
            )
        self._model: EmbeddingModel | None = None
        matrix = self._load_cached()
        if matrix is None:
            label = f"embedding {kb.regulation} ({Path(self.model_id).name}, once)"
            with _embedding_progress(len(texts), label) as progress:
                matrix = self.model.encode(texts, self.config.batch_size, progress)
            self._save(matrix)
        self.matrix = matrix
        groups: dict[str | None, int] = {}
        self._parents = [groups.setdefault(kb.tree[i].parent, len(groups)) for i in self.ids]
        self.build_seconds = time.perf_counter() - start

    @property
    def model(self) -> EmbeddingModel:
        """The embedding model (loaded on first use)."""
        if self._model is None:
            self._model = load_embedding_model(self.config.model, self.config.device, self.backend)
        return self._model

    def _load_cached(self) -> np.ndarray | None:
        entry = load_array_entry(self.cache_path, "embeddings.npy", len(self.ids))
        if entry is None:
            return None
        matrix, meta = entry
        if (meta.get("ids"), meta.get("model"), meta.get("backend")) != (
            self.ids,
            self.model_id,
            self.backend,
        ):
            return None
        self.loaded_from_cache = True
        return matrix

    def _save(self, matrix: np.ndarray) -> None:
        if self.cache_path is None:
            return
        meta = {
            "model": self.model_id,
            "backend": self.backend,
            "config": json.loads(json.dumps(asdict(self.config))),
            "kb_hash": self.kb_hash,
            "ids": self.ids,
        }
        save_array_entry(self.cache_path, "embeddings.npy", matrix, meta, self._family)

    # -- querying --------------------------------------------------------------------
    def _windows(self, text: str) -> list[str]:
        words = text.split()
        size = self.config.window_words or self.model.max_words
        if len(words) <= size:
            return [text]
        step = max(1, size - size // 4)  # 25 % overlap
        starts = list(range(0, max(1, len(words) - size + step), step))
        if len(starts) > self.config.max_windows > 0:
            n = self.config.max_windows
            starts = (
                [starts[round(i * (len(starts) - 1) / (n - 1))] for i in range(n)]
                if n > 1
                else starts[:1]
            )
        return [" ".join(words[start : start + size]) for start in starts]

    def query_vector(self, query: str | RetrievalQuery) -> np.ndarray:
        """The query's window embeddings.

        Args:
            query: free text or a `RetrievalQuery`.

        Returns:
            ``(windows, dim)`` normalised embeddings.
        """
        q = as_query(query)
        text = q.combined_text(ci=self.config.query_ci)
        return self.model.encode_memo(self._windows(text), self.config.batch_size)

    def score_vector(self, query: str | RetrievalQuery) -> np.ndarray:
        """Cosine similarity of the query with every document.

        Args:
            query: free text or a `RetrievalQuery`.

        Returns:
            One score per document, in `ids` order.
        """
        windows = self.query_vector(query)
        if self.config.query_pooling == "max":
            return np.asarray((self.matrix @ windows.T).max(axis=1), dtype=np.float32)
        mean = windows.mean(axis=0)
        norm = float(np.linalg.norm(mean)) or 1.0
        return np.asarray(self.matrix @ (mean / norm), dtype=np.float32)

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """The top ``k`` nodes by cosine similarity.

        Args:
            query: free text or a `RetrievalQuery`.
            k: at most this many hits.

        Returns:
            Hits, best first (cosines shifted by +1 so that every score is positive).

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        check_k(k)
        scores = self.score_vector(query) + 1.0  # cosine in [-1, 1] -> (0, 2]
        ranked = rank_with_tree(scores, self._parents, k, self.config.diversify)
        return [Hit(self.ids[i], s - 1.0) for i, s in ranked]

    def __repr__(self) -> str:
        return f"DenseRetriever({self.name!r}, {self.kb.regulation}, {Path(self.model_id).name})"


def embedding_similarity(
    model: EmbeddingModel | str = DEFAULT_MODEL,
) -> Callable[[str, Sequence[str]], list[float]]:
    """A meaning-based term scorer for the role and attribute graphs.

    Args:
        model: a loaded model, or a model name/folder to load (never downloaded).

    Returns:
        ``(query, terms) -> cosine similarities`` (clipped to [0, 1] by the graphs);
        term embeddings are memoised by the model, so a graph is embedded once.
    """
    loaded = load_embedding_model(model) if isinstance(model, str) else model

    def score(query: str, terms: Sequence[str]) -> list[float]:
        vectors = loaded.encode_memo([query, *terms])
        return [float(v) for v in vectors[1:] @ vectors[0]]

    return score
