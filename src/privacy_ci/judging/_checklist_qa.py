"""``checklist-qa``: the ci-reasoner's checklist, answered by a model.

a-b. The reasoner (`privacy_ci.reasoning.CIReasoner`, the one the ``ci-reasoner``
   step keeps per knowledge base) decides applicability and lists the candidate
   norms, best-matching first. Not applicable: the verdict is Not applicable and no
   model is called.
c. For each candidate norm with conditions (at most `JudgeConfig.checklist_norms`,
   in the reasoner's order) ONE model call: ``prompts/checklist_qa.txt`` with the
   narrative, the norm and its numbered condition questions, answered under
   `checklist_schema` (an object keyed by condition id, each ``{"answer": "yes" |
   "no" | "not stated", "quote": str}``). ``yes`` -> met, ``no`` -> contradicted,
   ``not stated`` -> unstated. A ``yes`` or ``no`` whose quote is not in the
   narrative (`find_quote`: whitespace collapsed, case ignored, enclosing quotation
   marks dropped; an empty quote is not a quote) is rejected: the condition is
   unstated and the rejection counted (``parsed["rejected_quotes"]``). The quote of
   a ``not stated`` answer is not read. An answer that does not parse is asked
   again (samples 1 and 2, like the flow judge); a third failure is an explicit
   failure: verdict None, no further calls.
d. The verdict is the reasoner's rule (`privacy_ci.reasoning._reasoner.decide`)
   over the candidates with the model's statuses: the norms asked and the norms
   without conditions (nothing to ask), in the reasoner's order. Candidates past the
   limit are left out: their statuses would be the cue matcher's, not the model's.
   No norm applies: an abstention, as for the reasoner.

Records, in order: ``candidates`` (steps a-b, model-free), one ``checklist`` record
per model call (prompt, raw output, parsed answers, rejected quotes), and
``combine`` (model-free: the reasoning with the model's statuses, ``calls`` per
case and the total of ``rejected_quotes``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._parse import ParsedVerdict
from privacy_ci.judging._pipeline import PipelineContext, PipelineState, step_record
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.judging._reason import ABSTAINED, _reasoner
from privacy_ci.judging._types import StepRecord
from privacy_ci.llm import FinishReason, GenerationSettings, user

if TYPE_CHECKING:
    from privacy_ci.reasoning import Condition, ConditionCheck, NormCheck, NormEntry, Reasoning

__all__ = [
    "CHECKLIST_ANSWERS",
    "CHECKLIST_PARSE_RETRIES",
    "CHECKLIST_PROMPT",
    "CHECKLIST_QUOTE_CHARS",
    "ChecklistAnswer",
    "checklist_qa",
    "checklist_schema",
    "find_quote",
    "parse_checklist_answer",
    "render_checklist_prompt",
]

CHECKLIST_PROMPT = "checklist_qa"
"""The prompt file (the narrative, the norm, its numbered questions)."""

CHECKLIST_ANSWERS: tuple[str, ...] = ("yes", "no", "not stated")
"""The schema's answers: met, contradicted, unstated."""

CHECKLIST_PARSE_RETRIES = 2
"""Re-asks after an answer that does not parse (as the flow judge)."""

CHECKLIST_QUOTE_CHARS = 200
"""Each quote's ``maxLength`` when constrained (a clause or a short sentence)."""

_TOKENS_BASE = 24
_TOKENS_PER_CONDITION = 72  # the id, the answer and a 200-character quote
_QUOTE_MARKS = "\"'“”‘’`"


def checklist_schema(ids: Sequence[str], constrained: bool = False) -> dict[str, Any]:
    """The answer's JSON schema: one required ``{"answer", "quote"}`` per condition id.

    Args:
        ids: the norm's condition ids, in question order.
        constrained: add ``maxLength`` to the quotes (for small local models).

    Returns:
        The schema.
    """
    quote: dict[str, Any] = {"type": "string"}
    if constrained:
        quote["maxLength"] = CHECKLIST_QUOTE_CHARS
    entry = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": list(CHECKLIST_ANSWERS)},
            "quote": quote,
        },
        "required": ["answer", "quote"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {i: entry for i in ids},
        "required": list(ids),
        "additionalProperties": False,
    }


def render_checklist_prompt(text: str, norm: NormEntry) -> str:
    """The prompt for one norm: the narrative and its numbered condition questions."""
    questions = "\n".join(
        f"{n}. [{c.id}] {c.question}" for n, c in enumerate(norm.conditions, start=1)
    )
    return load_prompt(CHECKLIST_PROMPT).render(
        norm=f"{norm.paragraph}: {norm.title}", event=text.strip(), questions=questions
    )


def find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """Where a quote stands in the narrative, whitespace collapsed and case ignored.

    Args:
        text: the narrative.
        quote: the model's quote (enclosing quotation marks are dropped).

    Returns:
        (start, end) offsets in `text`, or None when it is not there (or empty).
    """
    words = quote.strip().strip(_QUOTE_MARKS).split()
    if not words:
        return None
    found = re.search(r"\s+".join(re.escape(w) for w in words), text, re.IGNORECASE)
    return None if found is None else (found.start(), found.end())


@dataclass(frozen=True, slots=True)
class ChecklistAnswer:
    """What `parse_checklist_answer` found.

    Args:
        answers: condition id -> (answer, quote), every id present when it parses.
        problem: why it does not parse (None when it does).
        extra_keys: keys outside the schema (ignored).
    """

    answers: dict[str, tuple[str, str]] = field(default_factory=dict)
    problem: str | None = None
    extra_keys: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.problem is None


def parse_checklist_answer(
    value: Any, ids: Sequence[str], parse_error: str | None = None
) -> ChecklistAnswer:
    """Check a structured answer against `checklist_schema`.

    Args:
        value: the parsed JSON (`privacy_ci.llm.Completion.parsed`).
        ids: the condition ids asked.
        parse_error: why the text was not JSON, if so.

    Returns:
        The `ChecklistAnswer`; ``problem`` set when it is not a JSON object, or an
        id is missing or its answer is not one of `CHECKLIST_ANSWERS` (compared
        after collapsing whitespace and case) or its quote is not a string.
    """
    if parse_error is not None:
        return ChecklistAnswer(problem=parse_error)
    if not isinstance(value, dict):
        return ChecklistAnswer(problem=f"expected a JSON object, got {type(value).__name__}")
    extra = tuple(sorted(str(k) for k in value if k not in ids))
    answers: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    for cid in ids:
        entry = value.get(cid)
        if not isinstance(entry, dict):
            problems.append(
                f"no answer for {cid!r}" if entry is None else f"{cid!r} is not an object"
            )
            continue
        answer, quote = entry.get("answer"), entry.get("quote")
        said = " ".join(answer.split()).casefold() if isinstance(answer, str) else None
        if said not in CHECKLIST_ANSWERS:
            problems.append(
                f"{cid!r}: answer {answer!r} is not one of {', '.join(CHECKLIST_ANSWERS)}"
            )
        elif not isinstance(quote, str):
            problems.append(f"{cid!r}: the quote is not a string")
        else:
            answers[cid] = (said, quote)
    if problems:
        return ChecklistAnswer(answers, "; ".join(problems), extra)
    return ChecklistAnswer(answers, None, extra)


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence(s) around a span, for the evidence's context."""
    left = max(text.rfind(mark, 0, start) for mark in ".!?\n") + 1
    ends = [i for i in (text.find(mark, end) for mark in ".!?\n") if i != -1]
    right = min(ends) + 1 if ends else len(text)
    return " ".join(text[left:right].split())


def _checks(
    text: str, conditions: Sequence[Condition], answer: ChecklistAnswer
) -> tuple[tuple[ConditionCheck, ...], dict[str, Any], int]:
    """The model's answers as condition checks; the record's view; quotes rejected."""
    from privacy_ci.reasoning import ConditionCheck, Evidence, Status

    status = {"yes": Status.MET, "no": Status.CONTRADICTED, "not stated": Status.UNSTATED}
    checks: list[ConditionCheck] = []
    shown: dict[str, Any] = {}
    rejected = 0
    for cond in conditions:
        said, quote = answer.answers[cond.id]
        evidence: tuple[Evidence, ...] = ()
        why = None
        if said != "not stated":
            span = find_quote(text, quote)
            if span is None:
                why = "empty quote" if not quote.strip() else "quote not found in the narrative"
                rejected += 1
            else:
                start, end = span
                states = "met" if said == "yes" else "not_met"
                sentence = _sentence(text, start, end)
                evidence = (
                    Evidence(states, f"model: {said}", text[start:end], start, end, sentence),
                )
        result = status[said] if why is None else Status.UNSTATED
        checks.append(ConditionCheck(cond, result, evidence))
        shown[cond.id] = {"answer": said, "quote": quote, "status": result.value, "rejected": why}
    return tuple(checks), shown, rejected


def _settings(ctx: PipelineContext, ids: Sequence[str]) -> GenerationSettings:
    settings = replace(
        ctx.settings,
        grammar=None,
        json_schema=checklist_schema(ids, ctx.constrained),
        schema_name="checklist_answers",
    )
    if ctx.constrained:  # a small model must be able to close the object
        settings = replace(settings, max_tokens=_TOKENS_BASE + _TOKENS_PER_CONDITION * len(ids))
    return settings


@dataclass(slots=True)
class _Asked:
    """One norm's call(s): its checked conditions, or why there are none."""

    check: NormCheck | None
    calls: int
    rejected: int
    failed: str | None = None


async def _ask(state: PipelineState, ctx: PipelineContext, candidate: NormCheck) -> _Asked:
    """One norm: one call, re-asked up to twice when the answer does not parse."""
    norm = candidate.norm
    ids = [c.id for c in norm.conditions]
    prompt = render_checklist_prompt(state.event.text, norm)
    settings = _settings(ctx, ids)
    attempts = 1 + CHECKLIST_PARSE_RETRIES
    for attempt in range(attempts):
        completion = await ctx.require_client().complete([user(prompt)], settings, sample=attempt)
        record = step_record("checklist", CHECKLIST_PROMPT, prompt, completion)
        record.retrieved_ids = [norm.paragraph]
        state.steps.append(record)
        common: dict[str, Any] = {
            "norm": norm.id,
            "paragraph": norm.paragraph,
            "effect": norm.effect.value,
            "attempt": attempt + 1,
            "attempts_allowed": attempts,
            "sample": attempt,
        }
        if not completion.ok:
            record.parsed = common
            state.error = completion.error
            return _Asked(None, attempt + 1, 0, completion.error)
        answer = parse_checklist_answer(completion.parsed, ids, completion.parse_error)
        if answer.ok:
            checks, shown, rejected = _checks(state.event.text, norm.conditions, answer)
            record.parsed = {**common, "answers": shown, "rejected_quotes": rejected}
            if answer.extra_keys:
                record.parsed["extra_keys"] = list(answer.extra_keys)
            return _Asked(replace(candidate, conditions=checks), attempt + 1, rejected)
        record.parsed = {**common, "answers": None, "rejected_quotes": 0}
        record.error = f"parse failure: {answer.problem}"
        if completion.finish_reason is FinishReason.LENGTH:
            record.error += f" (cut at max_tokens={settings.max_tokens})"
        if attempt + 1 < attempts:
            record.error += f"; asking again ({attempt + 1} of {attempts} attempts used)"
        else:
            record.error += f"; {attempts} attempts used: recorded as a failure"
    return _Asked(None, attempts, 0, f"norm {norm.id}: {attempts} answers did not parse")


async def checklist_qa(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Answer the reasoner's checklist with the model (see the module docstring)."""
    from privacy_ci.reasoning import Reasoning
    from privacy_ci.reasoning._reasoner import decide

    record = StepRecord(name="candidates", prompt_name=None)
    state.steps.append(record)
    start = time.perf_counter()
    event = state.event
    try:
        found = await asyncio.to_thread(lambda: _reasoner(ctx).judge(event.text, event.flow))
    except PrivacyCIError as exc:
        record.error = f"the reasoner failed: {exc}"
        state.error = record.error
        return state
    record.latency_s = time.perf_counter() - start
    limit = ctx.config.checklist_norms
    with_conditions = [c for c in found.candidates if c.norm.conditions]
    asked, skipped = with_conditions[:limit], with_conditions[limit:]
    record.parsed = {
        "applicability": found.applicability.as_dict(),
        "candidates": [c.norm.id for c in found.candidates],
        "asked": [c.norm.id for c in asked],
        "skipped": [c.norm.id for c in skipped],
        "limit": limit,
    }
    record.retrieved_ids = [c.norm.paragraph for c in asked]

    answered: dict[str, NormCheck] = {}
    calls = rejected = 0
    failure = None
    if found.applicability.applicable:
        for candidate in asked:
            result = await _ask(state, ctx, candidate)
            calls += result.calls
            rejected += result.rejected
            if state.error is not None:
                return state
            if result.check is None:
                failure = result.failed
                break
            answered[candidate.norm.id] = result.check

    final = StepRecord(name="combine", prompt_name=None)
    state.steps.append(final)
    counts = {"calls": calls, "rejected_quotes": rejected}
    if failure is not None:
        final.parsed = {"verdict": None, **counts}
        final.error = f"an explicit failure: {failure}"
        state.decision = ParsedVerdict(None, "unparsed", "")
        state.rationale = final.error
        return state
    if not found.applicability.applicable:
        reasoning = found  # the reasoner's Not applicable, with its reasons
    else:
        used = tuple(
            answered.get(c.norm.id, c)
            for c in found.candidates
            if not c.norm.conditions or c.norm.id in answered
        )
        verdict, rule, deciding = decide(used)
        reasoning = Reasoning(verdict, rule, deciding, found.applicability, used, found.parties)
    final.parsed = {**reasoning.as_dict(), **counts}
    state.rationale = reasoning.explanation()
    if reasoning.deciding is not None:
        state.kept = [reasoning.deciding.norm.paragraph]
    state.decision = _decision(reasoning)
    if reasoning.verdict is None:
        final.error = ABSTAINED
    return state


def _decision(reasoning: Reasoning) -> ParsedVerdict:
    if reasoning.verdict is None:
        return ParsedVerdict(None, "abstained", reasoning.rule)
    return ParsedVerdict(reasoning.verdict, "checklist", reasoning.rule)
