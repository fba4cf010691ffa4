"""The explanation step: Table 9's "LLM Explanation for BM25 Similarity"."""

from __future__ import annotations

from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    call_model,
    free_text_settings,
)
from privacy_ci.judging._prompts import load_prompt

__all__ = ["explain"]


async def explain(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Table 9's "LLM Explanation for BM25 Similarity": sets ``state.explanation``.

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    prompt = load_prompt("explain").render(event=state.event.text)
    completion, record = await call_model(
        ctx, "explain", "explain", prompt, free_text_settings(ctx)
    )
    state.steps.append(record)
    if not completion.ok:
        state.error = completion.error
        return state
    state.explanation = completion.text.strip()
    record.parsed = {"chars": len(state.explanation)}
    return state
