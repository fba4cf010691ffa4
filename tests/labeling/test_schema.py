"""`parse_proposed` checks a model's label strictly; `substitute` puts it in place of
the annotator's fields and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Gate, Label, SensitivityTier
from privacy_ci.labeling import LabelOutputError, ProposedLabel, parse_proposed, substitute

GOOD: dict[str, Any] = {
    "sensitivity_tier": "clinical_standard",
    "permitted_receiver_roles": ["Doctor", "Nurse"],
    "extra_sensitive": False,
    "governing_principle": "  treatment: results go to the care team ",
}


def test_a_valid_label(corpus: Corpus) -> None:
    got = parse_proposed(dict(GOOD), corpus.policy)
    assert got == ProposedLabel(
        SensitivityTier.CLINICAL_STANDARD,
        frozenset({"Doctor", "Nurse"}),
        False,
        "treatment: results go to the care team",
    )
    assert got.as_dict()["permitted_receiver_roles"] == ["Doctor", "Nurse"]
    empty_acl = parse_proposed({**GOOD, "permitted_receiver_roles": []}, corpus.policy)
    assert empty_acl.permitted_receiver_roles == frozenset()  # deny everyone: valid


def test_every_authored_label_parses_as_itself(corpus: Corpus) -> None:
    for label in corpus.labels:
        proposed = ProposedLabel.of(label)
        assert parse_proposed(proposed.as_dict(), corpus.policy) == proposed


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["clinical_standard"], "expected a JSON object, got list"),
        ("clinical_standard", "expected a JSON object, got str"),
        (None, "expected a JSON object, got NoneType"),
        (
            {k: v for k, v in GOOD.items() if k != "extra_sensitive"},
            "missing field(s): extra_sensitive",
        ),
        ({}, "missing field(s): sensitivity_tier, permitted_receiver_roles"),
        ({**GOOD, "subject": "P01"}, "unknown field(s): subject"),
        (
            {**GOOD, "sensitivity_tier": "secret"},
            "sensitivity_tier: got 'secret', expected one of public, internal",
        ),
        (
            {**GOOD, "sensitivity_tier": "Clinical_Standard"},
            "sensitivity_tier: got 'Clinical_Standard'",
        ),
        ({**GOOD, "sensitivity_tier": 3}, "sensitivity_tier: got 3"),
        (
            {**GOOD, "permitted_receiver_roles": ["Doctor", "Janitor"]},
            "'Janitor' is not a role of the policy",
        ),
        ({**GOOD, "permitted_receiver_roles": ["doctor"]}, "'doctor' is not a role of the policy"),
        ({**GOOD, "permitted_receiver_roles": ["Doctor", "Doctor"]}, "'Doctor' is listed twice"),
        (
            {**GOOD, "permitted_receiver_roles": "Doctor, Nurse"},
            "permitted_receiver_roles: expected a list, got str",
        ),
        (
            {**GOOD, "permitted_receiver_roles": "Doctor"},
            "permitted_receiver_roles: expected a list, got str",
        ),
        ({**GOOD, "permitted_receiver_roles": ["*"]}, "wildcard"),
        ({**GOOD, "permitted_receiver_roles": ["all"]}, "wildcard"),
        ({**GOOD, "permitted_receiver_roles": ["Doctor, Nurse"]}, "several roles in one string"),
        ({**GOOD, "permitted_receiver_roles": [" Doctor"]}, "whitespace"),
        ({**GOOD, "permitted_receiver_roles": [1]}, "a role must be a string"),
        (
            {**GOOD, "extra_sensitive": "false"},
            "extra_sensitive: expected true or false, got 'false'",
        ),
        ({**GOOD, "extra_sensitive": 0}, "extra_sensitive: expected true or false, got 0"),
        ({**GOOD, "extra_sensitive": None}, "extra_sensitive: expected true or false"),
        ({**GOOD, "governing_principle": ""}, "governing_principle: expected a non-empty string"),
        (
            {**GOOD, "governing_principle": "   "},
            "governing_principle: expected a non-empty string",
        ),
        ({**GOOD, "governing_principle": 7}, "governing_principle: expected a non-empty string"),
    ],
)
def test_malformed_output_is_an_error_naming_the_field(
    data: object, message: str, corpus: Corpus
) -> None:
    with pytest.raises(LabelOutputError) as info:
        parse_proposed(data, corpus.policy)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_error_lists_the_allowed_values(corpus: Corpus) -> None:
    with pytest.raises(LabelOutputError) as tier:
        parse_proposed({**GOOD, "sensitivity_tier": "secret"}, corpus.policy)
    assert all(t.value in str(tier.value) for t in SensitivityTier)
    with pytest.raises(LabelOutputError) as role:
        parse_proposed({**GOOD, "permitted_receiver_roles": ["Janitor"]}, corpus.policy)
    assert all(r in str(role.value) for r in corpus.policy.roles)


def test_substitute_replaces_the_four_fields_only(corpus: Corpus) -> None:
    authored = corpus.label("RMC-LAB-001")
    proposed = ProposedLabel(
        SensitivityTier.FINANCIAL, frozenset({"Billing Specialist"}), True, "billing"
    )
    got = substitute(authored, proposed, corpus.policy)
    assert ProposedLabel.of(got) == proposed
    for name in (
        "doc_id",
        "title",
        "subject",
        "subject_type",
        "document_type",
        "originating_context",
        "pii_attributes",
        "implied_attributes",
    ):
        assert getattr(got, name) == getattr(authored, name), name
    assert got.extra_sensitive_reason == "marked extra-sensitive by the labeler"
    assert got.assignment_required is True  # financial requires an assignment


def test_extra_sensitive_reason_follows_the_flag(corpus: Corpus) -> None:
    mha = corpus.label("RMC-MHA-001")
    assert mha.extra_sensitive and mha.extra_sensitive_reason
    kept = substitute(mha, ProposedLabel.of(mha), corpus.policy)
    assert kept == mha  # the authored label substituted by itself is itself
    cleared = substitute(
        mha,
        ProposedLabel(mha.sensitivity_tier, mha.permitted_receiver_roles, False, "x"),
        corpus.policy,
    )
    assert cleared.extra_sensitive is False and cleared.extra_sensitive_reason is None


def test_every_authored_label_substituted_by_itself_is_unchanged(corpus: Corpus) -> None:
    for label in corpus.labels:
        assert substitute(label, ProposedLabel.of(label), corpus.policy) == label


@pytest.mark.parametrize(
    ("doc_id", "tier", "required"),
    [
        ("RMC-LAB-001", SensitivityTier.INTERNAL, False),
        ("RMC-LAB-001", SensitivityTier.PUBLIC, False),
        ("RMC-LAB-001", SensitivityTier.PII_BASIC, True),
        ("RMC-MEM-001", SensitivityTier.CLINICAL_STANDARD, False),  # no subject to assign
        ("RMC-MEM-001", SensitivityTier.INTERNAL, False),
    ],
)
def test_assignment_required_follows_the_policy_for_the_new_tier(
    doc_id: str, tier: SensitivityTier, required: bool, corpus: Corpus
) -> None:
    authored = corpus.label(doc_id)
    proposed = ProposedLabel(tier, authored.permitted_receiver_roles, False, "p")
    assert substitute(authored, proposed, corpus.policy).assignment_required is required


def test_a_relabeled_tier_is_a_real_induced_violation(corpus: Corpus, gate: Gate) -> None:
    """A clinical record relabeled `internal` reaches a doctor who is not caring for
    the patient: the gate applies the substituted tier's (absent) assignment rule."""
    authored = corpus.label("RMC-LAB-001")  # about P01, ACL Doctor and Nurse
    doctor = corpus.requester("D02")  # a Doctor not assigned to P01
    assert "P01" not in doctor.assignments
    assert not gate.decide(doctor, authored).permitted
    assigned = corpus.requester("D01")
    assert gate.decide(assigned, authored).permitted
    relabeled = substitute(
        authored,
        ProposedLabel(SensitivityTier.INTERNAL, authored.permitted_receiver_roles, False, "memo"),
        corpus.policy,
    )
    assert relabeled.assignment_required is False
    decision = gate.decide(doctor, relabeled)
    assert decision.permitted and decision.rule.key == "permit"
    # the same ACL under the authored tier again: denied for want of an assignment
    back = substitute(relabeled, ProposedLabel.of(authored), corpus.policy)
    assert back.assignment_required is True
    assert gate.decide(doctor, back).rule.key == "assignment_required"


def test_a_tier_the_policy_lacks_is_an_error(corpus: Corpus) -> None:
    tiers = {t: r for t, r in corpus.policy.tiers.items() if t is not SensitivityTier.PII_BASIC}
    policy = corpus.policy.model_copy(update={"tiers": tiers})
    authored: Label = corpus.label("RMC-LAB-001")
    with pytest.raises(LabelOutputError, match="'pii_basic' is not a tier of the policy"):
        substitute(
            authored,
            ProposedLabel(SensitivityTier.PII_BASIC, frozenset({"Doctor"}), False, "p"),
            policy,
        )
