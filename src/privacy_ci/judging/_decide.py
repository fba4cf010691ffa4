"""The decision step: the method's decision prompt, its answer parsed to a verdict.

Its ``<reference_regulations>`` (when the template has one) are the kept
regulations formatted ``ID: text``, one per line, or ``None`` when no regulation
was kept. The answer goes through `parse_verdict`; an unparseable answer is
recorded (``verdict=None``), never resampled and never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from privacy_ci.judging._parse import parse_verdict
from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    Step,
    call_model,
    choice_settings,
    format_references,
    parsed_verdict_dict,
)
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.llm import FinishReason

__all__ = ["VERDICT_OPTIONS", "decide"]

VERDICT_OPTIONS: tuple[str, ...] = ("A. Prohibited", "B. Permitted", "C. Not related")
"""The decision grammar's answers (after the forced ``Choice: ``), as the prompts print them."""


@dataclass(frozen=True, slots=True)
class _Decide:
    prompt_name: str
    name: str = "decide"

    async def __call__(self, state: PipelineState, ctx: PipelineContext) -> PipelineState:
        template = load_prompt(self.prompt_name)
        values = {"event": state.event.text}
        if "reference_regulations" in template.variables:
            kb = ctx.require_kb() if state.kept else ctx.kb
            values["reference_regulations"] = format_references(kb, state.kept, ctx.config)
        prompt = template.render(**values)
        settings = choice_settings(ctx, VERDICT_OPTIONS, "Choice: ", 16)
        completion, record = await call_model(ctx, self.name, self.prompt_name, prompt, settings)
        record.retrieved_ids = list(state.kept)
        state.steps.append(record)
        if not completion.ok:
            state.error = completion.error
            return state
        parsed = parse_verdict(completion.text, prompt=prompt)
        record.parsed = parsed_verdict_dict(parsed)
        if parsed.verdict is None:
            record.error = "parse failure: the answer holds no recognisable choice"
            if completion.finish_reason is FinishReason.LENGTH:
                record.error += f" (cut at max_tokens={settings.max_tokens})"
        state.decision = parsed
        state.rationale = completion.text
        return state


def decide(prompt: str) -> Step:
    """The decision step with the named prompt (``dp``, ``cot_auto``, ``cot_manual``,
    ``agent_id_decide``, ``content_decide``).

    Args:
        prompt: the prompt template's name; ``<event>`` is the event text and
            ``<reference_regulations>`` (when present) the kept regulations.

    Returns:
        The step.
    """
    load_prompt(prompt)  # fail early on a typo
    return _Decide(prompt)
