"""What the labeler returns (the "label schema and policy vocabulary" of Appendix C),
how a model's output is checked, and how it replaces the authored label's fields.

Only `sensitivity_tier` and `permitted_receiver_roles` reach the gate's decision
(Table IV); `extra_sensitive` and `governing_principle` are recorded and shown.
Everything else of a label (document id, subject, type, originating context) stays
as authored: the model replaces the annotator at one point only (section V-C). A
document with no authored label gets placeholders for those fields (`draft_label`),
for the Policy Authority to set before approving.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from privacy_ci.conductor import Label, Policy, SensitivityTier, SubjectType
from privacy_ci.conductor._labels import check_role_name

MODEL_FIELDS = (
    "sensitivity_tier",
    "permitted_receiver_roles",
    "extra_sensitive",
    "governing_principle",
)
"""The fields the labeler writes, in the schema's order."""
DRAFT_DOCUMENT_TYPE = "unknown"
"""The document type of a draft for a document with no authored label."""
DRAFT_EXTRA_SENSITIVE_REASON = "marked extra-sensitive by the labeler"


class LabelOutputError(ValueError):
    """A model's label does not fit the schema (the message says where and why)."""


def label_schema(policy: Policy) -> dict[str, Any]:
    """The JSON schema of the labeler's structured output, over the policy's vocabulary."""
    return {
        "type": "object",
        "properties": {
            "sensitivity_tier": {
                "type": "string",
                "enum": [t.value for t in SensitivityTier],
            },
            "permitted_receiver_roles": {
                "type": "array",
                "items": {"type": "string", "enum": list(policy.roles)},
                # distinct roles cannot outnumber the policy's; the bound also stops a
                # small model's grammar-constrained output from repeating a role until
                # it runs out of tokens (uniqueItems is not accepted by every provider)
                "maxItems": len(policy.roles),
            },
            "extra_sensitive": {"type": "boolean"},
            "governing_principle": {"type": "string"},
        },
        "required": list(MODEL_FIELDS),
        "additionalProperties": False,
    }


@dataclass(frozen=True, slots=True)
class ProposedLabel:
    """The four fields a labeler (model or person) wrote for one document."""

    sensitivity_tier: SensitivityTier
    permitted_receiver_roles: frozenset[str]
    extra_sensitive: bool
    governing_principle: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "sensitivity_tier": self.sensitivity_tier.value,
            "permitted_receiver_roles": sorted(self.permitted_receiver_roles),
            "extra_sensitive": self.extra_sensitive,
            "governing_principle": self.governing_principle,
        }

    @property
    def decisive(self) -> tuple[SensitivityTier, frozenset[str]]:
        """The two fields the gate reads."""
        return self.sensitivity_tier, self.permitted_receiver_roles

    @property
    def categorical(self) -> tuple[SensitivityTier, frozenset[str], bool]:
        """Every field with a closed vocabulary (the principle is free text)."""
        return self.sensitivity_tier, self.permitted_receiver_roles, self.extra_sensitive

    @classmethod
    def of(cls, label: Label) -> ProposedLabel:
        """The same four fields of an authored label."""
        return cls(
            label.sensitivity_tier,
            label.permitted_receiver_roles,
            label.extra_sensitive,
            label.governing_principle,
        )


def parse_proposed(data: object, policy: Policy) -> ProposedLabel:
    """Check a model's structured output against the schema, strictly.

    Nothing is repaired: an unknown tier or role, a role listed twice, a missing or
    extra field, or a wrong type is an error (the labeler then asks again, and
    records an explicit failure when that does not help).

    Args:
        data: the decoded JSON output.
        policy: the policy whose roles are the vocabulary.

    Returns:
        The `ProposedLabel`.

    Raises:
        LabelOutputError: naming the field and what was expected.
    """
    if not isinstance(data, Mapping):
        raise LabelOutputError(f"expected a JSON object, got {type(data).__name__}")
    missing = [f for f in MODEL_FIELDS if f not in data]
    extra = sorted(str(k) for k in data if k not in MODEL_FIELDS)
    if missing:
        raise LabelOutputError(f"missing field(s): {', '.join(missing)}")
    if extra:
        raise LabelOutputError(f"unknown field(s): {', '.join(extra)}")
    tier_raw = data["sensitivity_tier"]
    try:
        tier = SensitivityTier(tier_raw)
    except ValueError:
        allowed = ", ".join(t.value for t in SensitivityTier)
        raise LabelOutputError(
            f"sensitivity_tier: got {tier_raw!r}, expected one of {allowed}"
        ) from None
    roles_raw = data["permitted_receiver_roles"]
    if not isinstance(roles_raw, list):
        raise LabelOutputError(
            f"permitted_receiver_roles: expected a list, got {type(roles_raw).__name__}"
        )
    roles: set[str] = set()
    for item in roles_raw:
        try:
            role = check_role_name(item)
        except ValueError as exc:
            raise LabelOutputError(f"permitted_receiver_roles: {exc}") from None
        if role not in policy.roles:
            raise LabelOutputError(
                f"permitted_receiver_roles: {role!r} is not a role of the policy"
                f" ({', '.join(policy.roles)})"
            )
        if role in roles:
            raise LabelOutputError(f"permitted_receiver_roles: {role!r} is listed twice")
        roles.add(role)
    extra_sensitive = data["extra_sensitive"]
    if not isinstance(extra_sensitive, bool):
        raise LabelOutputError(f"extra_sensitive: expected true or false, got {extra_sensitive!r}")
    principle = data["governing_principle"]
    if not isinstance(principle, str) or not principle.strip():
        raise LabelOutputError("governing_principle: expected a non-empty string")
    return ProposedLabel(tier, frozenset(roles), extra_sensitive, principle.strip())


def draft_schema(policy: Policy, subjects: Sequence[str]) -> dict[str, Any]:
    """The schema of a draft for a document with no authored label: the label schema
    and its data subject, one of the corpus's known subjects or null (organization)."""
    schema = label_schema(policy)
    schema["properties"]["subject"] = {"enum": [*subjects, None]}
    schema["required"] = [*MODEL_FIELDS, "subject"]
    return schema


@dataclass(frozen=True, slots=True)
class ParsedDraft:
    """A draft's four label fields, the subject the model named (None: organization-
    level), and what was repaired on the way (a role listed twice, dropped)."""

    proposed: ProposedLabel
    subject: str | None
    notes: tuple[str, ...]


def parse_draft(data: object, policy: Policy, subjects: Sequence[str]) -> ParsedDraft:
    """Check a draft (a document with no authored label, from a user's corpus).

    Unlike `parse_proposed`, a list that repeats an entry keeps its first occurrences
    with a note (a small model repeats a role; the repeat says nothing new), and the
    subject must be one of `subjects` or null. Everything else is as strict.

    Raises:
        LabelOutputError: naming the field and what was expected.
    """
    if not isinstance(data, Mapping):
        raise LabelOutputError(f"expected a JSON object, got {type(data).__name__}")
    fields = dict(data)
    # absent reads as null (a backend without constrained output may leave it out):
    # the draft is then organization-level, and a tier needing a subject is refused
    subject = fields.pop("subject", None)
    if subject is not None and (not isinstance(subject, str) or subject not in subjects):
        known = ", ".join(subjects) or "none"
        raise LabelOutputError(
            f"subject: got {subject!r}, expected null or one of the known subjects ({known})"
        )
    notes: list[str] = []
    for name, value in list(fields.items()):
        if isinstance(value, list):
            kept = [v for i, v in enumerate(value) if _first(value, i)]
            if len(kept) < len(value):
                dropped = len(value) - len(kept)
                notes.append(
                    f"{name}: {dropped} repeated entr{'y' if dropped == 1 else 'ies'} removed"
                )
                fields[name] = kept
    return ParsedDraft(parse_proposed(fields, policy), subject, tuple(notes))


def _first(values: list[Any], i: int) -> bool:
    """Whether ``values[i]`` is the first of its equal entries."""
    return values[i] not in values[:i]


def _requires_assignment(policy: Policy, tier: SensitivityTier) -> bool:
    """The policy's rule for a drafted tier (Table V); a tier it lacks is an error."""
    requires = policy.requires_assignment(tier)
    if requires is None:
        raise LabelOutputError(f"sensitivity_tier: {tier.value!r} is not a tier of the policy")
    return requires


def substitute(authored: Label, proposed: ProposedLabel, policy: Policy) -> Label:
    """The authored label with the labeler's four fields in place of the annotator's.

    `assignment_required` follows the policy's rule for the new tier (Table V), as it
    would for an annotator's label.

    Raises:
        LabelOutputError: the result is not a valid label (e.g. a tier the policy lacks).
    """
    requires = _requires_assignment(policy, proposed.sensitivity_tier)
    data = authored.model_dump()
    data.update(
        sensitivity_tier=proposed.sensitivity_tier,
        permitted_receiver_roles=proposed.permitted_receiver_roles,
        extra_sensitive=proposed.extra_sensitive,
        extra_sensitive_reason=(
            (authored.extra_sensitive_reason or DRAFT_EXTRA_SENSITIVE_REASON)
            if proposed.extra_sensitive
            else None
        ),
        governing_principle=proposed.governing_principle,
        assignment_required=requires and authored.subject is not None,
    )
    try:
        return Label.model_validate(data)
    except ValidationError as exc:
        raise LabelOutputError(str(exc)) from None


def draft_label(
    doc_id: str, proposed: ProposedLabel, policy: Policy, subject: str | None = None
) -> Label:
    """A complete label for a document with no authored label: the labeler's four fields
    and placeholders for the rest, which the model is never asked for.

    The placeholders: an empty title, document type `DRAFT_DOCUMENT_TYPE`, the subject
    the model named (`parse_draft`; subject type individual) or none (organization-level),
    and as originating context the one context that the
    permitted roles are authoritative in, else the policy's first. A tier that requires
    an assignment is refused (the draft would have no subject, and the gate grants a
    subject-less document without one): such a document is labelled by hand.

    Raises:
        LabelOutputError: the result is not a valid label (e.g. a tier the policy lacks).
    """
    requires = _requires_assignment(policy, proposed.sensitivity_tier)
    if requires and subject is None:
        # fail closed: with no subject the gate would grant the tier without any
        # assignment, which is wider than the policy means for a document about a person
        raise LabelOutputError(
            f"sensitivity_tier: {proposed.sensitivity_tier.value!r} requires an assignment to"
            " the document's subject, which the model does not name: write the label by hand"
            " (with its subject) before proposing it"
        )
    contexts = {
        policy.authoritative_context[role]
        for role in proposed.permitted_receiver_roles
        if role in policy.authoritative_context
    }
    origin = next(iter(contexts)) if len(contexts) == 1 else policy.contexts[0]
    try:
        return Label.model_validate(
            {
                "doc_id": doc_id,
                "sensitivity_tier": proposed.sensitivity_tier,
                "permitted_receiver_roles": proposed.permitted_receiver_roles,
                "subject": subject,
                # a named subject's kind is not asked for: the reviewer sets it
                "subject_type": (
                    SubjectType.ORGANIZATION if subject is None else SubjectType.INDIVIDUAL
                ),
                "document_type": DRAFT_DOCUMENT_TYPE,
                "extra_sensitive": proposed.extra_sensitive,
                "extra_sensitive_reason": (
                    DRAFT_EXTRA_SENSITIVE_REASON if proposed.extra_sensitive else None
                ),
                "governing_principle": proposed.governing_principle,
                "originating_context": origin,
                "assignment_required": requires,
            }
        )
    except ValidationError as exc:
        raise LabelOutputError(str(exc)) from None
