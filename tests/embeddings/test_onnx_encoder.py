"""The ONNX encoder against independent references, and every way a model can be broken.

* the packaged MiniLM against vectors that sentence-transformers (torch) produced for a
  fixed sample (``minilm_reference.json``; runs without torch);
* tiny random BERT and MPNet checkpoints against a plain NumPy forward pass written
  here, one sequence at a time (so padding and masking in the batched graph are checked);
* missing, damaged and unsupported files; the graph cache; no network.
"""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from privacy_ci.embeddings import (
    EmbeddingModelError,
    ModelUnavailableError,
    load_embedding_model,
    relative_position_buckets,
    resolve_model,
)
from privacy_ci.embeddings._onnx import OnnxEncoder
from privacy_ci.store import Embedder

HERE = Path(__file__).parent
WORDS = [
    "the",
    "a",
    "hospital",
    "patient",
    "record",
    "sent",
    "to",
    "employer",
    "court",
    "order",
    "disclose",
    "health",
]


# -- the packaged model against torch's vectors -------------------------------------------
def test_packaged_minilm_matches_sentence_transformers_vectors(tmp_path: Path) -> None:
    reference = json.loads((HERE / "minilm_reference.json").read_text(encoding="utf-8"))
    folder = Path(resolve_model("minilm"))
    encoder = OnnxEncoder(folder, cache_root=tmp_path)
    got = encoder.encode(reference["texts"], batch_size=3)  # mixed lengths in one batch
    want = np.asarray(reference["vectors"], dtype=np.float32)
    cosines = (got * want).sum(axis=1) / np.linalg.norm(want, axis=1)
    assert cosines.min() >= 0.9999, cosines
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # the order of the texts is kept whatever the batching
    one_by_one = np.stack([encoder.encode([t])[0] for t in reference["texts"][:3]])
    assert np.allclose(one_by_one, got[:3], atol=1e-5)


def test_the_loaded_model_serves_the_store_and_never_opens_a_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the embedding model tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    model = load_embedding_model("minilm", backend="onnx")
    assert isinstance(model, Embedder)
    vectors = model.embed(["a court order", "an authorization"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert model.encode([]).shape == (0, 384)


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(EmbeddingModelError, match="unknown embedding backend 'gpu'"):
        load_embedding_model("minilm", backend="gpu")


# -- tiny random checkpoints against a NumPy forward pass ---------------------------------
def _tokenizer_json(folder: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.processors import TemplateProcessing

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    vocab.update({w: i + 4 for i, w in enumerate(WORDS)})
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(folder / "tokenizer.json"))


def _checkpoint(folder: Path, model_type: str, seed: int = 0) -> dict[str, np.ndarray]:
    """A random 2-layer checkpoint of ``model_type`` in Sentence Transformers' layout."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    hidden, heads, inter, layers, vocab = 16, 4, 32, 2, len(WORDS) + 4
    positions = 40
    pad = 0 if model_type == "bert" else 1

    def r(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": r(vocab, hidden),
        "embeddings.position_embeddings.weight": r(positions, hidden),
        "embeddings.LayerNorm.weight": 1 + r(hidden),
        "embeddings.LayerNorm.bias": r(hidden),
    }
    if model_type == "bert":
        w["embeddings.token_type_embeddings.weight"] = r(2, hidden)
        names = {
            "q": "attention.self.query",
            "k": "attention.self.key",
            "v": "attention.self.value",
            "o": "attention.output.dense",
            "ln1": "attention.output.LayerNorm",
        }
    else:
        w["encoder.relative_attention_bias.weight"] = r(32, heads) * 3
        names = {
            "q": "attention.attn.q",
            "k": "attention.attn.k",
            "v": "attention.attn.v",
            "o": "attention.attn.o",
            "ln1": "attention.LayerNorm",
        }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for role in ("q", "k", "v", "o"):
            w[p + names[role] + ".weight"] = r(hidden, hidden)
            w[p + names[role] + ".bias"] = r(hidden)
        w[p + names["ln1"] + ".weight"] = 1 + r(hidden)
        w[p + names["ln1"] + ".bias"] = r(hidden)
        w[p + "intermediate.dense.weight"] = r(inter, hidden)
        w[p + "intermediate.dense.bias"] = r(inter)
        w[p + "output.dense.weight"] = r(hidden, inter)
        w[p + "output.dense.bias"] = r(hidden)
        w[p + "output.LayerNorm.weight"] = 1 + r(hidden)
        w[p + "output.LayerNorm.bias"] = r(hidden)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(w, str(folder / "model.safetensors"))
    config = {
        "model_type": model_type,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "layer_norm_eps": 1e-12 if model_type == "bert" else 1e-5,
        "pad_token_id": pad,
        "max_position_embeddings": positions,
        "vocab_size": vocab,
    }
    if model_type == "mpnet":
        config["relative_attention_num_buckets"] = 32
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 12}', encoding="utf-8")
    _tokenizer_json(folder)
    return w


def _bucket(offset: int, buckets: int = 32, max_distance: int = 128) -> int:
    """MPNet's bucket of one (key - query) offset, written out scalar by scalar."""
    half = buckets // 2
    n = -offset
    out = half if n < 0 else 0
    n = abs(n)
    exact = half // 2
    if n < exact:
        return out + n
    large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (half - exact))
    return out + min(large, half - 1)


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _reference(w: dict[str, np.ndarray], model_type: str, ids: list[int]) -> np.ndarray:
    """One unpadded sequence through the encoder, mean-pooled and normalised."""
    from scipy.special import erf

    heads, eps = 4, (1e-12 if model_type == "bert" else 1e-5)
    n = len(ids)
    if model_type == "bert":
        pos = np.arange(n)
        names = ("attention.self.query", "attention.self.key", "attention.self.value")
        out_name, ln1 = "attention.output.dense", "attention.output.LayerNorm"
    else:
        pos = np.arange(n) + 2  # counted from the pad id (1), starting at 1
        names = ("attention.attn.q", "attention.attn.k", "attention.attn.v")
        out_name, ln1 = "attention.attn.o", "attention.LayerNorm"
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][pos]
    )
    if model_type == "bert":
        x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    bias = np.zeros((heads, n, n))
    if model_type == "mpnet":
        table = w["encoder.relative_attention_bias.weight"]
        for qi in range(n):
            for ki in range(n):
                bias[:, qi, ki] = table[_bucket(ki - qi)]
    d = x.shape[1] // heads
    for i in range(2):
        p = f"encoder.layer.{i}."

        def lin(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (lin(x, nm).reshape(n, heads, d).transpose(1, 0, 2) for nm in names)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, -1)
        x = _layer_norm(lin(ctx, out_name) + x, w[p + ln1 + ".weight"], w[p + ln1 + ".bias"], eps)
        up = lin(x, "intermediate.dense")
        up = 0.5 * up * (1 + erf(up / math.sqrt(2)))
        x = _layer_norm(
            lin(up, "output.dense") + x,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            eps,
        )
    pooled = x.mean(axis=0)
    return np.asarray(pooled / np.linalg.norm(pooled))


@pytest.mark.parametrize("model_type", ["bert", "mpnet"])
def test_graph_equals_a_numpy_forward_pass(model_type: str, tmp_path: Path) -> None:
    folder = tmp_path / model_type
    weights = _checkpoint(folder, model_type)
    encoder = OnnxEncoder(folder, cache_root=tmp_path / "cache")
    texts = [
        "the hospital sent the patient record to the employer",
        "a court order",
        "disclose",
        # longer than max_seq_length (12 tokens): truncated like Sentence Transformers
        "the a hospital patient record sent to employer court order disclose health the a",
    ]
    got = encoder.encode(texts, batch_size=4)
    for text, vector in zip(texts, got, strict=True):
        ids = encoder.tokenizer.encode(text).ids
        assert len(ids) <= 12
        want = _reference(weights, model_type, ids)
        assert np.allclose(vector, want, atol=2e-5), (text, float(vector @ want))


def test_relative_buckets_match_the_scalar_definition() -> None:
    got = relative_position_buckets(300, 32)
    for q in (0, 1, 7, 150, 299):
        for k in (0, 1, 8, 9, 20, 150, 299):
            assert got[q, k] == _bucket(k - q), (q, k)
    assert got[0, 0] == 0 and got[0, 1] == 17 and got[1, 0] == 1
    assert got.max() == 31 and got.min() == 0


# -- broken models and the graph cache ---------------------------------------------------
def test_missing_and_damaged_files_give_one_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    _checkpoint(folder, "bert")
    (folder / "model.safetensors").write_bytes(b"\x00" * 100)
    with pytest.raises(EmbeddingModelError, match=r"model\.safetensors: cannot read the weights"):
        OnnxEncoder(folder, cache_root=tmp_path / "cache")
    (folder / "model.safetensors").unlink()
    with pytest.raises(EmbeddingModelError, match=r"model\.safetensors is missing"):
        OnnxEncoder(folder, cache_root=tmp_path / "cache")
    _checkpoint(folder, "bert")
    (folder / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(EmbeddingModelError, match=r"tokenizer\.json"):
        OnnxEncoder(folder, cache_root=tmp_path / "cache")


def test_unsupported_architecture_names_the_torch_extra(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    _checkpoint(folder, "bert")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "t5"}), "utf-8")
    with pytest.raises(EmbeddingModelError, match=r"'t5' has no ONNX graph.*privacy-ci\[torch\]"):
        OnnxEncoder(folder, cache_root=tmp_path / "cache")


def test_a_missing_tensor_is_named(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    folder = tmp_path / "m"
    weights = _checkpoint(folder, "bert")
    del weights["encoder.layer.1.output.dense.weight"]
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(EmbeddingModelError, match=r"encoder\.layer\.1\.output\.dense\.weight"):
        OnnxEncoder(folder, cache_root=tmp_path / "cache")


def test_graph_cache_is_reused_rebuilt_when_damaged_and_replaced_when_weights_change(
    tmp_path: Path,
) -> None:
    folder, cache = tmp_path / "m", tmp_path / "cache"
    _checkpoint(folder, "bert", seed=1)
    first = OnnxEncoder(folder, cache_root=cache).encode(["a court order"])
    (graph,) = cache.glob("m-*.onnx")
    stamp = graph.stat().st_mtime_ns
    OnnxEncoder(folder, cache_root=cache)
    assert graph.stat().st_mtime_ns == stamp  # reused, not rebuilt
    graph.write_bytes(b"garbage")
    again = OnnxEncoder(folder, cache_root=cache).encode(["a court order"])
    assert np.allclose(first, again)
    _checkpoint(folder, "bert", seed=2)  # new weights: a new key, the old graph removed
    changed = OnnxEncoder(folder, cache_root=cache).encode(["a court order"])
    (new_graph,) = cache.glob("m-*.onnx")
    assert new_graph.name != graph.name
    assert not np.allclose(first, changed)


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("privacy_ci.embeddings._onnx.onnx_available", lambda: False)
    with pytest.raises(ModelUnavailableError, match=r"privacy-ci\[embeddings\]"):
        OnnxEncoder(tmp_path)
