"""The retriever registry: every retriever the CLI, the judging methods and the
benchmarks know by name, and the one place to add another.

    register_retriever(RetrieverSpec("my-bm25", "BM25 with my tokenizer", build_mine))
    build_retriever("my-bm25", kb)

A `RetrieverSpec` builds its retriever from a knowledge base and `RetrieverOptions`
(the index cache, the embedding model, and the retrievers built so far, which a
composite such as ``hybrid`` reuses).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from privacy_ci.retrieval._base import RetrievalError, Retriever

if TYPE_CHECKING:
    from privacy_ci.cases import Dataset
    from privacy_ci.knowledge import KnowledgeBase

__all__ = [
    "RETRIEVERS",
    "RetrieverOptions",
    "RetrieverSpec",
    "build_retriever",
    "register_retriever",
    "retriever_names",
]


@dataclass
class RetrieverOptions:
    """What every retriever's builder may use.

    Args:
        cache: the index / embedding cache (True: the default cache folder; False: none).
        model: the embedding model of the retrievers that embed (None: the default).
        built: retrievers built so far (name -> retriever), reused by composites.
        memory: the labelled cases ``cases`` and ``hybrid-cases`` remember: a
            `privacy_ci.cases` dataset name or the path of a case file (None: the
            regulation's ``training_cases``).
    """

    cache: bool | Path | str = True
    model: str | None = None
    built: dict[str, Retriever] = field(default_factory=dict)
    memory: str | Path | None = None


@dataclass(frozen=True)
class RetrieverSpec:
    """A retriever by name.

    Args:
        name: the name (``bm25-paper``, ``dense`` ...).
        description: one line for listings.
        build: makes it from a knowledge base and the options.
        compared_by_default: part of ``retrieval eval``'s default comparison
            (False for retrievers whose model is usually not installed).
    """

    name: str
    description: str
    build: Callable[[KnowledgeBase, RetrieverOptions], Retriever] = field(repr=False)
    compared_by_default: bool = True


RETRIEVERS: dict[str, RetrieverSpec] = {}
"""The registered retrievers, in registration order."""


def register_retriever(spec: RetrieverSpec) -> RetrieverSpec:
    """Add a retriever to the registry.

    Raises:
        RetrievalError: the name is taken.
    """
    if spec.name in RETRIEVERS:
        raise RetrievalError(f"a retriever named {spec.name!r} is registered already")
    RETRIEVERS[spec.name] = spec
    return spec


def retriever_names(*, default_only: bool = False) -> tuple[str, ...]:
    """The registered names, in registration order (`default_only`: those
    ``retrieval eval`` compares by default)."""
    return tuple(s.name for s in RETRIEVERS.values() if s.compared_by_default or not default_only)


def build_retriever(
    name: str,
    kb: KnowledgeBase,
    cache: bool | Path | str = True,
    model: str | None = None,
    _built: dict[str, Retriever] | None = None,
    memory: str | Path | None = None,
) -> Retriever:
    """Make a registered retriever by name.

    Args:
        name: a registered name (`retriever_names`).
        kb: the knowledge base.
        cache: index / embedding cache (as for `BM25Retriever`).
        model: the embedding model of ``dense``, ``roles`` and ``hybrid`` (default MiniLM).
        _built: retrievers already built (name -> retriever), reused by ``hybrid``.
        memory: the cases of ``cases`` / ``hybrid-cases`` (a dataset name or a case
            file; default the regulation's training cases).

    Returns:
        The retriever.

    Raises:
        RetrievalError: unknown name.
        ModelUnavailableError: the embedding model is not available locally.
    """
    built = _built if _built is not None else {}
    if name in built:
        return built[name]
    spec = RETRIEVERS.get(name)
    if spec is None:
        raise RetrievalError(
            f"unknown retriever {name!r}; expected one of {', '.join(retriever_names())}"
        )
    retriever = spec.build(kb, RetrieverOptions(cache, model, built, memory))
    built[name] = retriever
    return retriever


# -- the built-in retrievers ---------------------------------------------------------------
def _bm25_paper(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._bm25_official import bm25_paper

    return bm25_paper(kb)  # ~600 short documents: built in milliseconds, never cached


def _bm25_leaves(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._bm25 import bm25_leaves

    return bm25_leaves(kb, o.cache)


def _bm25_plus(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._bm25 import bm25_plus

    return bm25_plus(kb, o.cache)


def _dense(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._dense import DEFAULT_MODEL, DenseConfig, DenseRetriever

    return DenseRetriever(kb, DenseConfig(model=o.model or DEFAULT_MODEL), o.cache)


def _dense_paper(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._dense import PAPER_MODEL, DenseConfig, DenseRetriever

    return DenseRetriever(
        kb, replace(DenseConfig(), name="dense-paper", model=PAPER_MODEL), o.cache
    )


def _roles(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._dense import DEFAULT_MODEL
    from privacy_ci.retrieval._roles import RoleKeywordRetriever, RolesConfig

    return RoleKeywordRetriever(kb, RolesConfig(model=o.model or DEFAULT_MODEL))


def _hybrid(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._hybrid import HybridRetriever, hybrid_preset

    preset = hybrid_preset(kb.regulation)
    members = [build_retriever(m, kb, o.cache, o.model, o.built) for m in preset["members"]]
    return HybridRetriever(
        members,
        weights=preset["weights"],
        k_rrf=preset["k_rrf"],
        expansion=preset["expansion"],
        name="hybrid",
        kb=kb,
    )


def _cases(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.regulations import find_regulation
    from privacy_ci.retrieval._cases import (
        CaseMemoryConfig,
        CaseMemoryRetriever,
        NoCaseMemoryError,
        memory_cases,
    )
    from privacy_ci.retrieval._dense import DenseRetriever

    spec = find_regulation(kb.regulation)
    source = o.memory if o.memory is not None else (spec.training_cases if spec else None)
    if source is None:
        raise NoCaseMemoryError(
            f"{kb.regulation} has no labelled training cases for a case memory"
            " (RegulationSpec.training_cases); give your own with --memory FILE"
        )
    dataset = _memory_source(source, kb)
    dense = build_retriever("dense", kb, o.cache, o.model, o.built)
    assert isinstance(dense, DenseRetriever)
    return CaseMemoryRetriever(
        dense, memory_cases(dataset, kb), CaseMemoryConfig(), o.cache, source=dataset.name
    )


def _memory_source(source: str | Path, kb: KnowledgeBase) -> Dataset:
    """The cases of a memory: a named dataset of this regulation, or a case file (its
    dataset is named after the file's stem)."""
    from privacy_ci.cases import DATASET_NAMES, load_dataset
    from privacy_ci.retrieval._cases import NoCaseMemoryError

    if isinstance(source, str) and source in DATASET_NAMES:
        dataset = load_dataset(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise NoCaseMemoryError(
                f"case memory {str(source)!r} is neither a dataset"
                f" ({', '.join(DATASET_NAMES)}) nor a file"
            )
        from privacy_ci.cases import load_case_file

        dataset = load_case_file(path, regulation=kb.regulation)
    if dataset.protocol.regulation != kb.regulation:
        raise NoCaseMemoryError(
            f"case memory {str(source)!r} holds {dataset.protocol.regulation} cases,"
            f" not {kb.regulation}"
        )
    return dataset


def _hybrid_cases(kb: KnowledgeBase, o: RetrieverOptions) -> Retriever:
    from privacy_ci.retrieval._cases import CaseMemoryRetriever, CasesHybridRetriever

    memory = build_retriever("cases", kb, o.cache, o.model, o.built, o.memory)
    assert isinstance(memory, CaseMemoryRetriever)
    base = build_retriever("hybrid", kb, o.cache, o.model, o.built)
    return CasesHybridRetriever(base, memory)


for _spec in (
    RetrieverSpec(
        "bm25-paper",
        "BM25 exactly as the Privacy Checklist's released code ran it (the annotated entries)",
        _bm25_paper,
    ),
    RetrieverSpec("bm25-leaves", "BM25 equations 1-2 over the tree's leaves", _bm25_leaves),
    RetrieverSpec("bm25-plus", "BM25 over norm text, definitions and CI fields", _bm25_plus),
    RetrieverSpec("dense", "embeddings (the packaged all-MiniLM-L6-v2)", _dense),
    RetrieverSpec(
        "dense-paper",
        "embeddings with the paper's all-mpnet-base-v2 (if installed locally)",
        _dense_paper,
        compared_by_default=False,
    ),
    RetrieverSpec("roles", "role keywords matched through the role graph (CI-ES)", _roles),
    RetrieverSpec("hybrid", "reciprocal rank fusion per regulation (HYBRID_PRESETS)", _hybrid),
    RetrieverSpec(
        "cases",
        "the ids the nearest labelled training cases cite (case memory)",
        _cases,
    ),
    RetrieverSpec(
        "hybrid-cases",
        "hybrid fused with the case memory's votes, each refined into hybrid's best node",
        _hybrid_cases,
    ),
):
    register_retriever(_spec)
