"""The flow judge (Privacy Conductor V-G, Appendix C): prompts, filling, schema,
retry-twice-then-failure, the CLI, and wiring with the embedded local model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.ci import Flow, Verdict
from privacy_ci.judging import (
    FLOW_DECISIONS,
    FLOW_MISSING,
    FLOW_NO_CONSENT,
    FLOW_PARSE_RETRIES,
    METHODS,
    Event,
    JudgeConfig,
    Judgment,
    build_method,
    event_from_case,
    flow_schema,
    flow_values,
    load_prompt,
    parse_flow_answer,
    parse_verdict,
    prompt_hashes,
    render_flow_prompt,
)
from privacy_ci.judging._flow import FLOW_MAX_TOKENS, FLOW_RATIONALE_CHARS
from privacy_ci.llm import (
    GenerationSettings,
    LLMClient,
    LLMError,
    Message,
    ResponseCache,
    parse_structured,
)
from privacy_ci.llm.testing import ScriptedTestBackend
from tests._shared import paper as paper_path
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

PAPER = "privacy-conductor.txt"

NARRATIVE = (
    "Dr. Reed, a physician at Mercy Clinic, emailed Ann Lee's HIV test result to her "
    "employer, Acme Corp., who asked for it to decide on a promotion."
)
EVENT = Event(
    text=NARRATIVE,
    id="ev-flow",
    flow=Flow.of(
        sender="Dr. Reed",
        sender_role="Physician",
        recipient="Acme Corp.",
        recipient_role="Employer",
        subject="Ann Lee",
        subject_role="Patient",
        information_type="HIV test result",
        purpose="Employment decision",
        consent_form=None,
    ),
)
EXPECTED_PROMPT = (
    "Information flow under review:\n"
    "Sender (role) : Dr. Reed [Physician]\n"
    "Recipient (role) : Acme Corp. [Employer]\n"
    "Subject (role) : Ann Lee [Patient]\n"
    "Information type : HIV test result\n"
    "Purpose : Employment decision\n"
    "Consent : none stated\n"
    "Case narrative:\n"
    f"{NARRATIVE}\n"
    "How does the HIPAA Privacy Rule apply to this disclosure?"
)
GOOD = '{"decision": "prohibit", "rationale": "An employer is not a permitted recipient."}'


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def judge(pipeline: Any, event: Event = EVENT) -> Judgment:
    result: Judgment = asyncio.run(pipeline.judge(event))
    return result


def scripted(answers: Sequence[str | LLMError], **kwargs: Any) -> tuple[Any, ScriptedTestBackend]:
    backend = ScriptedTestBackend(answers)
    client = LLMClient(backend, **kwargs)
    return build_method("flow-judge", client), backend


# ---------------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["flow_judge_system", "flow_judge_user"])
def test_prompts_are_in_the_paper_word_for_word(name: str) -> None:
    paper = paper_path(PAPER).read_text("utf-8")
    text = load_prompt(name).text
    # documented deviation (prompts/README.md): <name> for the paper's {name}
    assert squash(re.sub(r"<([a-z_]+)>", r"{\1}", text)) in squash(paper)


def test_prompt_texts_and_variables() -> None:
    system = load_prompt("flow_judge_system")
    assert system.variables == frozenset()
    assert system.text.startswith("You are an expert on the U.S. HIPAA Privacy Rule (45 CFR")
    lines = system.text.splitlines()
    assert len(lines) == 5  # opening paragraph, three labels, closing paragraph
    assert [ln.split(":")[0] for ln in lines[1:4]] == [
        '- "permit"',
        '- "prohibit"',
        '- "not applicable"',
    ]
    assert system.text.endswith("naming the relevant HIPAA principle.")
    assert "one- to three-sentence rationale" in system.text
    user = load_prompt("flow_judge_user")
    assert user.variables == {
        "sender",
        "sender_role",
        "receiver",
        "receiver_role",
        "subject",
        "subject_role",
        "message_type",
        "transmission_principle",
        "consent_form",
        "case_content",
    }
    assert user.text.endswith("How does the HIPAA Privacy Rule apply to this disclosure?")
    hashes = prompt_hashes(list(METHODS["flow-judge"].prompts))
    assert set(hashes) == {"flow_judge_system", "flow_judge_user"}
    assert all(len(h) == 64 for h in hashes.values())


def test_method_spec() -> None:
    spec = METHODS["flow-judge"]
    assert list(METHODS)[-1] == "flow-judge"
    assert spec.prompts == ("flow_judge_system", "flow_judge_user")
    assert spec.steps == ("decide",) and not spec.needs_kb


# ---------------------------------------------------------------------------------
# filling
# ---------------------------------------------------------------------------------
def test_rendered_prompt_word_for_word() -> None:
    assert render_flow_prompt(EVENT) == EXPECTED_PROMPT
    values, missing = flow_values(EVENT)
    assert (
        missing == ["consent_form"] and values["consent_form"] == FLOW_NO_CONSENT == "none stated"
    )


def test_consent_when_recorded_and_missing_fields() -> None:
    event = Event(
        text="  A clinic sent records.  ",
        flow=Flow.of(
            sender_role="Clinic", subject="Bob", purpose="None", consent_form="Authorization"
        ),
    )
    values, missing = flow_values(event)
    assert values["sender"] == values["sender_role"] == "Clinic"  # no name: the role
    assert values["receiver"] == values["receiver_role"] == FLOW_MISSING == "unknown"
    assert values["subject"] == "Bob" and values["subject_role"] == FLOW_MISSING
    assert values["message_type"] == values["transmission_principle"] == FLOW_MISSING
    assert values["consent_form"] == "Authorization"
    assert values["case_content"] == "A clinic sent records."
    assert missing == [
        "receiver",
        "receiver_role",
        "subject_role",
        "message_type",
        "transmission_principle",
    ]
    prompt = render_flow_prompt(event)
    assert "Sender (role) : Clinic [Clinic]\n" in prompt
    assert "Recipient (role) : unknown [unknown]\n" in prompt
    assert "Consent : Authorization\n" in prompt
    # an ad-hoc event with no CI fields is judged from its narrative
    bare = render_flow_prompt(Event(text="Someone shared something."))
    assert "Consent : none stated" in bare and "Someone shared something." in bare


def test_a_privaci_case_never_shows_its_label_or_articles(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privacy_ci.cases import load_dataset

    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    dataset = load_dataset("privaci-hipaa")
    assert len(dataset.cases) == 214
    for case in dataset.cases:
        prompt = render_flow_prompt(event_from_case(case))
        assert case.text.strip() in prompt
        assert "Consent : none stated\n" in prompt  # no flow of the split records consent
        lines = prompt.splitlines()
        five = dict(line.split(" : ", 1) for line in lines[1:7])
        assert five["Sender (role)"] == (
            f"{case.flow.sender.name or case.flow.sender.role or 'unknown'} [{case.flow.sender.role or 'unknown'}]"
        )
        assert five["Information type"] == (case.flow.information_type or FLOW_MISSING)
        assert five["Purpose"] == (case.flow.principle.purpose or FLOW_MISSING)
        for article in (*case.extra["followed_articles"], *case.extra["violated_articles"]):
            if article not in case.text:
                assert article not in prompt
    # a case object carrying a label and gold ids: neither reaches the prompt
    case = dataset.cases[0]

    labelled = dataclasses.replace(
        case,
        label=Verdict.NOT_APPLICABLE,
        gold_ids=("999.999(z)",),
        extra={"norm_type": "SENTINEL-NORM", "label": "SENTINEL-LABEL"},
    )

    prompt = render_flow_prompt(event_from_case(labelled))
    assert "SENTINEL" not in prompt and "999.999" not in prompt


# ---------------------------------------------------------------------------------
# schema and parsing
# ---------------------------------------------------------------------------------
def test_schema() -> None:
    schema = flow_schema()
    assert schema == {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["permit", "prohibit", "not applicable"]},
            "rationale": {"type": "string"},
        },
        "required": ["decision", "rationale"],
        "additionalProperties": False,
    }
    constrained = flow_schema(True)
    assert constrained["properties"]["rationale"]["maxLength"] == FLOW_RATIONALE_CHARS
    assert FLOW_DECISIONS == {
        "permit": Verdict.PERMIT,
        "prohibit": Verdict.PROHIBIT,
        "not applicable": Verdict.NOT_APPLICABLE,
    }


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"decision": "permit", "rationale": "Treatment."}', Verdict.PERMIT),
        ('{"decision": "prohibit", "rationale": "No authorization."}', Verdict.PROHIBIT),
        (
            '{"decision": "not applicable", "rationale": "Not a covered entity."}',
            Verdict.NOT_APPLICABLE,
        ),
        ('{"decision": " Not  Applicable ", "rationale": ""}', Verdict.NOT_APPLICABLE),
        ('```json\n{"decision": "permit", "rationale": "ok"}\n```', Verdict.PERMIT),
    ],
)
def test_parse_valid_answers(text: str, verdict: Verdict) -> None:
    answer = parse_flow_answer(*parse_structured(text))
    assert answer.ok and answer.verdict is verdict and answer.problem is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Choice: B. Permitted", "invalid JSON"),
        ('{"decision": "permit", "rationale": "cut', "invalid JSON"),
        ("", "empty output"),
        ('["permit", "ok"]', "expected a JSON object, got list"),
        ('{"decision": "permitted", "rationale": "x"}', "'decision' 'permitted' is not one of"),
        ('{"decision": "not_applicable", "rationale": "x"}', "is not one of"),
        ('{"rationale": "x"}', "no 'decision'"),
        ('{"decision": "permit"}', "no 'rationale'"),
        ('{"decision": 1, "rationale": ["x"]}', "'decision' is a int"),
    ],
)
def test_parse_malformed_answers(text: str, problem: str) -> None:
    answer = parse_flow_answer(*parse_structured(text))
    assert answer.verdict is None and not answer.ok
    assert answer.problem is not None and problem in answer.problem


def test_extra_keys_are_ignored_and_reported() -> None:
    answer = parse_flow_answer({"decision": "permit", "rationale": "ok", "confidence": 0.9})
    assert answer.verdict is Verdict.PERMIT and answer.extra_keys == ("confidence",)


# ---------------------------------------------------------------------------------
# the method, with the scripted test backend
# ---------------------------------------------------------------------------------
def test_one_structured_call_with_the_system_prompt() -> None:
    pipeline, backend = scripted([GOOD])
    judgment = judge(pipeline)
    assert judgment.method == "flow-judge" and judgment.verdict is Verdict.PROHIBIT
    assert judgment.rationale == "An employer is not a permitted recipient."
    assert judgment.error is None and judgment.cited_ids == []
    assert judgment.backend == "scripted-test-double:scripted"
    [(messages, settings)] = backend.calls
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == load_prompt("flow_judge_system").text
    assert messages[1].content == EXPECTED_PROMPT
    assert settings.json_schema == flow_schema() and settings.grammar is None
    assert settings.schema_name == "flow_judgment"
    [step] = judgment.steps
    assert step.name == "decide" and step.prompt_name == "flow_judge_user"
    assert step.prompt == EXPECTED_PROMPT and step.raw_output == GOOD and step.error is None
    assert step.parsed["verdict"] == "prohibit" and step.parsed["method"] == "schema"
    assert step.parsed["attempt"] == 1 and step.parsed["attempts_allowed"] == 3
    assert step.parsed["system_prompt"] == "flow_judge_system"
    assert step.parsed["missing"] == ["consent_form"]


def test_retried_twice_with_distinct_samples_then_parsed() -> None:
    assert FLOW_PARSE_RETRIES == 2
    pipeline, backend = scripted(["Choice: A. Prohibited", '{"decision": "maybe"}', GOOD])
    judgment = judge(pipeline)
    assert judgment.verdict is Verdict.PROHIBIT and judgment.error is None
    assert [s.name for s in judgment.steps] == ["decide"] * 3
    assert [s.parsed["attempt"] for s in judgment.steps] == [1, 2, 3]
    assert [s.parsed["sample"] for s in judgment.steps] == [0, 1, 2]
    assert [c[1].seed for c in backend.calls] == [0, 1, 2]  # seed + sample
    assert backend.calls[0][0] == backend.calls[2][0]  # the same messages
    first, second, third = judgment.steps
    assert first.error is not None and "asking again (1 of 3" in first.error
    assert second.error is not None and "'decision' 'maybe'" in second.error
    assert third.error is None and third.parsed["method"] == "schema"


def test_three_failures_are_an_explicit_failure_never_a_guess() -> None:
    # free text that parse_verdict CAN read is still a failure under the schema
    words = "Choice: B. Permitted"
    assert parse_verdict(words).verdict is Verdict.PERMIT
    bad = [words, '{"decision": "permitted", "rationale": "x"}', '{"decision": "permit"']
    pipeline, backend = scripted([*bad, GOOD])
    judgment = judge(pipeline)
    assert judgment.verdict is None and not judgment.parsed and judgment.error is None
    assert len(backend.calls) == 3  # no fourth attempt
    assert [s.raw_output for s in judgment.steps] == bad
    assert all(s.error and s.error.startswith("parse failure") for s in judgment.steps)
    assert judgment.steps[-1].error is not None
    assert judgment.steps[-1].error.endswith("3 attempts used: recorded as a failure")
    assert all(s.parsed["verdict"] is None for s in judgment.steps)
    assert judgment.rationale == bad[-1]
    assert judgment.as_dict()["verdict"] is None


def test_the_cache_does_not_replay_a_failed_answer(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    pipeline, backend = scripted(["not json", GOOD], cache=cache)
    assert judge(pipeline).verdict is Verdict.PROHIBIT
    assert len(backend.calls) == 2
    # judged again: both attempts come from the cache, in the same order
    again, backend2 = scripted([], cache=cache)
    judgment = judge(again)
    assert judgment.verdict is Verdict.PROHIBIT and backend2.calls == []
    assert [s.cached for s in judgment.steps] == [True, True]


def test_a_failed_model_call_stops_with_an_error() -> None:
    pipeline, _ = scripted(["nope", LLMError("HTTP 400: context length", retryable=False)])
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.error is not None
    assert "context length" in judgment.error
    assert len(judgment.steps) == 2 and judgment.steps[-1].parsed["attempt"] == 2


def test_constrained_settings() -> None:
    backend = ScriptedTestBackend([GOOD])
    base = GenerationSettings(max_tokens=32, seed=5)
    pipeline = build_method(
        "flow-judge", LLMClient(backend), config=JudgeConfig(constrain=True), settings=base
    )
    assert judge(pipeline).verdict is Verdict.PROHIBIT
    settings = backend.calls[0][1]
    assert settings.json_schema == flow_schema(True) and settings.grammar is None
    assert settings.max_tokens == FLOW_MAX_TOKENS and settings.seed == 5


def test_recorded_answer_matches_by_prompt() -> None:
    """Different events get different prompts; a scripted function sees both messages."""
    seen: list[str] = []

    def answer(messages: Sequence[Message], settings: GenerationSettings) -> str:
        seen.append(messages[-1].content)
        return '{"decision": "permit", "rationale": "Treatment."}'

    pipeline = build_method("flow-judge", LLMClient(ScriptedTestBackend(answer)))
    judge(pipeline)
    judge(pipeline, Event(text="A nurse told a doctor.", flow=Flow.of(sender_role="Nurse")))
    assert seen[0] == EXPECTED_PROMPT and "Sender (role) : Nurse [Nurse]" in seen[1]


# ---------------------------------------------------------------------------------
# the CLI (judge and eval) against a local OpenAI-compatible test server
# ---------------------------------------------------------------------------------
def cli() -> typer.Typer:
    from privacy_ci.cli.evaluate import eval_command
    from privacy_ci.cli.judge import judge as judge_command
    from privacy_ci.cli.judge import methods_command

    app = typer.Typer()
    app.command("judge")(judge_command)
    app.command("eval")(eval_command)
    app.command("methods")(methods_command)
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


@pytest.fixture()
def fake(server: tuple[FakeLLMServer, str]) -> Iterator[tuple[FakeLLMServer, str]]:
    server[0].reset()
    yield server
    server[0].reset()


def remote(url: str) -> list[str]:
    return ["--provider", "openai-compatible", "--model", "fake", "--base-url", url, "--no-cache"]


def test_cli_lists_flow_judge() -> None:
    for command in ("judge", "eval"):
        result = CliRunner().invoke(cli(), [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "privacy-ci methods" in result.stdout
    result = CliRunner().invoke(cli(), ["methods", "--json"])
    listed = json.loads(result.stdout)
    assert result.exit_code == 0 and "flow-judge" in [m["name"] for m in listed["methods"]]


def test_cli_judge_a_case_file(
    fake: tuple[FakeLLMServer, str], env: dict[str, str], tmp_path: Path
) -> None:
    server, url = fake
    case = tmp_path / "case.json"
    case.write_text(
        json.dumps(
            {
                "id": "c-1",
                "text": NARRATIVE,
                "sender_role": "Physician",
                "recipient_role": ["Employer"],
                "subject_role": "Patient",
                "information_type": "HIV test result",
                "purpose": "Employment decision",
                "consent_form": None,
                "label": "prohibit",
                "gold_ids": ["164.508(a)(1)"],
            }
        )
    )
    args = ["judge", "--case", str(case), "-m", "flow-judge", *remote(url), "--json"]
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    # the server answers a schema with its first enum value and the prompt as the rationale
    assert payload["method"] == "flow-judge" and payload["verdict"] == "permit"
    assert payload["error"] is None and payload["cited_ids"] == []
    [request] = server.requests
    messages = request.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == load_prompt("flow_judge_system").text
    user_prompt = messages[1]["content"]
    assert "Sender (role) : Physician [Physician]" in user_prompt
    assert "Consent : none stated" in user_prompt and NARRATIVE in user_prompt
    assert "164.508" not in user_prompt and "prohibit" not in user_prompt
    response_format = request.body["response_format"]
    assert response_format["json_schema"]["name"] == "flow_judgment"
    assert response_format["json_schema"]["schema"] == flow_schema()


def test_cli_judge_malformed_answers_fail_after_two_retries(
    fake: tuple[FakeLLMServer, str], env: dict[str, str]
) -> None:
    server, url = fake
    server.push(Fault.content("Permitted."), Fault.content("{"), Fault.content('{"decision": 3}'))
    args = ["judge", NARRATIVE, "-m", "flow-judge", *remote(url), "--json"]
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == 0, result.output  # a parse failure is a result, not an error
    payload = json.loads(result.stdout)
    assert payload["verdict"] is None and payload["error"] is None
    assert len(server.requests) == 3 and len(payload["steps"]) == 3
    assert all("parse failure" in s["error"] for s in payload["steps"])
    # human output names the failure
    server.reset()
    server.push(*(Fault.content("no") for _ in range(3)))
    result = CliRunner().invoke(cli(), args[:-1], env=env)
    assert result.exit_code == 0 and "no verdict (the answer did not parse)" in result.stdout


def test_cli_eval_on_privaci_hipaa(fake: tuple[FakeLLMServer, str], env: dict[str, str]) -> None:
    server, url = fake
    out = Path(env["PRIVACY_CI_CACHE"]).parent / "run"
    args = [
        "eval",
        "--method",
        "flow-judge",
        "--dataset",
        "privaci-hipaa",
        *remote(url),
        "--limit",
        "3",
        "--out",
        str(out),
        "--no-progress",
        "--json",
    ]
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["judged"] == 3 and metrics["complete"] and metrics["unparsed"] == 0
    assert metrics["method"] == "flow-judge"
    assert len(server.requests) == 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["identity"]["prompts"] == prompt_hashes(
        ["flow_judge_system", "flow_judge_user"]
    )
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert all(r["verdict"] == "permit" for r in records)
    for request in server.requests:
        assert request.body["messages"][0]["role"] == "system"
        assert "Consent : none stated" in request.body["messages"][1]["content"]


# ---------------------------------------------------------------------------------
# the embedded local model (wiring, not accuracy)
# ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_embedded_model_on_two_privaci_cases(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.judging.test_embedded_e2e import _skip_reason

    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.setenv("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "passive"))
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    from privacy_ci.cases import load_dataset
    from privacy_ci.llm import EmbeddedBackend

    cases = sorted(load_dataset("privaci-hipaa").cases, key=lambda c: (len(c.text), c.id))[:2]
    client = LLMClient(EmbeddedBackend(), cache=None, concurrency=1)
    pipeline = build_method("flow-judge", client)  # constrain auto: on for embedded
    assert pipeline.context.constrained
    for case in cases:
        event = event_from_case(case)
        judgment = judge(pipeline, event)
        assert judgment.error is None, judgment.error
        assert judgment.backend == "embedded:smollm2-135m-instruct"
        assert 1 <= len(judgment.steps) <= 1 + FLOW_PARSE_RETRIES
        first = judgment.steps[0]
        assert first.prompt == render_flow_prompt(event) and case.text.strip() in first.prompt
        assert first.prompt_tokens > 0 and first.latency_s > 0
        # the schema is a grammar: the output is a JSON object with the two fields
        value = json.loads(first.raw_output)
        assert set(value) == {"decision", "rationale"} and value["decision"] in FLOW_DECISIONS
        assert len(value["rationale"]) <= FLOW_RATIONALE_CHARS
        assert judgment.verdict is FLOW_DECISIONS[value["decision"]]
        assert judgment.rationale == value["rationale"].strip()
