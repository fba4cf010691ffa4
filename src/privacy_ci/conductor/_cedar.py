"""The gate's policy in Cedar: translation to Cedar entities and requests, and a batch authorizer.

The same decision procedure as `Gate` (Algorithm 1), written as Cedar policies
over a Cedar schema, so that an independent engine can check the gate:

* ``cedar/riverside.cedarschema``: entity types Requester, Role, Context, Tier,
  Person, Document and Vocabulary (the policy's roles and tiers), action ``read``.
* ``cedar/riverside.cedar``: the decision policy, one ``permit`` whose
  conditions are the checks of Algorithm 1; everything else is denied by Cedar's
  default deny.
* ``cedar/riverside_rules.cedar``: one ``permit`` plus one ``forbid`` per failing
  check, each annotated ``@id("<rule key>")``, so Cedar's reasons name our rules.

This module only builds JSON and calls Cedar; `cedarpy` is imported when a
`CedarAuthorizer` is built (``pip install privacy-ci[cedar]``), never on import.

Typical use::

    corpus = load_corpus()
    cedar = CedarAuthorizer(corpus.policy, corpus.requesters(), corpus.labels)
    cedar.decide("D01", "RMC-LAB-001").allowed     # True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from privacy_ci.conductor._gate import Rule
from privacy_ci.conductor._labels import Label
from privacy_ci.conductor._policy import Policy, Requester

SCHEMA_FILE = "riverside.cedarschema"
DECISION_FILE = "riverside.cedar"
RULES_FILE = "riverside_rules.cedar"
#: The id of the one `Vocabulary` entity the policies refer to.
VOCABULARY_ID = "policy"
#: The Cedar action every flow is a request for.
ACTION_ID = "read"

PolicyChoice = Literal["decision", "rules"]
_POLICY_FILES: dict[str, str] = {"decision": DECISION_FILE, "rules": RULES_FILE}
_RULE_KEYS = {rule.key: rule for rule in Rule}

EntityJSON = dict[str, Any]


# -- the packaged Cedar files ---------------------------------------------------------
def cedar_text(name: str) -> str:
    """The text of one packaged Cedar file (``cedar/<name>`` in this package)."""
    folder = resources.files("privacy_ci.conductor") / "cedar"
    return (folder / name).read_text(encoding="utf-8")


def schema_text() -> str:
    """The Cedar schema (human-readable syntax)."""
    return cedar_text(SCHEMA_FILE)


def policy_text(which: PolicyChoice = "decision") -> str:
    """The Cedar policies: ``"decision"`` (one permit) or ``"rules"`` (annotated rules)."""
    try:
        return cedar_text(_POLICY_FILES[which])
    except KeyError:  # a programming error: `which` is a literal of the code
        raise ValueError(f"unknown policy set {which!r}; expected 'decision' or 'rules'") from None


def validate_policies(which: PolicyChoice = "decision") -> list[str]:
    """Validate a packaged policy set against the packaged schema with Cedar's validator.

    Returns:
        One message per validation error; empty when the policies validate.
    """
    import cedarpy

    result = cedarpy.validate_policies(policy_text(which), cedarpy.Schema.from_str(schema_text()))
    return [str(error) for error in result.errors]


# -- translation ----------------------------------------------------------------------
def _uid(kind: str, ident: str) -> dict[str, str]:
    return {"type": kind, "id": ident}


def _ref(kind: str, ident: str) -> dict[str, dict[str, str]]:
    return {"__entity": _uid(kind, ident)}


def _entity(kind: str, ident: str, attrs: dict[str, Any] | None = None) -> EntityJSON:
    return {"uid": _uid(kind, ident), "attrs": attrs or {}, "parents": []}


def policy_entities(policy: Policy) -> list[EntityJSON]:
    """The policy as Cedar entities: its contexts, roles, tiers and the vocabulary.

    Only the policy's own roles and tiers become entities, so a label or
    requester naming anything else refers to an entity that does not exist.
    """
    out = [_entity("Context", ctx) for ctx in policy.contexts]
    out += [
        _entity("Role", role, {"authoritative_context": _ref("Context", ctx)})
        for role, ctx in policy.authoritative_context.items()
    ]
    out += [
        _entity("Tier", tier.value, {"assignment_required": rule.assignment_required})
        for tier, rule in policy.tiers.items()
    ]
    out.append(
        _entity(
            "Vocabulary",
            VOCABULARY_ID,
            {
                "roles": [_ref("Role", role) for role in policy.roles],
                "tiers": [_ref("Tier", tier.value) for tier in policy.tiers],
            },
        )
    )
    return out


def requester_entity(requester: Requester) -> EntityJSON:
    """One requester as a Cedar `Requester` entity (optional attributes left out when None)."""
    attrs: dict[str, Any] = {
        "roles": [_ref("Role", role) for role in sorted(requester.roles)],
        "assignments": [_ref("Person", person) for person in sorted(requester.assignments)],
    }
    if requester.active_role is not None:
        attrs["active_role"] = _ref("Role", requester.active_role)
    if requester.active_context is not None:
        attrs["active_context"] = _ref("Context", requester.active_context)
    return _entity("Requester", requester.id, attrs)


def document_entity(label: Label) -> EntityJSON:
    """One label as a Cedar `Document` entity: ACL, tier and (when present) subject."""
    attrs: dict[str, Any] = {
        "acl": [_ref("Role", role) for role in sorted(label.permitted_receiver_roles)],
        "tier": _ref("Tier", label.sensitivity_tier.value),
    }
    if label.subject is not None:
        attrs["subject"] = _ref("Person", label.subject)
    return _entity("Document", label.doc_id, attrs)


def entities(
    policy: Policy, requesters: Iterable[Requester], labels: Iterable[Label]
) -> list[EntityJSON]:
    """The whole Cedar entity set for deciding flows between `requesters` and `labels`.

    Every person named as a subject or an assignment becomes a `Person` entity.

    Raises:
        ValueError: when two requesters, or two labels, share an id.
    """
    # Duplicate ids raise ValueError, a programming error: user files with
    # duplicate ids are refused when they are loaded, before they get here.
    out = policy_entities(policy)
    people: set[str] = set()
    seen: set[str] = set()
    for requester in requesters:
        if requester.id in seen:
            raise ValueError(f"requester id {requester.id!r} is used twice")
        seen.add(requester.id)
        people.update(requester.assignments)
        out.append(requester_entity(requester))
    seen.clear()
    for label in labels:
        if label.doc_id in seen:
            raise ValueError(f"document id {label.doc_id!r} is used twice")
        seen.add(label.doc_id)
        if label.subject is not None:
            people.add(label.subject)
        out.append(document_entity(label))
    out += [_entity("Person", person) for person in sorted(people)]
    return out


def request(requester_id: str, doc_id: str) -> dict[str, Any]:
    """The Cedar request for one flow: may `requester_id` read `doc_id`?"""
    return {
        "principal": _uid("Requester", requester_id),
        "action": _uid("Action", ACTION_ID),
        "resource": _uid("Document", doc_id),
    }


# -- deciding -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CedarDecision:
    """Cedar's answer for one flow.

    Attributes:
        allowed: Cedar's decision is Allow.
        reasons: the determining policies, by ``@id`` annotation (by Cedar's
            policy id when a policy has none), sorted in the gate's rule order
            when they are rule keys.
        errors: Cedar's evaluation errors (a policy whose condition errored is
            skipped; for the decision policy that means Deny).
    """

    allowed: bool
    reasons: tuple[str, ...]
    errors: tuple[str, ...] = ()

    @property
    def rule(self) -> Rule | None:
        """The first reason in Algorithm-1 order, as a gate rule (None when no reason is a rule).

        With the ``rules`` policy set this is the rule the gate should report.
        """
        rules = [_RULE_KEYS[r] for r in self.reasons if r in _RULE_KEYS]
        return min(rules) if rules else None


def _reason_order(reason: str) -> tuple[int, str]:
    rule = _RULE_KEYS.get(reason)
    return (int(rule) if rule is not None else len(_RULE_KEYS) + 1, reason)


class CedarAuthorizer:
    """Cedar over a fixed policy, requesters and labels, parsed once and queried in batches.

    Args:
        policy: the gate's policy (becomes Role, Tier, Context and Vocabulary entities).
        requesters: every requester that will be asked about (ids must be unique).
        labels: every document that will be asked about (doc ids must be unique).
        policies: ``"decision"`` for riverside.cedar, ``"rules"`` for riverside_rules.cedar.
        validate: check the policies against the schema with Cedar's validator, and
            the entities against the schema as they are parsed.

    Raises:
        ImportError: when cedarpy is not installed.
        ValueError: when the policies fail validation, or the entities do not
            conform to the schema.
    """

    def __init__(
        self,
        policy: Policy,
        requesters: Iterable[Requester],
        labels: Iterable[Label],
        *,
        policies: PolicyChoice = "decision",
        validate: bool = True,
    ) -> None:
        import cedarpy

        self._cedarpy: Any = cedarpy
        self.policy = policy
        self.which = policies
        text = policy_text(policies)
        self.schema: Any = cedarpy.Schema.from_str(schema_text())
        if validate:
            result = cedarpy.validate_policies(text, self.schema)
            if not result.validation_passed:  # the packaged files: a programming error
                problems = "; ".join(str(e) for e in result.errors)
                raise ValueError(f"{_POLICY_FILES[policies]} does not validate: {problems}")
        self.policy_set: Any = cedarpy.PolicySet.from_str(text)
        doc = json.dumps(entities(policy, requesters, labels))
        self.entities: Any = cedarpy.Entities.from_json_str(doc, self.schema if validate else None)
        self._validate = validate

    def __len__(self) -> int:
        """The number of Cedar entities held."""
        return len(self.entities)

    def is_authorized_batch(self, flows: Iterable[tuple[str, str]]) -> list[CedarDecision]:
        """Decide many flows in one Cedar call.

        Args:
            flows: (requester id, doc id) pairs; ids not among the entities are denied.

        Returns:
            One `CedarDecision` per flow, in order.
        """
        requests = [request(requester_id, doc_id) for requester_id, doc_id in flows]
        return self.authorize_requests(requests)

    def authorize_requests(self, requests: Sequence[dict[str, Any]]) -> list[CedarDecision]:
        """Decide prepared Cedar requests (see `request`) in one Cedar call."""
        if not requests:
            return []
        results = self._cedarpy.is_authorized_batch(
            requests, self.policy_set, self.entities, self.schema if self._validate else None
        )
        out = []
        for result in results:
            diagnostics = result.diagnostics
            names = diagnostics.id_annotations_by_reason
            reasons = sorted((names.get(r, r) for r in diagnostics.reasons), key=_reason_order)
            out.append(
                CedarDecision(
                    bool(result.allowed),
                    tuple(reasons),
                    tuple(str(e) for e in diagnostics.errors),
                )
            )
        return out

    def decide(self, requester_id: str, doc_id: str) -> CedarDecision:
        """Decide one flow."""
        return self.is_authorized_batch([(requester_id, doc_id)])[0]
