"""The law filter (Tables 8-10): one prompt per candidate regulation, concurrently."""

from __future__ import annotations

import asyncio

from privacy_ci.judging._parse import parse_yes_no
from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    call_model,
    choice_settings,
    format_reference,
)
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.judging._types import StepRecord
from privacy_ci.llm import Completion

__all__ = ["FILTER_OPTIONS", "filter_rules"]

FILTER_OPTIONS: tuple[str, ...] = ("yes", "no", "NONE")
"""The law filter's constrained answers: the prompt asks for yes or no, or NONE."""


async def _filter_one(
    state: PipelineState, ctx: PipelineContext, node_id: str
) -> tuple[Completion, StepRecord, bool | None]:
    kb = ctx.require_kb()
    prompt = load_prompt("law_filter").render(
        event=state.event.text,
        candidates=format_reference(kb, node_id, ctx.config.reference_chars),
    )
    settings = choice_settings(ctx, FILTER_OPTIONS, "", 4)
    completion, record = await call_model(ctx, "filter", "law_filter", prompt, settings)
    record.retrieved_ids = [node_id]
    if not completion.ok:
        return completion, record, None
    answer = parse_yes_no(completion.text)
    words = completion.text.replace("*", " ").split()
    record.parsed = {
        "id": node_id,
        "relevant": answer is True,
        "answer": answer,
        "none": bool(words) and words[0].strip(".,:;").upper() == "NONE",
    }
    if answer is None:
        record.error = "unparseable yes/no answer: treated as not relevant"
    return completion, record, answer


async def filter_rules(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """The law filter (Tables 8-10): one prompt per candidate, concurrently.

    "yes" keeps the candidate; "no", "NONE" and an unparseable answer (recorded
    in the step's ``error``) do not. Records keep candidate order. A failed call
    stops the pipeline after all records are appended.

    Args:
        state: the pipeline state (``candidates``).
        ctx: the context.

    Returns:
        The state with ``kept`` set.
    """
    results = await asyncio.gather(*(_filter_one(state, ctx, c) for c in state.candidates))
    state.kept = []
    for node_id, (completion, record, answer) in zip(state.candidates, results, strict=True):
        state.steps.append(record)
        if not completion.ok and state.error is None:
            state.error = completion.error
        if answer is True:
            state.kept.append(node_id)
    if state.error is not None:
        state.kept = []
    return state
