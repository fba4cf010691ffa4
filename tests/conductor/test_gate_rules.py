"""Check 3 of Algorithm 1 for requesters who hold more than one role.

The gate asks whether the *active* role is on the document's ACL
(`permitted_receiver_roles`): another role the requester holds, but does not act
in, grants nothing. The exhaustive test in test_gate.py holds one role per
requester, so it cannot tell the active role from "any role held"; these tests
can, for the single and the batch gate alike.
"""

from __future__ import annotations

import itertools

import pytest

from privacy_ci.conductor import Corpus, Gate, Label, Requester, Rule, SensitivityTier


def _label(acl: frozenset[str], tier: str = "internal", subject: str | None = None) -> Label:
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
        assignment_required=subject is not None,
    )


def _acting(
    gate: Gate, held: frozenset[str], active: str, assignments: frozenset[str] = frozenset()
) -> Requester:
    """A requester holding `held`, acting in `active` in the context that makes it
    authoritative (checks 1 and 2 pass)."""
    return Requester(
        id="r",
        roles=held,
        active_role=active,
        active_context=gate.role_context[active],
        assignments=assignments,
    )


def _both(gate: Gate, requester: Requester, label: Label) -> Rule:
    """The deciding rule, from the single and the batch gate (which must agree)."""
    single = gate.decide(requester, label).rule
    batch = gate.decide_batch(requester, gate.compile([label]))[0].rule
    assert batch is single, (requester, label)
    return single


def test_a_held_role_that_is_not_active_does_not_pass_check_3(corpus: Corpus) -> None:
    """A nurse who is also a billing specialist, acting as a nurse, may not receive a
    billing statement (ACL: billing specialists) of a patient she is assigned to;
    acting as a billing specialist, she may."""
    gate = Gate(corpus.policy)
    statement = corpus.label("RMC-BIL-004")  # financial, ACL {Billing Specialist}, P01
    assert statement.permitted_receiver_roles == frozenset({"Billing Specialist"})
    held = frozenset({"Nurse", "Billing Specialist"})
    assigned = frozenset({statement.subject or ""})
    as_nurse = _acting(gate, held, "Nurse", assignments=assigned)
    decision = gate.decide(as_nurse, statement)
    assert not decision.permitted and decision.rule is Rule.ROLE_NOT_PERMITTED
    assert decision.as_dict()["rule"] == "role_not_permitted"
    assert _both(gate, as_nurse, statement) is Rule.ROLE_NOT_PERMITTED
    as_billing = _acting(gate, held, "Billing Specialist", assignments=assigned)
    assert _both(gate, as_billing, statement) is Rule.PERMIT
    # and the other way round: the clinical lab report is the nurse's, not the biller's
    lab = corpus.label("RMC-LAB-001")  # clinical_standard, ACL {Doctor, Nurse}, P01
    assert _both(gate, as_nurse, lab) is Rule.PERMIT
    assert _both(gate, as_billing, lab) is Rule.ROLE_NOT_PERMITTED


@pytest.mark.parametrize(("tier", "subject"), [("internal", None), ("financial", "P01")])
def test_every_pair_of_held_roles(corpus: Corpus, tier: str, subject: str | None) -> None:
    """Every requester holding two roles of the policy, acting in either, against the
    ACLs made of those two roles: the decision follows the active role alone."""
    gate = Gate(corpus.policy)
    assigned = frozenset({subject}) if subject else frozenset()
    roles = list(corpus.policy.roles)
    checked = 0
    for active, other in itertools.permutations(roles, 2):
        requester = _acting(gate, frozenset({active, other}), active, assignments=assigned)
        for acl in ({other}, {active}, {active, other}, set()):
            label = _label(frozenset(acl), tier, subject)
            want = Rule.PERMIT if active in acl else Rule.ROLE_NOT_PERMITTED
            assert _both(gate, requester, label) is want, (active, other, sorted(acl))
            checked += 1
        # check 3 comes before check 4: an assignment does not open another role's document
        unassigned = requester.model_copy(update={"assignments": frozenset()})
        label = _label(frozenset({other}), tier, subject)
        assert _both(gate, unassigned, label) is Rule.ROLE_NOT_PERMITTED
    assert checked == len(roles) * (len(roles) - 1) * 4


def test_holding_every_role_but_the_acls(corpus: Corpus) -> None:
    """A requester holding every role of the policy, acting in one: only documents
    whose ACL names that role pass check 3, among all of Riverside's labels."""
    gate = Gate(corpus.policy)
    every = frozenset(corpus.policy.roles)
    labels = list(corpus.labels)
    compiled = gate.compile(labels)
    for active in corpus.policy.roles:
        requester = _acting(gate, every, active)
        batch = gate.decide_batch(requester, compiled)
        for i, label in enumerate(labels):
            rule = gate.decide(requester, label).rule
            assert batch[i].rule is rule
            if active not in label.permitted_receiver_roles:
                assert rule is Rule.ROLE_NOT_PERMITTED, (active, label.doc_id)
            else:
                assert rule in (Rule.PERMIT, Rule.ASSIGNMENT_REQUIRED), (active, label.doc_id)
