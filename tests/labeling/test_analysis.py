"""Tables VII-IX, attribution and controls against expectations computed here, by
brute force with `Gate.decide` over every (agent, document) flow."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privacy_ci.conductor import Corpus, Gate, Label, SensitivityTier
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling import (
    LabelingReport,
    LabelingRun,
    LabelRecord,
    ProposedLabel,
    analyze_run,
    run_from_labels,
)
from privacy_ci.labeling._report import markdown_report

from . import relabeled

Flow = tuple[str, str]
CLINICAL = SensitivityTier.CLINICAL_STANDARD


# -- brute force, independent of privacy_ci.labeling ---------------------------------------
def decide_all(corpus: Corpus, gate: Gate, labels: Iterable[Label | None]) -> dict[Flow, bool]:
    """Every flow's decision; a document without a label (None) is denied to everyone."""
    by_id: dict[str, Label | None] = dict.fromkeys(corpus.labels.ids)
    for lab in labels:
        if lab is not None:
            by_id[lab.doc_id] = lab
    return {
        (r.id, doc_id): lab is not None and gate.decide(r, lab).permitted
        for r in corpus.requesters()
        for doc_id, lab in by_id.items()
    }


@pytest.fixture(scope="module")
def authored(corpus: Corpus, gate: Gate) -> dict[Flow, bool]:
    decisions = decide_all(corpus, gate, corpus.labels)
    assert sum(decisions.values()) == 259 and len(decisions) == 2520
    return decisions


def pv_ob(authored: dict[Flow, bool], decisions: dict[Flow, bool]) -> tuple[set[Flow], set[Flow]]:
    pv = {f for f, ok in decisions.items() if ok and not authored[f]}
    ob = {f for f, ok in decisions.items() if not ok and authored[f]}
    return pv, ob


def report_of(corpus: Corpus, *draws: Sequence[Label], name: str = "test") -> LabelingReport:
    return analyze_run(run_from_labels(list(draws), name=name), corpus)


def add_role(role: str, tier: SensitivityTier = CLINICAL) -> Callable[[Label], Any]:
    def change(label: Label) -> dict[str, Any] | None:
        if label.sensitivity_tier is not tier or role in label.permitted_receiver_roles:
            return None
        return {"permitted_receiver_roles": label.permitted_receiver_roles | {role}}

    return change


def drop_role(role: str, tier: SensitivityTier = CLINICAL) -> Callable[[Label], Any]:
    def change(label: Label) -> dict[str, Any] | None:
        if label.sensitivity_tier is not tier or role not in label.permitted_receiver_roles:
            return None
        return {"permitted_receiver_roles": label.permitted_receiver_roles - {role}}

    return change


def changed(corpus: Corpus, labels: Sequence[Label]) -> list[str]:
    return [lab.doc_id for lab in labels if lab != corpus.label(lab.doc_id)]


# -- Table VII -----------------------------------------------------------------------------
def test_the_authored_labels_as_a_draw_change_nothing(corpus: Corpus) -> None:
    report = report_of(corpus, list(corpus.labels))
    c = report.conformance
    assert (c.privacy_violations, c.over_blocks, c.permits) == (0, 0, 259)
    assert (c.tier_conforming, c.acl_conforming, c.failures) == (105, 105, 0)
    assert (report.flows, report.authored_permits, report.authored_denies) == (2520, 259, 2261)
    assert report.stability is None and report.ensemble is None  # one draw
    assert report.test_double is False and report.backend == "label files"


def test_a_role_added_to_every_clinical_acl(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    """Billing specialists are assigned to patients, so granting them clinical records
    releases the records of their own patients: violations the gate now permits."""
    labels = relabeled(corpus, add_role("Billing Specialist"))
    assert len(changed(corpus, labels)) == 39
    pv, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    assert len(pv) > 0 and not ob
    assert {agent[0] for agent, _ in pv} == {"B"}  # only billing agents gain access
    report = report_of(corpus, labels)
    c = report.conformance
    assert (c.privacy_violations, c.over_blocks) == (len(pv), 0)
    assert (c.tier_conforming, c.acl_conforming) == (105, 105 - 39)
    assert (c.roles_added, c.roles_omitted, c.over_under) == (39, 0, None)
    assert c.permits == 259 + len(pv)
    assert report.attribution == {
        "privacy_violations": {"permitted_receiver_roles": len(pv)},
        "over_blocks": {},
    }


def test_an_added_role_without_assignments_releases_nothing(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    """IT contractors hold no assignment, so under an assignment-requiring tier the
    added role is an ACL error (O:U counts it) that no flow shows (section V-E)."""
    labels = relabeled(corpus, add_role("IT Contractor"))
    pv, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    assert not pv and not ob
    c = report_of(corpus, labels).conformance
    assert (c.privacy_violations, c.over_blocks, c.permits) == (0, 0, 259)
    assert (c.acl_conforming, c.roles_added) == (66, 39)


def test_a_role_removed_is_over_blocks(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    labels = relabeled(corpus, drop_role("Nurse"))
    removed = len(changed(corpus, labels))
    assert removed == 33
    pv, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    assert not pv and len(ob) > 0
    assert all(agent.startswith("N") for agent, _ in ob)
    report = report_of(corpus, labels)
    c = report.conformance
    assert (c.privacy_violations, c.over_blocks) == (0, len(ob))
    assert (c.roles_added, c.roles_omitted, c.over_under) == (0, removed, 0.0)
    assert c.permits == 259 - len(ob)
    assert report.attribution == {
        "privacy_violations": {},
        "over_blocks": {"permitted_receiver_roles": len(ob)},
    }


def test_over_under_ratio_is_exact(corpus: Corpus, gate: Gate, authored: dict[Flow, bool]) -> None:
    added = omitted = 0

    def change(label: Label) -> dict[str, Any] | None:
        nonlocal added, omitted
        acl = set(label.permitted_receiver_roles)
        if label.sensitivity_tier is CLINICAL:
            acl.add("Billing Specialist")  # never authored on clinical records
            added += 1
            if "Nurse" in acl:
                acl.discard("Nurse")
                omitted += 1
        if label.sensitivity_tier is SensitivityTier.EMPLOYMENT:
            acl |= {"Doctor", "Nurse"} - acl
            added += 2 if "Doctor" not in label.permitted_receiver_roles else 1
        return {"permitted_receiver_roles": frozenset(acl)}

    labels = relabeled(corpus, change)
    assert (added, omitted) == (39 + 18 * 2 + 3, 33)
    pv, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    c = report_of(corpus, labels).conformance
    assert (c.roles_added, c.roles_omitted) == (added, omitted)
    assert c.over_under == added / omitted
    assert c.as_dict()["over_under"] == round(added / omitted, 2) == 2.36
    assert (c.privacy_violations, c.over_blocks) == (len(pv), len(ob))
    assert c.acl_conforming == 105 - 39 - 21


def test_tier_changes_count_and_induce_violations_of_their_own(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    to_internal = {"RMC-LAB-001", "RMC-RX-002", "RMC-RAD-003"}

    def change(label: Label) -> dict[str, Any] | None:
        if label.doc_id in to_internal:
            return {"sensitivity_tier": SensitivityTier.INTERNAL}
        if label.sensitivity_tier is SensitivityTier.FINANCIAL:
            # same assignment rule as financial: no decision changes
            return {"sensitivity_tier": SensitivityTier.PII_BASIC}
        return None

    labels = relabeled(corpus, change)
    pv, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    assert pv and not ob
    assert {doc for _, doc in pv} == to_internal
    assert {agent[0] for agent, _ in pv} <= {"D", "N"}  # care staff not assigned to them
    report = report_of(corpus, labels)
    c = report.conformance
    assert (c.tier_conforming, c.acl_conforming) == (105 - 3 - 25, 105)
    assert (c.privacy_violations, c.over_blocks) == (len(pv), 0)
    assert report.attribution["privacy_violations"] == {"sensitivity_tier": len(pv)}
    # generation-cue control: conformance within each authored tier
    cue = report.tier_cue
    assert cue["clinical_standard"] == {
        "documents": 39,
        "conforming": 36,
        "tier_conformance": 0.9231,
    }
    assert cue["financial"] == {"documents": 25, "conforming": 0, "tier_conformance": 0.0}
    for tier in ("employment", "clinical_sensitive", "internal", "public"):
        assert cue[tier]["conforming"] == cue[tier]["documents"]
    assert sum(row["documents"] for row in cue.values()) == 105


def test_attribution_credits_every_field_that_alone_restores_the_decision(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    """A clinical record relabeled `internal` and granted to IT contractors: the
    contractors' flows are undone by either field, the unassigned clinicians' by the
    tier alone."""
    doc = corpus.label("RMC-LAB-002")
    wrong = doc.model_copy(
        update={
            "sensitivity_tier": SensitivityTier.INTERNAL,
            "permitted_receiver_roles": doc.permitted_receiver_roles | {"IT Contractor"},
        }
    )
    labels = [wrong if lab.doc_id == doc.doc_id else lab for lab in corpus.labels]
    pv, _ = pv_ob(authored, decide_all(corpus, gate, labels))
    requesters = {r.id: r for r in corpus.requesters()}
    tier_back = wrong.model_copy(update={"sensitivity_tier": doc.sensitivity_tier})
    acl_back = wrong.model_copy(update={"permitted_receiver_roles": doc.permitted_receiver_roles})
    by_tier = sum(not gate.decide(requesters[a], tier_back).permitted for a, _ in pv)
    by_acl = sum(not gate.decide(requesters[a], acl_back).permitted for a, _ in pv)
    assert by_tier == len(pv) and by_acl == 2 and len(pv) > 2  # T01, T02
    report = report_of(corpus, labels)
    assert report.attribution["privacy_violations"] == {
        "sensitivity_tier": by_tier,
        "permitted_receiver_roles": by_acl,
    }


def test_a_failed_label_denies_its_document(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    failed = "RMC-PUB-001"  # public: permitted to all 24 agents
    records = [
        LabelRecord(
            lab.doc_id,
            1,
            None if lab.doc_id == failed else ProposedLabel.of(lab),
            "output does not fit the label schema: x" if lab.doc_id == failed else None,
            (),
            "scripted-test-double:scripted",
        )
        for lab in corpus.labels
    ]
    run = LabelingRun(
        None, {"name": "f", "backend": "scripted-test-double:scripted", "draws": 1}, records
    )
    labels = [lab for lab in corpus.labels if lab.doc_id != failed]
    pv, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    assert not pv and len(ob) == 24
    report = analyze_run(run, corpus)
    c = report.conformance
    assert (c.failures, c.privacy_violations, c.over_blocks) == (1, 0, 24)
    assert (c.tier_conforming, c.acl_conforming) == (104, 104)  # a failure conforms to nothing
    assert report.attribution["over_blocks"] == {"label failed": 24}
    assert report.failures == [
        {"doc_id": failed, "draw": 1, "failure": "output does not fit the label schema: x"}
    ]
    assert report.tier_cue["public"]["conforming"] == 0
    assert report.test_double is True
    # the failure is never replaced by the authored label, in the inert control either
    assert report.inert_field["permits_before"] == report.inert_field["permits_after"] == 235


# -- Tables VIII and IX ---------------------------------------------------------------------
def test_stability_across_two_draws(corpus: Corpus, gate: Gate, authored: dict[Flow, bool]) -> None:
    acl_changes = {
        "RMC-LAB-001": frozenset({"Doctor", "Nurse", "Billing Specialist"}),
        "RMC-LAB-002": frozenset({"Doctor", "Nurse", "Patient"}),
        "RMC-LAB-003": frozenset({"Doctor"}),
    }
    flipped = {"RMC-CLM-001", "RMC-SAL-001"}  # extra_sensitive only: no decision moves

    def change(label: Label) -> dict[str, Any] | None:
        if label.doc_id in acl_changes:
            return {"permitted_receiver_roles": acl_changes[label.doc_id]}
        if label.doc_id in flipped:
            return {"extra_sensitive": True, "extra_sensitive_reason": "model said so"}
        return None

    first, second = list(corpus.labels), relabeled(corpus, change)
    d1 = decide_all(corpus, gate, first)
    d2 = decide_all(corpus, gate, second)
    unstable = {f for f in d1 if d1[f] != d2[f]}
    uud = {f for f in unstable if not authored[f]}
    pv2, ob2 = pv_ob(authored, d2)
    assert uud and unstable - uud  # both kinds present
    report = report_of(corpus, first, second)
    s = report.stability
    assert s is not None
    assert (s.draws, s.documents) == (2, 105)
    assert (s.tier_unanimous, s.acl_unanimous, s.all_unanimous) == (105, 102, 100)
    assert (s.unstable_flows, s.unstable_denied) == (len(unstable), len(uud))
    assert s.violations_per_draw == (0, len(pv2))
    assert s.over_blocks_per_draw == (0, len(ob2))
    d = s.as_dict()
    assert d["acl_stability"] == round(102 / 105, 4) and d["tier_stability"] == 1.0
    assert d["unstable_unauthorized_disclosures"] == len(uud)


def test_a_failed_draw_breaks_unanimity(corpus: Corpus) -> None:
    second = [lab for lab in corpus.labels if lab.doc_id != "RMC-LAB-001"]
    run = run_from_labels([list(corpus.labels), second])
    with pytest.raises(
        PrivacyCIError, match=r"lacks 1 of 210 labels \(e.g. document RMC-LAB-001\)"
    ):
        analyze_run(run, corpus)
    s = analyze_run(run, corpus, allow_partial=True).stability
    assert s is not None and (s.tier_unanimous, s.acl_unanimous, s.all_unanimous) == (104, 104, 104)


def test_table_ix_and_the_majority_vote(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    two = {"RMC-LAB-001", "RMC-LAB-005"}
    five = two | {"RMC-RX-001", "RMC-CN-002", "RMC-REF-004"}
    grant = add_role("Billing Specialist")

    def on(docs: set[str]) -> list[Label]:
        return relabeled(corpus, lambda lab: grant(lab) if lab.doc_id in docs else None)

    draws = [list(corpus.labels), on(two), on(five)]
    pv = [len(pv_ob(authored, decide_all(corpus, gate, d))[0]) for d in draws]
    assert pv[0] == 0 < pv[1] < pv[2]
    report = report_of(corpus, *draws, name="three")
    s = report.stability
    assert s is not None and s.violations_per_draw == tuple(pv)
    d = s.as_dict()
    assert (d["violations_min"], d["violations_max"], d["violations_range"]) == (0, pv[2], pv[2])
    assert [c.privacy_violations for c in report.per_draw] == pv
    # per document, the vote keeps what two of three draws say: the `two` documents
    # are granted (draws 2 and 3), the rest of `five` are not (draws 1 and 2)
    assert report.ensemble is not None
    assert report.ensemble.as_dict() == report.per_draw[1].as_dict()
    markdown = markdown_report([report])
    assert f"| three | 0 | {pv[1]} | {pv[2]} | 0 | {pv[2]} | {pv[2]} | {pv[1]} |" in markdown


def test_the_majority_is_not_the_first_draw(corpus: Corpus) -> None:
    a = relabeled(corpus, add_role("Billing Specialist"))
    b = relabeled(corpus, drop_role("Nurse"))
    report = report_of(corpus, b, a, a)
    assert report.ensemble is not None
    assert report.ensemble.as_dict() == report.per_draw[1].as_dict()
    assert report.ensemble.as_dict() != report.per_draw[0].as_dict()
    assert report.conformance == report.per_draw[0]  # Table VII is draw 1


# -- controls -----------------------------------------------------------------------------
def test_inverting_extra_sensitive_changes_no_decision(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    labels = relabeled(corpus, add_role("Billing Specialist"))
    inverted = [
        lab.model_copy(
            update={
                "extra_sensitive": not lab.extra_sensitive,
                "extra_sensitive_reason": None if lab.extra_sensitive else "inverted",
            }
        )
        for lab in labels
    ]
    before = decide_all(corpus, gate, labels)
    assert decide_all(corpus, gate, inverted) == before  # the gate ignores the field
    report = report_of(corpus, labels)
    assert report.inert_field == {
        "field": "extra_sensitive",
        "flows": 2520,
        "decisions_changed": 0,
        "permits_before": sum(before.values()),
        "permits_after": sum(before.values()),
    }
    assert sum(before.values()) > 259
    authored_report = report_of(corpus, list(corpus.labels))
    assert authored_report.inert_field["permits_after"] == 259


# -- refusals ------------------------------------------------------------------------------
def test_an_unfinished_run_is_refused_unless_partial(
    corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    missing = "RMC-MHA-002"
    labels = [lab for lab in corpus.labels if lab.doc_id != missing]
    run = run_from_labels([labels])
    with pytest.raises(
        PrivacyCIError, match=rf"lacks 1 of 105 labels \(e.g. document {missing}\); pass --partial"
    ):
        analyze_run(run, corpus)
    report = analyze_run(run, corpus, allow_partial=True)
    _, ob = pv_ob(authored, decide_all(corpus, gate, labels))
    assert report.conformance.failures == 1
    assert report.conformance.over_blocks == len(ob) > 0


def test_a_run_labeling_documents_the_corpus_lacks_is_refused(corpus: Corpus) -> None:
    labels = [
        *list(corpus.labels),
        corpus.label("RMC-LAB-001").model_copy(update={"doc_id": "X-1"}),
    ]
    with pytest.raises(PrivacyCIError, match="documents the corpus lacks: X-1"):
        analyze_run(run_from_labels([labels]), corpus, allow_partial=True)


def test_the_markdown_report_names_a_test_double(corpus: Corpus) -> None:
    records = [
        LabelRecord(lab.doc_id, 1, ProposedLabel.of(lab), None, (), "scripted-test-double:s")
        for lab in corpus.labels
    ]
    run = LabelingRun(
        None, {"name": "fake", "backend": "scripted-test-double:s", "draws": 1}, records
    )
    text = markdown_report([analyze_run(run, corpus), report_of(corpus, list(corpus.labels))])
    assert (
        "| fake | scripted-test-double:s (test double, not a model) | 100% | 100% | 0 | 0 |" in text
    )
    assert "| test | label files | 100% | 100% | 0 | 0 |" in text
    assert "259 permit / 2261 deny of 2,520 flows" in text
    assert "Table VIII" not in text  # one draw each


# -- against brute force, on random relabelings ----------------------------------------------
TIERS = list(SensitivityTier)
ROLES = ["Doctor", "Nurse", "Billing Specialist", "HR Manager", "IT Contractor", "Patient"]


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_relabelings_match_brute_force(
    data: st.DataObject, corpus: Corpus, gate: Gate, authored: dict[Flow, bool]
) -> None:
    labels = []
    added = omitted = tiers = acls = 0
    for lab in corpus.labels:
        if data.draw(st.integers(0, 3)) == 0:
            tier = data.draw(st.sampled_from(TIERS))
            acl = frozenset(data.draw(st.sets(st.sampled_from(ROLES))))
            lab = lab.model_copy(update={"sensitivity_tier": tier, "permitted_receiver_roles": acl})
        original = corpus.label(lab.doc_id)
        tiers += lab.sensitivity_tier == original.sensitivity_tier
        acls += lab.permitted_receiver_roles == original.permitted_receiver_roles
        added += len(lab.permitted_receiver_roles - original.permitted_receiver_roles)
        omitted += len(original.permitted_receiver_roles - lab.permitted_receiver_roles)
        labels.append(lab)
    decisions = decide_all(corpus, gate, labels)
    pv, ob = pv_ob(authored, decisions)
    c = report_of(corpus, labels).conformance
    assert (c.privacy_violations, c.over_blocks, c.permits) == (
        len(pv),
        len(ob),
        sum(decisions.values()),
    )
    assert (c.tier_conforming, c.acl_conforming) == (tiers, acls)
    assert (c.roles_added, c.roles_omitted) == (added, omitted)
