"""The flow judge of the Privacy Conductor paper (section V-G, Appendix C).

A judge-only method: one structured-output call per flow. The system message is
the "Flow-judge system prompt" (``prompts/flow_judge_system.txt``); the user
message is the "Flow-judge user prompt" (``prompts/flow_judge_user.txt``) filled
with the flow's CI five-tuple and the case narrative, never its gold label or
governing articles. The answer is a JSON object under `flow_schema`:
``{"decision": "permit" | "prohibit" | "not applicable", "rationale": str}``.

Filling the five-tuple (`flow_values`): each party is ``name [role]``; a missing
name shows the role (PrivaCI-Bench HIPAA gives the same value for a party's name
and role in all 214 flows, and `privacy-ci eval` passes roles only), a missing
role or other field shows `FLOW_MISSING` (``unknown``), and a flow with no
recorded consent shows `FLOW_NO_CONSENT` (``none stated``), as Appendix C says.
Placeholders (``None``, ``N/A``, ``Unknown`` ...) count as missing
(`privacy_ci.ci.clean_value`); list values arrive joined with ``"; "`` by the case
loader. The fields shown as missing are
listed in each attempt's record (``parsed["missing"]``); an event with no CI
fields at all is still judged, from its narrative.

Parsing and retries (Appendix C: "A response that does not parse is retried twice
and otherwise recorded as an explicit failure"): an answer parses when it is a
JSON object whose ``decision`` is one of the three labels (compared after
collapsing whitespace and case) and whose ``rationale`` is a string; other keys
are ignored (and recorded). Anything else is re-asked with the same messages
under sample indices 1 and 2 (`privacy_ci.llm.LLMClient.complete`'s ``sample``:
their own cache entries and seed + sample, so a cached failure is not replayed;
a greedy deterministic model may still repeat itself). After
`FLOW_PARSE_RETRIES` failed re-asks the judgment has ``verdict=None``, an explicit
failure counted wrong. Free text is never read with `parse_verdict`: an answer
outside the schema is a failure even when its words name a verdict. Every
attempt is one ``decide`` step record.

Constrained decoding (`JudgeConfig.constrain`; auto: the embedded model): the
schema becomes a grammar, the rationale gets ``maxLength``
`FLOW_RATIONALE_CHARS` and the completion limit is `FLOW_MAX_TOKENS`, so a small
model always closes the JSON object. Unconstrained, the schema is sent as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from privacy_ci.ci import Verdict, clean_value
from privacy_ci.judging._parse import ParsedVerdict
from privacy_ci.judging._pipeline import PipelineContext, PipelineState, step_record
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.judging._types import Event
from privacy_ci.llm import FinishReason, GenerationSettings, system, user

__all__ = [
    "FLOW_DECISIONS",
    "FLOW_MAX_TOKENS",
    "FLOW_MISSING",
    "FLOW_NO_CONSENT",
    "FLOW_PARSE_RETRIES",
    "FLOW_RATIONALE_CHARS",
    "FLOW_SYSTEM_PROMPT",
    "FLOW_USER_PROMPT",
    "FlowAnswer",
    "flow_schema",
    "flow_values",
    "judge_flow",
    "parse_flow_answer",
    "render_flow_prompt",
]

FLOW_SYSTEM_PROMPT = "flow_judge_system"
"""The system prompt's file (no variables)."""

FLOW_USER_PROMPT = "flow_judge_user"
"""The user prompt's file (the five-tuple and the narrative)."""

FLOW_DECISIONS: dict[str, Verdict] = {
    "permit": Verdict.PERMIT,
    "prohibit": Verdict.PROHIBIT,
    "not applicable": Verdict.NOT_APPLICABLE,
}
"""The schema's decisions (the system prompt's labels) -> verdicts."""

FLOW_PARSE_RETRIES = 2
"""Re-asks after an answer that does not parse (Appendix C: "retried twice")."""

FLOW_MISSING = "unknown"
"""What a missing five-tuple field (other than consent) shows."""

FLOW_NO_CONSENT = "none stated"
"""What a flow with no recorded consent shows (Appendix C)."""

FLOW_RATIONALE_CHARS = 320
"""The rationale's ``maxLength`` when constrained (about three sentences)."""

FLOW_MAX_TOKENS = 256
"""The completion limit when constrained (the JSON object with that rationale fits)."""


def flow_schema(
    constrained: bool = False, rationale_chars: int = FLOW_RATIONALE_CHARS
) -> dict[str, Any]:
    """The flow judge's JSON schema: a decision and a rationale, both required.

    Args:
        constrained: add ``maxLength`` to the rationale (for small local models).
        rationale_chars: that ``maxLength``.

    Returns:
        The schema.
    """
    rationale: dict[str, Any] = {"type": "string"}
    if constrained:
        rationale["maxLength"] = rationale_chars
    return {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": list(FLOW_DECISIONS)},
            "rationale": rationale,
        },
        "required": ["decision", "rationale"],
        "additionalProperties": False,
    }


def flow_values(event: Event) -> tuple[dict[str, str], list[str]]:
    """The user prompt's values for an event, and the fields shown as missing.

    Args:
        event: the event (its CI fields and narrative; it carries no label).

    Returns:
        (values by the template's variable names, the template variables that show
        `FLOW_MISSING` or `FLOW_NO_CONSENT`, in template order).
    """
    values: dict[str, str] = {}
    missing: list[str] = []

    def put(name: str, value: str | None, default: str = FLOW_MISSING) -> None:
        if value is None:
            missing.append(name)
        values[name] = default if value is None else value

    flow = event.flow
    for variable, party in (
        ("sender", flow.sender),
        ("receiver", flow.recipient),
        ("subject", flow.subject),
    ):
        role = clean_value(party.role)
        put(variable, clean_value(party.name) or role)
        put(f"{variable}_role", role)
    put("message_type", clean_value(flow.information_type))
    put("transmission_principle", clean_value(flow.principle.purpose))
    put("consent_form", clean_value(flow.principle.consent), FLOW_NO_CONSENT)
    values["case_content"] = event.text.strip()
    return values, missing


def render_flow_prompt(event: Event) -> str:
    """The flow judge's user message for an event.

    Args:
        event: the event.

    Returns:
        The rendered ``flow_judge_user`` prompt.
    """
    values, _ = flow_values(event)
    return load_prompt(FLOW_USER_PROMPT).render(**values)


@dataclass(frozen=True, slots=True)
class FlowAnswer:
    """What `parse_flow_answer` found.

    Args:
        verdict: the verdict, or None when the answer does not parse.
        decision: the decision label as given ("" when absent).
        rationale: the rationale ("" when absent).
        problem: why it does not parse (None when it does).
        extra_keys: keys outside the schema (ignored).
    """

    verdict: Verdict | None
    decision: str = ""
    rationale: str = ""
    problem: str | None = None
    extra_keys: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.verdict is not None


def parse_flow_answer(value: Any, parse_error: str | None = None) -> FlowAnswer:
    """Check a structured answer against `flow_schema`.

    Args:
        value: the parsed JSON (`privacy_ci.llm.Completion.parsed`).
        parse_error: why the text was not JSON (`Completion.parse_error`), if so.

    Returns:
        The `FlowAnswer`; ``verdict`` None with ``problem`` set when the value is not
        JSON, not an object, or its decision or rationale is missing or invalid.
    """
    if parse_error is not None:
        return FlowAnswer(None, problem=parse_error)
    if not isinstance(value, dict):
        return FlowAnswer(None, problem=f"expected a JSON object, got {type(value).__name__}")
    extra = tuple(sorted(str(k) for k in value if k not in ("decision", "rationale")))
    decision = value.get("decision")
    rationale = value.get("rationale")
    problems = []
    if decision is None:
        problems.append("no 'decision'")
    elif not isinstance(decision, str):
        problems.append(f"'decision' is a {type(decision).__name__}, not a string")
    elif " ".join(decision.split()).casefold() not in FLOW_DECISIONS:
        problems.append(
            f"'decision' {decision!r} is not one of {', '.join(map(repr, FLOW_DECISIONS))}"
        )
    if rationale is None:
        problems.append("no 'rationale'")
    elif not isinstance(rationale, str):
        problems.append(f"'rationale' is a {type(rationale).__name__}, not a string")
    decision_text = decision if isinstance(decision, str) else ""
    rationale_text = rationale.strip() if isinstance(rationale, str) else ""
    if problems:
        return FlowAnswer(None, decision_text, rationale_text, "; ".join(problems), extra)
    verdict = FLOW_DECISIONS[" ".join(decision_text.split()).casefold()]
    return FlowAnswer(verdict, decision_text, rationale_text, None, extra)


def _flow_settings(ctx: PipelineContext) -> GenerationSettings:
    settings = replace(
        ctx.settings,
        grammar=None,
        json_schema=flow_schema(ctx.constrained),
        schema_name="flow_judgment",
    )
    if ctx.constrained:
        settings = replace(settings, max_tokens=FLOW_MAX_TOKENS)
    return settings


async def judge_flow(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """The flow judge: one structured call, re-asked up to twice when it does not parse.

    Sets ``state.decision`` (method ``schema``, or ``unparsed`` after the last
    failed attempt) and ``state.rationale`` (the answer's rationale; the last raw
    output on failure). Appends one ``decide`` record per attempt. A failed model
    call sets ``state.error`` and stops.

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    system_text = load_prompt(FLOW_SYSTEM_PROMPT).render()
    values, missing = flow_values(state.event)
    prompt = load_prompt(FLOW_USER_PROMPT).render(**values)
    settings = _flow_settings(ctx)
    messages = [system(system_text), user(prompt)]
    attempts = 1 + FLOW_PARSE_RETRIES
    last_text = ""
    for attempt in range(attempts):
        completion = await ctx.require_client().complete(messages, settings, sample=attempt)
        record = step_record("decide", FLOW_USER_PROMPT, prompt, completion)
        state.steps.append(record)
        common = {
            "attempt": attempt + 1,
            "attempts_allowed": attempts,
            "sample": attempt,
            "system_prompt": FLOW_SYSTEM_PROMPT,
            "missing": list(missing),
        }
        if not completion.ok:
            record.parsed = common
            state.error = completion.error
            return state
        answer = parse_flow_answer(completion.parsed, completion.parse_error)
        record.parsed = {
            "verdict": None if answer.verdict is None else answer.verdict.value,
            "method": "schema" if answer.ok else "unparsed",
            "evidence": answer.decision,
            "decision": answer.decision,
            "rationale": answer.rationale,
            **common,
        }
        if answer.extra_keys:
            record.parsed["extra_keys"] = list(answer.extra_keys)
        if answer.verdict is not None:
            state.decision = ParsedVerdict(answer.verdict, "schema", answer.decision)
            state.rationale = answer.rationale
            return state
        record.error = f"parse failure: {answer.problem}"
        if completion.finish_reason is FinishReason.LENGTH:
            record.error += f" (cut at max_tokens={settings.max_tokens})"
        if attempt + 1 < attempts:
            record.error += f"; asking again ({attempt + 1} of {attempts} attempts used)"
        else:
            record.error += f"; {attempts} attempts used: recorded as a failure"
        last_text = completion.text
    state.decision = ParsedVerdict(None, "unparsed", "")
    state.rationale = last_text
    return state
