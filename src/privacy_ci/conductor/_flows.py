"""The flow taxonomy F1-F6 (Table VI of the Conductor paper).

A descriptive partition of (requester, document) flows, written separately from
the gate so that the gate can be checked against it. F2, F4 and F6 share one
predicate (the role is not on the ACL) and differ only in why the Policy
Authority narrowed the ACL: heightened sensitivity (F4), an orthogonal
originating context (F6), or neither (F2).
"""

from __future__ import annotations

from enum import StrEnum

from privacy_ci.conductor._labels import Label, SensitivityTier
from privacy_ci.conductor._policy import Policy, Requester


class FlowClass(StrEnum):
    F1 = "F1"
    F2 = "F2"
    F3 = "F3"
    F4 = "F4"
    F5 = "F5"
    F6 = "F6"
    # Outside Table VI: the requester holds no valid role in the context it acts in.
    # Such a flow is never expected to be permitted.
    INVALID = "invalid"

    @property
    def condition(self) -> str:
        return _CONDITIONS[self]

    @property
    def expected_permit(self) -> bool:
        """Whether Table VI expects the flow to be permitted."""
        return self in (FlowClass.F1, FlowClass.F5)


_CONDITIONS = {
    FlowClass.F1: "Permitted role, assigned to the subject",
    FlowClass.F2: "Role not permitted for the document",
    FlowClass.F3: "Permitted role, not assigned to the subject",
    FlowClass.F4: "Extra-sensitive record, role lacks access",
    FlowClass.F5: "Public-tier document",
    FlowClass.F6: "Request crosses a context boundary",
    FlowClass.INVALID: "Requester has no valid role in its context (outside Table VI)",
}

TABLE_VI = {
    FlowClass.F1: 235,
    FlowClass.F2: 74,
    FlowClass.F3: 367,
    FlowClass.F4: 200,
    FlowClass.F5: 24,
    FlowClass.F6: 1620,
}


def classify_flow(requester: Requester, label: Label, policy: Policy) -> FlowClass:
    """Place one flow in Table VI's taxonomy.

    Order of the tests: a public document is F5 for everyone; a permitted role is
    F1 or F3 by the assignment; otherwise the narrowing is explained by
    sensitivity (F4), then by a context boundary (F6), else F2.

    Args:
        requester: who asks, acting in an active role and context.
        label: the document's label.
        policy: the policy that gives each role its context and each tier its
            assignment requirement.

    Returns:
        The flow's class.
    """
    role = requester.active_role
    if (
        role is None
        or role not in requester.roles
        or role not in policy.authoritative_context
        or policy.authoritative_context[role] != requester.active_context
    ):
        return FlowClass.INVALID
    if label.sensitivity_tier is SensitivityTier.PUBLIC:
        return FlowClass.F5
    if role in label.permitted_receiver_roles:
        needs = bool(policy.requires_assignment(label.sensitivity_tier))
        if needs and label.subject is not None and label.subject not in requester.assignments:
            return FlowClass.F3
        return FlowClass.F1
    if label.extra_sensitive:
        return FlowClass.F4
    if requester.active_context != label.originating_context:
        return FlowClass.F6
    return FlowClass.F2
