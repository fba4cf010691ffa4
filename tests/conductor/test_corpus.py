"""The Riverside Medical Clinic corpus reproduces section V-A, Table VI and Table X."""

from __future__ import annotations

import json
from collections import Counter

from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import TABLE_VI, Corpus, FlowClass, Gate
from privacy_ci.conductor._analysis import enumerate_flows, inert_field_control

TABLE_X = {
    "clinical_standard": {
        "lab report": 8,
        "prescription": 8,
        "clinical note": 7,
        "referral letter": 6,
        "discharge summary": 5,
        "radiology report": 5,
    },
    "financial": {
        "insurance claim": 8,
        "billing statement": 6,
        "explanation of benefits": 4,
        "insurance verification": 4,
        "prior authorization": 3,
    },
    "employment": {
        "salary letter": 6,
        "employment contract": 5,
        "performance review": 4,
        "credentialing file": 3,
        "contractor agreement": 3,
    },
    "clinical_sensitive": {
        "mental health assessment": 5,
        "clinical note": 3,
        "prior authorization": 2,
    },
    "internal": {"meeting agenda": 3, "policy memo": 3, "staff schedule": 3},
    "public": {"public pamphlet": 1},
}

runner = CliRunner()


def test_agents(corpus: Corpus) -> None:
    roles = Counter(a.role for a in corpus.agents)
    assert roles == {
        "Patient": 10,
        "Doctor": 4,
        "Nurse": 4,
        "Billing Specialist": 2,
        "HR Manager": 2,
        "IT Contractor": 2,
    }


def test_table_x_tiers_and_types(corpus: Corpus) -> None:
    got: dict[str, Counter[str]] = {}
    for lab in corpus.labels:
        got.setdefault(lab.sensitivity_tier.value, Counter())[lab.document_type] += 1
    assert {t: dict(c) for t, c in got.items()} == TABLE_X
    assert len(corpus.labels) == 105
    assert len({lab.document_type for lab in corpus.labels}) == 21


def test_contexts_acls_and_extra_sensitive(corpus: Corpus) -> None:
    contexts = Counter(lab.originating_context for lab in corpus.labels)
    assert contexts == {"Medical": 47, "Administrative": 27, "HR": 21, "Internal": 9, "Public": 1}
    assert len({lab.permitted_receiver_roles for lab in corpus.labels}) == 9
    extra = [lab for lab in corpus.labels if lab.extra_sensitive]
    assert len(extra) == 10
    assert all(lab.sensitivity_tier.value == "clinical_sensitive" for lab in extra)
    assert all(lab.permitted_receiver_roles == {"Doctor"} for lab in extra)
    assert all(lab.extra_sensitive_reason for lab in extra)
    # pii_basic is the one tier the corpus does not use (section V-A)
    assert "pii_basic" not in {lab.sensitivity_tier.value for lab in corpus.labels}


def test_table_vi_exactly(corpus: Corpus) -> None:
    table = enumerate_flows(corpus)
    assert len(table.records) == 2520
    assert dict(table.by_class) == TABLE_VI
    assert (table.permits, table.denies) == (259, 2261)
    assert not table.disagreements
    # within every class and every tier the gate's decision is the class's expectation
    for rec in table.records:
        assert rec.decision.permitted == rec.flow_class.expected_permit
    assert table.matches_table_vi()


def test_batch_gate_agrees_on_every_flow(corpus: Corpus, gate: Gate) -> None:
    labels = list(corpus.labels)
    compiled = gate.compile(labels)
    for requester in corpus.requesters():
        batch = gate.decide_batch(requester, compiled)
        single = [gate.decide(requester, lab) for lab in labels]
        assert [batch[i] for i in range(len(labels))] == single


def test_inert_field_control(corpus: Corpus) -> None:
    result = inert_field_control(corpus)
    assert result.flows == 2520 and result.changed == 0
    assert result.permits_before == result.permits_after == 259


def test_flipping_the_acl_does_change_decisions(corpus: Corpus) -> None:
    """The control can fail: a deciding field does move decisions."""
    labels = [
        lab.model_copy(update={"permitted_receiver_roles": frozenset({"Doctor"})})
        for lab in corpus.labels
    ]
    assert enumerate_flows(corpus, labels=labels).permits != 259


def test_cli_flows_json() -> None:
    result = runner.invoke(app, ["conductor", "flows", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {k: v["n"] for k, v in data["classes"].items()} == {
        c.value: n for c, n in TABLE_VI.items()
    }
    assert (data["permit"], data["deny"]) == (259, 2261)
    assert data["agreement"]["disagree"] == 0 and data["matches_table_vi"] is True
    assert set(data["tiers"]) == set(TABLE_X)


def test_cli_flows_table() -> None:
    result = runner.invoke(app, ["conductor", "flows"])
    assert result.exit_code == 0
    assert "1,620" in result.output and "matches Table VI" in result.output


def test_cli_decide_examples() -> None:
    def decide(*args: str) -> dict[str, object]:
        res = runner.invoke(app, ["conductor", "decide", *args, "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)  # type: ignore[no-any-return]

    ok = decide("--agent", "D01", "--doc", "RMC-LAB-001")
    assert (ok["decision"], ok["rule"], ok["flow_class"]) == ("permit", "permit", "F1")
    assert set(ok["flow"]) >= {
        "sender",
        "recipient",
        "subject",
        "information_type",  # type: ignore[arg-type]
        "transmission_principle",
    }
    miss = decide("--agent", "D02", "--doc", "RMC-LAB-001")
    assert (miss["decision"], miss["rule"], miss["flow_class"]) == (
        "deny",
        "assignment_required",
        "F3",
    )
    ctx = decide("--agent", "D01", "--doc", "RMC-LAB-001", "--context", "Administrative")
    assert ctx["rule"] == "role_not_authoritative_in_context"
    assert ctx["flow_class"] == FlowClass.INVALID.value


def test_cli_decide_unknown_ids_are_one_line_errors() -> None:
    res = runner.invoke(app, ["conductor", "decide", "--agent", "ZZZ", "--doc", "RMC-LAB-001"])
    assert res.exit_code == 2
    assert "unknown agent 'ZZZ'" in res.output
    res = runner.invoke(app, ["conductor", "decide", "--agent", "D01", "--doc", "NOPE"])
    assert res.exit_code == 2 and "unknown document 'NOPE'" in res.output


def test_cli_controls_and_validate() -> None:
    res = runner.invoke(app, ["conductor", "controls", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["decisions_changed"] == 0
    res = runner.invoke(app, ["conductor", "validate", "--json"])
    assert res.exit_code == 0
    assert json.loads(res.output)["distinct_acls"] == 9


def test_cli_show_and_documents(tmp_path: object) -> None:
    from pathlib import Path

    res = runner.invoke(app, ["conductor", "show", "RMC-MHA-001", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["label"]["extra_sensitive"] is True
    assert "Riverside Medical Clinic" in data["content"]
    out = Path(str(tmp_path)) / "docs"
    res = runner.invoke(app, ["conductor", "documents", "--out", str(out), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["documents"] == 105
    assert len(list(out.glob("*.txt"))) == 105
