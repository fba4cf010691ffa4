"""Differential test: the gate against the same policy written in Cedar.

Every flow is decided four ways: `Gate.decide`, `Gate.decide_batch`, Cedar with
the decision policy (cedar/riverside.cedar) and Cedar with the rule policies
(cedar/riverside_rules.cedar). Decisions must agree everywhere; the gate's
deciding rule must be the first, in Algorithm-1 order, of the forbid policies
Cedar reports (Cedar evaluates every policy, the gate stops at the first
failing check), and a permit must be reported by Cedar's `permit` alone.
"""

from __future__ import annotations

import gc
import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from privacy_ci.conductor import (
    Corpus,
    Gate,
    Label,
    Policy,
    Requester,
    Rule,
    SensitivityTier,
    _cedar,
)
from privacy_ci.conductor._cedar import CedarAuthorizer, CedarDecision

pytest.importorskip("cedarpy")

UNKNOWN_ROLE = "Janitor"  # held by some random requesters, unknown to the policy
UNKNOWN_CONTEXT = "Nowhere"
PEOPLE = tuple(f"S{i:02d}" for i in range(8))
STRANGER = "S99"  # a subject nobody is assigned to


# -- comparing the four deciders -------------------------------------------------------
@dataclass
class Report:
    flows: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    cedar_errors: int = 0
    mismatches: list[str] = field(default_factory=list)

    def add_mismatch(self, what: str, requester: Requester, label: Label) -> None:
        if len(self.mismatches) < 20:
            self.mismatches.append(
                f"{what}\n    requester={_show_requester(requester)}"
                f"\n    label={_show_label(label)}"
            )
        else:
            self.mismatches.append(what)


def _show_requester(r: Requester) -> str:
    return (
        f"Requester(id={r.id!r}, roles={sorted(r.roles)}, active_role={r.active_role!r},"
        f" active_context={r.active_context!r}, assignments={sorted(r.assignments)})"
    )


def _show_label(label: Label) -> str:
    return (
        f"(doc_id={label.doc_id!r}, tier={label.sensitivity_tier.value!r},"
        f" acl={sorted(label.permitted_receiver_roles)}, subject={label.subject!r})"
    )


def _check_rules_decision(expected: Rule, cedar: CedarDecision) -> str | None:
    """Why Cedar's rule policies disagree with the gate's rule, or None when they agree."""
    if expected is Rule.PERMIT:
        if not cedar.allowed or cedar.reasons != ("permit",):
            return f"gate permits, Cedar rules say {cedar.allowed=} reasons={cedar.reasons}"
        return None
    if cedar.allowed:
        return f"gate denies ({expected.key}), Cedar rules allow"
    if expected.key not in cedar.reasons:
        return f"gate rule {expected.key!r} is not among Cedar's reasons {cedar.reasons}"
    if cedar.rule is not expected:
        return (
            f"gate rule {expected.key!r}, but Cedar's first failing check is {cedar.reasons[0]!r}"
        )
    return None


def compare(policy: Policy, requesters: list[Requester], labels: list[Label]) -> Report:
    """Decide every requester x label flow four ways and collect disagreements."""
    gate = Gate(policy)
    compiled = gate.compile(labels)
    decision_cedar = CedarAuthorizer(policy, requesters, labels, policies="decision")
    rules_cedar = CedarAuthorizer(policy, requesters, labels, policies="rules")
    flows = [(r.id, label.doc_id) for r in requesters for label in labels]
    gc_was_enabled = gc.isenabled()
    gc.disable()  # cedarpy's results are many small dicts: a third of the time goes to GC
    try:
        cedar_decisions = decision_cedar.is_authorized_batch(flows)
        cedar_rules = rules_cedar.is_authorized_batch(flows)
    finally:
        if gc_was_enabled:
            gc.enable()
    report = Report()
    k = 0
    for requester in requesters:
        batch = gate.decide_batch(requester, compiled)
        assert list(batch.doc_ids) == [label.doc_id for label in labels]
        for i, label in enumerate(labels):
            single = gate.decide(requester, label)
            by_batch = Rule(int(batch.rules[i]))
            cedar, cedar_rule = cedar_decisions[k], cedar_rules[k]
            k += 1
            report.flows += 1
            report.rules[single.rule.key] += 1
            report.cedar_errors += bool(cedar.errors)
            if by_batch is not single.rule:
                report.add_mismatch(
                    f"decide says {single.rule.key}, decide_batch says {by_batch.key}",
                    requester,
                    label,
                )
            if single.permitted != cedar.allowed:
                report.add_mismatch(
                    f"decide says {single.rule.key}, Cedar decision policy says"
                    f" allowed={cedar.allowed} errors={cedar.errors}",
                    requester,
                    label,
                )
            if cedar_rule.allowed != cedar.allowed:
                report.add_mismatch(
                    f"Cedar policy sets disagree: decision {cedar.allowed}, rules"
                    f" {cedar_rule.allowed} {cedar_rule.reasons}",
                    requester,
                    label,
                )
            problem = _check_rules_decision(single.rule, cedar_rule)
            if problem:
                report.add_mismatch(problem, requester, label)
    assert k == len(flows)
    return report


def _assert_clean(report: Report) -> None:
    if report.mismatches:
        shown = "\n".join(report.mismatches[:20])
        pytest.fail(f"{len(report.mismatches)} mismatches in {report.flows} flows:\n{shown}")


# -- the policy files ------------------------------------------------------------------
def test_cedar_policies_validate_against_schema() -> None:
    assert _cedar.validate_policies("decision") == []
    assert _cedar.validate_policies("rules") == []


def test_rules_file_annotates_every_rule() -> None:
    import cedarpy

    text = _cedar.policy_text("rules")
    policy_set = cedarpy.PolicySet.from_str(text)
    assert len(policy_set) == len(Rule)
    for rule in Rule:
        assert f'@id("{rule.key}")' in text


def test_importing_conductor_does_not_import_cedarpy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, privacy_ci.conductor, privacy_ci.conductor._cedar;"
        " sys.exit('cedarpy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- (a) every Riverside flow ------------------------------------------------------------
def test_riverside_flows_agree_with_cedar(corpus: Corpus) -> None:
    requesters = corpus.requesters()
    labels = list(corpus.labels)
    report = compare(corpus.policy, requesters, labels)
    assert report.flows == 24 * 105 == 2520
    _assert_clean(report)
    assert report.cedar_errors == 0
    assert report.rules["permit"] > 0 and report.rules["assignment_required"] > 0


# -- (b) random flows over the whole decision space --------------------------------------
def random_requesters(policy: Policy, n: int, rng: random.Random) -> list[Requester]:
    """Requesters with random held roles, active role (None, unheld, unknown), context, assignments."""
    role_pool = [*policy.roles, UNKNOWN_ROLE]
    context_pool = [None, *policy.contexts, UNKNOWN_CONTEXT]
    out = []
    for i in range(n):
        roles = {role for role in role_pool if rng.random() < 0.2}
        active = rng.choice([None, *role_pool])
        if active is not None and rng.random() < 0.8:
            roles.add(active)
        if active in policy.authoritative_context and rng.random() < 0.5:
            context = policy.authoritative_context[active]
        else:
            context = rng.choice(context_pool)
        assignments = frozenset(rng.sample(PEOPLE, rng.randint(0, 5)))
        out.append(
            Requester(
                id=f"R{i:04d}",
                roles=frozenset(roles),
                active_role=active,
                active_context=context,
                assignments=assignments,
            )
        )
    return out


def random_labels(
    policy: Policy, tiers: list[SensitivityTier], n: int, rng: random.Random
) -> list[Label]:
    """Labels with random tier, ACL (any subset of the roles, sometimes an unknown one), subject."""
    out = []
    for i in range(n):
        acl = {role for role in policy.roles if rng.random() < 0.5}
        if rng.random() < 0.05:
            acl.add(UNKNOWN_ROLE)
        subject = None if rng.random() < 0.25 else rng.choice([*PEOPLE, STRANGER])
        out.append(
            Label.model_validate(
                {
                    "doc_id": f"X{i:04d}",
                    "sensitivity_tier": rng.choice(tiers),
                    "permitted_receiver_roles": sorted(acl),
                    "subject": subject,
                    "subject_type": "organization" if subject is None else "individual",
                    "document_type": "random",
                    "extra_sensitive": False,
                    "governing_principle": "random",
                    "originating_context": rng.choice(policy.contexts),
                    "assignment_required": False,
                }
            )
        )
    return out


def _seeded_flows(
    policy: Policy, tiers: list[SensitivityTier], n_requesters: int, n_labels: int, seed: int
) -> tuple[list[Requester], list[Label]]:
    rng = random.Random(seed)
    return random_requesters(policy, n_requesters, rng), random_labels(policy, tiers, n_labels, rng)


@pytest.mark.slow
def test_random_flows_agree_with_cedar(corpus: Corpus) -> None:
    policy = corpus.policy
    requesters, labels = _seeded_flows(policy, list(policy.tiers), 500, 200, seed=20240611)
    report = compare(policy, requesters, labels)
    assert report.flows == 100_000
    _assert_clean(report)
    # the random space really covers every rule, including invalid labels
    for rule in Rule:
        assert report.rules[rule.key] >= 1_000, report.rules


def test_random_flows_with_tiers_outside_the_policy(corpus: Corpus) -> None:
    """A policy that drops two tiers and flips a third: labels may use tiers it does not know."""
    raw = corpus.policy.model_dump(mode="json")
    del raw["tiers"]["public"], raw["tiers"]["employment"]
    raw["tiers"]["internal"]["assignment_required"] = True
    raw["tiers"]["financial"]["assignment_required"] = False
    policy = Policy.model_validate(raw)
    requesters, labels = _seeded_flows(policy, list(SensitivityTier), 150, 150, seed=7)
    report = compare(policy, requesters, labels)
    _assert_clean(report)
    assert report.rules["invalid_label"] >= 500, report.rules


# -- specific flows ----------------------------------------------------------------------
def _one(
    policy: Policy, requester: Requester, label: Label
) -> tuple[Rule, CedarDecision, CedarDecision]:
    decision = CedarAuthorizer(policy, [requester], [label]).decide(requester.id, label.doc_id)
    rules = CedarAuthorizer(policy, [requester], [label], policies="rules").decide(
        requester.id, label.doc_id
    )
    return Gate(policy).decide(requester, label).rule, decision, rules


def test_invalid_labels_are_denied_by_cedar(corpus: Corpus) -> None:
    doctor = corpus.requester("D01")
    base = corpus.label("RMC-LAB-001").model_dump()
    # the requester's own role is on the ACL, but so is a role the policy does not know
    unknown_role = Label.model_validate({**base, "permitted_receiver_roles": ["Doctor", "Janitor"]})
    rule, decision, rules = _one(corpus.policy, doctor, unknown_role)
    assert rule is Rule.INVALID_LABEL
    assert not decision.allowed and rules.rule is Rule.INVALID_LABEL
    # an organisation-level document in a tier the policy does not define
    raw = corpus.policy.model_dump(mode="json")
    del raw["tiers"]["internal"]
    policy = Policy.model_validate(raw)
    org = Label.model_validate(
        {**base, "sensitivity_tier": "internal", "subject": None, "subject_type": "organization"}
    )
    rule, decision, rules = _one(policy, doctor, org)
    assert rule is Rule.INVALID_LABEL
    assert not decision.allowed and rules.rule is Rule.INVALID_LABEL


def test_role_unknown_to_the_policy_is_authoritative_nowhere(corpus: Corpus) -> None:
    label = corpus.label("RMC-LAB-001")
    for context in (None, "Medical"):
        janitor = Requester(
            id="J",
            roles=frozenset({UNKNOWN_ROLE}),
            active_role=UNKNOWN_ROLE,
            active_context=context,
        )
        rule, decision, rules = _one(corpus.policy, janitor, label)
        assert rule is Rule.ROLE_NOT_AUTHORITATIVE
        assert not decision.allowed and rules.rule is Rule.ROLE_NOT_AUTHORITATIVE
    # with a context, Cedar's decision policy dereferences the missing Role entity: an error,
    # and Cedar denies
    assert any("does not exist" in e for e in decision.errors)


def test_unknown_principal_or_resource_is_denied(corpus: Corpus) -> None:
    cedar = CedarAuthorizer(corpus.policy, corpus.requesters(), list(corpus.labels))
    assert cedar.decide("D01", "RMC-LAB-001").allowed
    assert not cedar.decide("nobody", "RMC-LAB-001").allowed
    assert not cedar.decide("D01", "no-such-doc").allowed


def test_translation_rejects_duplicate_ids(corpus: Corpus) -> None:
    doctor = corpus.requester("D01")
    with pytest.raises(ValueError, match="used twice"):
        _cedar.entities(corpus.policy, [doctor, doctor], [])
