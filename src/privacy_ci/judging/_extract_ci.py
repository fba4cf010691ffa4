"""CI characteristics extraction (section 4.1, Table 10) as structured output."""

from __future__ import annotations

from dataclasses import replace

from privacy_ci.judging._ci import CI_JSON_FIELDS, answer_flow, ci_schema, event_characteristics
from privacy_ci.judging._pipeline import PipelineContext, PipelineState, call_model
from privacy_ci.judging._prompts import load_prompt

__all__ = ["extract_ci"]


async def extract_ci(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """CI characteristics extraction (section 4.1) as structured output.

    Sets ``state.ci`` (snake-case keys, ``None`` for "None" answers) and
    ``state.ci_source``: ``model``; or, when the answer is not a JSON object with
    the schema's fields (recorded as the step's ``error``), ``case`` (the CI
    fields given with the event) or ``none`` (the event has none either).

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    prompt = load_prompt("ci_extract").render(event=state.event.text)
    settings = replace(
        ctx.settings,
        grammar=None,
        json_schema=ci_schema(ctx.constrained, ctx.config.ci_field_chars),
        schema_name="ci_characteristics",
    )
    if ctx.constrained:
        settings = replace(settings, max_tokens=ctx.config.ci_max_tokens)
    completion, record = await call_model(ctx, "extract_ci", "ci_extract", prompt, settings)
    state.steps.append(record)
    if not completion.ok:
        state.error = completion.error
        return state
    value = completion.parsed
    problem = completion.parse_error
    if problem is None and not isinstance(value, dict):
        problem = f"expected a JSON object, got {type(value).__name__}"
    if problem is None and isinstance(value, dict):
        missing = [f for f in CI_JSON_FIELDS if f not in value]
        if len(missing) == len(CI_JSON_FIELDS):
            problem = "none of the CI fields is present"
    if problem is None and isinstance(value, dict):
        state.ci = answer_flow(value)
        state.ci_source = "model"
    else:
        state.ci = event_characteristics(state.event.flow)
        state.ci_source = "case" if not state.ci.is_empty else "none"
        record.error = f"malformed CI extraction ({problem}); using the {state.ci_source} fields"
    record.parsed = {"ci": state.ci.fields(), "source": state.ci_source}
    return state
