"""Sentence embeddings with sentence-transformers and torch (the ``torch`` extra).

Used when a user asks for it (``backend="torch"``) or for a model the ONNX graph does
not cover; nothing is downloaded (``local_files_only``, ``HF_HUB_OFFLINE``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privacy_ci.embeddings._errors import ModelUnavailableError

__all__ = ["SentenceTransformerEncoder", "torch_available"]


def torch_available() -> bool:
    """Whether sentence-transformers (and so torch) can be imported."""
    return importlib.util.find_spec("sentence_transformers") is not None


def _quiet_loading() -> None:
    """No progress bars while weights load (they would interleave with --json output)."""
    # through importlib: mypy must pass with and without the torch extra installed
    for module, name in (
        ("huggingface_hub.utils", "disable_progress_bars"),
        ("transformers.utils.logging", "disable_progress_bar"),
    ):
        with contextlib.suppress(Exception):
            getattr(importlib.import_module(module), name)()


class SentenceTransformerEncoder:
    """A `SentenceTransformer` behind the encoder interface.

    Args:
        target: a local folder or a model name in the Hugging Face cache.
        device: the torch device.
        hint: added to the error when the model cannot be loaded.

    Raises:
        ModelUnavailableError: sentence-transformers is missing or the model is not local.
    """

    backend = "torch"

    def __init__(self, target: str, device: str = "cpu", hint: str = "") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if not torch_available():
            raise ModelUnavailableError(
                "the torch embedding backend needs sentence-transformers and torch "
                "(pip install 'privacy-ci[torch]'; see the Makefile for a CPU build of torch)"
            )
        sentence_transformer: Any = importlib.import_module("sentence_transformers")
        _quiet_loading()
        try:
            self.st: Any = sentence_transformer.SentenceTransformer(
                target, device=device, local_files_only=True
            )
        except Exception as exc:
            raise ModelUnavailableError(
                f"embedding model {target!r} is not available locally and nothing is "
                f"downloaded: pass a local folder or a model already in the Hugging Face "
                f"cache.{hint} ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
        self.max_seq_length = int(getattr(self.st, "max_seq_length", 256) or 256)

    @property
    def dimension(self) -> int:
        """The embedding size."""
        get = (
            getattr(self.st, "get_embedding_dimension", None)
            or self.st.get_sentence_embedding_dimension
        )
        return int(get())

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> npt.NDArray[np.float32]:
        """L2-normalised embeddings of ``texts``, in their order."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = []
        step = max(1, batch_size) * (8 if progress is not None else 1 << 30)
        for start in range(0, len(texts), step):
            chunk = list(texts[start : start + step])
            parts.append(
                self.st.encode(
                    chunk,
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            )
            if progress is not None:
                progress(len(chunk))
        return np.asarray(np.concatenate(parts), dtype=np.float32)
