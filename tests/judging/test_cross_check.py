"""The cross-check: the ci-reasoner beside a model's verdict, its flags, and the
``--cross-check`` options of ``judge`` and ``eval``."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.ci import Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging import CrossCheck, CrossChecker, Event, cross_check
from privacy_ci.reasoning import Status
from tests._norms import (
    ALTERNATIVES,
    NO_CONDITIONS,
    NOT_APPLICABLE,
    SALE,
    TREATMENT,
    StubReasoner,
    candidate,
    reasoning,
)
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

MET, NO, UNSTATED = Status.MET, Status.CONTRADICTED, Status.UNSTATED


# ---------------------------------------------------------------------------------
# the flags
# ---------------------------------------------------------------------------------
def test_a_permit_on_unstated_conditions_is_flagged() -> None:
    treatment = candidate(TREATMENT, 2, MET, UNSTATED)
    found = reasoning(Verdict.PERMIT, [treatment, candidate(SALE)], treatment)
    check = cross_check(Verdict.PERMIT, found)
    assert check.agree and check.flagged and check.flag == "permit-unsupported"
    assert check.reason is not None and "to-provider (unstated)" in check.reason
    assert "for-treatment" not in check.reason  # met: not a reason
    assert check.norm is not None and check.norm["id"] == TREATMENT.id
    assert [c["status"] for c in check.conditions] == ["met", "unstated"]
    assert check.conditions[0]["evidence"][0]["quote"] == "quote for for-treatment"
    data = check.as_dict()
    assert data["reasoner"] == "ci-reasoner" and data["reasoner_verdict"] == "permit"
    assert data["flagged"] and data["flag"]["kind"] == "permit-unsupported"
    assert data["flag"]["conditions"] == check.conditions and data["error"] is None


def test_a_permit_on_contradicted_conditions_is_flagged_and_disagrees() -> None:
    treatment = candidate(TREATMENT, 2, NO, MET)
    found = reasoning(Verdict.PROHIBIT, [treatment], treatment)
    check = cross_check(Verdict.PERMIT, found)
    assert not check.agree and check.flag == "permit-unsupported"
    assert check.reason is not None and "for-treatment (contradicted)" in check.reason


def test_a_permit_on_a_norm_that_holds_is_not_flagged() -> None:
    treatment = candidate(TREATMENT, 2, MET, MET)
    check = cross_check(Verdict.PERMIT, reasoning(Verdict.PERMIT, [treatment], treatment))
    assert check.agree and not check.flagged and check.reason is None
    assert check.as_dict()["flag"] is None
    # alternatives: one met alternative is what the norm asks
    judicial = candidate(ALTERNATIVES, 1, UNSTATED, MET)
    assert not cross_check(Verdict.PERMIT, reasoning(None, [judicial])).flagged
    # a permission that needs no condition holds
    free = candidate(NO_CONDITIONS, 2)
    assert not cross_check(Verdict.PERMIT, reasoning(Verdict.PERMIT, [free], free)).flagged


def test_the_permission_checked_when_the_reasoner_decided_otherwise() -> None:
    sale = candidate(SALE, 2, MET)
    unstated = candidate(ALTERNATIVES, 1, UNSTATED, UNSTATED)
    held = candidate(TREATMENT, 0, MET, MET)
    # a permitting candidate that holds is the one a permit rests on
    check = cross_check(Verdict.PERMIT, reasoning(Verdict.PROHIBIT, [sale, unstated, held], sale))
    assert not check.flagged and not check.agree
    # none holds: the best-matching permitting candidate
    check = cross_check(Verdict.PERMIT, reasoning(Verdict.PROHIBIT, [sale, unstated], sale))
    assert check.flag == "permit-unsupported" and check.norm is not None
    assert check.norm["id"] == ALTERNATIVES.id and check.norm["requires"] == "any"
    # no permitting candidate at all: nothing to check
    check = cross_check(Verdict.PERMIT, reasoning(Verdict.PROHIBIT, [sale], sale))
    assert not check.flagged and not check.agree


def test_a_prohibit_despite_a_met_permission_is_flagged() -> None:
    treatment = candidate(TREATMENT, 2, MET, MET)
    found = reasoning(Verdict.PERMIT, [candidate(SALE), treatment], treatment)
    check = cross_check(Verdict.PROHIBIT, found)
    assert not check.agree and check.flag == "prohibit-despite-permission"
    assert check.reason is not None and TREATMENT.id in check.reason
    assert check.norm is not None and check.norm["effect"] == "permit"
    assert [c["status"] for c in check.conditions] == ["met", "met"]
    judicial = candidate(ALTERNATIVES, 1, NO, MET)  # one alternative met
    assert cross_check(Verdict.PROHIBIT, reasoning(None, [judicial])).flagged
    # a permission that requires no condition, matched on the flow
    free = candidate(NO_CONDITIONS, 2)
    check = cross_check(Verdict.PROHIBIT, reasoning(Verdict.PERMIT, [free], free))
    assert check.flag == "prohibit-despite-permission" and check.conditions == []
    assert check.reason is not None and "requires no condition" in check.reason


def test_a_prohibit_is_not_flagged_without_a_met_permission() -> None:
    partly = candidate(TREATMENT, 2, MET, UNSTATED)
    check = cross_check(Verdict.PROHIBIT, reasoning(Verdict.PERMIT, [partly], partly))
    assert not check.flagged and not check.agree
    # a permission without conditions that no pattern field matched
    free = candidate(NO_CONDITIONS, 0)
    assert not cross_check(Verdict.PROHIBIT, reasoning(None, [free])).flagged
    sale = candidate(SALE, 1, MET)
    check = cross_check(Verdict.PROHIBIT, reasoning(Verdict.PROHIBIT, [sale], sale))
    assert check.agree and not check.flagged


@pytest.mark.parametrize("verdict", [Verdict.NOT_APPLICABLE, None])
def test_other_verdicts_are_never_flagged(verdict: Verdict | None) -> None:
    held = candidate(TREATMENT, 2, MET, MET)
    unstated = candidate(ALTERNATIVES, 1)
    check = cross_check(verdict, reasoning(Verdict.PERMIT, [unstated, held], held))
    assert not check.flagged and not check.agree


def test_agreement() -> None:
    na = reasoning(Verdict.NOT_APPLICABLE, applicability=NOT_APPLICABLE)
    assert cross_check(Verdict.NOT_APPLICABLE, na).agree
    assert not cross_check(Verdict.PERMIT, na).flagged  # nothing to check
    undetermined = reasoning(None)
    assert not cross_check(None, undetermined).agree  # an abstention agrees with nothing
    assert not cross_check(Verdict.PERMIT, undetermined).agree


def test_checker_with_a_given_reasoner() -> None:
    treatment = candidate(TREATMENT, 2, UNSTATED, UNSTATED)
    stub = StubReasoner(reasoning(Verdict.PERMIT, [treatment], treatment))
    checker = CrossChecker(reasoner=stub)  # type: ignore[arg-type]
    event = Event("A clinic sent a chart.", "e-1")
    check = checker.check_sync(event, Verdict.PERMIT)
    assert check.flagged and stub.seen == [(event.text, event.flow)]
    assert checker.identity() == {
        "reasoner": "ci-reasoner",
        "regulation": "hipaa",
        "catalogue_sha256": hashlib.sha256(b"{}").hexdigest(),
        "knowledge_base": "kb-hash",
    }


def test_a_failing_reasoner_is_an_entry_not_an_exception() -> None:
    def fail(text: str) -> object:
        raise PrivacyCIError("the NLP model is missing")

    checker = CrossChecker(reasoner=StubReasoner(fail))  # type: ignore[arg-type]
    check = checker.check_sync(Event("x"), Verdict.PERMIT)
    assert isinstance(check, CrossCheck) and check.reasoner_verdict is None
    assert check.error is not None and "NLP model is missing" in check.error
    assert not check.flagged and not check.agree


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
    from privacy_ci.reasoning._evidence import load_nlp

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
    if check["flagged"]:
        assert check["flag"]["kind"] == "prohibit-despite-permission"
        statuses = {c["status"] for c in check["flag"]["conditions"]}
        assert statuses <= {"met"} or check["flag"]["norm"]["requires"] == "any"
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
