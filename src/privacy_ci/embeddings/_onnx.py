"""Sentence embeddings on ONNX Runtime: the `tokenizers` library, the graph of
`privacy_ci.embeddings._graph`, and the pooling Sentence Transformers applies.

The graph is built once from the checkpoint's safetensors weights and cached as
``<cache_dir>/embeddings/<name>-<key>.onnx``, the key covering the graph version, the
model's config and its weights file (size and sampled bytes), so a changed model or
builder rebuilds it. Texts are encoded in batches of similar length (fewer padding
tokens), then returned in the caller's order.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privacy_ci.embeddings._errors import EmbeddingModelError, ModelUnavailableError
from privacy_ci.embeddings._graph import (
    GRAPH_VERSION,
    EncoderConfig,
    build_encoder_graph,
    relative_position_buckets,
)

__all__ = ["OnnxEncoder", "onnx_available"]

_MASKED = -1e9  # added to the attention scores of padding tokens


def onnx_available() -> bool:
    """Whether onnxruntime, onnx and tokenizers can be imported."""
    import importlib.util

    return all(
        importlib.util.find_spec(m) is not None
        for m in ("onnxruntime", "onnx", "tokenizers", "safetensors")
    )


def _read_json(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    if not path.is_file():
        return default
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingModelError(f"{path}: cannot read ({exc})") from None
    if not isinstance(value, dict):
        raise EmbeddingModelError(f"{path}: expected a JSON object")
    return value


def _weights_key(folder: Path) -> str:
    """A cheap fingerprint of the checkpoint: config, weights size and sampled bytes."""
    digest = hashlib.sha256(GRAPH_VERSION.encode())
    for name in ("config.json", "tokenizer.json"):
        with open(folder / name, "rb") as fh:
            digest.update(fh.read())
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    digest.update(str(size).encode())
    with open(weights, "rb") as fh:
        for offset in np.linspace(0, max(0, size - 65536), 16).astype(np.int64):
            fh.seek(int(offset))
            digest.update(fh.read(65536))
    return digest.hexdigest()


class OnnxEncoder:
    """A BERT or MPNet sentence encoder run by ONNX Runtime on the CPU.

    Args:
        folder: a Sentence Transformers folder (``config.json``, ``model.safetensors``,
            ``tokenizer.json``, optionally ``sentence_bert_config.json`` and
            ``1_Pooling/config.json``).
        cache_root: where the built graph is kept (default ``cache_dir()/embeddings``).
        threads: ONNX Runtime intra-op threads (default: the machine's cores).

    Raises:
        ModelUnavailableError: onnxruntime, onnx or tokenizers is not installed.
        EmbeddingModelError: a model file is missing or damaged.
    """

    backend = "onnx"

    def __init__(
        self, folder: Path, cache_root: Path | None = None, threads: int | None = None
    ) -> None:
        if not onnx_available():
            raise ModelUnavailableError(
                "ONNX embeddings need onnxruntime, onnx, tokenizers and safetensors "
                "(pip install 'privacy-ci[embeddings]')"
            )
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.folder = folder
        for required in ("config.json", "model.safetensors", "tokenizer.json"):
            if not (folder / required).is_file():
                raise EmbeddingModelError(f"{folder}: {required} is missing")
        self.config = EncoderConfig.from_folder(folder)
        st_config = _read_json(folder / "sentence_bert_config.json", {})
        pooling = _read_json(folder / "1_Pooling" / "config.json", {})
        self.max_seq_length = int(st_config.get("max_seq_length", 256))
        self.pooling = "cls" if pooling.get("pooling_mode_cls_token") else "mean"
        try:
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise EmbeddingModelError(f"{folder / 'tokenizer.json'}: {exc}") from None
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        graph_path = self._graph(cache_root)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(
                str(graph_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a damaged cached graph: rebuild once
            graph_path.unlink(missing_ok=True)
            graph_path = self._graph(cache_root)
            try:
                self.session = ort.InferenceSession(
                    str(graph_path), options, providers=["CPUExecutionProvider"]
                )
            except Exception:
                raise EmbeddingModelError(
                    f"{graph_path}: ONNX Runtime refused it ({exc})"
                ) from None
        self._buckets: dict[int, np.ndarray] = {}

    def _graph(self, cache_root: Path | None) -> Path:
        if cache_root is None:
            from privacy_ci.data import cache_dir

            cache_root = cache_dir() / "embeddings"
        key = _weights_key(self.folder)
        target = cache_root / f"{self.folder.name}-{key[:20]}.onnx"
        if target.is_file() and target.stat().st_size > 0:
            return target
        data, _ = build_encoder_graph(self.folder)
        cache_root.mkdir(parents=True, exist_ok=True)
        for old in cache_root.glob(f"{self.folder.name}-*.onnx"):
            old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_root, prefix=".graph-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    @property
    def dimension(self) -> int:
        """The embedding size."""
        return self.config.hidden

    def _position_buckets(self, length: int) -> np.ndarray:
        hit = self._buckets.get(length)
        if hit is None:
            hit = relative_position_buckets(length, self.config.buckets)
            self._buckets[length] = hit
        return hit

    def _run(self, ids: list[list[int]]) -> npt.NDArray[np.float32]:
        length = max(len(row) for row in ids)
        batch = np.full((len(ids), length), self.config.pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), length), dtype=np.int64)
        for i, row in enumerate(ids):
            batch[i, : len(row)] = row
            mask[i, : len(row)] = 1
        if self.config.model_type == "mpnet":  # RoBERTa-style: count from the pad id
            positions = np.cumsum(mask, axis=1) * mask + self.config.pad_id
        else:
            positions = np.broadcast_to(np.arange(length, dtype=np.int64), batch.shape)
        feeds: dict[str, np.ndarray] = {
            "input_ids": batch,
            "position_ids": np.ascontiguousarray(positions, dtype=np.int64),
            "attention_bias": ((1 - mask) * _MASKED).astype(np.float32)[:, None, None, :],
        }
        if self.config.model_type == "mpnet":
            feeds["position_buckets"] = self._position_buckets(length)
        (hidden,) = self.session.run(["last_hidden_state"], feeds)
        if self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> npt.NDArray[np.float32]:
        """L2-normalised embeddings of ``texts``, in their order (the `Encoder` protocol);
        batches hold texts of similar length, so little of each is padding."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        for start in range(0, len(order), max(1, batch_size)):
            chunk = order[start : start + batch_size]
            out[chunk] = self._run([ids[i] for i in chunk])
            if progress is not None:
                progress(len(chunk))
        return out
