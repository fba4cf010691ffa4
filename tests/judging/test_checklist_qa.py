"""``checklist-qa``: the reasoner's checklist answered by a model.

Most tests replace the reasoner with a fixed `Reasoning` of hand-made norms (so they
test this method's wiring, not the catalogue, which is tuned elsewhere) and the
model with the scripted test backend; the last ones run the real reasoner against
the local OpenAI-compatible test server and the embedded model.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.ci import Flow, Verdict
from privacy_ci.judging import (
    CHECKLIST_ANSWERS,
    CHECKLIST_PARSE_RETRIES,
    METHODS,
    Event,
    JudgeConfig,
    Judgment,
    _checklist_qa,
    build_method,
    checklist_schema,
    find_quote,
    load_prompt,
    parse_checklist_answer,
    render_checklist_prompt,
)
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, Message, OpenAICompatibleBackend
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.reasoning import Applicability, NormCheck, Status
from tests._norms import (
    ALTERNATIVES,
    APPLICABLE,
    NO_CONDITIONS,
    NOT_APPLICABLE,
    SALE,
    TREATMENT,
    StubReasoner,
    candidate,
    reasoning,
)
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

NARRATIVE = (
    "Dr. Reed, a physician at Mercy Clinic, sent Ann Lee's chart to Dr. Park,\n"
    "a cardiologist, for her treatment. The clinic did not sell the chart."
)
EVENT = Event(NARRATIVE, "qa-1", Flow.of(sender_role="Physician", recipient_role="Physician"))


def use_reasoner(
    monkeypatch: pytest.MonkeyPatch,
    candidates: Sequence[NormCheck],
    applicability: Applicability = APPLICABLE,
) -> StubReasoner:
    verdict = None if applicability.applicable else Verdict.NOT_APPLICABLE
    rule = "reasoner" if applicability.applicable else "not applicable"
    stub = StubReasoner(reasoning(verdict, candidates, None, applicability, rule))
    monkeypatch.setattr(_checklist_qa, "_reasoner", lambda ctx: stub)
    return stub


Answers = dict[str, tuple[str, str]]


def by_schema(table: Answers) -> Callable[[Sequence[Message], GenerationSettings], str]:
    """A scripted model that answers each asked condition id from `table`."""

    def answer(messages: Sequence[Message], settings: GenerationSettings) -> str:
        assert settings.json_schema is not None
        ids = list(settings.json_schema["properties"])
        return json.dumps({i: {"answer": table[i][0], "quote": table[i][1]} for i in ids})

    return answer


FAKE_KB: Any = SimpleNamespace(regulation="hipaa")


def method(answers: Any, config: JudgeConfig | None = None) -> tuple[Any, ScriptedTestBackend]:
    backend = ScriptedTestBackend(answers)
    return build_method("checklist-qa", LLMClient(backend), kb=FAKE_KB, config=config), backend


def judge(pipeline: Any, event: Event = EVENT) -> Judgment:
    result: Judgment = asyncio.run(pipeline.judge(event))
    return result


def combine(judgment: Judgment) -> dict[str, Any]:
    [record] = [s for s in judgment.steps if s.name == "combine"]
    assert record.prompt_name is None and record.raw_output == ""  # model-free
    parsed: dict[str, Any] = record.parsed
    return parsed


# ---------------------------------------------------------------------------------
# the method, the prompt, the schema
# ---------------------------------------------------------------------------------
def test_registered() -> None:
    spec = METHODS["checklist-qa"]
    assert spec.prompts == ("checklist_qa",) and spec.needs_kb and spec.needs_model
    assert spec.steps == ("candidates", "checklist", "combine")
    assert list(METHODS)[-1] == "flow-judge"  # the flow judge stays last
    assert JudgeConfig().checklist_norms == 4


def test_prompt_is_ours_with_numbered_questions() -> None:
    template = load_prompt("checklist_qa")
    assert template.variables == {"norm", "event", "questions"}
    prompt = render_checklist_prompt("  " + NARRATIVE + "\n", TREATMENT)
    assert NARRATIVE in prompt and "Provision: 164.506(c)(1): Disclosure for treatment" in prompt
    assert (
        "1. [for-treatment] Is the chart disclosed for the individual's treatment?\n"
        "2. [to-provider] Is the recipient a health care provider?"
    ) in prompt
    assert '"yes"' in prompt and '"not stated"' in prompt and "word for word" in prompt
    readme = (Path(_checklist_qa.__file__).parent / "prompts" / "README.md").read_text()
    assert "checklist_qa.txt" in readme and "our own" in readme


def test_schema() -> None:
    entry = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": ["yes", "no", "not stated"]},
            "quote": {"type": "string"},
        },
        "required": ["answer", "quote"],
        "additionalProperties": False,
    }
    assert checklist_schema(["a", "b"]) == {
        "type": "object",
        "properties": {"a": entry, "b": entry},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    constrained = checklist_schema(["a"], constrained=True)
    assert constrained["properties"]["a"]["properties"]["quote"]["maxLength"] == 200
    assert CHECKLIST_ANSWERS == ("yes", "no", "not stated")


def test_find_quote() -> None:
    assert find_quote(NARRATIVE, "Dr. Park, a cardiologist") is not None
    start, end = find_quote(NARRATIVE, "  DR. PARK,   a\tCardiologist ") or (0, 0)
    assert NARRATIVE[start:end] == "Dr. Park,\na cardiologist"  # across the line break
    assert find_quote(NARRATIVE, '"for her treatment"') is not None  # quotation marks dropped
    assert find_quote(NARRATIVE, "for his surgery") is None
    assert find_quote(NARRATIVE, "") is None and find_quote(NARRATIVE, "  ") is None
    assert find_quote(NARRATIVE, "cardio") is not None  # a substring is a quote


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([], "expected a JSON object, got list"),
        ({"a": {"answer": "yes", "quote": "x"}}, "no answer for 'b'"),
        ({"a": "yes", "b": {"answer": "no", "quote": ""}}, "'a' is not an object"),
        ({"a": {"answer": "maybe", "quote": ""}, "b": {"answer": "no", "quote": ""}}, "'maybe'"),
        ({"a": {"answer": "yes"}, "b": {"answer": "no", "quote": ""}}, "quote is not a string"),
    ],
)
def test_parse_malformed(value: Any, problem: str) -> None:
    answer = parse_checklist_answer(value, ["a", "b"])
    assert not answer.ok and answer.problem is not None and problem in answer.problem


def test_parse_normalises_answers_and_reports_extra_keys() -> None:
    value = {
        "a": {"answer": " Not  Stated ", "quote": ""},
        "b": {"answer": "YES", "quote": "q"},
        "c": {},
    }
    answer = parse_checklist_answer(value, ["a", "b"])
    assert answer.ok and answer.answers == {"a": ("not stated", ""), "b": ("yes", "q")}
    assert answer.extra_keys == ("c",)
    assert parse_checklist_answer(None, ["a"], "invalid JSON").problem == "invalid JSON"


# ---------------------------------------------------------------------------------
# verdicts with the scripted test backend
# ---------------------------------------------------------------------------------
def test_conditions_met_permit(monkeypatch: pytest.MonkeyPatch) -> None:
    stub = use_reasoner(monkeypatch, [candidate(TREATMENT, 2), candidate(SALE)])
    table = {
        "for-treatment": ("yes", "for her treatment"),
        "to-provider": ("yes", "Dr. Park, a cardiologist"),
        "sold": ("not stated", ""),
    }
    pipeline, backend = method(by_schema(table))
    judgment = judge(pipeline)
    assert stub.seen == [(NARRATIVE, EVENT.flow)]
    assert judgment.verdict is Verdict.PERMIT and judgment.error is None
    assert judgment.cited_ids == ["164.506(c)(1)"]
    assert [s.name for s in judgment.steps] == ["candidates", "checklist", "checklist", "combine"]
    assert len(backend.calls) == 2
    # one call per norm: its questions only, under its schema
    (messages, settings), _ = backend.calls
    assert [m.role for m in messages] == ["user"]
    assert messages[0].content == render_checklist_prompt(NARRATIVE, TREATMENT)
    assert settings.json_schema == checklist_schema(["for-treatment", "to-provider"])
    assert settings.schema_name == "checklist_answers" and settings.grammar is None
    first = judgment.steps[1]
    assert first.prompt_name == "checklist_qa" and first.raw_output and first.error is None
    assert first.parsed["norm"] == TREATMENT.id and first.parsed["rejected_quotes"] == 0
    assert first.parsed["answers"]["for-treatment"] == {
        "answer": "yes",
        "quote": "for her treatment",
        "status": "met",
        "rejected": None,
    }
    result = combine(judgment)
    assert result["verdict"] == "permit" and result["rule"]
    assert result["calls"] == 2 and result["rejected_quotes"] == 0
    assert result["deciding"]["id"] == TREATMENT.id
    [ev] = result["deciding"]["conditions"][1]["evidence"]
    assert NARRATIVE[ev["start"] : ev["end"]] == ev["quote"] == "Dr. Park,\na cardiologist"
    assert ev["states"] == "met" and ev["cue"] == "model: yes"
    assert judgment.rationale.startswith(f"verdict: permit ({result['rule']})")
    candidates = judgment.steps[0].parsed
    assert candidates["asked"] == [TREATMENT.id, SALE.id] and candidates["skipped"] == []


def test_contradicted_conditions_prohibit(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [candidate(TREATMENT, 2), candidate(SALE)])
    table = {
        "for-treatment": ("no", "The clinic did not sell the chart"),
        "to-provider": ("yes", "a cardiologist"),
        "sold": ("no", "did not sell"),
    }
    pipeline, _ = method(by_schema(table))
    judgment = judge(pipeline)
    assert judgment.verdict is Verdict.PROHIBIT
    result = combine(judgment)
    statuses = [c["status"] for c in result["deciding"]["conditions"]]
    assert result["deciding"]["id"] == TREATMENT.id and statuses == ["contradicted", "met"]
    assert result["deciding"]["conditions"][0]["evidence"][0]["states"] == "not_met"


def test_a_prohibition_met_prohibits(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [candidate(SALE, 1), candidate(TREATMENT, 1)])
    # the permission is not on firm ground (nothing stated as met): rule clause 1
    table = {
        "sold": ("yes", "sent Ann Lee's chart"),
        "for-treatment": ("not stated", ""),
        "to-provider": ("not stated", ""),
    }
    judgment = judge(method(by_schema(table))[0])
    assert judgment.verdict is Verdict.PROHIBIT and judgment.cited_ids == ["164.502(a)(5)(ii)"]
    assert combine(judgment)["deciding"]["effect"] == "prohibit"


def test_the_verdict_is_the_reasoners_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's statuses go through `decide`, the reasoner's own verdict rule."""
    from privacy_ci.reasoning import _reasoner

    seen: list[tuple[NormCheck, ...]] = []

    def spy(candidates: Sequence[NormCheck]) -> tuple[Verdict | None, str, NormCheck | None]:
        seen.append(tuple(candidates))
        return Verdict.PROHIBIT, "the spy's rule", candidates[-1]

    monkeypatch.setattr(_reasoner, "decide", spy)
    use_reasoner(monkeypatch, [candidate(TREATMENT, 2), candidate(NO_CONDITIONS)])
    table = {"for-treatment": ("yes", "for her treatment"), "to-provider": ("no", "Dr. Park")}
    judgment = judge(method(by_schema(table))[0])
    [given] = seen
    assert [c.norm.id for c in given] == [TREATMENT.id, NO_CONDITIONS.id]
    assert [c.status for c in given[0].conditions] == [Status.MET, Status.CONTRADICTED]
    assert given[0].score == 2 and given[0].matched == ("recipients: Physician",)
    assert judgment.verdict is Verdict.PROHIBIT and judgment.cited_ids == ["164.506(c)(2)"]
    assert combine(judgment)["rule"] == "the spy's rule"


def test_not_applicable_calls_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [], NOT_APPLICABLE)
    pipeline, backend = method([])  # any call would fail: the script is empty
    judgment = judge(pipeline)
    assert judgment.verdict is Verdict.NOT_APPLICABLE and judgment.error is None
    assert backend.calls == [] and [s.name for s in judgment.steps] == ["candidates", "combine"]
    result = combine(judgment)
    assert result["calls"] == 0 and result["rule"] == "not applicable"
    assert result["applicability"]["reasons"] == ["the information is an employment record"]
    assert "employment record" in judgment.rationale


def test_invented_quotes_are_rejected_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [candidate(TREATMENT, 2), candidate(ALTERNATIVES)])
    table = {
        "for-treatment": ("yes", "for his heart surgery"),  # not in the narrative
        "to-provider": ("yes", "  DR. PARK,  A CARDIOLOGIST "),  # spacing and case differ
        "court-order": ("no", ""),  # no quote at all
        "assurances": ("not stated", "anything: not read"),
    }
    judgment = judge(method(by_schema(table))[0])
    first, second = (s for s in judgment.steps if s.name == "checklist")
    assert first.parsed["rejected_quotes"] == 1
    assert first.parsed["answers"]["for-treatment"]["status"] == "unstated"
    assert first.parsed["answers"]["for-treatment"]["rejected"] == (
        "quote not found in the narrative"
    )
    assert first.parsed["answers"]["to-provider"]["status"] == "met"
    assert second.parsed["rejected_quotes"] == 1
    assert second.parsed["answers"]["court-order"]["rejected"] == "empty quote"
    assert second.parsed["answers"]["assurances"] == {
        "answer": "not stated",
        "quote": "anything: not read",
        "status": "unstated",
        "rejected": None,
    }
    result = combine(judgment)
    assert result["rejected_quotes"] == 2 and result["calls"] == 2
    # nothing holds and nothing is contradicted: permitting norms with unstated conditions
    assert judgment.verdict is Verdict.PERMIT and result["deciding"]["holds"] is False


def test_malformed_answers_are_asked_again_then_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [candidate(SALE)])
    good = json.dumps({"sold": {"answer": "yes", "quote": "sent Ann Lee's chart"}})
    pipeline, backend = method(["Yes, it was sold.", good])
    judgment = judge(pipeline)
    assert judgment.verdict is Verdict.PROHIBIT
    records = [s for s in judgment.steps if s.name == "checklist"]
    assert [r.parsed["attempt"] for r in records] == [1, 2]
    assert [c[1].seed for c in backend.calls] == [0, 1]  # seed + sample
    assert records[0].error is not None and "asking again (1 of 3" in records[0].error
    assert records[0].parsed["answers"] is None and records[1].error is None
    assert combine(judgment)["calls"] == 2


def test_three_malformed_answers_are_an_explicit_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    assert CHECKLIST_PARSE_RETRIES == 2
    use_reasoner(monkeypatch, [candidate(TREATMENT, 2), candidate(SALE)])
    bad = [
        "not json",
        json.dumps({"for-treatment": {"answer": "maybe", "quote": ""}}),
        json.dumps({"for-treatment": {"answer": "yes"}, "to-provider": {"answer": "no"}}),
    ]
    pipeline, backend = method([*bad, "{}"])
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.error is None and not judgment.abstained
    assert len(backend.calls) == 3  # no fourth attempt, and the next norm is not asked
    records = [s for s in judgment.steps if s.name == "checklist"]
    assert [r.raw_output for r in records] == bad
    assert all(r.error and r.error.startswith("parse failure") for r in records)
    assert records[-1].error is not None
    assert records[-1].error.endswith("3 attempts used: recorded as a failure")
    final = next(s for s in judgment.steps if s.name == "combine")
    assert final.error is not None and "explicit failure" in final.error
    assert final.parsed == {"verdict": None, "calls": 3, "rejected_quotes": 0}


def test_a_failed_model_call_stops_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [candidate(SALE)])
    pipeline, _ = method([LLMError("HTTP 400: bad request", retryable=False)])
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.error is not None
    assert "bad request" in judgment.error


def test_at_most_the_configured_norms_are_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    norms = [candidate(SALE, 3), candidate(NO_CONDITIONS, 2), candidate(TREATMENT, 1)]
    norms.append(candidate(ALTERNATIVES, 0))
    use_reasoner(monkeypatch, norms)
    table = {"sold": ("no", "did not sell")}
    pipeline, backend = method(by_schema(table), JudgeConfig(checklist_norms=1))
    judgment = judge(pipeline)
    assert len(backend.calls) == 1
    candidates = judgment.steps[0].parsed
    assert candidates["asked"] == [SALE.id] and candidates["limit"] == 1
    assert candidates["skipped"] == [TREATMENT.id, ALTERNATIVES.id]
    # the norm without conditions needs no call and counts; skipped ones do not
    result = combine(judgment)
    assert [c["id"] for c in result["candidates"]] == [SALE.id, NO_CONDITIONS.id]
    assert judgment.verdict is Verdict.PERMIT and result["deciding"]["id"] == NO_CONDITIONS.id


def test_no_candidate_is_an_abstention(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [])
    pipeline, backend = method([])
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.abstained and backend.calls == []


def test_constrained_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reasoner(monkeypatch, [candidate(TREATMENT)])
    table = {"for-treatment": ("not stated", ""), "to-provider": ("not stated", "")}
    pipeline, backend = method(by_schema(table), JudgeConfig(constrain=True))
    judge(pipeline)
    settings = backend.calls[0][1]
    assert settings.json_schema == checklist_schema(["for-treatment", "to-provider"], True)
    assert settings.max_tokens == 24 + 72 * 2


def test_openai_compatible_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Against the local test server: the schema is sent; its made-up quote is rejected."""
    use_reasoner(monkeypatch, [candidate(TREATMENT, 2), candidate(SALE)])
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        backend = OpenAICompatibleBackend(model="fake", base_url=url + "/v1")
        pipeline = build_method("checklist-qa", LLMClient(backend), kb=FAKE_KB)
        # the server answers a schema with its first enum value ("yes") and the prompt
        # as every string: a quote that is not in the narrative
        judgment = judge(pipeline)
        assert len(fake.requests) == 2 and judgment.error is None
        body = fake.requests[0].body
        assert body["response_format"]["json_schema"]["name"] == "checklist_answers"
        schema = checklist_schema(["for-treatment", "to-provider"])
        assert body["response_format"]["json_schema"]["schema"] == schema
        assert body["messages"][0]["content"] == render_checklist_prompt(NARRATIVE, TREATMENT)
        result = combine(judgment)
        assert result["rejected_quotes"] == 3 and result["calls"] == 2
        assert judgment.verdict is Verdict.PERMIT  # all unstated: the unstated clause
        # an answer with real quotes
        fake.reset()
        quoted = {"sold": {"answer": "yes", "quote": "sent Ann Lee's chart"}}
        fake.push(Fault.content("{"), Fault.content(json.dumps(quoted)))
        # nothing stated for the permission: it is not on firm ground (clause 1)
        treatment = {"for-treatment": {"answer": "not stated", "quote": ""}}
        treatment["to-provider"] = {"answer": "not stated", "quote": ""}
        fake.push(Fault.content(json.dumps(treatment)))
        use_reasoner(monkeypatch, [candidate(SALE, 2), candidate(TREATMENT)])
        judgment = judge(pipeline)
        assert len(fake.requests) == 3 and judgment.verdict is Verdict.PROHIBIT
        assert combine(judgment)["calls"] == 3


# ---------------------------------------------------------------------------------
# the real reasoner: the CLI against the test server, and the embedded model
# ---------------------------------------------------------------------------------
def nlp_skip() -> None:
    from privacy_ci.reasoning import NLPUnavailable
    from privacy_ci.reasoning._evidence import load_nlp

    try:
        load_nlp()
    except NLPUnavailable as exc:
        pytest.skip(str(exc))


SYNTHETIC = [
    (
        "Dr. Smith, a physician at General Hospital, sent the patient's medical record to a"
        " specialist for treatment of her heart condition.",
        Flow.of(
            sender_role="Physician",
            recipient_role="Physician",
            subject_role="Patient",
            information_type="Medical record",
            purpose="Treatment",
        ),
    ),
    (
        "A hospital sold its patients' medical records to a marketing firm without their"
        " authorization.",
        Flow.of(
            sender_role="Hospital",
            recipient_role="Marketing firm",
            subject_role="Patient",
            information_type="Medical record",
        ),
    ),
    (
        "A school nurse told a teacher about a student's grades, which are part of his"
        " education record under FERPA.",
        Flow.of(sender_role="School nurse", recipient_role="Teacher", subject_role="Student"),
    ),
]


def cli() -> typer.Typer:
    from privacy_ci.cli.judge import judge as judge_command

    app = typer.Typer()
    app.command("judge")(judge_command)
    app.command("other")(lambda: None)
    return app


@pytest.fixture()
def env(tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("PRIVACY_CI_LLM_") or name == "PRIVACY_CI_CONFIG":
            monkeypatch.delenv(name)
    return {"PRIVACY_CI_DATA": str(shared_data), "PRIVACY_CI_CACHE": str(tmp_path / "cache")}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeLLMServer, str]]:
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        yield fake, url + "/v1"


def test_cli_judge_with_the_real_reasoner(
    server: tuple[FakeLLMServer, str], env: dict[str, str]
) -> None:
    nlp_skip()
    fake, url = server
    fake.reset()
    remote = ["--provider", "openai-compatible", "--model", "fake", "--base-url", url]
    text, _ = SYNTHETIC[0]
    args = ["judge", text, "-m", "checklist-qa", "--sender", "Physician", "--recipient"]
    args += ["Physician", "--info", "Medical record", "--purpose", "Treatment", *remote]
    result = CliRunner().invoke(cli(), [*args, "--no-cache", "--json"], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    steps = payload["steps"]
    calls = [s for s in steps if s["name"] == "checklist"]
    assert 1 <= len(calls) <= 4 and len(fake.requests) == len(calls)
    assert steps[-1]["parsed"]["calls"] == len(calls)
    asked = steps[0]["parsed"]["asked"]
    assert [c["parsed"]["norm"] for c in calls] == asked
    # every made-up quote (the server's prompt echo) is rejected
    assert steps[-1]["parsed"]["rejected_quotes"] == sum(len(c["parsed"]["answers"]) for c in calls)
    # not applicable: no request at all
    fake.reset()
    text, _ = SYNTHETIC[2]
    result = CliRunner().invoke(
        cli(), ["judge", text, "-m", "checklist-qa", *remote, "--no-cache", "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "not_applicable" and fake.requests == []


CALLS_PER_CASE: list[int] = []


@pytest.mark.slow
def test_embedded_model_on_synthetic_narratives(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wiring, not accuracy: prompts reach the model, constrained answers parse."""
    from privacy_ci.llm.testing import embedded_unavailable_reason

    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    nlp_skip()
    monkeypatch.setenv("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "passive"))
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    from privacy_ci.knowledge import load_knowledge_base
    from privacy_ci.llm import EmbeddedBackend

    kb = load_knowledge_base("hipaa")
    client = LLMClient(EmbeddedBackend(), cache=None, concurrency=1)
    pipeline = build_method("checklist-qa", client, kb=kb, config=JudgeConfig(checklist_norms=2))
    assert pipeline.context.constrained
    for text, flow in SYNTHETIC:
        judgment = judge(pipeline, Event(text, flow=flow))
        assert judgment.error is None, judgment.error
        calls = [s for s in judgment.steps if s.name == "checklist"]
        CALLS_PER_CASE.append(len(calls))
        assert combine(judgment)["calls"] == len(calls)
        if not judgment.steps[0].parsed["applicability"]["applicable"]:
            assert calls == [] and judgment.verdict is Verdict.NOT_APPLICABLE
            continue
        asked = judgment.steps[0].parsed["asked"]
        assert len(asked) <= 2 and len(calls) <= len(asked) * (1 + CHECKLIST_PARSE_RETRIES)
        for call in calls:
            assert text in call.prompt and call.prompt_tokens > 0
            assert judgment.backend == "embedded:smollm2-135m-instruct"
            if call.error is None:  # the schema is a grammar: it parses
                value = json.loads(call.raw_output)
                assert set(value) == set(call.parsed["answers"])
    print(f"\ncalls per case (embedded): {CALLS_PER_CASE}")
