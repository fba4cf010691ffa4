"""``checklist-qa``: a model reads the facts (one call, each value with a verified quote),
then the law decides.

Most tests replace the offline reader with a stub that returns fixed facts (so they
test this method's wiring, not the reader, which is tuned elsewhere) and the model with
the scripted test backend; the law book is the packaged one. The last tests run the
real reader against the local OpenAI-compatible test server, and the embedded model.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging import (
    FACTS_QA_PARSE_RETRIES,
    FACTS_QA_UNKNOWN,
    METHODS,
    QUOTE_MIN_WORDS,
    Event,
    JudgeConfig,
    Judgment,
    PipelineState,
    _checklist_qa,
    build_method,
    check_quote,
    facts_answer_schema,
    find_quote,
    load_prompt,
    parse_facts_answer,
    render_facts_prompt,
)
from privacy_ci.llm import (
    Capabilities,
    LLMClient,
    LLMError,
    OpenAICompatibleBackend,
)
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.reasoning import FactJudge, Facts, FactValue, Source, load_fact_schema
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

SCHEMA = load_fact_schema("hipaa")

NARRATIVE = (
    "Dr. Reed, a physician at Mercy Clinic, sent Ann Lee's chart to Dr. Park,\n"
    "a cardiologist, for her treatment. Asked whether she had signed a release, Ann said"
    " no. Asked whether the clinic was paid, the manager said yes, in part. The patient"
    " never signed an authorization form. No restriction on sharing had been agreed."
)
FLOW = Flow.of(sender_role="Physician", recipient_role="Physician")
EVENT = Event(NARRATIVE, "qa-1", FLOW)

# what the stub reader "reads" (each with a quote of the narrative)
READ = {
    "holder": ("covered_entity", "Dr. Reed, a physician at Mercy Clinic"),
    "information": ("phi", "Ann Lee's chart"),
    "recipient": ("health_care_provider", "Dr. Park,\na cardiologist"),
    "authorization": ("absent", "The patient never signed an authorization form."),
}


def read_facts(table: Mapping[str, tuple[str, str]], source: Source = Source.READ) -> Facts:
    values = {}
    for name, (value, quote) in table.items():
        start = NARRATIVE.find(quote)
        assert start >= 0, quote
        values[name] = FactValue(value, source, quote, start, start + len(quote), "stub")
    return Facts(SCHEMA, values)


class StubReader:
    """Stands in for the offline reader: fixed facts, and what it was asked."""

    def __init__(self, facts: Facts | Callable[[str | None], Facts]) -> None:
        self.facts = facts
        self.seen: list[tuple[str | None, Flow | None]] = []

    def read(self, text: str | None = None, flow: Flow | None = None) -> Facts:
        self.seen.append((text, flow))
        return self.facts(text) if callable(self.facts) else self.facts


def use_reader(monkeypatch: pytest.MonkeyPatch, facts: Facts | None = None) -> FactJudge:
    judge = FactJudge("hipaa", reader=StubReader(facts or read_facts(READ)))  # type: ignore[arg-type]
    monkeypatch.setattr(_checklist_qa, "fact_judge", lambda ctx: judge)
    return judge


def answer(said: Mapping[str, tuple[str, str]] | None = None, **extra: Any) -> str:
    """A well-formed answer: every fact unknown except `said`; `extra` entries added."""
    out: dict[str, Any] = {s.name: {"value": FACTS_QA_UNKNOWN, "quote": ""} for s in SCHEMA}
    for name, (value, quote) in (said or {}).items():
        out[name] = {"value": value, "quote": quote}
    out.update(extra)
    return json.dumps(out)


def method(
    answers: Any, config: JudgeConfig | None = None, backend: ScriptedTestBackend | None = None
) -> tuple[Any, ScriptedTestBackend]:
    backend = backend or ScriptedTestBackend(answers)
    return build_method("checklist-qa", LLMClient(backend), config=config), backend


def judge(pipeline: Any, event: Event = EVENT) -> Judgment:
    result: Judgment = asyncio.run(pipeline.judge(event))
    return result


def step(judgment: Judgment, name: str) -> dict[str, Any]:
    [record] = [s for s in judgment.steps if s.name == name]
    parsed: dict[str, Any] = record.parsed
    return parsed


def combine(judgment: Judgment) -> dict[str, Any]:
    [record] = [s for s in judgment.steps if s.name == "combine"]
    assert record.prompt_name is None and record.raw_output == ""  # model-free
    parsed: dict[str, Any] = record.parsed
    return parsed


def final_facts(judgment: Judgment) -> Facts:
    return Facts.from_mapping(SCHEMA, combine(judgment)["facts"])


# ---------------------------------------------------------------------------------
# the method, the prompt, the schema
# ---------------------------------------------------------------------------------
def test_registered() -> None:
    spec = METHODS["checklist-qa"]
    assert spec.prompts == ("facts_qa",) and spec.needs_model and not spec.needs_kb
    assert spec.steps == ("read", "facts_qa", "combine")
    assert "law engine" in spec.title
    assert list(METHODS)[-1] == "flow-judge"  # the flow judge stays last
    readme = (Path(_checklist_qa.__file__).parent / "prompts" / "README.md").read_text()
    assert "facts_qa.txt" in readme and "our own" in readme
    assert "checklist_qa.txt" not in readme


def test_prompt_shows_the_narrative_the_fields_and_every_fact() -> None:
    assert load_prompt("facts_qa").variables == {"regulation", "event", "fields", "facts"}
    prompt = render_facts_prompt("  " + NARRATIVE + "\n", FLOW, SCHEMA)
    assert NARRATIVE in prompt and "judged under HIPAA" in prompt
    assert "Sender role: Physician\nRecipient role: Physician" in prompt
    for spec in SCHEMA:
        assert f"[{spec.name}] {spec.question}" in prompt
        for name, value in spec.values.items():
            assert f"\n  {name}: {value.label}\n" in prompt + "\n"
    assert '"unknown"' in prompt and "at least three words" in prompt
    assert '"yes" or "no" is not a quote' in prompt
    # no CI field: said so
    assert "(none given)" in render_facts_prompt(NARRATIVE, Flow(), SCHEMA)


def test_schema_is_derived_from_the_fact_schema() -> None:
    schema = facts_answer_schema(SCHEMA)
    names = [s.name for s in SCHEMA]
    assert list(schema["properties"]) == names and schema["required"] == names
    assert schema["additionalProperties"] is False
    entry = schema["properties"]["authorization"]
    assert entry == {
        "type": "object",
        "properties": {
            "value": {"type": "string", "enum": ["valid", "not_covering", "absent", "unknown"]},
            "quote": {"type": "string"},
        },
        "required": ["value", "quote"],
        "additionalProperties": False,
    }
    constrained = facts_answer_schema(SCHEMA, constrained=True)
    assert constrained["properties"]["holder"]["properties"]["quote"]["maxLength"] == 200


def test_find_quote() -> None:
    start, end = find_quote(NARRATIVE, "  DR. PARK,   a\tCardiologist ") or (0, 0)
    assert NARRATIVE[start:end] == "Dr. Park,\na cardiologist"  # across the line break
    assert find_quote(NARRATIVE, '"for her treatment"') is not None  # quotation marks dropped
    assert find_quote(NARRATIVE, "for his surgery") is None
    assert find_quote(NARRATIVE, "") is None and find_quote(NARRATIVE, "  ") is None


@pytest.mark.parametrize(
    ("quote", "problem"),
    [
        ("no", "quote too short: 1 word(s)"),  # the finding: "no" is in the text
        ("yes", "quote too short: 1 word(s)"),
        ('"No."', "quote too short"),
        ("said no", "quote too short: 2 word(s)"),
        ("Ann said no", None),  # three words, "Ann" and "said" carry content
        ("she had signed a release", None),
        ("whether she had", "no content word"),
        ("for her treatment", None),
        ("for his heart surgery", "not found in the narrative"),
        ("", "empty quote"),
        ('  "" ', "empty quote"),
    ],
)
def test_check_quote(quote: str, problem: str | None) -> None:
    assert QUOTE_MIN_WORDS == 3
    check = check_quote(NARRATIVE, quote)
    if problem is None:
        assert check.ok and check.span is not None
    else:
        assert not check.ok and check.problem is not None and problem in check.problem


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"holders": {"value": "other", "quote": ""}}, "unknown fact(s) 'holders'"),
        ({"holder": {"value": "hospital", "quote": ""}}, "'holder': value 'hospital'"),
        ({"holder": {"value": True, "quote": ""}}, "'holder': value True"),
        ({"holder": "covered_entity"}, "'holder' is not an object"),
        ({"holder": None}, "no answer for 'holder'"),
        ({"holder": {"value": "other", "quote": "", "why": "x"}}, "unknown field(s) 'why'"),
        ({"holder": {"value": "other"}}, "'holder': the quote is not a string"),
        ({"holder": {"value": "other", "quote": 3}}, "the quote is not a string"),
    ],
)
def test_parse_is_strict(change: dict[str, Any], problem: str) -> None:
    value = json.loads(answer())
    value.update(change)
    if change.get("holder", 0) is None:
        del value["holder"]
    parsed = parse_facts_answer(value, SCHEMA)
    assert not parsed.ok and parsed.problem is not None and problem in parsed.problem


def test_parse_well_formed_answers() -> None:
    value = json.loads(answer({"holder": (" Covered_Entity ", "q")}))
    parsed = parse_facts_answer(value, SCHEMA)
    assert parsed.ok and parsed.answers["holder"] == ("covered_entity", "q")
    assert set(parsed.answers) == set(SCHEMA.facts)
    assert parse_facts_answer(None, SCHEMA, "invalid JSON").problem == "invalid JSON"
    assert parse_facts_answer([], SCHEMA).problem == "expected a JSON object, got list"


# ---------------------------------------------------------------------------------
# quotes, precedence and the law, with the scripted test backend
# ---------------------------------------------------------------------------------
def test_one_call_records_and_a_good_quote_is_accepted_with_offsets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge_ = use_reader(monkeypatch)
    said = {
        "purpose": ("treatment", "for her treatment"),
        # answered over read: the reader had the recipient too
        "recipient": ("health_care_provider", "  DR. PARK,  A CARDIOLOGIST "),
    }
    pipeline, backend = method([answer(said)])
    judgment = judge(pipeline)
    seen = judge_.reader.seen  # type: ignore[attr-defined]
    assert judgment.error is None and seen == [(NARRATIVE, FLOW)]
    assert [s.name for s in judgment.steps] == ["read", "facts_qa", "combine"]
    # one call, under the schema derived from the fact schema
    [(messages, settings)] = backend.calls
    assert [m.role for m in messages] == ["user"]
    assert messages[0].content == render_facts_prompt(NARRATIVE, FLOW, SCHEMA)
    assert settings.json_schema == facts_answer_schema(SCHEMA)
    assert settings.schema_name == "facts_answers" and settings.grammar is None
    # the read record: model-free, the reader's facts
    read = judgment.steps[0]
    assert read.prompt_name is None and read.parsed["given"] == []
    assert read.parsed["facts"] == read_facts(READ).as_dict()
    # the call's record: each answer and its quote's check
    call = judgment.steps[1]
    assert call.prompt_name == "facts_qa" and call.raw_output and call.error is None
    assert call.parsed["rejected_quotes"] == 0 and call.parsed["structured"] is True
    assert call.parsed["answers"]["purpose"]["status"] == "accepted"
    assert call.parsed["answers"]["holder"] == {
        "value": "unknown",
        "quote": "",
        "status": "unknown",
    }
    # the final facts: answered ones with the narrative's own words and offsets
    facts = final_facts(judgment)
    recipient = facts["recipient"]
    assert recipient.source is Source.ANSWERED and recipient.quote == "Dr. Park,\na cardiologist"
    assert NARRATIVE[recipient.start or 0 : recipient.end] == recipient.quote
    assert recipient.note == "answered by scripted-test-double:scripted"
    assert facts["purpose"].source is Source.ANSWERED and facts["holder"].source is Source.READ
    result = combine(judgment)
    assert result["answered"] == ["recipient", "purpose"] and result["given_won"] == []
    assert result["calls"] == 1 and result["rejected_quotes"] == 0


def test_yes_and_no_quotes_are_refused_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's finding: "no" and "yes" occur in the narrative, and prove nothing."""
    judge_ = use_reader(monkeypatch)
    said = {
        "authorization": ("valid", "yes"),  # the reader read "absent": it stays
        "remuneration": ("yes", "yes"),  # unknown to the reader: stays unknown
        "required_by_law": ("no", "no"),
        "serious_threat": ("no", "said no"),  # two words
    }
    judgment = judge(method([answer(said)])[0])
    call = step(judgment, "facts_qa")
    assert call["rejected_quotes"] == 4 and combine(judgment)["rejected_quotes"] == 4
    entry = call["answers"]["authorization"]
    assert entry["status"] == "rejected" and "quote too short" in entry["rejected"]
    facts = final_facts(judgment)
    assert facts["authorization"] == read_facts(READ)["authorization"]  # as the reader had it
    assert "remuneration" not in facts and "required_by_law" not in facts
    assert combine(judgment)["answered"] == []
    # nothing answered: the verdict is the ci-reasoner's on the same facts
    alone = judge_.judge(NARRATIVE, FLOW)
    assert judgment.verdict is alone.verdict
    assert combine(judgment)["decision"] == alone.decision.as_dict()


def test_a_quote_not_in_the_narrative_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    said = {
        "purpose": ("treatment", "for his heart surgery"),
        "legal_process": ("court_order", ""),
        "restriction": ("none", "the clinic agreed to no restriction"),
    }
    judgment = judge(method([answer(said)])[0])
    answers = step(judgment, "facts_qa")["answers"]
    assert answers["purpose"]["rejected"] == "quote not found in the narrative"
    assert answers["legal_process"]["rejected"] == "empty quote"
    assert answers["restriction"]["status"] == "rejected"
    assert combine(judgment)["rejected_quotes"] == 3
    facts = final_facts(judgment)
    assert not {"purpose", "legal_process", "restriction"} & set(facts)


def test_given_facts_win_over_answered_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # the reader takes a CI field as given; the user gives another fact
    fields = read_facts({"holder": READ["holder"]}, Source.GIVEN)
    use_reader(monkeypatch, read_facts(READ).with_facts(dict(fields)))
    said = {
        "authorization": ("valid", "she had signed a release"),
        "holder": ("other", "Dr. Reed, a physician"),
        "purpose": ("treatment", "for her treatment"),
    }
    event = Event(NARRATIVE, "qa-2", FLOW, facts={"authorization": "not_covering"})
    judgment = judge(method([answer(said)])[0], event)
    assert step(judgment, "read")["given"] == ["authorization"]
    facts = final_facts(judgment)
    assert facts["authorization"].value == "not_covering"
    assert facts["authorization"].source is Source.GIVEN
    assert facts["holder"].value == "covered_entity" and facts["holder"].source is Source.GIVEN
    assert facts["purpose"].source is Source.ANSWERED
    result = combine(judgment)
    assert result["given_won"] == ["holder", "authorization"] and result["answered"] == ["purpose"]
    # an accepted answer that lost is not a rejected quote
    assert result["rejected_quotes"] == 0


def test_a_bad_given_fact_is_an_error_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    pipeline, backend = method([])
    judgment = judge(pipeline, Event(NARRATIVE, facts={"authorisation": "valid"}))
    assert judgment.verdict is None and judgment.error is not None
    assert "unknown fact 'authorisation'" in judgment.error and backend.calls == []


def test_a_failing_reader_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(text: str | None) -> Facts:
        raise PrivacyCIError("the NLP model is missing")

    judge_ = FactJudge("hipaa", reader=StubReader(fail))  # type: ignore[arg-type]
    monkeypatch.setattr(_checklist_qa, "fact_judge", lambda ctx: judge_)
    pipeline, backend = method([])
    judgment = judge(pipeline)
    assert judgment.error is not None and "the fact reader failed" in judgment.error
    assert backend.calls == [] and [s.name for s in judgment.steps] == ["read"]


@pytest.mark.parametrize(
    ("said", "determined"),
    [
        # a treatment disclosure; nobody said whether a restriction was agreed
        ({"purpose": ("treatment", "for her treatment")}, False),
        # the same, and the narrative says the restriction question
        (
            {
                "purpose": ("treatment", "for her treatment"),
                "restriction": ("none", "No restriction on sharing had been agreed"),
            },
            True,
        ),
        # the holder is not covered: not applicable, whatever the rest (a quote is
        # checked for where it stands and its form, not for its meaning)
        ({"holder": ("individual", "Ann said no")}, True),
    ],
)
def test_the_verdict_follows_the_law(
    monkeypatch: pytest.MonkeyPatch, said: dict[str, tuple[str, str]], determined: bool
) -> None:
    judge_ = use_reader(monkeypatch)
    judgment = judge(method([answer(said)])[0])
    facts = final_facts(judgment)
    decision = judge_.decide(facts)
    result = combine(judgment)
    assert result["verdict"] == decision.verdict.value and judgment.verdict is decision.verdict
    assert result["decision"] == decision.as_dict() and result["determined"] is determined
    assert result["law"] == judge_.book.version_id
    assert judgment.cited_ids == [decision.rule.paragraph]
    [decide] = [s for s in judgment.steps if s.name == "combine"]
    assert decide.retrieved_ids == [decision.rule.paragraph]
    assert judgment.rationale.startswith(f"verdict: {decision.verdict.value}")
    assert not judgment.abstained


def test_the_decision_says_when_it_rests_on_presumptions(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    state = asyncio.run(
        _checklist_qa.checklist_qa(
            PipelineState(EVENT),
            method([answer({"purpose": ("treatment", "for her treatment")})])[0].context,
        )
    )
    assert state.decision is not None and state.decision.method == "law"
    assert state.decision.evidence == "164.506(c)(2)-treatment (on presumptions)"
    assert state.decision.verdict is Verdict.PERMIT


def test_malformed_answers_are_asked_again_then_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    good = answer({"purpose": ("treatment", "for her treatment")})
    pipeline, backend = method(["Yes, it was for treatment.", good])
    judgment = judge(pipeline)
    records = [s for s in judgment.steps if s.name == "facts_qa"]
    assert [r.parsed["attempt"] for r in records] == [1, 2]
    assert [c[1].seed for c in backend.calls] == [0, 1]  # seed + sample
    assert records[0].error is not None and "asking again (1 of 3" in records[0].error
    assert records[0].parsed["answers"] is None and records[1].error is None
    assert combine(judgment)["calls"] == 2 and judgment.verdict is Verdict.PERMIT


def test_unknown_keys_and_values_three_times_are_an_explicit_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert FACTS_QA_PARSE_RETRIES == 2
    use_reader(monkeypatch)
    bad = [
        answer(consent={"value": "yes", "quote": ""}),  # an unknown key
        answer({"authorization": ("signed", "she had signed a release")}),  # an unknown value
        json.dumps({"holder": {"value": "covered_entity", "quote": "Dr. Reed, a physician"}}),
    ]
    pipeline, backend = method([*bad, answer()])
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.error is None and not judgment.abstained
    assert len(backend.calls) == 3  # no fourth attempt
    records = [s for s in judgment.steps if s.name == "facts_qa"]
    assert [r.raw_output for r in records] == bad
    assert "unknown fact(s) 'consent'" in (records[0].error or "")
    assert "'authorization': value 'signed' is not one of" in (records[1].error or "")
    assert "no answer for 'information'" in (records[2].error or "")
    assert all(r.error and r.error.startswith("parse failure") for r in records)
    assert (records[-1].error or "").endswith("3 attempts used: recorded as a failure")
    final = next(s for s in judgment.steps if s.name == "combine")
    assert final.error is not None and "explicit failure" in final.error
    assert final.parsed == {"verdict": None, "calls": 3, "rejected_quotes": 0}


def test_a_failed_model_call_stops_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    pipeline, _ = method([LLMError("HTTP 400: bad request", retryable=False)])
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.error is not None
    assert "bad request" in judgment.error
    assert [s.name for s in judgment.steps] == ["read", "facts_qa"]


def test_constrained_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    pipeline, backend = method([answer()], JudgeConfig(constrain=True))
    judge(pipeline)
    settings = backend.calls[0][1]
    assert settings.json_schema == facts_answer_schema(SCHEMA, constrained=True)
    assert settings.max_tokens == 24 + 72 * len(SCHEMA.facts)


class PlainBackend(ScriptedTestBackend):
    """A backend that takes no JSON schema (the answer is read from its text)."""

    capabilities = Capabilities(frozenset())


def test_a_backend_without_structured_output(monkeypatch: pytest.MonkeyPatch) -> None:
    use_reader(monkeypatch)
    text = "```json\n" + answer({"purpose": ("treatment", "for her treatment")}) + "\n```"
    backend = PlainBackend([text])
    pipeline, _ = method(None, backend=backend)
    judgment = judge(pipeline)
    settings = backend.calls[0][1]
    assert settings.json_schema is None and settings.grammar is None
    assert step(judgment, "facts_qa")["structured"] is False
    assert final_facts(judgment)["purpose"].source is Source.ANSWERED


def test_openai_compatible_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Against the local test server: the schema is sent; its made-up quotes are refused."""
    judge_ = use_reader(monkeypatch)
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        backend = OpenAICompatibleBackend(model="fake", base_url=url + "/v1")
        pipeline = build_method("checklist-qa", LLMClient(backend))
        # the server answers a schema with each enum's first value and the prompt as
        # every string: a quote that is not in the narrative
        judgment = judge(pipeline)
        assert len(fake.requests) == 1 and judgment.error is None
        body = fake.requests[0].body
        assert body["response_format"]["json_schema"]["name"] == "facts_answers"
        assert body["response_format"]["json_schema"]["schema"] == facts_answer_schema(SCHEMA)
        assert body["messages"][0]["content"] == render_facts_prompt(NARRATIVE, FLOW, SCHEMA)
        result = combine(judgment)
        assert result["rejected_quotes"] == len(SCHEMA.facts) and result["calls"] == 1
        assert judgment.verdict is judge_.judge(NARRATIVE, FLOW).verdict
        # a malformed answer, then one with a real quote
        fake.reset()
        good = answer({"purpose": ("treatment", "for her treatment")})
        fake.push(Fault.content("{"), Fault.content(good))
        judgment = judge(pipeline)
        assert len(fake.requests) == 2 and judgment.verdict is Verdict.PERMIT
        assert combine(judgment)["calls"] == 2 and combine(judgment)["answered"] == ["purpose"]


# ---------------------------------------------------------------------------------
# the real reader: the CLI against the test server, and the embedded model
# ---------------------------------------------------------------------------------
def nlp_skip() -> None:
    from privacy_ci.reasoning import NLPUnavailable
    from privacy_ci.reasoning._nlp import load_nlp

    try:
        load_nlp()
    except NLPUnavailable as exc:
        pytest.skip(str(exc))


TREATMENT = (
    "Dr. Smith, a physician at General Hospital, sent the patient's medical record to a"
    " specialist for treatment of her heart condition."
)


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


def test_cli_judge_with_the_real_reader(
    server: tuple[FakeLLMServer, str], env: dict[str, str]
) -> None:
    nlp_skip()
    fake, url = server
    fake.reset()
    remote = ["--provider", "openai-compatible", "--model", "fake", "--base-url", url]
    flow = ["--sender", "Physician", "--recipient", "Physician", "--info", "Medical record"]
    args = ["judge", TREATMENT, "-m", "checklist-qa", *flow, *remote, "--no-cache", "--json"]
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    steps = payload["steps"]
    assert [s["name"] for s in steps] == ["read", "facts_qa", "combine"]
    assert len(fake.requests) == 1
    # every made-up quote (the server's prompt echo) is refused: the reader's facts stand
    assert steps[-1]["parsed"]["rejected_quotes"] == len(SCHEMA.facts)
    assert steps[-1]["parsed"]["facts"] == steps[0]["parsed"]["facts"]
    reasoner = ["judge", TREATMENT, "-m", "ci-reasoner", *flow, "--json"]
    alone = CliRunner().invoke(cli(), reasoner, env=env)
    assert alone.exit_code == 0, alone.output
    assert payload["verdict"] == json.loads(alone.stdout)["verdict"]


SMALL_FACTS = ("recipient", "purpose", "authorization")


@pytest.mark.slow
def test_embedded_model_on_a_synthetic_narrative(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wiring, not accuracy: the prompt reaches the model, the constrained answer parses,
    accepted quotes are the narrative's. Three facts are asked, not all of them: the
    135M model writes every fact's quote under the grammar, and the whole schema takes
    minutes per attempt on a small CPU."""
    from privacy_ci.llm.testing import embedded_unavailable_reason

    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    nlp_skip()
    monkeypatch.setenv("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "passive"))
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    from privacy_ci.llm import EmbeddedBackend
    from privacy_ci.reasoning import FactSchema

    judge_ = FactJudge("hipaa")
    small = FactSchema("hipaa", SCHEMA.version, {n: SCHEMA.facts[n] for n in SMALL_FACTS})
    judge_.schema = small
    monkeypatch.setattr(_checklist_qa, "fact_judge", lambda ctx: judge_)
    client = LLMClient(EmbeddedBackend(), cache=None, concurrency=1)
    pipeline = build_method("checklist-qa", client)
    assert pipeline.context.constrained
    flow = Flow.of(sender_role="Physician", recipient_role="Physician")
    judgment = judge(pipeline, Event(TREATMENT, flow=flow))
    assert judgment.error is None, judgment.error
    calls = [s for s in judgment.steps if s.name == "facts_qa"]
    assert 1 <= len(calls) <= 1 + FACTS_QA_PARSE_RETRIES
    assert judgment.backend == "embedded:smollm2-135m-instruct"
    for call in calls:
        assert TREATMENT in call.prompt and call.prompt_tokens > 0
        assert "[authorization]" in call.prompt and "[holder]" not in call.prompt
        if call.error is None:  # the schema is a grammar: it parses
            assert set(json.loads(call.raw_output)) == set(SMALL_FACTS)
    final = combine(judgment)
    assert final["calls"] == len(calls)
    if final["verdict"] is not None:  # every accepted answer quotes the narrative
        for fact in final_facts(judgment).values():
            if fact.source is Source.ANSWERED:
                assert TREATMENT[fact.start or 0 : fact.end] == fact.quote
    latency = sum(c.latency_s for c in calls)
    print(f"\nembedded checklist-qa: {len(calls)} call(s), {latency:.1f} s, {final}")
