"""An ONNX graph for a BERT or MPNet sentence encoder, built from its safetensors weights.

No torch is involved: the checkpoint's tensors are read with ``safetensors.numpy`` and
wired into a standard post-LayerNorm transformer encoder with ``onnx.helper``. The graph
takes the token ids, an additive attention mask, the position ids and (MPNet) the
relative-position buckets, all prepared by `privacy_ci.embeddings._onnx`, and returns the
last hidden state; pooling happens outside, as in Sentence Transformers.

Supported ``model_type`` values of ``config.json``: ``bert`` (absolute positions, token
type 0 everywhere) and ``mpnet`` (RoBERTa-style positions, a relative-attention bias
shared by every layer). Anything else raises `EmbeddingModelError`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privacy_ci.embeddings._errors import EmbeddingModelError

__all__ = ["GRAPH_VERSION", "EncoderConfig", "build_encoder_graph", "relative_position_buckets"]

GRAPH_VERSION = "1"
"""Bumped whenever the graph changes, so cached graphs are rebuilt."""

_OPSET = 17  # LayerNormalization is a standard op from 17 on


@dataclass(frozen=True, slots=True)
class EncoderConfig:
    """What the graph and its inputs need from ``config.json``.

    Args:
        model_type: ``bert`` or ``mpnet``.
        hidden: the hidden size.
        heads: attention heads.
        layers: encoder layers.
        eps: LayerNorm epsilon.
        pad_id: the padding token id (MPNet positions count from it).
        buckets: MPNet's relative-attention buckets (0 for BERT).
        max_positions: rows of the position table.
    """

    model_type: str
    hidden: int
    heads: int
    layers: int
    eps: float
    pad_id: int
    buckets: int
    max_positions: int

    @classmethod
    def from_folder(cls, folder: Path) -> EncoderConfig:
        """Read ``config.json`` of a checkpoint folder."""
        path = folder / "config.json"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EmbeddingModelError(f"{path}: cannot read the model's config ({exc})") from None
        model_type = str(raw.get("model_type", ""))
        if model_type not in {"bert", "mpnet"}:
            raise EmbeddingModelError(
                f"{path}: model_type {model_type!r} has no ONNX graph here (bert or mpnet); "
                "use the torch backend (pip install 'privacy-ci[torch]') for other models"
            )
        try:
            return cls(
                model_type=model_type,
                hidden=int(raw["hidden_size"]),
                heads=int(raw["num_attention_heads"]),
                layers=int(raw["num_hidden_layers"]),
                eps=float(raw.get("layer_norm_eps", 1e-12)),
                pad_id=int(raw.get("pad_token_id", 0)),
                buckets=int(raw.get("relative_attention_num_buckets", 0)),
                max_positions=int(raw["max_position_embeddings"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingModelError(f"{path}: missing or bad field {exc}") from None


def relative_position_buckets(length: int, buckets: int, max_distance: int = 128) -> np.ndarray:
    """MPNet's bucket of every (query, key) offset: exact for small offsets, logarithmic
    beyond, one half of the buckets for each direction.

    Args:
        length: the sequence length.
        buckets: the number of buckets (32 for all-mpnet-base-v2).
        max_distance: offsets at or beyond it share the last bucket.

    Returns:
        An int64 ``(length, length)`` matrix.
    """
    offsets = np.arange(length)[None, :] - np.arange(length)[:, None]  # key - query
    n = -offsets
    half = buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (
            np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    return np.asarray(out + np.where(n < exact, n, large), dtype=np.int64)


class _Builder:
    """Accumulates nodes and initialisers with unique names."""

    def __init__(self) -> None:
        from onnx import helper

        self.helper = helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def name(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, stem: str, value: npt.ArrayLike, dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], stem: str, **attrs: Any) -> str:
        out = self.name(stem)
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, stem: str) -> str:
        # torch stores (out, in); MatMul wants (in, out)
        w = self.const(f"{stem}_w", weight.T)
        b = self.const(f"{stem}_b", bias)
        return self.op("Add", [self.op("MatMul", [x, w], stem), b], f"{stem}_out")

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, eps: float) -> str:
        w = self.const("ln_w", weight)
        b = self.const("ln_b", bias)
        return self.op("LayerNormalization", [x, w, b], "ln", axis=-1, epsilon=eps)

    def gelu(self, x: str) -> str:
        # the exact (erf) GELU that BERT and MPNet use
        scaled = self.op("Mul", [x, self.const("inv_sqrt2", 1.0 / math.sqrt(2.0))], "gelu_s")
        erf = self.op("Erf", [scaled], "gelu_erf")
        one_plus = self.op("Add", [erf, self.const("one", 1.0)], "gelu_p")
        half_x = self.op("Mul", [x, self.const("half", 0.5)], "gelu_h")
        return self.op("Mul", [half_x, one_plus], "gelu")


def _names(cfg: EncoderConfig, layer: int) -> dict[str, str]:
    """Checkpoint tensor names of one layer, by role."""
    p = f"encoder.layer.{layer}."
    if cfg.model_type == "bert":
        return {
            "q": p + "attention.self.query",
            "k": p + "attention.self.key",
            "v": p + "attention.self.value",
            "o": p + "attention.output.dense",
            "ln1": p + "attention.output.LayerNorm",
            "up": p + "intermediate.dense",
            "down": p + "output.dense",
            "ln2": p + "output.LayerNorm",
        }
    return {
        "q": p + "attention.attn.q",
        "k": p + "attention.attn.k",
        "v": p + "attention.attn.v",
        "o": p + "attention.attn.o",
        "ln1": p + "attention.LayerNorm",
        "up": p + "intermediate.dense",
        "down": p + "output.dense",
        "ln2": p + "output.LayerNorm",
    }


def _strip_prefix(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Checkpoints saved from a task model prefix every tensor (``bert.``, ``mpnet.``)."""
    for prefix in ("bert.", "mpnet.", "model."):
        if any(k.startswith(prefix + "embeddings.") for k in weights):
            return {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
    return weights


def build_encoder_graph(folder: Path) -> tuple[bytes, EncoderConfig]:
    """The serialised ONNX model of a checkpoint folder, and its config.

    Inputs of the graph: ``input_ids`` (int64, batch x length), ``position_ids`` (int64,
    batch x length), ``attention_bias`` (float32, batch x 1 x 1 x length: 0 for tokens,
    a large negative number for padding) and, for MPNet, ``position_buckets`` (int64,
    length x length, from `relative_position_buckets`). Output: ``last_hidden_state``
    (batch x length x hidden).

    Args:
        folder: a folder with ``config.json`` and ``model.safetensors``.

    Returns:
        The model bytes and the config.

    Raises:
        EmbeddingModelError: a file is missing or damaged, or the architecture is
            not supported.
    """
    from onnx import TensorProto, helper

    cfg = EncoderConfig.from_folder(folder)
    path = folder / "model.safetensors"
    try:
        from safetensors.numpy import load_file

        weights = _strip_prefix(load_file(str(path)))
    except FileNotFoundError:
        raise EmbeddingModelError(f"{path}: the model's weights are missing") from None
    except Exception as exc:  # safetensors raises its own error types for damaged files
        raise EmbeddingModelError(f"{path}: cannot read the weights ({exc})") from None

    def w(name: str) -> np.ndarray:
        try:
            return np.asarray(weights[name], dtype=np.float32)
        except KeyError:
            raise EmbeddingModelError(f"{path}: tensor {name!r} is missing") from None

    b = _Builder()
    head_dim = cfg.hidden // cfg.heads
    words = b.op(
        "Gather",
        [b.const("word_emb", w("embeddings.word_embeddings.weight")), "input_ids"],
        "words",
    )
    positions = b.op(
        "Gather",
        [b.const("pos_emb", w("embeddings.position_embeddings.weight")), "position_ids"],
        "positions",
    )
    x = b.op("Add", [words, positions], "emb")
    if cfg.model_type == "bert":  # every token is segment 0
        x = b.op(
            "Add",
            [x, b.const("type_emb", w("embeddings.token_type_embeddings.weight")[0])],
            "emb_t",
        )
    x = b.layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), cfg.eps)

    split_shape = b.const("split_shape", [0, 0, cfg.heads, head_dim], np.int64)
    merge_shape = b.const("merge_shape", [0, 0, cfg.hidden], np.int64)
    scale = b.const("scale", 1.0 / math.sqrt(head_dim))
    position_bias = None
    if cfg.model_type == "mpnet":  # one bias table shared by every layer
        table = b.const("rel_bias", w("encoder.relative_attention_bias.weight"))
        looked_up = b.op("Gather", [table, "position_buckets"], "rel")  # L x L x heads
        position_bias = b.op(
            "Unsqueeze",
            [
                b.op("Transpose", [looked_up], "rel_t", perm=[2, 0, 1]),
                b.const("axis0", [0], np.int64),
            ],
            "rel_bias_b",
        )
    for layer in range(cfg.layers):
        n = _names(cfg, layer)

        def heads(t: str) -> str:
            return b.op(
                "Transpose",
                [b.op("Reshape", [t, split_shape], "split")],
                "heads",
                perm=[0, 2, 1, 3],
            )

        q = heads(b.linear(x, w(n["q"] + ".weight"), w(n["q"] + ".bias"), "q"))
        k = heads(b.linear(x, w(n["k"] + ".weight"), w(n["k"] + ".bias"), "k"))
        v = heads(b.linear(x, w(n["v"] + ".weight"), w(n["v"] + ".bias"), "v"))
        k_t = b.op("Transpose", [k], "k_t", perm=[0, 1, 3, 2])
        scores = b.op("Mul", [b.op("MatMul", [q, k_t], "qk"), scale], "scores")
        if position_bias is not None:
            scores = b.op("Add", [scores, position_bias], "scores_pos")
        scores = b.op("Add", [scores, "attention_bias"], "scores_masked")
        probs = b.op("Softmax", [scores], "probs", axis=-1)
        context = b.op("Transpose", [b.op("MatMul", [probs, v], "ctx")], "ctx_t", perm=[0, 2, 1, 3])
        context = b.op("Reshape", [context, merge_shape], "merged")
        attn = b.linear(context, w(n["o"] + ".weight"), w(n["o"] + ".bias"), "o")
        x = b.layer_norm(
            b.op("Add", [attn, x], "res1"), w(n["ln1"] + ".weight"), w(n["ln1"] + ".bias"), cfg.eps
        )
        up = b.gelu(b.linear(x, w(n["up"] + ".weight"), w(n["up"] + ".bias"), "up"))
        down = b.linear(up, w(n["down"] + ".weight"), w(n["down"] + ".bias"), "down")
        x = b.layer_norm(
            b.op("Add", [down, x], "res2"), w(n["ln2"] + ".weight"), w(n["ln2"] + ".bias"), cfg.eps
        )
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "length"]),
        helper.make_tensor_value_info(
            "attention_bias", TensorProto.FLOAT, ["batch", 1, 1, "length"]
        ),
    ]
    if cfg.model_type == "mpnet":
        inputs.append(
            helper.make_tensor_value_info(
                "position_buckets", TensorProto.INT64, ["length", "length"]
            )
        )
    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "length", cfg.hidden]
    )
    graph = helper.make_graph(b.nodes, "sentence_encoder", inputs, [output], b.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", _OPSET)],
        producer_name="privacy-ci",
        producer_version=GRAPH_VERSION,
    )
    model.ir_version = 8  # readable by every onnxruntime since 1.14
    return model.SerializeToString(), cfg
