"""Algorithm 1, checked rule by rule and over the whole decision space against an
independently written specification predicate."""

from __future__ import annotations

import inspect
import itertools

import pytest

from privacy_ci.conductor import (
    Corpus,
    Decision,
    Effect,
    Gate,
    Label,
    Requester,
    Rule,
    SensitivityTier,
)

ROLES = ("Doctor", "Nurse", "Billing Specialist", "HR Manager", "IT Contractor", "Patient")
AUTH = {
    "Doctor": "Medical",
    "Nurse": "Medical",
    "Billing Specialist": "Administrative",
    "HR Manager": "HR",
    "IT Contractor": "Administrative",
    "Patient": "Patient",
}
NEEDS = {
    "public": False,
    "internal": False,
    "pii_basic": True,
    "clinical_standard": True,
    "clinical_sensitive": True,
    "financial": True,
    "employment": True,
}


def spec(
    active: str | None,
    held: frozenset[str],
    ctx: str | None,
    tier: str,
    acl: frozenset[str],
    subject: str | None,
    assigned: bool,
) -> str:
    """The specification of Algorithm 1, written from the paper without the gate's code."""
    if active is None or active not in held:
        return "no_active_role"
    if active not in AUTH or AUTH[active] != ctx:
        return "role_not_authoritative_in_context"
    if tier not in NEEDS or any(r not in AUTH for r in acl):
        return "invalid_label"
    if active not in acl:
        return "role_not_permitted"
    if subject is not None and NEEDS[tier] and not assigned:
        return "assignment_required"
    return "permit"


def make_label(tier: str, acl: frozenset[str], subject: str | None) -> Label:
    return Label(
        doc_id="DOC",
        sensitivity_tier=SensitivityTier(tier),
        permitted_receiver_roles=acl,
        subject=subject,
        subject_type="organization" if subject is None else "patient",
        document_type="test",
        extra_sensitive=False,
        governing_principle="test",
        originating_context="Medical",
        assignment_required=subject is not None and NEEDS[tier],
    )


def test_decide_takes_no_request_text() -> None:
    params = list(inspect.signature(Gate.decide).parameters)
    assert params == ["self", "requester", "label"]
    batch = list(inspect.signature(Gate.decide_batch).parameters)
    assert batch == ["self", "requester", "compiled"]


def test_policy_matches_the_spec_tables(corpus: Corpus) -> None:
    assert corpus.policy.authoritative_context == AUTH
    assert {t.value: r.assignment_required for t, r in corpus.policy.tiers.items()} == NEEDS


def test_each_rule_named(gate: Gate, corpus: Corpus) -> None:
    lab = corpus.label("RMC-LAB-001")  # clinical_standard, {Doctor, Nurse}, subject P01
    cases = {
        "no_active_role": Requester(id="x", roles=frozenset({"Doctor"}), active_context="Medical"),
        "role_not_authoritative_in_context": corpus.requester("D01", context="Administrative"),
        "role_not_permitted": corpus.requester("B01"),
        "assignment_required": corpus.requester("D02"),
        "permit": corpus.requester("D01"),
    }
    for rule, requester in cases.items():
        decision = gate.decide(requester, lab)
        assert decision.rule.key == rule
        assert decision.permitted == (rule == "permit")
        assert decision.policy_version == corpus.policy.version
    invalid = lab.model_dump() | {"permitted_receiver_roles": ["Doctor", "Surgeon"]}
    d = gate.decide(corpus.requester("D01"), invalid)
    assert d.rule is Rule.INVALID_LABEL and d.effect is Effect.DENY
    assert any("Surgeon" in e for e in d.errors)


def test_requester_checked_before_any_label_field(gate: Gate, corpus: Corpus) -> None:
    # A broken label is not even looked at when the requester has no valid role.
    broken = {"doc_id": "X"}
    assert gate.decide(corpus.requester("D01", context="HR"), broken).rule is (
        Rule.ROLE_NOT_AUTHORITATIVE
    )
    assert gate.decide(corpus.requester("D01"), broken).rule is Rule.INVALID_LABEL


def test_role_held_but_not_active_is_denied(gate: Gate, corpus: Corpus) -> None:
    lab = corpus.label("RMC-PUB-001")
    held_only = Requester(id="D01", roles=frozenset({"Doctor"}), active_context="Medical")
    assert gate.decide(held_only, lab).rule is Rule.NO_ACTIVE_ROLE
    not_held = Requester(
        id="D01", roles=frozenset({"Nurse"}), active_role="Doctor", active_context="Medical"
    )
    assert gate.decide(not_held, lab).rule is Rule.NO_ACTIVE_ROLE


def test_decisions_are_values_and_deterministic(gate: Gate, corpus: Corpus) -> None:
    r, lab = corpus.requester("N01"), corpus.label("RMC-LAB-001")
    first = gate.decide(r, lab)
    assert all(gate.decide(r, lab) == first for _ in range(1000))
    assert isinstance(first, Decision)
    assert first == Decision(Effect.PERMIT, Rule.PERMIT, corpus.policy.version)


def test_policy_version_changes_with_content(corpus: Corpus) -> None:
    tiers = dict(corpus.policy.tiers)
    tiers[SensitivityTier.INTERNAL] = tiers[SensitivityTier.FINANCIAL]
    other = corpus.policy.model_copy(update={"tiers": tiers})
    assert other.version != corpus.policy.version
    assert (
        Gate(other).decide(corpus.requester("D01"), corpus.label("RMC-PUB-001")).policy_version
        == other.version
    )


ACTIVE = (*ROLES, None, "Surgeon")
CONTEXTS = ("Medical", "Administrative", "HR", "Internal", "Public", "Patient", None, "Finance")
TIERS = tuple(NEEDS)
UNKNOWN_ROLE = "Surgeon"  # not a role of the policy: a label naming it is invalid
ACLS = [
    frozenset(c)
    for n in range(len(ROLES) + 2)
    for c in itertools.combinations((*ROLES, UNKNOWN_ROLE), n)
]


def test_exhaustive_decision_space_against_spec(gate: Gate) -> None:
    """role x context x tier x ACL x assigned x subject, plus held-not-active, vs `spec`."""
    labels = {
        (tier, acl, subj): make_label(tier, acl, subj)
        for tier in TIERS
        for acl in ACLS
        for subj in ("P01", None)
    }
    compiled_keys = list(labels)
    compiled = gate.compile([labels[k] for k in compiled_keys])
    checked = 0
    for active, ctx, assigned, holds in itertools.product(
        ACTIVE, CONTEXTS, (True, False), (True, False)
    ):
        held = frozenset({active}) if (holds and active is not None) else frozenset({"Nurse"})
        requester = Requester(
            id="r",
            roles=held,
            active_role=active,
            active_context=ctx,
            assignments=frozenset({"P01"}) if assigned else frozenset(),
        )
        batch = gate.decide_batch(requester, compiled)
        for i, (tier, acl, subj) in enumerate(compiled_keys):
            want = spec(active, held, ctx, tier, acl, subj, assigned)
            got = gate.decide(requester, labels[(tier, acl, subj)])
            assert got.rule.key == want, (active, ctx, tier, sorted(acl), subj, assigned, holds)
            assert batch[i].rule is got.rule
            assert got.permitted == (want == "permit")
            checked += 1
    assert checked == len(ACTIVE) * len(CONTEXTS) * 4 * len(TIERS) * len(ACLS) * 2
    # the pool holds every ACL with and without the unknown role (the ACL-subset check)
    assert len(ACLS) == 2 ** (len(ROLES) + 1)
    assert sum(UNKNOWN_ROLE in acl for acl in ACLS) == len(ACLS) // 2
    assert UNKNOWN_ROLE not in AUTH and UNKNOWN_ROLE not in gate.roles


def test_batch_keeps_invalid_labels_as_denials(gate: Gate, corpus: Corpus) -> None:
    good = corpus.label("RMC-LAB-001")
    raw = [
        good,
        {"doc_id": "BAD", "sensitivity_tier": "secret"},
        good.model_dump() | {"doc_id": "G2"},
    ]
    compiled = gate.compile(raw)
    out = gate.decide_batch(corpus.requester("D01"), compiled)
    assert [d.rule for d in (out[0], out[1], out[2])] == [
        Rule.PERMIT,
        Rule.INVALID_LABEL,
        Rule.PERMIT,
    ]
    assert out.permitted_ids() == ["RMC-LAB-001", "G2"]
    assert out[1].errors, "an invalid label carries its errors"


def test_batch_refuses_labels_compiled_for_another_policy(corpus: Corpus) -> None:
    gate = Gate(corpus.policy)
    other = Gate(corpus.policy.model_copy(update={"name": "other"}))
    compiled = other.compile(list(corpus.labels))
    with pytest.raises(ValueError, match="different policy"):
        gate.decide_batch(corpus.requester("D01"), compiled)


def test_a_policy_with_more_than_64_roles_is_a_user_error(corpus: Corpus) -> None:
    from privacy_ci.conductor import Policy
    from privacy_ci.errors import ValidationFailed

    roles = tuple(f"Role {i}" for i in range(65))
    context = corpus.policy.contexts[0]
    body = corpus.policy.model_dump(mode="json")
    body.update(roles=roles, authoritative_context=dict.fromkeys(roles, context))
    with pytest.raises(ValidationFailed, match="lists 65 roles"):
        Gate(Policy.model_validate(body))
