"""``checklist-qa``: a model reads the facts of the disclosure, then the law decides.

a. ``read`` (model-free): the offline reader's facts (`FactJudge.read`: the CI fields,
   then the narrative) with the event's given facts on top. This is the starting point.
b. ``facts_qa``: ONE model call, ``prompts/facts_qa.txt``: the narrative, the CI fields,
   and for each fact of the regulation's fact schema its question and its values with
   their labels. The answer is a JSON object keyed by fact, each ``{"value": <one of the
   fact's values or "unknown">, "quote": <the narrative's words that state it>}``, sent
   under `facts_answer_schema` (derived from the fact schema) when the backend takes a
   JSON schema (`privacy_ci.llm.Capability.JSON_SCHEMA`; otherwise the text is parsed as
   JSON). It is parsed strictly (`parse_facts_answer`): a missing or unknown fact, an
   unknown field, a value that is not one of the fact's, or a quote that is not a string
   is asked again (samples 1 and 2, like the flow judge); a third failure is an explicit
   failure: verdict None, counted wrong.
c. Every value the model states (not ``unknown``) needs its quote (`check_quote`): found
   in the narrative (`find_quote`: whitespace collapsed, case ignored, enclosing quotation
   marks dropped) and stating the fact's content, not one word: at least
   `QUOTE_MIN_WORDS` words, one of them a content word (not a function word, and not
   yes / no / not / never). "no" and "yes" occur in most narratives and prove nothing.
   A value whose quote fails is dropped and counted (``rejected_quotes``): the fact
   stays as the reader had it, or unknown.
d. Precedence: given facts (the user's, and the CI fields the reader takes as given)
   win over answered ones; answered ones (source ``answered``, with the verified quote
   as the narrative writes it and its offsets) over read ones.
e. The law decides (`FactJudge.decide`): the verdict, the deciding rule, the facts it
   used, the presumptions and the questions, exactly as for ``ci-reasoner``. A verdict
   that rests on presumptions says so (``(on presumptions)`` in the decision).

Records, in order: ``read`` (model-free: the starting facts and which were given), one
``facts_qa`` record per model call (prompt, raw output, each answer with its quote's
check, ``rejected_quotes``), and ``combine`` (model-free: `FactJudgment.as_dict` of the
final facts and the law's decision, with ``calls``, ``rejected_quotes``, ``answered``:
the facts taken from the model, and ``given_won``: accepted answers a given fact
overrode).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from privacy_ci.ci import Flow, clean_value
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._parse import ParsedVerdict
from privacy_ci.judging._pipeline import PipelineContext, PipelineState, step_record
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.judging._reason import ON_PRESUMPTIONS, fact_judge
from privacy_ci.judging._types import StepRecord
from privacy_ci.llm import (
    Capability,
    FinishReason,
    GenerationSettings,
    capabilities_of,
    parse_structured,
    user,
)

if TYPE_CHECKING:
    from privacy_ci.reasoning import Facts, FactSchema, FactValue

__all__ = [
    "FACTS_QA_PARSE_RETRIES",
    "FACTS_QA_PROMPT",
    "FACTS_QA_QUOTE_CHARS",
    "FACTS_QA_UNKNOWN",
    "QUOTE_MIN_WORDS",
    "FactsAnswer",
    "QuoteCheck",
    "check_quote",
    "checklist_qa",
    "facts_answer_schema",
    "find_quote",
    "parse_facts_answer",
    "render_facts_prompt",
]

FACTS_QA_PROMPT = "facts_qa"
"""The prompt file (the narrative, the CI fields, every fact's question and values)."""

FACTS_QA_UNKNOWN = "unknown"
"""The answer for a fact the narrative does not state (its quote is not read)."""

FACTS_QA_PARSE_RETRIES = 2
"""Re-asks after an answer that does not parse (as the flow judge)."""

FACTS_QA_QUOTE_CHARS = 200
"""Each quote's ``maxLength`` when constrained (a clause or a short sentence)."""

QUOTE_MIN_WORDS = 3
"""A quote states a fact in at least this many words ("no" or "yes" states nothing)."""

_TOKENS_BASE = 24
_TOKENS_PER_FACT = 72  # the key, the value and a 200-character quote
_QUOTE_MARKS = "\"'“”‘’`"
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")

# Words that carry no fact by themselves, written out (not spaCy's list) so the check
# never moves with a library version.
_FUNCTION_WORDS = """
    yes no not never none nor neither either nobody nothing noone
    a an the this that these those there here such some any each every all both
    i me my mine we us our ours you your yours he him his she her hers it its they them
    their theirs one ones myself yourself himself herself itself ourselves themselves
    who whom whose which what whatever whoever when where why how
    am is are was were be been being do does did done doing have has had having
    will would shall should can could may might must ought
    and or but if then than so as because while though although whether
    of to in on at by for with from into onto about above below over under up down out
    off through during before after again further once upon within without against
    between among via per
    also just only very too even still yet already ever
    s t don't didn't doesn't isn't wasn't weren't aren't hasn't haven't hadn't won't
    wouldn't can't cannot couldn't shouldn't
"""
NOT_CONTENT: frozenset[str] = frozenset(_FUNCTION_WORDS.split())
"""Words that are not a quote's content (a quote needs one word outside this set)."""


def facts_answer_schema(schema: FactSchema, constrained: bool = False) -> dict[str, Any]:
    """The answer's JSON schema: every fact required, each ``{"value", "quote"}``.

    Args:
        schema: the regulation's fact schema.
        constrained: add ``maxLength`` to the quotes (for small local models).

    Returns:
        The schema: an object whose keys are exactly the facts; each value one of the
        fact's value names or `FACTS_QA_UNKNOWN`.
    """
    quote: dict[str, Any] = {"type": "string"}
    if constrained:
        quote["maxLength"] = FACTS_QA_QUOTE_CHARS
    properties: dict[str, Any] = {}
    for spec in schema:
        if FACTS_QA_UNKNOWN in spec.values:  # a fact model that names a value "unknown"
            raise PrivacyCIError(
                f"fact {spec.name!r} has a value named {FACTS_QA_UNKNOWN!r}: "
                "checklist-qa keeps that word for a fact the narrative does not state"
            )
        properties[spec.name] = {
            "type": "object",
            "properties": {
                "value": {"type": "string", "enum": [*spec.values, FACTS_QA_UNKNOWN]},
                "quote": quote,
            },
            "required": ["value", "quote"],
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _regulation_name(regulation: str) -> str:
    from privacy_ci.regulations import UnknownRegulation, get_regulation

    try:
        return get_regulation(regulation).name
    except UnknownRegulation:
        return regulation


def _fields(flow: Flow) -> str:
    """The case's CI fields, one ``name: value`` line each (the given ones only)."""
    lines = []
    for name, raw in flow.fields().items():
        value = clean_value(raw)
        if value is not None:
            lines.append(f"{name.replace('_', ' ').capitalize()}: {value}")
    return "\n".join(lines) or "(none given)"


def _facts_block(schema: FactSchema) -> str:
    blocks = []
    for spec in schema:
        lines = [f"[{spec.name}] {spec.question}"]
        lines += [f"  {name}: {v.label}" for name, v in spec.values.items()]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def render_facts_prompt(text: str, flow: Flow, schema: FactSchema) -> str:
    """The prompt: the narrative, the CI fields, every fact's question and values."""
    return load_prompt(FACTS_QA_PROMPT).render(
        regulation=_regulation_name(schema.regulation),
        event=text.strip(),
        fields=_fields(flow),
        facts=_facts_block(schema),
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
class QuoteCheck:
    """What `check_quote` found: the quote's offsets, or why it is refused."""

    span: tuple[int, int] | None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def check_quote(text: str, quote: str) -> QuoteCheck:
    """Whether a quote states a fact from the narrative (see the module docstring, c).

    Args:
        text: the narrative.
        quote: the model's quote.

    Returns:
        The `QuoteCheck`: the span when the quote is in the narrative (even when it is
        refused for its content), and the problem when it is refused.
    """
    if not quote.strip().strip(_QUOTE_MARKS).strip():
        return QuoteCheck(None, "empty quote")
    span = find_quote(text, quote)
    if span is None:
        return QuoteCheck(None, "quote not found in the narrative")
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(quote)]
    if len(words) < QUOTE_MIN_WORDS:
        return QuoteCheck(
            span, f"quote too short: {len(words)} word(s), at least {QUOTE_MIN_WORDS} state a fact"
        )
    if all(w in NOT_CONTENT for w in words):
        return QuoteCheck(span, "quote has no content word (only words such as no, not, yes)")
    return QuoteCheck(span)


@dataclass(frozen=True, slots=True)
class FactsAnswer:
    """What `parse_facts_answer` found.

    Args:
        answers: fact -> (value, quote), every fact present when it parses.
        problem: why it does not parse (None when it does).
    """

    answers: dict[str, tuple[str, str]] = field(default_factory=dict)
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def parse_facts_answer(
    value: Any, schema: FactSchema, parse_error: str | None = None
) -> FactsAnswer:
    """Check a structured answer against `facts_answer_schema`, strictly.

    Args:
        value: the parsed JSON.
        schema: the fact schema asked.
        parse_error: why the text was not JSON, if so.

    Returns:
        The `FactsAnswer`; ``problem`` set when it is not a JSON object, names a fact the
        schema does not have, misses one, has an entry that is not ``{"value", "quote"}``,
        a value that is not one of the fact's nor `FACTS_QA_UNKNOWN` (compared after
        trimming and case folding), or a quote that is not a string.
    """
    if parse_error is not None:
        return FactsAnswer(problem=parse_error)
    if not isinstance(value, dict):
        return FactsAnswer(problem=f"expected a JSON object, got {type(value).__name__}")
    problems: list[str] = []
    unknown = sorted(str(k) for k in value if k not in schema)
    if unknown:
        problems.append(f"unknown fact(s) {', '.join(map(repr, unknown))}")
    answers: dict[str, tuple[str, str]] = {}
    for spec in schema:
        entry = value.get(spec.name)
        if not isinstance(entry, dict):
            problems.append(
                f"no answer for {spec.name!r}"
                if entry is None
                else f"{spec.name!r} is not an object"
            )
            continue
        extra = sorted(str(k) for k in entry if k not in ("value", "quote"))
        said, quote = entry.get("value"), entry.get("quote")
        name = said.strip().casefold() if isinstance(said, str) else None
        if extra:
            problems.append(f"{spec.name!r}: unknown field(s) {', '.join(map(repr, extra))}")
        elif name is None or (name not in spec.values and name != FACTS_QA_UNKNOWN):
            problems.append(
                f"{spec.name!r}: value {said!r} is not one of"
                f" {', '.join(spec.values)}, {FACTS_QA_UNKNOWN}"
            )
        elif not isinstance(quote, str):
            problems.append(f"{spec.name!r}: the quote is not a string")
        else:
            answers[spec.name] = (name, quote)
    if problems:
        return FactsAnswer(answers, "; ".join(problems))
    return FactsAnswer(answers)


def _verify(
    text: str, answer: FactsAnswer, note: str
) -> tuple[dict[str, FactValue], dict[str, Any], int]:
    """The answers whose quotes hold, as answered facts; the record's view; rejections."""
    from privacy_ci.reasoning import FactValue, Source

    accepted: dict[str, FactValue] = {}
    shown: dict[str, Any] = {}
    rejected = 0
    for fact, (value, quote) in answer.answers.items():
        if value == FACTS_QA_UNKNOWN:
            shown[fact] = {"value": value, "quote": quote, "status": "unknown"}
            continue
        check = check_quote(text, quote)
        entry: dict[str, Any] = {"value": value, "quote": quote}
        if check.ok and check.span is not None:
            start, end = check.span
            accepted[fact] = FactValue(value, Source.ANSWERED, text[start:end], start, end, note)
            entry.update(status="accepted", start=start, end=end)
        else:
            rejected += 1
            entry.update(status="rejected", rejected=check.problem)
        shown[fact] = entry
    return accepted, shown, rejected


def _settings(ctx: PipelineContext, schema: FactSchema, structured: bool) -> GenerationSettings:
    settings = replace(ctx.settings, grammar=None, json_schema=None)
    if structured:
        settings = replace(
            settings,
            json_schema=facts_answer_schema(schema, ctx.constrained),
            schema_name="facts_answers",
        )
    if ctx.constrained:  # a small model must be able to close the object
        n = len(schema.facts)
        settings = replace(settings, max_tokens=_TOKENS_BASE + _TOKENS_PER_FACT * n)
    return settings


@dataclass(slots=True)
class _Asked:
    """The model's call(s): the facts it answered with verified quotes, or the failure."""

    answered: dict[str, FactValue] | None
    calls: int
    rejected: int
    failed: str | None = None


async def _ask(state: PipelineState, ctx: PipelineContext, schema: FactSchema) -> _Asked:
    """One call, re-asked up to twice when the answer does not parse."""
    text = state.event.text
    prompt = render_facts_prompt(text, state.event.flow, schema)
    client = ctx.require_client()
    structured = Capability.JSON_SCHEMA in capabilities_of(client.backend)
    settings = _settings(ctx, schema, structured)
    attempts = 1 + FACTS_QA_PARSE_RETRIES
    for attempt in range(attempts):
        completion = await client.complete([user(prompt)], settings, sample=attempt)
        record = step_record("facts_qa", FACTS_QA_PROMPT, prompt, completion)
        state.steps.append(record)
        common: dict[str, Any] = {
            "attempt": attempt + 1,
            "attempts_allowed": attempts,
            "sample": attempt,
            "structured": structured,
        }
        if not completion.ok:
            record.parsed = common
            state.error = completion.error
            return _Asked(None, attempt + 1, 0, completion.error)
        if structured:
            value, error = completion.parsed, completion.parse_error
        else:  # no schema was sent: read the text as JSON
            value, error = parse_structured(completion.text)
        answer = parse_facts_answer(value, schema, error)
        if answer.ok:
            accepted, shown, rejected = _verify(text, answer, f"answered by {ctx.backend}")
            record.parsed = {**common, "answers": shown, "rejected_quotes": rejected}
            return _Asked(accepted, attempt + 1, rejected)
        record.parsed = {**common, "answers": None, "rejected_quotes": 0}
        record.error = f"parse failure: {answer.problem}"
        if completion.finish_reason is FinishReason.LENGTH:
            record.error += f" (cut at max_tokens={settings.max_tokens})"
        if attempt + 1 < attempts:
            record.error += f"; asking again ({attempt + 1} of {attempts} attempts used)"
        else:
            record.error += f"; {attempts} attempts used: recorded as a failure"
    return _Asked(None, attempts, 0, f"{attempts} answers did not parse")


def _combine(start: Facts, answered: Mapping[str, FactValue]) -> tuple[Facts, list[str], list[str]]:
    """Given facts win over answered ones, answered ones over read ones."""
    from privacy_ci.reasoning import Source

    taken: dict[str, FactValue] = {}
    given_won: list[str] = []
    for name, fact in answered.items():
        held = start.get(name)
        if held is not None and held.source is Source.GIVEN:
            given_won.append(name)
        else:
            taken[name] = fact
    return start.with_facts(taken), list(taken), given_won


async def checklist_qa(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Read the facts with the model, then apply the law (see the module docstring)."""
    from privacy_ci.reasoning import FactJudgment

    record = StepRecord(name="read", prompt_name=None)
    state.steps.append(record)
    began = time.perf_counter()
    event = state.event
    try:
        judge = await asyncio.to_thread(fact_judge, ctx)  # the first call loads the KB
        given = judge.given(event.facts or None)
        read = await asyncio.to_thread(judge.read, event.text, event.flow)
    except PrivacyCIError as exc:
        record.error = f"the fact reader failed: {exc}"
        state.error = record.error
        return state
    start = read.with_facts(dict(given))
    record.latency_s = time.perf_counter() - began
    record.parsed = {"facts": start.as_dict(), "given": list(given)}

    asked = await _ask(state, ctx, judge.schema)
    if state.error is not None:
        return state

    final = StepRecord(name="combine", prompt_name=None)
    state.steps.append(final)
    counts = {"calls": asked.calls, "rejected_quotes": asked.rejected}
    if asked.answered is None:
        final.parsed = {"verdict": None, **counts}
        final.error = f"an explicit failure: {asked.failed}"
        state.decision = ParsedVerdict(None, "unparsed", "")
        state.rationale = final.error
        return state
    facts, taken, given_won = _combine(start, asked.answered)
    judgment = FactJudgment(facts, judge.decide(facts), judge.book.version_id)
    final.parsed = {**judgment.as_dict(), **counts, "answered": taken, "given_won": given_won}
    rule = judgment.decision.rule
    final.retrieved_ids = [rule.paragraph]
    state.kept = [rule.paragraph]
    state.rationale = judgment.explanation()
    how = rule.id if judgment.determined else f"{rule.id} ({ON_PRESUMPTIONS})"
    state.decision = ParsedVerdict(judgment.verdict, "law", how)
    return state
