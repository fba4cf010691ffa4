"""`privacy_ci.reasoning.Questionnaire` (the logic of ``privacy-ci ask``) and the
``ask`` command: its questions, its confirmations and its JSON step protocol.

The law is the packaged one; a narrative is read by a stub reader (its facts given
here) except in one test that runs the real offline reader. The sessions answer from
a "truth": the gold facts of the development pairs (never the held-out files).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.reasoning import (
    FactError,
    FactJudge,
    Facts,
    FactValue,
    LawDecision,
    Questionnaire,
    Source,
    Step,
    StepKind,
    apply_law,
    load_law,
)

BOOK = load_law("hipaa")
SCHEMA = BOOK.schema
PRESUMED = {s.name: s.presume for s in SCHEMA if s.presume is not None}
NARRATIVE = "A hospital faxed her lab results to her employer although she never signed a release."

# the development pairs' gold facts (held-out files are never read here)
DEV_PAIRS = Path(str(resources.files("privacy_ci.cases") / "packaged" / "hipaa-pairs-dev.jsonl"))
DEV_FACTS: list[tuple[str, dict[str, str]]] = [
    (row["id"], row["facts"])
    for row in map(json.loads, DEV_PAIRS.read_text(encoding="utf-8").splitlines())
]


def _facts(data: Mapping[str, str]) -> Facts:
    return Facts.from_mapping(SCHEMA, data)


def _law(data: Mapping[str, str]) -> LawDecision:
    return apply_law(BOOK, _facts(data))


def _run(session: Questionnaire, truth: Mapping[str, str], step: Step) -> Step:
    """Answer every step from `truth` (unknown when it says nothing) until the verdict."""
    for _ in range(len(SCHEMA.facts) + 1):
        if step.kind is StepKind.VERDICT:
            return step
        assert step.fact is not None
        session.answer(step.fact, truth.get(step.fact))
        step = session.next_step()
    raise AssertionError(f"no verdict after {len(SCHEMA.facts)} answers: {session.asked}")


class StubJudge(FactJudge):
    """A fact judge whose reader returns fixed facts (the questionnaire is under test,
    not the reader)."""

    def __init__(self, read: Mapping[str, FactValue]) -> None:
        super().__init__("hipaa")
        self._read = dict(read)
        self.texts: list[str | None] = []

    def read(self, text: str | None, flow: Flow | None = None) -> Facts:
        self.texts.append(text)
        return Facts(self.schema, self._read)


def _read(value: str, quote: str) -> FactValue:
    start = NARRATIVE.index(quote)
    return FactValue(value, Source.READ, quote, start, start + len(quote), "stub")


READ = {
    "holder": _read("covered_entity", "A hospital"),
    "information": _read("phi", "her lab results"),
    "recipient": _read("employer", "her employer"),
    "authorization": _read("absent", "she never signed a release"),
    # a fact that cannot change this verdict (a data use agreement matters only for a
    # limited data set): never shown for confirmation
    "data_use_agreement": _read("present", "faxed"),
}


# ------------------------------------------------------------------ given facts
@pytest.mark.parametrize(("case_id", "gold"), DEV_FACTS[::18], ids=[c for c, _ in DEV_FACTS[::18]])
def test_answering_only_the_asked_questions_reaches_the_law_s_verdict(
    case_id: str, gold: dict[str, str]
) -> None:
    """From nothing, answering only what is asked (from the gold facts and the
    presumptions) ends determined, with the verdict the law gives on all of them, and
    asks fewer questions than there are facts, none twice."""
    truth = {**PRESUMED, **gold}
    session = Questionnaire()
    final = _run(session, truth, session.start())
    want = _law(truth)
    assert want.determined  # the gold facts name every fact without a presumption
    assert final.decision is not None
    assert final.decision.determined, (case_id, session.asked)
    assert final.decision.verdict is want.verdict, (case_id, session.asked)
    assert final.decision.rule.effect.verdict is want.verdict
    assert len(session.asked) == len(set(session.asked)) < len(SCHEMA.facts)
    assert set(session.facts) == set(session.asked)  # only what was asked is known


def test_a_determined_start_asks_nothing() -> None:
    gold = next(g for _, g in DEV_FACTS if _law(g).determined)
    session = Questionnaire()
    step = session.start(facts=gold)
    assert step.kind is StepKind.VERDICT and session.asked == []
    assert step.decision is not None and step.decision.determined
    assert step.decision.verdict is _law(gold).verdict
    data = step.as_dict()
    assert data["kind"] == "verdict" and data["determined"] is True
    assert set(data["facts"]) == set(gold) and data["rule"]["paragraph"]


def _changes_outcome(known: Mapping[str, str], fact: str) -> bool:
    outcomes = set()
    for group in BOOK.classes[fact]:
        d = _law({**known, fact: group[0]})
        outcomes.add((d.verdict, d.determined, d.rule.id))
    return len(outcomes) > 1


@pytest.mark.parametrize("start", [{}, {"holder": "covered_entity", "information": "phi"}])
def test_never_asks_a_fact_that_cannot_change_the_verdict(start: dict[str, str]) -> None:
    """Every question asked is one whose answers lead to different outcomes of the law,
    and its values say which verdict each leads to; a question's fact is unknown."""
    truth = {**PRESUMED, **DEV_FACTS[0][1], **start}
    session = Questionnaire()
    step = session.start(facts=start)
    while step.kind is not StepKind.VERDICT:
        assert step.kind is StepKind.QUESTION and step.fact is not None
        known = session.facts.plain()
        assert step.fact not in known
        assert _changes_outcome(known, step.fact), (step.fact, known)
        verdicts = {v for c in step.choices for v in c.verdicts}
        assert len(verdicts) >= 2 or any(len(c.verdicts) > 1 for c in step.choices)
        assert step.decision is not None and step.fact in [q.fact for q in step.decision.questions]
        session.answer(step.fact, truth.get(step.fact))
        step = session.next_step()


def test_the_questions_come_in_the_law_s_order() -> None:
    session = Questionnaire()
    step = session.start(facts={"holder": "covered_entity"})
    assert step.decision is not None
    assert step.fact == step.decision.questions[0].fact
    assert step.text == step.decision.questions[0].text


def test_leaving_a_question_unknown_moves_on_and_never_asks_it_again() -> None:
    session = Questionnaire()
    first = session.start(facts={"holder": "covered_entity", "information": "phi"})
    assert first.fact is not None
    session.answer(first.fact, None)
    second = session.next_step()
    assert second.fact != first.fact
    truth = {**PRESUMED, "recipient": "employer", "purpose": "other"}
    final = _run(session, truth, second)
    assert session.asked.count(first.fact) == 1
    assert final.kind is StepKind.VERDICT and first.fact not in session.facts


def test_all_questions_left_unknown_end_with_the_verdict_on_presumptions() -> None:
    session = Questionnaire()
    final = _run(session, {}, session.start())
    assert final.decision is not None and not final.decision.determined
    assert final.decision.questions  # what would still settle it
    assert final.as_dict()["determined"] is False


# ------------------------------------------------------------------ a narrative
def test_a_narrative_s_facts_are_shown_with_their_quotes_for_confirmation() -> None:
    judge = StubJudge(READ)
    session = Questionnaire(judge=judge)
    step = session.start(NARRATIVE)
    assert judge.texts == [NARRATIVE]
    shown = []
    while step.kind is StepKind.CONFIRM:
        assert step.read is not None and step.fact is not None
        assert step.read.source is Source.READ
        assert step.read.quote in NARRATIVE
        assert step.read == READ[step.fact]
        assert NARRATIVE[step.read.start : step.read.end] == step.read.quote
        data = step.as_dict()
        assert data["kind"] == "confirm" and data["quote"] == step.read.quote
        assert data["value"] == step.read.value and data["label"]
        shown.append(step.fact)
        session.confirm(step.fact)
        step = session.next_step()
    # the flow's facts first, in the schema's order; never the one that cannot matter
    assert shown == ["holder", "information", "recipient", "authorization"]
    for name in shown:  # confirmed: given, the quote kept
        fact = session.facts[name]
        assert fact.source is Source.GIVEN and fact.quote == READ[name].quote
    assert session.facts["data_use_agreement"].source is Source.READ
    final = _run(session, {**PRESUMED, "purpose": "employment_decision"}, step)
    assert final.unconfirmed == ("data_use_agreement",)
    assert final.decision is not None and final.decision.verdict is Verdict.PROHIBIT
    assert final.as_dict()["unconfirmed"] == ["data_use_agreement"]


def test_changing_or_clearing_a_read_fact() -> None:
    session = Questionnaire(judge=StubJudge(READ))
    step = session.start(NARRATIVE)
    assert step.fact == "holder"
    session.answer("holder", "covered_entity")  # the value read: a confirmation
    assert session.facts["holder"].source is Source.GIVEN
    assert session.facts["holder"].quote == "A hospital"
    assert session.next_step().fact == "information"
    session.reject("information")  # cleared: unknown, and not asked again
    assert "information" not in session.facts
    step = session.next_step()
    assert step.fact == "recipient"
    session.answer("recipient", "health_care_provider")  # changed
    assert session.facts["recipient"] == FactValue(
        "health_care_provider", Source.GIVEN, note="answered in ask"
    )
    final = _run(session, {**PRESUMED, "purpose": "treatment"}, session.next_step())
    assert "information" not in session.facts and session.asked.count("information") == 1
    assert final.kind is StepKind.VERDICT


def test_given_facts_win_over_read_ones_and_are_not_confirmed() -> None:
    session = Questionnaire(judge=StubJudge(READ))
    step = session.start(NARRATIVE, {"holder": "business_associate"})
    assert session.facts["holder"].value == "business_associate"
    assert session.facts["holder"].source is Source.GIVEN
    assert "holder" not in session.pending
    assert step.fact != "holder"


def test_a_session_without_a_narrative_never_reads() -> None:
    judge = StubJudge(READ)
    Questionnaire(judge=judge).start(facts={"holder": "covered_entity"})
    assert judge.texts == []


@pytest.mark.slow
def test_the_real_reader_pre_fills_the_facts_it_reads() -> None:
    """The offline reader on a narrative: the first step confirms a fact read from it,
    its quote taken from the narrative at its offsets."""
    pytest.importorskip("spacy")
    try:
        session = Questionnaire()
        step = session.start(NARRATIVE)
    except PrivacyCIError as exc:  # the NLP or embedding package is not installed
        pytest.skip(str(exc))
    assert step.kind is StepKind.CONFIRM and step.read is not None
    assert step.read.source is Source.READ and step.read.quote
    assert NARRATIVE[step.read.start : step.read.end] == step.read.quote
    assert set(session.pending) <= set(session.facts)


# ------------------------------------------------------------------ bad answers
def test_bad_answers_are_clear_errors_and_the_session_goes_on() -> None:
    session = Questionnaire()
    step = session.start(facts={"holder": "covered_entity"})
    with pytest.raises(FactError, match="unknown fact 'colour'"):
        session.answer("colour", "blue")
    with pytest.raises(FactError, match="fact 'information': unknown value 'x-ray'"):
        session.answer("information", "x-ray")
    with pytest.raises(FactError, match="no read value awaiting confirmation"):
        session.confirm("information")
    with pytest.raises(FactError, match="unknown fact 'colour'"):
        session.reject("colour")
    assert session.next_step() is step and session.asked == [step.fact]
    assert session.facts.plain() == {"holder": "covered_entity"}
    with pytest.raises(FactError, match="unknown value 'nope'"):
        Questionnaire().start(facts={"holder": "nope"})


def test_error_steps_and_their_json() -> None:
    step = Step.error("line 3: not JSON", "holder")
    assert step.as_dict() == {"kind": "error", "fact": "holder", "message": "line 3: not JSON"}


# ------------------------------------------------------------------ prefetch
def test_prefetched_answers_give_the_same_steps() -> None:
    """With the background decisions on, a session asks the same questions and ends with
    the same verdict (a decision is the same whichever thread made it)."""
    truth = {**PRESUMED, **DEV_FACTS[4][1]}
    plain = Questionnaire()
    want = _run(plain, truth, plain.start())
    with Questionnaire(prefetch=True) as fast:
        got = _run(fast, truth, fast.start())
    assert fast.asked == plain.asked
    assert got.as_dict() == want.as_dict()


def test_a_remembered_decision_shows_the_current_values() -> None:
    """Values no rule tells apart share a decision; it is told with the value given."""
    fact, group = next((f, g) for f, gs in BOOK.classes.items() for g in gs if len(g) > 1)
    session = Questionnaire()
    session.start(facts={fact: group[0]})
    first = session.decision()
    session.answer(fact, group[1])  # the same class: no rule tells them apart
    again = session.decision()
    assert again.facts is not None and again.facts.value(fact) == group[1]
    assert again.rule == first.rule and again.verdict is first.verdict
    for name, fact in again.used.items():
        if name in session.facts:
            assert fact == session.facts[name]


# ------------------------------------------------------------------ the command
def _cli() -> typer.Typer:
    from privacy_ci.cli.ask import ask

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test entry point."""

    app.command("ask")(ask)
    return app


def test_terminal_session_from_given_facts(tmp_path: Path) -> None:
    facts = tmp_path / "facts.yaml"
    facts.write_text("holder: covered_entity\ninformation: psychotherapy_notes\n")
    # ?: the values' meanings; a value by name; a number; u: unknown; then end of input
    replies = "?\n" + "\n".join(["employer", "3", "u", "u", "u", "u", "u", "u"]) + "\n"
    result = CliRunner().invoke(_cli(), ["ask", "--facts", str(facts)], input=replies)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "1. recipient: Who receives the information?" in out
    assert "the individual the information is about" in out  # a description, after ?
    assert "verdict" in out and "rule" in out and "determined" in out


def test_terminal_bad_facts_file_is_one_error(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"holder": "covered_entity", "colour": "blue"}))
    result = CliRunner().invoke(_cli(), ["ask", "--facts", str(facts)])
    assert result.exit_code == 2
    assert "unknown fact 'colour'" in " ".join(result.stderr.split())
    assert str(facts) in " ".join(result.stderr.split()).replace("\n", "")


ASK_JSON = [sys.executable, "-m", "privacy_ci.cli.main", "ask", "--json-steps"]


def _ask_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ASK_JSON, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _steps(proc: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert proc.stdout is not None
    for line in proc.stdout:
        yield json.loads(line)


def test_json_steps_round_trip_over_a_subprocess() -> None:
    """A UI's session: read a step, send an answer, until the verdict; bad lines get an
    error step, then the same step again."""
    truth = {**PRESUMED, **DEV_FACTS[2][1]}
    want = _law(truth)
    proc = _ask_process("--fact", "holder=covered_entity")
    assert proc.stdin is not None
    seen: list[dict[str, Any]] = []
    bad = iter(
        [
            ("this is not json", "not JSON"),
            (json.dumps({"fact": "colour", "value": "blue"}), "unknown fact 'colour'"),
            (json.dumps({"fact": "information", "value": "x-ray"}), "unknown value 'x-ray'"),
            (json.dumps({"fact": "information", "confirm": True}), "awaiting confirmation"),
            (json.dumps(["holder"]), "expected a JSON object"),
            (json.dumps({"fact": "information", "value": 3}), "value name or null"),
        ]
    )
    pending: tuple[str, str] | None = None
    try:
        for step in _steps(proc):
            seen.append(step)
            if step["kind"] == "verdict":
                break
            if step["kind"] == "error":
                assert pending is not None and pending[1] in step["message"], step
                continue
            assert step["kind"] == "question"
            assert {"fact", "question", "paragraph", "text", "values", "leaning"} <= set(step)
            pending = next(bad, None)
            if pending is not None:
                proc.stdin.write(pending[0] + "\n")
            else:
                answer = {"fact": step["fact"], "value": truth.get(step["fact"])}
                proc.stdin.write(json.dumps(answer) + "\n")
            proc.stdin.flush()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
    errors = [s for s in seen if s["kind"] == "error"]
    assert len(errors) == 6
    assert all(s["message"].startswith("line ") for s in errors)
    # after each error, the step it answered again
    for i, step in enumerate(seen):
        if step["kind"] == "error":
            assert seen[i + 1] == seen[i - 1]
    final = seen[-1]
    assert final["kind"] == "verdict" and final["determined"] is True
    assert final["verdict"] == want.verdict.value
    assert final["facts"]["holder"] == {
        "value": "covered_entity",
        "source": "given",
        "note": "--fact",
    }


def test_json_steps_with_every_answer_piped_at_once() -> None:
    """Answers written up front (blank lines skipped); the input ends before the
    verdict is determined: the verdict on the facts so far comes last."""
    lines = [
        {"fact": "holder", "value": "covered_entity"},
        {"fact": "information", "value": "phi"},
        {"fact": "recipient", "value": None},
    ]
    stdin = "\n".join(json.dumps(line) for line in lines) + "\n\n"
    done = subprocess.run(
        ASK_JSON,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    steps = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["kind"] for s in steps[:-1]] == ["question"] * (len(steps) - 1)
    assert [s["fact"] for s in steps[:3]] == ["holder", "information", "recipient"]
    last = steps[-1]
    assert last["kind"] == "verdict" and last["determined"] is False
    assert last["questions"] and set(last["facts"]) == {"holder", "information"}


def test_json_steps_bad_given_facts_exit_2_before_any_step() -> None:
    done = subprocess.run(
        [*ASK_JSON, "--fact", "holder=hospital"],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown value 'hospital'" in done.stderr and "Traceback" not in done.stderr
