"""The ci-reasoner's step: facts, then law, no model (`privacy_ci.reasoning.FactJudge`).

It reads the facts of the disclosure (the event's given facts as they are, then its
CI fields and narrative) and applies the regulation's law book. It records one
``reason`` step whose ``parsed`` is the whole judgment (every fact with its source
and quote; the verdict, the deciding rule, the facts it used, the presumptions it
rests on, and the questions that would settle it) and sets the decision. The law
always answers: when the verdict hinges on a fact nobody stated, it is the verdict
on the fact schema's presumptions, and the record says so (``determined: false``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from privacy_ci.errors import DataMissingError, PrivacyCIError
from privacy_ci.judging._parse import ParsedVerdict
from privacy_ci.judging._pipeline import PipelineContext, PipelineState
from privacy_ci.judging._types import Event, StepRecord

if TYPE_CHECKING:
    from privacy_ci.reasoning import FactJudge

__all__ = ["ON_PRESUMPTIONS", "fact_judge", "reason"]

ON_PRESUMPTIONS = "on presumptions"
"""Marks a decision that rests on presumed facts (the record names them and the questions)."""

_JUDGES: dict[tuple[str, int], FactJudge] = {}
_LOCK = threading.Lock()


def fact_judge(ctx: PipelineContext, event: Event | None = None) -> FactJudge:
    """The fact judge of the context's regulation (one per regulation and role graph: the
    NLP pipeline, the embeddings and the law book load once).

    The judge needs no knowledge base: the reader consults its role graph only for a
    party that no cue or head noun names, which is mostly a CI field (on the packaged
    development and validation narratives alone it changed 2 of 274 readings, both for
    the worse). So an `event` with no CI field gets the judge without the role graph and
    judging it never loads the knowledge base; otherwise (or with no `event`) the
    context's knowledge base is loaded for its role graph when its data is installed.
    The choice depends on the event alone, so a verdict never depends on what was
    judged before it.
    """
    regulation = ctx.config.regulation
    kb = None
    if event is None or not event.flow.is_empty:
        kb = ctx.kb
        if kb is None:
            try:
                kb = ctx.require_kb()
            except DataMissingError:
                kb = None
    graph = None if kb is None else kb.role_graph
    # the judge keeps the graph alive, so its id names it for as long as the entry lives
    key = (regulation, id(graph))
    with _LOCK:
        found = _JUDGES.get(key)
        if found is None:
            from privacy_ci.reasoning import FactJudge

            found = _JUDGES[key] = FactJudge(regulation, kb=kb)
        return found


async def reason(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Judge the event: its facts, then the law (see the module docstring)."""
    record = StepRecord(name="reason", prompt_name=None)
    state.steps.append(record)
    start = time.perf_counter()
    event = state.event
    try:
        judge = fact_judge(ctx, event)
        result = await asyncio.to_thread(judge.judge, event.text, event.flow, event.facts or None)
    except PrivacyCIError as exc:
        record.error = f"the reasoner failed: {exc}"
        state.error = record.error
        return state
    record.latency_s = time.perf_counter() - start
    record.parsed = result.as_dict()
    rule = result.decision.rule
    record.retrieved_ids = [rule.paragraph]
    state.rationale = result.explanation()
    state.kept = [rule.paragraph]
    how = rule.id if result.determined else f"{rule.id} ({ON_PRESUMPTIONS})"
    state.decision = ParsedVerdict(result.verdict, "reasoner", how)
    return state
