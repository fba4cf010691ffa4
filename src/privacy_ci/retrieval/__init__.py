"""Ranked regulation ids for a query (section 4.2 of the Privacy Checklist paper).

* `Retriever` protocol: ``retrieve(query: str | RetrievalQuery, k) -> list[Hit]`` and
  ``name``; `RetrievalQuery` carries the case text and, optionally, its CI
  characteristics; `Hit` is ``(node_id, score)``.
* `bm25_paper` (``bm25-paper``): the Privacy Checklist's BM25 exactly as its released
  code ran it (the annotated entries, its tokenisation, IDF and ties: `OfficialBM25`).
* `BM25Retriever` on bm25s, with the presets `bm25_leaves` (``bm25-leaves``: equations
  1-2 over the tree's leaves) and `bm25_plus` (``bm25-plus``: stemming, stop words,
  full specifications with CI annotations, tree-aware ranking).
* `DenseRetriever`: cosine similarity of sentence embeddings (`privacy_ci.embeddings`:
  ONNX Runtime by default; the packaged all-MiniLM-L6-v2, or the paper's
  all-mpnet-base-v2 from its PyPI packages).
* `RoleKeywordRetriever`: CI-ES, norms whose roles match the case's roles
  (embeddings plus the role graph).
* `verify_ids`: normalise and validate the ids an LLM writes (agent-based retrieval).
* `fuse` (reciprocal rank fusion), `expand` (support references, definitions),
  `HybridRetriever` with a preset per regulation (`hybrid_preset`),
  `CaseMemoryRetriever` (``cases``: the ids the nearest labelled training cases
  cite) and `CasesHybridRetriever` (``hybrid-cases``), and the registry:
  `build_retriever(name, kb)` for every registered retriever, `register_retriever`
  to add one.
* `evaluate_retrieval` / `evaluate_many`: recall@k, any-hit@k, MRR and nDCG@10
  against gold ids with the subtree hit rule; `load_eval_cases` for the datasets.

The embedding runtime (onnxruntime, or torch for the torch backend) is imported only
when a dense or role retriever is built.
"""

from privacy_ci.retrieval._base import (
    CI_FIELDS,
    EmptyQueryError,
    Hit,
    ModelUnavailableError,
    RetrievalError,
    RetrievalQuery,
    Retriever,
    as_query,
    check_k,
    kb_fingerprint,
    retrieval_cache_dir,
)
from privacy_ci.retrieval._bm25 import (
    LEAVES_CONFIG,
    PLUS_CONFIG,
    BM25Config,
    BM25Retriever,
    DocumentRecipe,
    Tokenizer,
    bm25_leaves,
    bm25_plus,
    build_documents,
    defined_terms_in,
    path_text,
    rank_with_tree,
)
from privacy_ci.retrieval._bm25_official import OfficialBM25, OfficialBM25Retriever, bm25_paper
from privacy_ci.retrieval._cases import (
    CaseMemoryConfig,
    CaseMemoryRetriever,
    CasesHybridRetriever,
    MemoryCase,
    NoCaseMemoryError,
    memory_cases,
    refine_into,
    vote_node,
)
from privacy_ci.retrieval._dense import (
    DEFAULT_MODEL,
    PAPER_MODEL,
    DenseConfig,
    DenseRetriever,
    EmbeddingModel,
    embedding_similarity,
    load_embedding_model,
    resolve_model,
)
from privacy_ci.retrieval._eval import (
    DATASET_REGULATION,
    DATASETS,
    CaseMetrics,
    PairedDifference,
    RetrievalResult,
    case_metrics,
    dataset_regulation,
    evaluate_many,
    evaluate_retrieval,
    format_results,
    gold_of,
    is_applicable,
    load_eval_cases,
    paired_difference,
)
from privacy_ci.retrieval._hybrid import (
    BEST_HYBRID,
    HYBRID_PRESETS,
    Expansion,
    HybridRetriever,
    definition_nodes,
    dev_split,
    expand,
    fuse,
    hybrid_preset,
)
from privacy_ci.retrieval._ids import RejectedId, VerifiedIds, extract_citations, verify_ids
from privacy_ci.retrieval._registry import (
    RETRIEVERS,
    RetrieverOptions,
    RetrieverSpec,
    build_retriever,
    register_retriever,
    retriever_names,
)
from privacy_ci.retrieval._roles import RoleKeywordRetriever, RolesConfig, split_role

__all__ = [
    "BEST_HYBRID",
    "CI_FIELDS",
    "DATASETS",
    "DATASET_REGULATION",
    "DEFAULT_MODEL",
    "HYBRID_PRESETS",
    "LEAVES_CONFIG",
    "PAPER_MODEL",
    "PLUS_CONFIG",
    "RETRIEVERS",
    "BM25Config",
    "BM25Retriever",
    "CaseMemoryConfig",
    "CaseMemoryRetriever",
    "CaseMetrics",
    "CasesHybridRetriever",
    "DenseConfig",
    "DenseRetriever",
    "DocumentRecipe",
    "EmbeddingModel",
    "EmptyQueryError",
    "Expansion",
    "Hit",
    "HybridRetriever",
    "MemoryCase",
    "ModelUnavailableError",
    "NoCaseMemoryError",
    "OfficialBM25",
    "OfficialBM25Retriever",
    "PairedDifference",
    "RejectedId",
    "RetrievalError",
    "RetrievalQuery",
    "RetrievalResult",
    "Retriever",
    "RetrieverOptions",
    "RetrieverSpec",
    "RoleKeywordRetriever",
    "RolesConfig",
    "Tokenizer",
    "VerifiedIds",
    "as_query",
    "bm25_leaves",
    "bm25_paper",
    "bm25_plus",
    "build_documents",
    "build_retriever",
    "case_metrics",
    "check_k",
    "dataset_regulation",
    "defined_terms_in",
    "definition_nodes",
    "dev_split",
    "embedding_similarity",
    "evaluate_many",
    "evaluate_retrieval",
    "expand",
    "extract_citations",
    "format_results",
    "fuse",
    "gold_of",
    "hybrid_preset",
    "is_applicable",
    "kb_fingerprint",
    "load_embedding_model",
    "load_eval_cases",
    "memory_cases",
    "paired_difference",
    "path_text",
    "rank_with_tree",
    "refine_into",
    "register_retriever",
    "resolve_model",
    "retrieval_cache_dir",
    "retriever_names",
    "split_role",
    "verify_ids",
    "vote_node",
]
