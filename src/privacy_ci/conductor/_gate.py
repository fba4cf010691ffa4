"""The deterministic policy gate (section IV-B and Algorithm 1 of the Conductor paper).

`Gate.decide(requester, label)` is a pure function of six inputs: the requester's
active role, that role's context, the requester's assignment set, and the
document's ACL, tier and subject. It takes no request text. Checks run in the
order of Algorithm 1 and stop at the first failure; whatever is not affirmatively
permitted is denied, and every decision names the rule that produced it.

The gate imports nothing from the LLM, retrieval or store packages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from privacy_ci.conductor._labels import Label, SensitivityTier
from privacy_ci.conductor._policy import Policy, Requester
from privacy_ci.errors import ValidationFailed


class Effect(StrEnum):
    PERMIT = "permit"
    DENY = "deny"


class Rule(IntEnum):
    """The rule that decided a flow, in the order Algorithm 1 checks them."""

    NO_ACTIVE_ROLE = 1
    ROLE_NOT_AUTHORITATIVE = 2
    INVALID_LABEL = 3
    ROLE_NOT_PERMITTED = 4
    ASSIGNMENT_REQUIRED = 5
    PERMIT = 6

    @property
    def key(self) -> str:
        """Stable snake_case name used in files, JSON and Cedar annotations."""
        return _RULE_KEYS[self]

    @property
    def explanation(self) -> str:
        return _RULE_TEXT[self]

    @classmethod
    def from_key(cls, key: str) -> Rule:
        for rule, name in _RULE_KEYS.items():
            if name == key:
                return rule
        raise KeyError(key)


_RULE_KEYS = {
    Rule.NO_ACTIVE_ROLE: "no_active_role",
    Rule.ROLE_NOT_AUTHORITATIVE: "role_not_authoritative_in_context",
    Rule.INVALID_LABEL: "invalid_label",
    Rule.ROLE_NOT_PERMITTED: "role_not_permitted",
    Rule.ASSIGNMENT_REQUIRED: "assignment_required",
    Rule.PERMIT: "permit",
}
_RULE_TEXT = {
    Rule.NO_ACTIVE_ROLE: "the requester has no active role (a role held but not activated,"
    " or a malformed requester)",
    Rule.ROLE_NOT_AUTHORITATIVE: "the requester's active role is not authoritative in the"
    " context it is acting in",
    Rule.INVALID_LABEL: "the document's label is invalid or incomplete",
    Rule.ROLE_NOT_PERMITTED: "the requester's role is not in the document's permitted"
    " receiver roles",
    Rule.ASSIGNMENT_REQUIRED: "the document's tier requires an assignment to its subject and"
    " the requester holds none",
    Rule.PERMIT: "every check holds: the role is authoritative in its context, permitted by"
    " the label, and any required assignment is held",
}


@dataclass(frozen=True, slots=True)
class Decision:
    """The gate's answer for one flow: effect, deciding rule, policy version, errors.

    Decisions are values: two flows decided the same way by the same policy get
    equal `Decision`s.
    """

    effect: Effect
    rule: Rule
    policy_version: str
    errors: tuple[str, ...] = ()

    @property
    def permitted(self) -> bool:
        return self.effect is Effect.PERMIT

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.effect.value,
            "rule": self.rule.key,
            "explanation": self.rule.explanation,
            "policy_version": self.policy_version,
            "errors": list(self.errors),
        }


class CompiledLabels:
    """Labels laid out as arrays for deciding many candidates at once.

    Built once per corpus (or per candidate set) against one policy; invalid
    labels are kept, marked invalid, so they are denied rather than dropped.
    """

    __slots__ = (
        "acl_bits",
        "base_rules",
        "doc_ids",
        "errors",
        "needs_assignment",
        "policy_version",
        "subject_idx",
        "subjects",
        "unlocks",
        "valid",
    )

    def __init__(self, gate: Gate, labels: Sequence[Label | Mapping[str, Any]]) -> None:
        n = len(labels)
        self.policy_version = gate.policy.version
        self.doc_ids: list[str] = []
        self.valid = np.zeros(n, dtype=bool)
        self.acl_bits = np.zeros(n, dtype=np.uint64)
        self.needs_assignment = np.zeros(n, dtype=bool)
        self.subject_idx = np.full(n, -1, dtype=np.int64)
        self.subjects: dict[str, int] = {}
        self.errors: dict[int, tuple[str, ...]] = {}
        for i, raw in enumerate(labels):
            label, errors = gate.check_label(raw)
            self.doc_ids.append(_doc_id(raw))
            if label is None:
                self.errors[i] = errors
                continue
            self.valid[i] = True
            bits = 0
            for role in label.permitted_receiver_roles:
                bits |= gate.role_bit[role]
            self.acl_bits[i] = bits
            if gate.tier_requires[label.sensitivity_tier] and label.subject is not None:
                self.needs_assignment[i] = True
                self.subject_idx[i] = self.subjects.setdefault(label.subject, len(self.subjects))
        # Per role, the rules as if the requester held no assignment (checks 3-5), and
        # per (role, subject) the documents an assignment to that subject turns into
        # permits. Deciding is then one lookup, and one copy only if an assignment applies.
        self.base_rules: dict[str, npt.NDArray[np.uint8]] = {}
        self.unlocks: dict[str, dict[str, npt.NDArray[np.intp]]] = {}
        names = list(self.subjects)
        for role, bit in gate.role_bit.items():
            rules = np.full(n, Rule.PERMIT, dtype=np.uint8)
            rules[self.needs_assignment] = Rule.ASSIGNMENT_REQUIRED
            rules[(self.acl_bits & np.uint64(bit)) == 0] = Rule.ROLE_NOT_PERMITTED
            rules[~self.valid] = Rule.INVALID_LABEL
            rules.flags.writeable = False
            self.base_rules[role] = rules
            waiting = np.flatnonzero(rules == Rule.ASSIGNMENT_REQUIRED)
            by_subject: dict[str, npt.NDArray[np.intp]] = {}
            if len(waiting):
                subj = self.subject_idx[waiting]
                order = np.argsort(subj, kind="stable")
                cuts = np.flatnonzero(np.diff(subj[order])) + 1
                for group in np.split(waiting[order], cuts):
                    by_subject[names[int(self.subject_idx[group[0]])]] = group
            self.unlocks[role] = by_subject

    def __len__(self) -> int:
        return len(self.doc_ids)


@dataclass(frozen=True, slots=True)
class BatchDecision:
    """Decisions for one requester over many candidate documents.

    `rules` holds one `Rule` code per candidate; it may be a read-only array
    shared with other decisions, so copy it before changing it.
    """

    doc_ids: Sequence[str]
    rules: npt.NDArray[np.uint8]
    policy_version: str
    errors: Mapping[int, tuple[str, ...]]
    requester_errors: tuple[str, ...] = ()

    @property
    def permitted(self) -> npt.NDArray[np.bool_]:
        mask: npt.NDArray[np.bool_] = self.rules == np.uint8(Rule.PERMIT)
        return mask

    def permitted_ids(self) -> list[str]:
        return [self.doc_ids[int(i)] for i in np.flatnonzero(self.permitted)]

    def __len__(self) -> int:
        return len(self.rules)

    def __getitem__(self, i: int) -> Decision:
        rule = Rule(int(self.rules[i]))
        errors = self.requester_errors if rule <= Rule.ROLE_NOT_AUTHORITATIVE else ()
        if rule is Rule.INVALID_LABEL:
            errors = self.errors.get(i, ())
        return Decision(
            Effect.PERMIT if rule is Rule.PERMIT else Effect.DENY,
            rule,
            self.policy_version,
            errors,
        )


def _doc_id(raw: Label | Mapping[str, Any]) -> str:
    if isinstance(raw, Label):
        return raw.doc_id
    value = raw.get("doc_id") if isinstance(raw, Mapping) else None
    return value if isinstance(value, str) else ""


class Gate:
    """The policy decision point of the Privacy Conductor.

    Args:
        policy: the validated policy of the Policy Authority.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.version = policy.version
        self.roles = frozenset(policy.roles)
        self.role_context = dict(policy.authoritative_context)
        self.tier_requires: dict[SensitivityTier, bool] = {
            tier: rule.assignment_required for tier, rule in policy.tiers.items()
        }
        if len(policy.roles) > 64:  # a policy file can list more: a user error
            raise ValidationFailed(
                [
                    f"policy {policy.name!r} lists {len(policy.roles)} roles:"
                    " the batch gate supports at most 64 roles"
                ]
            )
        self.role_bit = {role: 1 << i for i, role in enumerate(policy.roles)}
        # Decisions without errors are shared values: building one per call is the cost.
        self._plain = {
            rule: Decision(
                Effect.PERMIT if rule is Rule.PERMIT else Effect.DENY, rule, self.version
            )
            for rule in Rule
        }

    # -- single decisions -------------------------------------------------------------
    def decide(
        self, requester: Requester | Mapping[str, Any], label: Label | Mapping[str, Any]
    ) -> Decision:
        """Decide whether `label`'s document may flow to `requester` (Algorithm 1).

        Args:
            requester: the validated requester (a raw mapping is validated first;
                a malformed one has no active role).
            label: the document's validated label (a raw mapping is validated
                first; a malformed one is denied with `Rule.INVALID_LABEL`).

        Returns:
            The `Decision`, naming the rule that decided.
        """
        # `type(...) is` rather than isinstance: pydantic's metaclass makes isinstance slow.
        if type(requester) is Requester:
            req = requester
        else:
            checked, problems = self.check_requester(requester)
            if checked is None:
                return Decision(Effect.DENY, Rule.NO_ACTIVE_ROLE, self.version, problems)
            req = checked
        role = req.active_role
        # 1. the requester must have an active role it actually holds
        if role is None or role not in req.roles:
            return self._plain[Rule.NO_ACTIVE_ROLE]
        # 2. that role must be authoritative in the context it acts in
        # (a role unknown to the policy is authoritative nowhere, not even in "no context")
        authoritative_in = self.role_context.get(role)
        if authoritative_in is None or authoritative_in != req.active_context:
            return self._plain[Rule.ROLE_NOT_AUTHORITATIVE]
        # Only now is any field of the document consulted.
        if type(label) is Label:
            lab = label
        else:
            parsed, problems = self.check_label(label)
            if parsed is None:
                return Decision(Effect.DENY, Rule.INVALID_LABEL, self.version, problems)
            lab = parsed
        requires = self.tier_requires.get(lab.sensitivity_tier)
        acl = lab.permitted_receiver_roles
        if requires is None or not acl <= self.roles:
            return Decision(Effect.DENY, Rule.INVALID_LABEL, self.version, self._label_errors(lab))
        # 3. the role must be on the document's ACL
        if role not in acl:
            return self._plain[Rule.ROLE_NOT_PERMITTED]
        # 4. a subject under an assignment-requiring tier needs an assignment
        if requires and lab.subject is not None and lab.subject not in req.assignments:
            return self._plain[Rule.ASSIGNMENT_REQUIRED]
        return self._plain[Rule.PERMIT]

    def decide_many(
        self, requester: Requester, labels: Iterable[Label | Mapping[str, Any]]
    ) -> list[Decision]:
        """`decide` for each label, in order (the plain-Python batch)."""
        return [self.decide(requester, label) for label in labels]

    # -- batch decisions --------------------------------------------------------------
    def compile(self, labels: Sequence[Label | Mapping[str, Any]]) -> CompiledLabels:
        """Lay labels out as arrays for `decide_batch` (validate once, decide often)."""
        return CompiledLabels(self, labels)

    def decide_batch(
        self, requester: Requester | Mapping[str, Any], compiled: CompiledLabels
    ) -> BatchDecision:
        """Decide every compiled candidate for one requester at once.

        Gives exactly the decisions of `decide` on each label, computed as a few
        vectorised passes over the candidates.
        """
        if compiled.policy_version != self.version:
            # a programming error: the caller compiled with another gate
            raise ValueError("labels were compiled against a different policy version")
        n = len(compiled)
        problems: tuple[str, ...] = ()
        req: Requester | None
        if type(requester) is Requester:
            req = requester
        else:
            req, problems = self.check_requester(requester)
        if req is None or req.active_role is None or req.active_role not in req.roles:
            rules = np.full(n, Rule.NO_ACTIVE_ROLE, dtype=np.uint8)
            return BatchDecision(compiled.doc_ids, rules, self.version, {}, problems)
        role = req.active_role
        authoritative_in = self.role_context.get(role)
        if authoritative_in is None or authoritative_in != req.active_context:
            rules = np.full(n, Rule.ROLE_NOT_AUTHORITATIVE, dtype=np.uint8)
            return BatchDecision(compiled.doc_ids, rules, self.version, {})
        base = compiled.base_rules[role]
        unlocks = compiled.unlocks[role]
        opened = [unlocks[s] for s in req.assignments if s in unlocks] if unlocks else []
        if opened:
            rules = base.copy()
            for docs in opened:
                rules[docs] = Rule.PERMIT
        else:
            rules = base  # shared and read-only: nothing to change for this requester
        return BatchDecision(compiled.doc_ids, rules, self.version, compiled.errors)

    # -- validation helpers -----------------------------------------------------------
    def check_label(
        self, raw: Label | Mapping[str, Any] | object
    ) -> tuple[Label | None, tuple[str, ...]]:
        """Validate a label against the schema and this policy's vocabulary.

        Returns:
            The label and no errors, or None and the reasons it is invalid.
        """
        if isinstance(raw, Label):
            label = raw
        elif isinstance(raw, Mapping):
            try:
                label = Label.model_validate(raw)
            except ValidationError as exc:
                return None, tuple(
                    f"{'.'.join(str(p) for p in e['loc']) or 'label'}: {e['msg']}"
                    for e in exc.errors()
                )
        else:
            return None, (f"expected a label, got {type(raw).__name__}",)
        errors = self._label_errors(label)
        return (None, errors) if errors else (label, ())

    def _label_errors(self, label: Label) -> tuple[str, ...]:
        errors = []
        if label.sensitivity_tier not in self.tier_requires:
            errors.append(f"sensitivity_tier {label.sensitivity_tier.value!r} is not in the policy")
        for role in sorted(label.permitted_receiver_roles - self.roles):
            errors.append(
                f"permitted_receiver_roles: {role!r} is not a role of the policy"
                f" (expected one of {', '.join(self.policy.roles)})"
            )
        return tuple(errors)

    def check_requester(self, raw: object) -> tuple[Requester | None, tuple[str, ...]]:
        """Validate a requester given as a mapping; None and reasons when malformed."""
        if isinstance(raw, Requester):
            return raw, ()
        if not isinstance(raw, Mapping):
            return None, (f"expected a requester, got {type(raw).__name__}",)
        try:
            return Requester.model_validate(raw), ()
        except ValidationError as exc:
            return None, tuple(
                f"{'.'.join(str(p) for p in e['loc']) or 'requester'}: {e['msg']}"
                for e in exc.errors()
            )
