"""The policy written by the Policy Authority, and the requesters it governs.

A policy names the roles, the contexts, the one context in which each role is
authoritative, and for each sensitivity tier whether an assignment to the data
subject is required (Table V). Its version is a hash of its content, carried by
every decision.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from privacy_ci.conductor._labels import (
    SensitivityTier,
    check_role_name,
    format_validation_error,
    read_structured,
)
from privacy_ci.errors import ValidationFailed

POLICY_AUTHORITY_ROLE = "Policy Authority"
"""The role of the people who approve and revoke labels. It is held in the store like
any role, but it is no requester role of the policy, so it never receives a document."""


class TierRule(BaseModel):
    """What the policy says about one sensitivity tier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    assignment_required: bool
    description: str = ""


class Policy(BaseModel):
    """A CI access policy, as written by an accountable Policy Authority.

    Args:
        name: short name of the policy.
        authority: who wrote it and answers for it.
        roles: every role a requester can act in.
        contexts: every context a role or document can belong to.
        authoritative_context: for each role, the one context that grants it.
        tiers: for each sensitivity tier in use, whether an assignment is required.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    authority: str = Field(min_length=1)
    description: str = ""
    roles: tuple[str, ...] = Field(min_length=1)
    contexts: tuple[str, ...] = Field(min_length=1)
    authoritative_context: dict[str, str]
    tiers: dict[SensitivityTier, TierRule]

    # The validators raise ValueError: pydantic reports it as a ValidationError,
    # which loading turns into ValidationFailed (a PrivacyCIError).
    @field_validator("roles")
    @classmethod
    def _roles_well_formed(cls, roles: tuple[str, ...]) -> tuple[str, ...]:
        for role in roles:
            check_role_name(role)
        if len(set(roles)) != len(roles):
            raise ValueError("a role is listed twice")
        return roles

    @field_validator("contexts")
    @classmethod
    def _contexts_unique(cls, contexts: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(contexts)) != len(contexts):
            raise ValueError("a context is listed twice")
        for ctx in contexts:
            if not ctx or ctx != ctx.strip():
                raise ValueError(f"context {ctx!r} is blank or has stray whitespace")
        return contexts

    @model_validator(mode="after")
    def _cross_check(self) -> Policy:
        problems = []
        for role in self.roles:
            if role not in self.authoritative_context:
                problems.append(f"role {role!r} has no authoritative context")
        for role, ctx in self.authoritative_context.items():
            if role not in self.roles:
                problems.append(f"authoritative_context names unknown role {role!r}")
            if ctx not in self.contexts:
                problems.append(f"role {role!r} is authoritative in unknown context {ctx!r}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def version(self) -> str:
        """Content hash of the policy (stable under key order and formatting)."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def requires_assignment(self, tier: SensitivityTier) -> bool | None:
        """Whether `tier` requires an assignment; None when the policy does not know it."""
        rule = self.tiers.get(tier)
        return None if rule is None else rule.assignment_required


class Agent(BaseModel):
    """A person who can make requests: identity, name, the role they hold and its context."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    role: str
    context: str
    description: str = ""

    @field_validator("role")
    @classmethod
    def _role_name(cls, role: str) -> str:
        return check_role_name(role)


class Requester(BaseModel):
    """Who asks, in what capacity, and whom they are assigned to.

    `roles` are the roles the person holds; `active_role` is the one they act in
    now and `active_context` the context they act in. The gate never reads the
    request text, only this value.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    roles: frozenset[str] = frozenset()
    active_role: str | None = None
    active_context: str | None = None
    assignments: frozenset[str] = frozenset()

    @classmethod
    def acting_as(
        cls,
        agent: Agent,
        assignments: frozenset[str] = frozenset(),
        *,
        role: str | None = None,
        context: str | None = None,
    ) -> Requester:
        """The requester an agent becomes when acting in its role (or an override)."""
        return cls(
            id=agent.id,
            roles=frozenset({agent.role}),
            active_role=agent.role if role is None else role,
            active_context=agent.context if context is None else context,
            assignments=assignments,
        )


class AuthorityMember(BaseModel):
    """A person who acts as the Policy Authority (approves and revokes labels).

    Kept apart from the agents: the authority administers labels, it does not request
    documents, so it takes no part in the flows the gate is measured on.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    context: str = Field(min_length=1, description="The context the authority acts in.")
    description: str = ""


class Directory(BaseModel):
    """The agents of an organisation, the other people documents may be about, and
    the members of its Policy Authority."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agents: tuple[Agent, ...]
    subjects: dict[str, str] = Field(
        default_factory=dict, description="Non-agent data subjects: id -> name."
    )
    policy_authority: tuple[AuthorityMember, ...] = ()

    def person_name(self, person_id: str) -> str | None:
        for agent in self.agents:
            if agent.id == person_id:
                return agent.name
        return self.subjects.get(person_id)

    def agent(self, agent_id: str) -> Agent | None:
        for agent in self.agents:
            if agent.id == agent_id:
                return agent
        return None

    @property
    def person_ids(self) -> set[str]:
        return {a.id for a in self.agents} | set(self.subjects)


def _parse(model: type[BaseModel], raw: object, source: str, entry: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ValidationFailed([f"{source}: expected a mapping at the top level"])
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ValidationFailed(format_validation_error(source, entry, exc)) from None


def load_policy(path: Path) -> Policy:
    """Read and validate a policy file (YAML or JSON)."""
    policy: Policy = _parse(Policy, read_structured(path), str(path), "policy")
    return policy


def load_directory(path: Path) -> Directory:
    """Read and validate an agents file (YAML or JSON)."""
    directory: Directory = _parse(Directory, read_structured(path), str(path), "agents")
    ids = (
        [a.id for a in directory.agents]
        + list(directory.subjects)
        + [m.id for m in directory.policy_authority]
    )
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValidationFailed([f"{path}: person id(s) used twice: {', '.join(dupes)}"])
    return directory


def parse_assignments(raw: object, source: str) -> dict[str, frozenset[str]]:
    """Validate an assignment relation: requester id -> list of subject ids."""
    if isinstance(raw, Mapping) and "assignments" in raw:
        raw = raw["assignments"]
    if not isinstance(raw, Mapping):
        raise ValidationFailed([f"{source}: expected a mapping 'requester id: [subject ids]'"])
    problems = []
    out: dict[str, frozenset[str]] = {}
    for requester, subjects in raw.items():
        if not isinstance(requester, str) or not requester.strip():
            problems.append(f"{source}: key {requester!r}: expected a requester id")
            continue
        if subjects is None:
            subjects = []
        if not isinstance(subjects, list) or not all(
            isinstance(s, str) and s and s == s.strip() for s in subjects
        ):
            problems.append(f"{source}: {requester}: expected a list of subject ids")
            continue
        out[requester] = frozenset(subjects)
    if problems:
        raise ValidationFailed(problems)
    return out


def load_assignments(path: Path) -> dict[str, frozenset[str]]:
    """Read and validate an assignment file (YAML or JSON)."""
    return parse_assignments(read_structured(path), str(path))
