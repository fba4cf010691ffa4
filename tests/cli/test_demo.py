"""`privacy-ci demo` without the assistant: the Conductor part and the model-free
Checklist part (one narrative judged by the ci-reasoner, facts then law, and the same
case answered through `privacy-ci ask` from a script)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.demo import ASK_SCRIPT
from privacy_ci.cli.main import app
from privacy_ci.reasoning import NLPUnavailable
from privacy_ci.reasoning._nlp import load_nlp

runner = CliRunner()


def _need_nlp() -> None:
    try:
        load_nlp()
    except NLPUnavailable as exc:
        pytest.skip(str(exc))


def _checklist(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["demo", "--no-assistant", "--json", *args])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["flows"] and len(data["examples"]) == 4
    part: dict[str, Any] = data["checklist"]
    return part


def test_demo_json_has_the_judgment_with_its_facts_and_questions() -> None:
    _need_nlp()
    part = _checklist()
    assert part["method"] == "ci-reasoner (model-free)" and "error" not in part
    narrative = part["narrative"]
    # the psychiatric record sent to an employer, no authorization signed: nothing in
    # the narrative permits it; it rests on facts it does not state (legal process ...)
    assert part["verdict"] == "prohibit" and part["determined"] is False
    decision = part["decision"]
    assert decision["rule"]["id"] == "164.502(a)-general-rule"
    assert decision["rule"]["effect"] == "prohibit"
    used = decision["used"]
    assert used["holder"]["value"] == "covered_entity"
    assert used["information"]["value"] == "phi"
    for fact in (*used.values(), *part["facts"].values()):
        if fact["source"] == "read":  # every quote is where its offsets say
            assert narrative[fact["start"] : fact["end"]] == fact["quote"]
    assert part["facts"]["authorization"]["value"] == "absent"
    assert "signed" in part["facts"]["authorization"]["quote"]
    # the deciding questions, and the permission that fails on the authorization
    assert {q["fact"] for q in decision["questions"]} == set(decision["presumed"]) | {"purpose"}
    assert "164.508(a)(1)-authorization" in [m["rule"] for m in decision["near_misses"]]


def test_demo_json_answers_the_questions_through_ask() -> None:
    _need_nlp()
    part = _checklist()
    asked = part["ask"]
    assert asked["script"] == ASK_SCRIPT
    steps = asked["steps"]
    confirms = [s for s in steps if s["kind"] == "confirm"]
    questions = [s for s in steps if s["kind"] == "question"]
    assert confirms and questions and len(confirms) + len(questions) == len(steps)
    # the read facts come first, each with its quote, and are confirmed
    assert steps[: len(confirms)] == confirms
    for step in confirms:
        read = step["read"]
        assert read["value"] == part["facts"][step["fact"]]["value"]
        assert part["narrative"][read["start"] : read["end"]] == read["quote"]
        assert step["answer"] == {"fact": step["fact"], "confirm": True}
    # the questions are the ones the judgment named, each answered from the script
    assert [q["fact"] for q in questions] == [q["fact"] for q in part["decision"]["questions"]]
    for step in questions:
        assert step["answer"] == {"fact": step["fact"], "value": ASK_SCRIPT[step["fact"]]}
        assert step["question"] and step["text"] and step["leaning"] == "prohibit"
    verdict = asked["verdict"]
    assert verdict["kind"] == "verdict"
    assert verdict["verdict"] == "prohibit" and verdict["determined"] is True
    assert verdict["rule"]["id"] == "164.502(a)-general-rule" and verdict["presumed"] == {}
    facts = verdict["facts"]
    assert all(f["source"] == "given" for f in facts.values())
    assert {k: facts[k]["value"] for k in ASK_SCRIPT} == ASK_SCRIPT
    assert verdict["unconfirmed"] == []


def test_demo_text_shows_the_judgment_then_the_questions() -> None:
    _need_nlp()
    res = runner.invoke(app, ["demo", "--no-assistant"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    judged = out.index("model-free ci-reasoner")
    asked = out.index("through privacy-ci ask")
    assert judged < asked
    first, second = out[judged:asked], out[asked:]
    assert "verdict  prohibit" in first and "determined  no" in first
    assert "164.502(a)-general-rule" in first and 'read: "A hospital" at 0-10' in first
    assert "questions that would settle it" in first and "legal_process" in first
    assert "164.508(a)(1)" in first  # the near miss: no authorization
    assert 'read: covered_entity from "A hospital"  -> answered: confirm' in second
    assert "-> answered: none (no legal process)" in second
    assert "-> answered: employment_decision" in second
    assert "determined  yes" in second and "given (answered in ask)" in second


def test_demo_without_the_data_directory_still_judges(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The ci-reasoner needs no knowledge base: an empty data directory changes nothing
    in the Checklist part."""
    _need_nlp()
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path))
    part = _checklist()
    assert "error" not in part and part["verdict"] == "prohibit"
    assert part["ask"]["verdict"]["determined"] is True


def test_demo_without_the_nlp_pipeline_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from privacy_ci.reasoning import _reading

    def missing(self: object) -> object:
        raise NLPUnavailable("the ci-reasoner needs spaCy: pip install 'privacy-ci[reasoner]'")

    monkeypatch.setattr(_reading.FactReader, "nlp", property(missing))
    part = _checklist()
    assert "spaCy" in part["error"] and "verdict" not in part and "ask" not in part
    res = runner.invoke(app, ["demo", "--no-assistant"])
    assert res.exit_code == 0, res.output
    assert "skipped:" in res.stdout and "through privacy-ci ask" not in res.stdout
