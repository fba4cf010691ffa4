"""Case memory: the regulations cited by the most similar labelled cases.

A court narrative and the regulation text it turns on rarely share words; two
narratives about the same kind of disclosure often do. `CaseMemoryRetriever`
therefore keeps labelled cases (text, CI fields and gold regulation ids; for
HIPAA the GoldCoin synthetic training cases) as embedding vectors and, for a
query, lets its ``neighbours`` nearest cases vote for the ids they cite::

    vote(g) = sum over the nearest cases c citing g of  exp(cos(q, c) / temperature)

and a node's score is its share of all the votes cast.

With ``vote_level="paragraph"`` (the default) a cited id counts as its
ancestor one level below the section (``164.512(e)(1)(ii)`` votes for
``164.512(e)``; an id at or above a section, or in a tree without sections,
counts as itself). A neighbour rarely cites the very paragraph a new case turns
on, but often one beside it: voting for the enclosing paragraph keeps that
evidence without betting on the neighbour's exact subparagraph.

Cases are embedded as `DenseRetriever` embeds a query (the text with its CI
characteristics, long texts as the mean of their windows), by the same model.
A memory case whose text is the query's own text does not vote, so evaluating
on the memory's own cases is leave-one-out.

`CasesHybridRetriever` joins the memory with a base ranking (``hybrid``): each
voted node is replaced by the base ranking's best node inside it (a cited
section becomes its best-matching paragraph, which also hits the narrower ids
beneath the section), then the two rankings are fused by reciprocal rank.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from privacy_ci.retrieval._base import (
    Hit,
    RetrievalError,
    RetrievalQuery,
    Retriever,
    as_query,
    check_k,
    load_array_entry,
    retrieval_cache_dir,
    save_array_entry,
)
from privacy_ci.retrieval._hybrid import fuse

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.retrieval._dense import DenseRetriever

__all__ = [
    "CaseMemoryConfig",
    "CaseMemoryRetriever",
    "CasesHybridRetriever",
    "MemoryCase",
    "NoCaseMemoryError",
    "memory_cases",
    "refine_into",
    "vote_node",
]


class NoCaseMemoryError(RetrievalError):
    """The regulation has no labelled training cases to remember."""


@dataclass(frozen=True, slots=True)
class MemoryCase:
    """One remembered case.

    Args:
        case_id: the case's id.
        query: its text and CI fields.
        gold: the regulation ids it cites (tree node ids, repeats removed).
    """

    case_id: str
    query: RetrievalQuery
    gold: tuple[str, ...]


@dataclass(frozen=True)
class CaseMemoryConfig:
    """How the memory votes.

    The defaults are what ``cases`` and ``hybrid-cases`` use (with MiniLM), chosen
    on two synthetic measures averaged (the real cases measured only the choice):
    leave-one-out over the 309 GoldCoin synthetic cases (where no other case cites
    a held-out case's paragraph: the memory can only hurt) and the 20 applicable
    GoldCoin validation cases with the synthetic cases as the memory (whose
    paragraphs the memory has seen). Grid: vote level cited / parent / paragraph /
    section, neighbours {10, 20}, the memory's RRF weight beside ``hybrid``
    {0.25, 0.5, 1} (`CasesHybridRetriever`), temperature 0.05 (0.1 changed nothing
    on the validation cases). A first version chosen on the validation cases alone
    (cited level, weight 1) was measured on the real cases once; leave-one-out then
    showed it halving synthetic recall, which led to the paragraph level.

    Args:
        name: the retriever's name in tables.
        neighbours: how many nearest cases vote.
        temperature: the softmax temperature of a vote's weight (lower: the
            nearest cases count for more).
        vote_level: ``paragraph`` (a cited id votes for its ancestor one level
            below the section) or ``cited`` (for itself).
    """

    name: str = "cases"
    neighbours: int = 20
    temperature: float = 0.05
    vote_level: Literal["paragraph", "cited"] = "paragraph"

    def __post_init__(self) -> None:
        if self.vote_level not in ("paragraph", "cited"):
            raise RetrievalError(f"vote_level must be paragraph or cited, not {self.vote_level!r}")
        if self.neighbours < 1:
            raise RetrievalError(f"neighbours must be >= 1, not {self.neighbours}")
        if not self.temperature > 0:
            raise RetrievalError(f"temperature must be > 0, not {self.temperature}")


def memory_cases(cases: Iterable[Any], kb: KnowledgeBase) -> list[MemoryCase]:
    """The applicable cases with gold ids that the knowledge base's tree knows.

    Args:
        cases: `privacy_ci.cases.Case` objects (or case-like objects, see
            `privacy_ci.retrieval.evaluate_retrieval`).
        kb: the knowledge base whose tree the gold ids must name.

    Returns:
        One `MemoryCase` per usable case (gold ids outside the tree are dropped;
        a case left with none is skipped).
    """
    from privacy_ci.retrieval._eval import gold_of, is_applicable

    out: list[MemoryCase] = []
    for i, case in enumerate(cases):
        if not is_applicable(case):
            continue
        gold = tuple(g for g in gold_of(case) if g in kb.tree.nodes)
        if not gold:
            continue
        query = RetrievalQuery.from_case(case, use_ci=True)
        if query.is_empty():
            continue
        out.append(MemoryCase(str(getattr(case, "id", "") or i), query, gold))
    return out


def vote_node(kb: KnowledgeBase, node_id: str) -> str:
    """The node a cited id votes for at ``paragraph`` level (see the module docstring).

    Args:
        kb: the knowledge base.
        node_id: a cited tree node id.

    Returns:
        Its ancestor one level below the section, or the id itself.
    """
    from privacy_ci.regulations import NodeKind

    tree = kb.tree
    if node_id not in tree.nodes:
        return node_id
    path = tree.path(node_id)
    sections = [i for i, n in enumerate(path) if tree[n].kind == NodeKind.SECTION]
    if not sections or sections[-1] + 1 >= len(path):
        return node_id
    return path[sections[-1] + 1]


def _text_key(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


class CaseMemoryRetriever:
    """Vote for the gold ids of the nearest labelled cases (see the module docstring).

    Args:
        dense: the `DenseRetriever` whose model and query windows embed the cases.
        cases: the remembered cases (`memory_cases`).
        config: how the memory votes.
        cache: ``True`` for the default cache folder, a folder, or ``False``: the
            case vectors are cached under ``cache_dir()/retrieval/cases/``.
        source: a name for the cases (``synthetic``), kept in the cache key and reports.

    Raises:
        NoCaseMemoryError: no usable case.
    """

    def __init__(
        self,
        dense: DenseRetriever,
        cases: Sequence[MemoryCase],
        config: CaseMemoryConfig | None = None,
        cache: bool | Path | str = True,
        source: str = "",
    ) -> None:
        if not cases:
            raise NoCaseMemoryError("a case memory needs at least one labelled, applicable case")
        self.dense = dense
        self.kb = dense.kb
        self.cases = list(cases)
        self.config = config or CaseMemoryConfig()
        self.name = self.config.name
        self.source = source
        self._keys = [_text_key(c.query.text) for c in self.cases]
        self._rows_of: dict[str, list[int]] = {}
        for row, key in enumerate(self._keys):
            self._rows_of.setdefault(key, []).append(row)
        if self.config.vote_level == "paragraph":
            self._votes_for = [
                tuple(dict.fromkeys(vote_node(self.kb, g) for g in c.gold)) for c in self.cases
            ]
        else:
            self._votes_for = [c.gold for c in self.cases]
        self.cache_path: Path | None = None
        self._family = ""
        if cache is not False:
            root = None if cache is True else Path(cache)
            digest = hashlib.sha256()
            for case, key in zip(self.cases, self._keys, strict=True):
                payload = [key, case.query.combined_text(ci=dense.config.query_ci), case.gold]
                digest.update(json.dumps(payload).encode())
            model = hashlib.sha256(f"{dense.model_id}@{dense.backend}".encode()).hexdigest()[:10]
            # the source may be a user's path: keep the folder name inside the cache
            slug = re.sub(r"[^A-Za-z0-9_-]+", "_", source or "cases").strip("_")[:40] or "cases"
            self._family = f"{self.kb.regulation}-{slug}-{model}-"
            self.cache_path = retrieval_cache_dir("cases", root) / (
                self._family + digest.hexdigest()[:16]
            )
        matrix = self._load_cached()
        if matrix is None:
            from privacy_ci.retrieval._dense import _embedding_progress

            rows = []
            label = f"embedding {len(self.cases)} {source or 'memory'} cases (once)"
            with _embedding_progress(len(self.cases), label) as progress:
                for case in self.cases:
                    rows.append(self._embed(case.query))
                    if progress is not None:
                        progress(1)
            matrix = np.vstack(rows).astype(np.float32)
            self._save(matrix)
        self.matrix = matrix

    def _embed(self, query: RetrievalQuery) -> np.ndarray:
        windows = self.dense.query_vector(query)
        mean = windows.mean(axis=0)
        return np.asarray(mean / (float(np.linalg.norm(mean)) or 1.0), dtype=np.float32)

    def _load_cached(self) -> np.ndarray | None:
        entry = load_array_entry(self.cache_path, "vectors.npy", len(self.cases))
        if entry is None:
            return None
        matrix, meta = entry
        if (meta.get("keys"), meta.get("model")) != (self._keys, self.dense.model_id):
            return None
        return matrix

    def _save(self, matrix: np.ndarray) -> None:
        if self.cache_path is None:
            return
        meta = {
            "model": self.dense.model_id,
            "source": self.source,
            "config": asdict(self.config),
            "keys": self._keys,
        }
        save_array_entry(self.cache_path, "vectors.npy", matrix, meta, self._family)

    def votes(self, query: str | RetrievalQuery) -> list[Hit]:
        """Every node the nearest cases vote for, with its vote, best first.

        Args:
            query: free text or a `RetrievalQuery`.

        Returns:
            Hits scored by their share of all the votes cast (the shares add up
            to 1); ties keep the order of the nearest case that cited them first.
        """
        q = as_query(query)
        sims = self.matrix @ self._embed(q)
        sims[self._rows_of.get(_text_key(q.text), [])] = -np.inf  # a case never votes for itself
        order = np.argsort(-sims, kind="stable")[: self.config.neighbours]
        scores: dict[str, float] = {}
        for i in order:
            if not np.isfinite(sims[i]):
                continue
            weight = math.exp(float(sims[i]) / self.config.temperature)
            for g in self._votes_for[i]:
                scores[g] = scores.get(g, 0.0) + weight
        total = sum(scores.values()) or 1.0
        ranked = sorted(scores, key=lambda g: -scores[g])  # stable: nearest case first
        return [Hit(g, scores[g] / total) for g in ranked]

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """The ids the nearest cases cite, best voted first.

        Args:
            query: free text or a `RetrievalQuery`.
            k: at most this many hits.

        Returns:
            Hits, best first.

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        check_k(k)
        return self.votes(query)[:k]

    def __repr__(self) -> str:
        return f"CaseMemoryRetriever({self.name!r}: {len(self.cases)} cases from {self.source!r})"


def refine_into(voted: Sequence[Hit], base: Sequence[Hit], kb: KnowledgeBase) -> list[Hit]:
    """Replace each voted node by the base ranking's best node inside it.

    Args:
        voted: the memory's ranking.
        base: another ranking of the same tree (best first).
        kb: the knowledge base (its tree decides "inside").

    Returns:
        The voted ranking with each node replaced (a node with nothing of the
        base inside it stays itself); a node already taken is not repeated.
    """
    tree = kb.tree
    paths: dict[str, frozenset[str]] = {}

    def within(node_id: str) -> frozenset[str]:
        found = paths.get(node_id)
        if found is None:
            found = frozenset(tree.path(node_id)) if node_id in tree.nodes else frozenset()
            paths[node_id] = found
        return found

    out: list[Hit] = []
    used: set[str] = set()
    for hit in voted:
        chosen = hit.node_id
        for candidate in base:
            if candidate.node_id not in used and hit.node_id in within(candidate.node_id):
                chosen = candidate.node_id
                break
        if chosen not in used:
            used.add(chosen)
            out.append(Hit(chosen, hit.score))
    return out


class CasesHybridRetriever:
    """A base ranking fused with the case memory's refined votes.

    Args:
        base: the base retriever (the ``hybrid``).
        memory: the case memory.
        weights: the RRF weights of the base ranking and of the memory's (the
            memory's 0.5 was chosen with `CaseMemoryConfig`'s defaults).
        k_rrf: the RRF constant.
        depth: how many hits to take from each.
        name: the name in tables.
    """

    def __init__(
        self,
        base: Retriever,
        memory: CaseMemoryRetriever,
        weights: tuple[float, float] = (1.0, 0.5),
        k_rrf: int = 60,
        depth: int = 100,
        name: str = "hybrid-cases",
    ) -> None:
        self.base = base
        self.memory = memory
        self.kb = memory.kb
        self.weights = weights
        self.k_rrf = k_rrf
        self.depth = depth
        self.name = name

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """Fuse the base ranking with the memory's votes refined into it.

        Args:
            query: free text or a `RetrievalQuery`.
            k: at most this many hits.

        Returns:
            Hits with RRF scores, best first.

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        check_k(k)
        q = as_query(query)
        depth = max(self.depth, k)
        base = self.base.retrieve(q, depth)
        voted = refine_into(self.memory.retrieve(q, depth), base, self.kb)
        return fuse([base, voted], self.k_rrf, self.weights)[:k]

    def __repr__(self) -> str:
        return f"CasesHybridRetriever({self.name!r})"
