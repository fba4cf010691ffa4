"""The model-free ci-reasoner: evidence, negation and scope, offsets, condition
statuses, applicability, the verdict rule, abstention, and the method around it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privacy_ci.ci import Flow, Verdict
from privacy_ci.reasoning import CIReasoner, Status
from privacy_ci.reasoning._evidence import CueSet, Narrative
from privacy_ci.reasoning._reasoner import decide
from tests._shared import require_data


@pytest.fixture(scope="module")
def reasoner() -> CIReasoner:
    require_data()
    return CIReasoner()


@pytest.fixture(scope="module")
def cues() -> CueSet:
    return CueSet(
        {
            ("auth",): ["sign authorization", "authorization"],
            ("court",): ["court order"],
            ("object",): ["object"],
            ("agree",): ["agree"],
        }
    )


# -- evidence: negation and its scope ---------------------------------------------------
@pytest.mark.parametrize(
    ("text", "key", "negated"),
    [
        ("The patient signed a valid written authorization.", "auth", False),
        ("No authorization was signed by the patient.", "auth", True),
        ("Authorization was never obtained from her.", "auth", True),
        ("The records were released without a court order.", "court", True),
        ("The judge issued a court order for the records.", "court", False),
        ("She did not object to the disclosure.", "object", True),
        ("He objected strongly.", "object", False),
        ("Mary agreed to the disclosure.", "agree", False),
        ("Mary did not agree to the disclosure.", "agree", True),
    ],
)
def test_negation_and_scope(cues: CueSet, text: str, key: str, negated: bool) -> None:
    found = [m for m in Narrative(text, cues).matches if m.key == (key,)]
    assert found, text
    assert found[0].negated is negated, (text, found[0])


def test_negation_does_not_cross_a_clause(cues: CueSet) -> None:
    text = "Mary agreed to the disclosure, but her husband did not agree."
    states = [m.negated for m in Narrative(text, cues).matches if m.key == ("agree",)]
    assert states == [False, True]
    # a negated verb governs its object, not a later clause's
    text = "The clinic did not object before it signed an authorization form."
    found = {m.key: m.negated for m in Narrative(text, cues).matches}
    assert found[("object",)] is True and found[("auth",)] is False


def test_offsets_point_into_the_text(cues: CueSet) -> None:
    text = "Intro.  The patient  SIGNED an\\nauthorization yesterday. No court order was shown."
    for match in Narrative(text, cues).matches:
        assert text[match.start : match.end] == match.quote
        assert match.quote in match.sentence or match.sentence in text


def test_lemmas_and_gaps(cues: CueSet) -> None:
    # "sign authorization" matches with determiners and up to two words in between
    assert any(
        m.cue == "sign authorization"
        for m in Narrative("She signs the attached written authorization.", cues).matches
    )
    assert not any(
        m.cue == "sign authorization"
        for m in Narrative(
            "She signs many forms, letters and papers and an authorization.", cues
        ).matches
    )


# -- the reasoner ------------------------------------------------------------------------
RECORDS = "Medical records"


def test_applicability_by_information_type(reasoner: CIReasoner) -> None:
    flow = Flow.of(sender_role="Doctor", recipient_role="Specialist", information_type=RECORDS)
    result = reasoner.judge("Dr. Smith sent the records to Dr. Brown for treatment.", flow)
    assert result.applicability.applicable and result.verdict is not Verdict.NOT_APPLICABLE
    assert "protected information" in result.applicability.reasons[0]
    other = reasoner.judge(
        "The bureau handed over employment files of political appointees.",
        Flow.of(information_type="FBI files"),
    )
    assert other.verdict is Verdict.NOT_APPLICABLE and not other.applicability.applicable
    assert "not protected health information" in other.applicability.reasons[-1]


def test_identifiers_need_a_covered_entity_holding_them(reasoner: CIReasoner) -> None:
    flow = Flow.of(information_type="Name and room number")
    held = reasoner.judge("The hospital told a visitor the patient's room number.", flow)
    assert held.applicability.applicable
    assert "a covered entity holds it" in held.applicability.reasons[-1]
    loose = reasoner.judge("A neighbour told a visitor the tenant's room number.", flow)
    assert loose.verdict is Verdict.NOT_APPLICABLE


def test_each_ground_with_a_cue_makes_it_not_applicable(reasoner: CIReasoner) -> None:
    grounds = [g for g in reasoner.catalogue.applicability.grounds if g.cues.met]
    assert len(grounds) >= 4
    for ground in grounds:
        result = reasoner.judge(
            f"The hospital disclosed the patient's medical records; {ground.cues.met[0]}.",
            Flow.of(information_type=RECORDS),
        )
        assert result.verdict is Verdict.NOT_APPLICABLE, ground.id
        assert [g[0] for g in result.applicability.grounds] == [ground.id]


def test_an_individual_sharing_their_own_information(reasoner: CIReasoner) -> None:
    text = "Ann Lee emailed her own medical records to her new employer."
    flow = Flow.of(sender="Ann Lee", subject="ann lee ", information_type=RECORDS)
    result = reasoner.judge(text, flow)
    assert result.verdict is Verdict.NOT_APPLICABLE
    assert [g[0] for g in result.applicability.grounds] == ["individual-own-information"]
    assert any(
        "is the individual the information is about" in r for r in result.applicability.reasons
    )
    other = reasoner.judge(
        text, Flow.of(sender="Mercy Clinic", subject="Ann Lee", information_type=RECORDS)
    )
    assert "individual-own-information" not in [g[0] for g in other.applicability.grounds]


# a sentence that states what the rule allows is not a fact about the flow
@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("The clinic was not required to obtain an authorization before it replied.", False),
        ("The disclosure was made without requiring her authorization.", False),
        ("Her authorization was not necessary for the report.", False),
        ("A covered entity can disclose the chart without her authorization.", False),
        ("The rule allows the disclosure without the patient's authorization.", False),
        ("The clinic disclosed the chart without her authorization.", True),
        ("No authorization was signed by the patient.", True),
        ("The clinic could not find any authorization she had signed.", True),
    ],
)
def test_a_waived_condition_is_not_a_contradiction(cues: CueSet, text: str, stated: bool) -> None:
    found = [m for m in Narrative(text, cues).matches if m.key == ("auth",)]
    if stated:
        assert found and found[0].negated, text
    else:
        assert not found, (text, found)


def _auth(reasoner: CIReasoner, text: str) -> Status:
    result = reasoner.judge(text, Flow.of(information_type=RECORDS))
    checks = {c.condition.id: c for n in result.candidates for c in n.conditions}
    return (
        checks["valid-authorization"].status if "valid-authorization" in checks else Status.UNSTATED
    )


def test_condition_statuses(reasoner: CIReasoner) -> None:
    assert (
        _auth(
            reasoner,
            "The patient signed a written authorization; the clinic sent the records to her lawyer.",
        )
        is Status.MET
    )
    assert (
        _auth(
            reasoner,
            "The clinic sent the records to her lawyer, though no written authorization was signed.",
        )
        is Status.CONTRADICTED
    )
    assert _auth(reasoner, "The clinic sent the records to her lawyer.") is Status.UNSTATED


def test_the_last_statement_wins_for_permissions(reasoner: CIReasoner) -> None:
    text = (
        "At first no written authorization was signed. A week later the patient signed a"
        " written authorization, and the clinic sent the records to her lawyer."
    )
    assert _auth(reasoner, text) is Status.MET


def test_evidence_offsets_in_a_judgment(reasoner: CIReasoner) -> None:
    text = "The patient signed a written authorization; the clinic then sent her medical records."
    result = reasoner.judge(text, Flow.of(information_type=RECORDS))
    evidence = [e for n in result.candidates for c in n.conditions for e in c.evidence]
    assert evidence
    for e in evidence:
        assert text[e.start : e.end] == e.quote


def test_verdict_rule_clauses() -> None:
    assert decide(()) == (None, "no norm of the catalogue applies", None)


def test_abstention_when_no_norm_applies(reasoner: CIReasoner) -> None:
    result = reasoner.judge("Zz.", Flow.of(information_type="protected health information"))
    if result.verdict is None:
        assert result.rule == "no norm of the catalogue applies" and result.deciding is None
    assert result.applicability.applicable


def test_judgments_are_deterministic_and_explained(reasoner: CIReasoner) -> None:
    text = (
        "A hospital sent a patient's full psychiatric record to the patient's employer after"
        " the HR manager asked by phone. The patient had not signed any authorization."
    )
    first, second = reasoner.judge(text), reasoner.judge(text)
    assert first.as_dict() == second.as_dict()
    data = json.loads(json.dumps(first.as_dict()))
    assert set(data) == {"verdict", "rule", "deciding", "applicability", "candidates", "parties"}
    assert first.explanation().startswith("verdict: ")


# -- the method and the CLI ----------------------------------------------------------------
def test_the_method_needs_no_model() -> None:
    require_data()
    from privacy_ci.judging import Event, build_method

    method = build_method("ci-reasoner", None)
    judgment = asyncio.run(
        method.judge(
            Event(
                "Dr. Smith sent the records to Dr. Brown.", flow=Flow.of(information_type=RECORDS)
            )
        )
    )
    assert judgment.backend == "model-free" and judgment.steps[0].name == "reason"
    assert judgment.steps[0].parsed["applicability"]["applicable"] is True
    identity = method.identity()
    assert identity.client is None and identity.settings is None and identity.knowledge_base


def test_judge_cli_with_ci_options(tmp_path: Path) -> None:
    require_data()
    from privacy_ci.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "judge",
            "The clinic sent the patient's records to her insurer. She signed a written authorization.",
            "--method",
            "ci-reasoner",
            "--sender",
            "Doctor",
            "--info",
            "medical records",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backend"] == "model-free" and data["usage"] is None
    assert data["event"]["flow"]["sender"]["role"] == "Doctor"
    assert data["reasoning"]["applicability"]["applicable"] is True
    text = CliRunner().invoke(
        app,
        [
            "judge",
            "The clinic sent the records.",
            "--method",
            "ci-reasoner",
            "--info",
            "medical records",
        ],
    )
    assert text.exit_code == 0 and "applicability" in text.stdout
    bad = CliRunner().invoke(
        app, ["judge", "x", "--method", "ci-reasoner", "--retriever", "bm25-plus"]
    )
    assert bad.exit_code == 2 and "retrieves no regulations" in bad.output
