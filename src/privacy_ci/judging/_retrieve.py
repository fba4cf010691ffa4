"""The retrieval step: ranked regulation ids from a `Retriever` into ``state.candidates``."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._ci import event_characteristics
from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    QuerySource,
    RetrieverSource,
    Step,
)
from privacy_ci.judging._types import StepRecord

if TYPE_CHECKING:
    from privacy_ci.retrieval import Hit, RetrievalQuery, Retriever

__all__ = ["retrieve"]


def _ci_query(state: PipelineState) -> RetrievalQuery:
    from privacy_ci.retrieval import RetrievalQuery

    ci = state.ci if state.ci is not None else event_characteristics(state.event.flow)
    return RetrievalQuery(text=state.event.text, flow=ci)


def _query_text(query: str | RetrievalQuery) -> str:
    if isinstance(query, str):
        return query
    lines = [query.text.strip()] if query.text.strip() else []
    lines.extend(f"{k}: {v}" for k, v in query.ci_values().items())
    return "\n".join(lines)


@dataclass(slots=True)
class _Retrieve:
    source: Any
    k: int | None
    query_from: Any
    _retriever: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _search(self, retriever: Retriever, query: str | RetrievalQuery, k: int) -> list[Hit]:
        # one search at a time per step: retrievers keep memo tables and models
        with self._lock:
            return retriever.retrieve(query, k)

    def _resolve(self, ctx: PipelineContext) -> Retriever:
        if self._retriever is None:
            self._retriever = self.source if hasattr(self.source, "retrieve") else self.source(ctx)
        return self._retriever  # type: ignore[no-any-return]

    def _query(self, state: PipelineState) -> tuple[str | RetrievalQuery, str | None]:
        note = None
        if callable(self.query_from):
            return self.query_from(state), None
        if self.query_from == "explanation":
            if state.explanation and state.explanation.strip():
                return state.explanation, None
            note = "empty explanation: the event text is the query"
            return state.event.text, note
        if self.query_from == "ci":
            return _ci_query(state), None
        return state.event.text, note

    async def __call__(self, state: PipelineState, ctx: PipelineContext) -> PipelineState:
        from privacy_ci.retrieval import EmptyQueryError, RetrievalError

        k = self.k if self.k is not None else ctx.config.k
        record = StepRecord(name="retrieve")
        state.steps.append(record)
        try:
            retriever = self._resolve(ctx)
            query, note = self._query(state)
            record.prompt_name = None
            record.prompt = _query_text(query)
            start = time.perf_counter()
            hits = await asyncio.to_thread(self._search, retriever, query, k)
            record.latency_s = time.perf_counter() - start
        except EmptyQueryError as exc:
            record.error = f"empty query, nothing retrieved: {exc}"
            state.candidates = []
            return state
        except (RetrievalError, PrivacyCIError, OSError) as exc:
            record.error = f"retrieval failed: {exc}"
            state.error = record.error
            return state
        record.parsed = {
            "retriever": getattr(retriever, "name", type(retriever).__name__),
            "k": k,
            "hits": [{"id": h.node_id, "score": round(float(h.score), 6)} for h in hits],
        }
        if note:
            record.parsed["note"] = note
        state.candidates = [h.node_id for h in hits]
        record.retrieved_ids = list(state.candidates)
        return state


def retrieve(
    retriever: RetrieverSource,
    k: int | None = None,
    query_from: QuerySource = "event",
) -> Step:
    """Retrieve candidate regulations into ``state.candidates``.

    Args:
        retriever: a `Retriever`, or a function of the context that builds one
            (called once, on first use: indexes load lazily).
        k: how many (None: ``config.k``).
        query_from: ``event`` (the event text), ``explanation`` (the LLM
            explanation; the event text when it is empty, noted in the record),
            ``ci`` (a `RetrievalQuery` with the event text and the extracted CI
            characteristics, else the event's own), or a function of the state.

    Returns:
        The step. A query with nothing in it retrieves nothing (recorded); any
        other retrieval error stops the pipeline (``state.error``).
    """
    return _Retrieve(retriever, k, query_from)
