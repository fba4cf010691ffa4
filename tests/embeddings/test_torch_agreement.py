"""ONNX and torch give the same vectors on HIPAA knowledge-base texts.

Needs the ``torch`` extra (sentence-transformers); without it the test is skipped with
that reason: the default install has no torch, and `minilm_reference.json` (checked in
`test_onnx_encoder`) carries torch's vectors for a fixed sample instead. The full
comparison over every knowledge-base text is `benchmarks/retrieval.py --backends`.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("sentence_transformers", reason="the torch extra is not installed (make torch)")

from privacy_ci.embeddings import load_embedding_model


def test_onnx_and_torch_agree_on_a_sample_of_hipaa_texts(shared_data: object) -> None:
    from privacy_ci.knowledge import load_knowledge_base
    from privacy_ci.retrieval import DenseConfig
    from privacy_ci.retrieval._bm25 import build_documents

    kb = load_knowledge_base("hipaa")
    _, texts = build_documents(kb, DenseConfig().recipe)
    sample = texts[:: max(1, len(texts) // 120)]  # spread over the whole tree
    onnx = load_embedding_model("minilm", backend="onnx").encode(sample)
    torch = load_embedding_model("minilm", backend="torch").encode(sample)
    cosines = (onnx * torch).sum(axis=1)
    assert cosines.min() >= 0.99, float(cosines.min())
    assert float(np.mean(cosines)) >= 0.999
