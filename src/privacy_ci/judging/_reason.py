"""The ci-reasoner's step: the condition catalogue checked against the narrative,
no model (`privacy_ci.reasoning.CIReasoner`).

It records one ``reason`` step whose ``parsed`` is the whole reasoning (applicability,
candidate norms, each condition's status with quoted evidence and offsets) and sets
the decision; an undetermined case (no norm of the catalogue applies) is an explicit
abstention: ``verdict`` None with the step's error saying so, counted wrong.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._parse import ParsedVerdict
from privacy_ci.judging._pipeline import PipelineContext, PipelineState
from privacy_ci.judging._types import StepRecord

if TYPE_CHECKING:
    from privacy_ci.reasoning import CIReasoner

__all__ = ["ABSTAINED", "reason"]

ABSTAINED = "undetermined: no norm of the catalogue applies (an abstention, counted wrong)"

_REASONERS: dict[int, CIReasoner] = {}
_LOCK = threading.Lock()


def _reasoner(ctx: PipelineContext) -> CIReasoner:
    kb = ctx.require_kb()
    with _LOCK:  # one per knowledge base: the NLP pipeline and cues load once
        found = _REASONERS.get(id(kb))
        if found is None:
            from privacy_ci.reasoning import CIReasoner

            found = _REASONERS[id(kb)] = CIReasoner(kb)
        return found


async def reason(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Judge the event with the condition catalogue (see the module docstring)."""
    record = StepRecord(name="reason", prompt_name=None)
    state.steps.append(record)
    start = time.perf_counter()
    try:
        reasoner = _reasoner(ctx)
        result = await asyncio.to_thread(reasoner.judge, state.event.text, state.event.flow)
    except PrivacyCIError as exc:
        record.error = f"the reasoner failed: {exc}"
        state.error = record.error
        return state
    record.latency_s = time.perf_counter() - start
    record.parsed = result.as_dict()
    record.retrieved_ids = [c.norm.paragraph for c in result.candidates]
    state.rationale = result.explanation()
    if result.deciding is not None:
        state.kept = [result.deciding.norm.paragraph]
    if result.verdict is None:
        record.error = ABSTAINED
        state.decision = ParsedVerdict(None, "abstained", result.rule)
    else:
        state.decision = ParsedVerdict(result.verdict, "reasoner", result.rule)
    return state
