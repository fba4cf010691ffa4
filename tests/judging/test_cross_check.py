"""The cross-check: the ci-reasoner beside a model's verdict, its flags, and the
``--cross-check`` options of ``judge`` and ``eval``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging import CrossCheck, CrossChecker, Event, cross_check
from privacy_ci.reasoning import (
    FactJudge,
    FactJudgment,
    Facts,
    FactValue,
    Source,
    apply_law,
    load_fact_schema,
    load_law,
)
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

SCHEMA = load_fact_schema("hipaa")
BOOK = load_law("hipaa")

# fact sets and the law's decision on them (tests/reasoning/test_law.py proves the law)
CORE = {"holder": "covered_entity", "information": "phi"}
TREATMENT = {**CORE, "recipient": "health_care_provider", "purpose": "treatment"}
PERMIT_DETERMINED = {**TREATMENT, "restriction": "none"}
PERMIT_PRESUMED = TREATMENT  # no restriction stated: presumed none
PROHIBIT_DETERMINED = {
    **CORE,
    "recipient": "marketer",
    "purpose": "marketing",
    "authorization": "absent",
    "remuneration": "no",
    "marketing_exception": "no",
}
PROHIBIT_DEFAULT = {  # no permission applies; three nearly do
    **CORE,
    "recipient": "law_enforcement",
    "purpose": "law_enforcement",
    "legal_process": "informal_request",
}
NOT_APPLICABLE = {"holder": "employer", "information": "employment_record"}


def read(values: dict[str, str]) -> Facts:
    """The facts as a reader reports them: each with a quote."""
    return Facts(
        SCHEMA,
        {k: FactValue(v, Source.READ, f"the words for {k}", 0, 9) for k, v in values.items()},
    )


def judged(values: dict[str, str]) -> FactJudgment:
    facts = read(values)
    return FactJudgment(facts, apply_law(BOOK, facts), BOOK.version_id)


class StubReader:
    """Stands in for the offline reader: facts by a function of the narrative."""

    def __init__(self, facts: Callable[[str | None], Facts]) -> None:
        self.facts = facts
        self.seen: list[tuple[str | None, Flow | None]] = []

    def read(self, text: str | None = None, flow: Flow | None = None) -> Facts:
        self.seen.append((text, flow))
        return self.facts(text)


def stub_judge(facts: Callable[[str | None], Facts]) -> FactJudge:
    return FactJudge("hipaa", reader=StubReader(facts))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------
# the flags
# ---------------------------------------------------------------------------------
def test_a_permit_the_law_prohibits_by_default_is_flagged() -> None:
    judgment = judged(PROHIBIT_DEFAULT)
    check = cross_check(Verdict.PERMIT, judgment)
    assert not check.agree and check.flagged and check.flag == "permit-unsupported"
    assert check.reasoner_verdict is Verdict.PROHIBIT and not check.determined
    rule = judgment.decision.rule
    assert check.reasoner_rule == rule.id == "164.502(a)-general-rule"
    assert check.rule == rule.as_dict()
    # the facts the rule used, with their quotes; the presumptions marked
    assert check.facts == {k: v.as_dict() for k, v in judgment.decision.used.items()}
    assert check.facts["holder"]["quote"] == "the words for holder"
    assert {k for k, v in check.facts.items() if v["source"] == "presumed"} == {
        "authorization",
        "required_by_law",
        "serious_threat",
    }
    # the near misses and the questions, named in the reason too
    assert [m["rule"] for m in check.near_misses] == [
        "164.512(e)(1)(i)-court-order",
        "164.512(e)(1)(ii)-subpoena-with-assurances",
        "164.512(f)(1)(ii)-law-enforcement-process",
    ]
    assert [q["fact"] for q in check.questions] == [q.fact for q in judgment.decision.questions]
    assert check.reason is not None
    assert check.reason.startswith("the model permits, but on the facts read the law prohibits")
    assert "164.502(a)" in check.reason and "on presumptions (authorization presumed absent" in (
        check.reason
    )
    assert 'holder = covered_entity (read "the words for holder")' in check.reason
    assert "authorization = absent (presumed)" in check.reason
    assert "nearly permitted by 164.512(e)(1)(i)" in check.reason
    assert "legal_process is informal_request, needs court_order" in check.reason
    data = check.as_dict()
    assert data["reasoner"] == "ci-reasoner" and data["reasoner_verdict"] == "prohibit"
    assert data["reasoner_rule"] == rule.id and data["reasoner_determined"] is False
    assert data["flagged"] and data["error"] is None
    assert data["flag"] == {
        "kind": "permit-unsupported",
        "reason": check.reason,
        "determined": False,
        "rule": check.rule,
        "facts": check.facts,
        "near_misses": check.near_misses,
        "questions": check.questions,
    }
    json.dumps(data)  # a record entry: plain JSON


def test_a_permit_against_a_determined_prohibition_is_flagged() -> None:
    check = cross_check(Verdict.PERMIT, judged(PROHIBIT_DETERMINED))
    assert check.flag == "permit-unsupported" and check.determined
    assert check.rule is not None and check.rule["id"] == "164.508(a)(3)-marketing"
    assert check.reason is not None and "determined: no unknown fact changes it" in check.reason
    assert check.questions == [] and check.near_misses == []
    assert check.facts["authorization"]["value"] == "absent"


@pytest.mark.parametrize(
    ("values", "determined", "says"),
    [
        (PERMIT_DETERMINED, True, "determined: no unknown fact changes it"),
        (PERMIT_PRESUMED, False, "on presumptions (restriction presumed none)"),
    ],
)
def test_a_prohibit_against_a_permission_is_flagged(
    values: dict[str, str], determined: bool, says: str
) -> None:
    judgment = judged(values)
    check = cross_check(Verdict.PROHIBIT, judgment)
    assert not check.agree and check.flag == "prohibit-despite-permission"
    assert check.determined is determined and check.as_dict()["flag"]["determined"] is determined
    assert check.rule is not None and check.rule["id"] == "164.506(c)(2)-treatment"
    assert check.rule["effect"] == "permit"
    assert check.reason is not None
    assert check.reason.startswith("the model prohibits, but on the facts read the law permits")
    assert says in check.reason
    if not determined:  # the question whose answer would prohibit it
        assert [q["fact"] for q in check.questions] == ["restriction"]
        assert "prohibited if an agreed restriction covers it" in check.reason


def test_agreement_is_not_flagged() -> None:
    for values, verdict in (
        (PERMIT_DETERMINED, Verdict.PERMIT),
        (PERMIT_PRESUMED, Verdict.PERMIT),
        (PROHIBIT_DETERMINED, Verdict.PROHIBIT),
        (PROHIBIT_DEFAULT, Verdict.PROHIBIT),
        (NOT_APPLICABLE, Verdict.NOT_APPLICABLE),
    ):
        check = cross_check(verdict, judged(values))
        assert check.agree and not check.flagged and check.reason is None
        assert check.as_dict()["flag"] is None and check.rule is None and check.facts == {}


@pytest.mark.parametrize("model", [Verdict.PERMIT, Verdict.PROHIBIT, Verdict.NOT_APPLICABLE, None])
def test_not_applicable_and_no_verdict_are_never_flagged(model: Verdict | None) -> None:
    # the law says not applicable: nothing to flag, whatever the model says
    check = cross_check(model, judged(NOT_APPLICABLE))
    assert not check.flagged and check.agree is (model is Verdict.NOT_APPLICABLE)
    assert check.reasoner_verdict is Verdict.NOT_APPLICABLE and check.determined
    # the model says not applicable, or nothing: never flagged
    if model in (Verdict.NOT_APPLICABLE, None):
        for values in (PERMIT_DETERMINED, PROHIBIT_DETERMINED, PROHIBIT_DEFAULT):
            check = cross_check(model, judged(values))
            assert not check.flagged and not check.agree


def test_checker_reads_the_event_with_its_given_facts() -> None:
    judge = stub_judge(lambda text: read(PROHIBIT_DEFAULT))
    checker = CrossChecker(reasoner=judge)
    event = Event("A clinic sent a chart to the police.", "e-1")
    check = checker.check_sync(event, Verdict.PERMIT)
    assert check.flag == "permit-unsupported"
    assert judge.reader.seen == [(event.text, event.flow)]  # type: ignore[attr-defined]
    # a given fact wins over the facts read: a court order permits it
    given = Event(event.text, "e-2", facts={"legal_process": "court_order"})
    check = checker.check_sync(given, Verdict.PERMIT)
    assert check.reasoner_verdict is Verdict.PERMIT and not check.flagged and check.agree
    # and asynchronously, the same
    assert asyncio.run(checker.check(event, Verdict.PERMIT)) == checker.check_sync(
        event, Verdict.PERMIT
    )


def test_checker_identity() -> None:
    checker = CrossChecker(reasoner=stub_judge(lambda text: read({})))
    identity = checker.identity()
    root = resources.files("privacy_ci.reasoning")
    digest = hashlib.sha256()
    for folder in ("facts", "law", "reading"):
        digest.update(f"{folder}/hipaa.yaml\n".encode())
        digest.update((root / folder / "hipaa.yaml").read_bytes())
    assert identity == {
        "reasoner": "ci-reasoner",
        "regulation": "hipaa",
        "law": BOOK.version_id,
        "facts": SCHEMA.version_id,
        "files_sha256": digest.hexdigest(),
        "knowledge_base": None,
    }


def test_a_failing_reasoner_is_an_entry_not_an_exception() -> None:
    def fail(text: str | None) -> Facts:
        raise PrivacyCIError("the NLP model is missing")

    checker = CrossChecker(reasoner=stub_judge(fail))
    check = checker.check_sync(Event("x"), Verdict.PERMIT)
    assert isinstance(check, CrossCheck) and check.reasoner_verdict is None
    assert check.error is not None and "NLP model is missing" in check.error
    assert not check.flagged and not check.agree and check.reasoner_rule == ""
    assert check.as_dict()["error"] == check.error
    # a bad given fact is the same kind of failure (named)
    checker = CrossChecker(reasoner=stub_judge(lambda text: read({})))
    check = checker.check_sync(Event("x", facts={"consent": "yes"}), Verdict.PERMIT)
    assert check.error is not None and "unknown fact 'consent'" in check.error


def test_a_regulation_without_a_fact_model_is_refused() -> None:
    checker = CrossChecker(regulation="gdpr")
    with pytest.raises(PrivacyCIError, match="no fact model"):
        checker.reasoner  # noqa: B018


# ---------------------------------------------------------------------------------
# the CLI: judge and eval against the local OpenAI-compatible test server
# ---------------------------------------------------------------------------------
def cli() -> typer.Typer:
    from privacy_ci.cli.evaluate import eval_command, report_command
    from privacy_ci.cli.judge import judge as judge_command

    app = typer.Typer()
    app.command("judge")(judge_command)
    app.command("eval")(eval_command)
    app.command("report")(report_command)
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


def nlp_skip() -> None:
    from privacy_ci.reasoning import NLPUnavailable
    from privacy_ci.reasoning._nlp import load_nlp

    try:
        load_nlp()
    except NLPUnavailable as exc:
        pytest.skip(str(exc))


TREATMENT_TEXT = (
    "Dr. Smith, a physician at General Hospital, sent the patient's medical record to a"
    " specialist for treatment of her heart condition."
)
TREATMENT_ARGS = [
    "--sender",
    "Physician",
    "--recipient",
    "Physician",
    "--subject",
    "Patient",
    "--info",
    "Medical record",
    "--purpose",
    "Treatment",
]


def test_cli_options_are_listed() -> None:
    for command in ("judge", "eval"):
        result = CliRunner().invoke(cli(), [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "--cross-check" in result.stdout


def test_cli_refuses_to_cross_check_the_reasoner(env: dict[str, str]) -> None:
    result = CliRunner().invoke(
        cli(), ["judge", "x", "-m", "ci-reasoner", "--cross-check"], env=env
    )
    assert result.exit_code == 2 and "calls no model" in result.output
    args = ["eval", "-m", "ci-reasoner", "-d", "real", "-n", "2", "--cross-check"]
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == 2 and "calls no model" in result.output


def test_cli_judge_cross_check(fake: tuple[FakeLLMServer, str], env: dict[str, str]) -> None:
    nlp_skip()
    server, url = fake
    # the flow judge answers "prohibit" for a disclosure for treatment
    answer = '{"decision": "prohibit", "rationale": "No authorization."}'
    server.push(Fault.content(answer))
    args = ["judge", TREATMENT_TEXT, "-m", "flow-judge", *TREATMENT_ARGS, *remote(url)]
    result = CliRunner().invoke(cli(), [*args, "--cross-check", "--json"], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    check = payload["cross_check"]
    assert payload["verdict"] == "prohibit" and check["model_verdict"] == "prohibit"
    assert check["reasoner"] == "ci-reasoner" and check["reasoner_rule"]
    assert check["agree"] is (check["reasoner_verdict"] == "prohibit")
    assert isinstance(check["reasoner_determined"], bool)
    if check["flagged"]:  # the law permits a disclosure to a specialist for treatment
        flag = check["flag"]
        assert (
            flag["kind"] == "prohibit-despite-permission" and check["reasoner_verdict"] == "permit"
        )
        assert flag["rule"]["id"] == check["reasoner_rule"]
        assert flag["rule"]["effect"] in ("permit", "require") and flag["facts"]
        assert all(f["source"] in ("given", "read", "presumed") for f in flag["facts"].values())
    # without the option: no key; human output prints the reasoner under the answer
    server.push(Fault.content(answer))
    result = CliRunner().invoke(cli(), [*args, "--json"], env=env)
    assert result.exit_code == 0 and "cross_check" not in json.loads(result.stdout)
    server.push(Fault.content(answer))
    result = CliRunner().invoke(cli(), [*args, "--cross-check"], env=env)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.index("verdict") < out.index("cross-check") and "ci-reasoner:" in out
    assert ("prohibit-despite-permission" in out) is check["flagged"]
    assert ("not flagged" in out) is not check["flagged"]


def test_cli_eval_cross_check(fake: tuple[FakeLLMServer, str], env: dict[str, str]) -> None:
    nlp_skip()
    _, url = fake
    out = Path(env["PRIVACY_CI_CACHE"]).parent / "run"
    args = ["eval", "-m", "flow-judge", "-d", "privaci-hipaa", *remote(url), "-n", "4"]
    args += ["--out", str(out), "--no-progress"]
    result = CliRunner().invoke(cli(), [*args, "--cross-check", "--json"], env=env)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    block = metrics["cross_check"]
    assert block["compared"] == 4 and sum(map(sum, block["counts"])) == 4
    # the server always answers "permit" (the schema's first decision)
    assert block["rows"][0] == "permit" and sum(block["counts"][0]) == 4
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert all(r["cross_check"]["model_verdict"] == "permit" for r in records)
    assert block["flagged_cases"] == [r["case_id"] for r in records if r["cross_check"]["flagged"]]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["identity"]["cross_check"]["reasoner"] == "ci-reasoner"
    # the same folder without --cross-check is another run: refused
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == 2 and "cross_check" in result.output
    # the human output shows the agreement table; the report its section
    result = CliRunner().invoke(cli(), [*args, "--cross-check"], env=env)
    assert result.exit_code == 0 and "cross-check with the ci-reasoner" in result.stdout
    report = Path(env["PRIVACY_CI_CACHE"]).parent / "report"
    result = CliRunner().invoke(cli(), ["report", str(out), "--out", str(report), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "Cross-check with the ci-reasoner: flow-judge" in (report / "report.md").read_text()
