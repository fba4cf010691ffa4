"""Contextual Integrity as a type: the flow every subsystem carries.

A flow has five parameters (Nissenbaum; section II-A of the Conductor paper, section
3.2 of the Checklist paper): sender, recipient and data subject (each a `Party`, a
name and a role), the information type, and the transmission principle (purpose and
consent). A case to evaluate, an event to judge, a retrieval query, a norm of the
knowledge base and the service's judge request all describe their flow with `Flow`.

`FIELDS` is the one flat spelling of those parameters (the case files', the CI
extraction prompt's and the CLI's), and `clean_value` the one normaliser of the
many ways files and models write "no value" (``None``, ``N/A``, ``null``, ``None
specified``, ``none (remark)`` ...).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "CHARACTERISTICS",
    "FIELDS",
    "FIELD_TITLES",
    "PARTY_FIELDS",
    "Flow",
    "Party",
    "TransmissionPrinciple",
    "Verdict",
    "clean_value",
    "is_placeholder",
]


class Verdict(StrEnum):
    """How a norm set judges a flow (the Checklist's three answers)."""

    PERMIT = "permit"
    PROHIBIT = "prohibit"
    NOT_APPLICABLE = "not_applicable"


FIELDS: tuple[str, ...] = (
    "sender",
    "sender_role",
    "recipient",
    "recipient_role",
    "subject",
    "subject_role",
    "information_type",
    "purpose",
    "consent_form",
)
"""The flow's parameters spelled flat, in order: the fields of GoldCoin's case files,
of the CI extraction prompt's answer (in snake case) and of the CLI's options."""

FIELD_TITLES: dict[str, str] = {
    "Sender": "sender",
    "Sender Role": "sender_role",
    "Recipient": "recipient",
    "Recipient Role": "recipient_role",
    "Subject": "subject",
    "Subject Role": "subject_role",
    "Information Type": "information_type",
    "Consent Form": "consent_form",
    "Purpose": "purpose",
}
"""The fields as the Checklist paper's prompts name them, in their order -> `FIELDS`:
the CI extraction prompt's answer (Table 10) and the annotation prompt's ``Q2``
(Table 5)."""

PARTY_FIELDS: tuple[str, ...] = ("sender", "recipient", "subject")
"""The fields that hold a party's name (the rest are its characteristics)."""

CHARACTERISTICS: tuple[str, ...] = tuple(f for f in FIELDS if f not in PARTY_FIELDS)
"""The CI characteristics: the roles, the information type and the transmission
principle, without the parties' names (what retrieval and most prompts read)."""


# -- "no value" ---------------------------------------------------------------------------
_PLACEHOLDER = re.compile(
    r"(none|null|nil|nan|n/?a|unknown|unspecified|none specified|not specified|"
    r"not mentioned|not applicable|not sure|\*\*none\*\*)\W*"
    # "none (consent not mentioned)", "n/a (not relevant to the case)"
    r"|(?:none|n/a|not applicable)\s*\(.*\)"
    # "none stated", "not explicitly mentioned in the case", "none provided"
    r"|(?:none|not)(?: explicitly| clearly| directly)?"
    r" (?:stated|provided|mentioned|given|indicated|specified|disclosed)(?: explicitly)?"
    r"(?: in (?:the )?(?:case|given information|provided text|context of the case))?"
)
_TRAILING = ";.,:"


def is_placeholder(value: str) -> bool:
    """Whether a written value means "no value".

    Case-, space- and Unicode-insensitive; trailing ``;.,:`` ignored. Values that
    say more (``None, Law enforcement``; ``Not explicitly stated, but implied
    consent``) are not placeholders.

    Args:
        value: the raw string, e.g. ``None``, ``null``, ``N/A``, ``None specified``,
            ``**None**``, ``None (consent not mentioned)``, ``""``.

    Returns:
        True when it means "no value".
    """
    text = " ".join(unicodedata.normalize("NFKC", value).split()).lower()
    while text and text[-1] in _TRAILING:
        text = text[:-1].rstrip()
    return not text or _PLACEHOLDER.fullmatch(text) is not None


def clean_value(value: Any) -> str | None:
    """One CI value as text, or None when there is none.

    Args:
        value: None, a string, or a list of strings (joined with ``"; "``, its
            empty and placeholder items dropped); other values are written with
            ``str``.

    Returns:
        The value with runs of whitespace collapsed and the ends stripped (case,
        wording and punctuation kept), or None for None, empty and placeholder
        values.
    """
    if value is None:
        return None
    if isinstance(value, list | tuple):
        items = [clean_value(v) for v in value]
        return "; ".join(i for i in items if i) or None
    text = " ".join(str(value).split())
    return None if is_placeholder(text) else text


# -- the flow ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Party:
    """An actor in a flow: who it is and in what role.

    Args:
        name: the individual or organisation (None when only the role is known).
        role: the capacity in which it acts (e.g. ``Doctor``, ``covered entity``).
    """

    name: str | None = None
    role: str | None = None

    def __str__(self) -> str:
        if self.name and self.role:
            return f"{self.name} [{self.role}]"
        return self.name or self.role or ""


@dataclass(frozen=True, slots=True)
class TransmissionPrinciple:
    """The terms under which information moves: purpose and consent."""

    purpose: str | None = None
    consent: str | None = None


_EMPTY_PARTY = Party()
_EMPTY_PRINCIPLE = TransmissionPrinciple()


@dataclass(frozen=True, slots=True)
class Flow:
    """One information flow described by its five CI parameters.

    Every value is text or None (unknown); build one from flat fields with
    `Flow.of`, which cleans placeholders.

    Args:
        sender: who transmits the information.
        recipient: who receives it.
        subject: whom the information is about.
        information_type: what kind of information moves.
        principle: the transmission principle (purpose, consent).
        attributes: finer information attributes, when known.
    """

    sender: Party = _EMPTY_PARTY
    recipient: Party = _EMPTY_PARTY
    subject: Party = _EMPTY_PARTY
    information_type: str | None = None
    principle: TransmissionPrinciple = _EMPTY_PRINCIPLE
    attributes: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def of(
        cls,
        source: Mapping[str, Any] | object | None = None,
        *,
        clean: bool = True,
        **values: Any,
    ) -> Flow:
        """A flow from flat `FIELDS`, each cleaned with `clean_value`.

        Args:
            source: a mapping or an object with some of the `FIELDS` (missing ones
                are None).
            clean: clean each value (False: take them as they are, e.g. from a
                loader that has validated and normalised them already).
            values: fields given directly (they win over `source`'s).

        Returns:
            The flow.

        Raises:
            TypeError: a keyword that is not one of the `FIELDS` (a caller's bug).
        """
        unknown = set(values) - set(FIELDS)
        if unknown:
            raise TypeError(f"not CI fields: {sorted(unknown)} (expected some of {FIELDS})")
        flat: dict[str, str | None] = {}
        for name in FIELDS:
            if name in values:
                raw = values[name]
            elif isinstance(source, Mapping):
                raw = source.get(name)
            else:
                raw = getattr(source, name, None)
            flat[name] = clean_value(raw) if clean else raw
        return cls(
            sender=Party(flat["sender"], flat["sender_role"]),
            recipient=Party(flat["recipient"], flat["recipient_role"]),
            subject=Party(flat["subject"], flat["subject_role"]),
            information_type=flat["information_type"],
            principle=TransmissionPrinciple(flat["purpose"], flat["consent_form"]),
        )

    def get(self, name: str) -> str | None:
        """One of the `FIELDS` by its flat name.

        Raises:
            KeyError: not one of the `FIELDS`.
        """
        match name:
            case "sender":
                return self.sender.name
            case "sender_role":
                return self.sender.role
            case "recipient":
                return self.recipient.name
            case "recipient_role":
                return self.recipient.role
            case "subject":
                return self.subject.name
            case "subject_role":
                return self.subject.role
            case "information_type":
                return self.information_type
            case "purpose":
                return self.principle.purpose
            case "consent_form":
                return self.principle.consent
        raise KeyError(f"{name!r} is not a CI field (one of {FIELDS})")

    def fields(self, names: Iterable[str] = FIELDS) -> dict[str, str | None]:
        """The flat fields, in `FIELDS` order (or the order of `names`)."""
        return {name: self.get(name) for name in names}

    def known(self, names: Iterable[str] = FIELDS) -> dict[str, str]:
        """The flat fields that have a value."""
        return {name: v for name, v in self.fields(names).items() if v is not None}

    def characteristics(self) -> dict[str, str]:
        """The known `CHARACTERISTICS` (roles, information type, purpose, consent)."""
        return self.known(CHARACTERISTICS)

    @property
    def is_empty(self) -> bool:
        """Whether no parameter is known."""
        return not self.known() and not self.attributes

    def as_dict(self) -> dict[str, object]:
        """The five parameters as nested JSON-ready values."""
        return {
            "sender": {"name": self.sender.name, "role": self.sender.role},
            "recipient": {"name": self.recipient.name, "role": self.recipient.role},
            "subject": {"name": self.subject.name, "role": self.subject.role},
            "information_type": self.information_type,
            "transmission_principle": {
                "purpose": self.principle.purpose,
                "consent": self.principle.consent,
            },
            "attributes": list(self.attributes),
        }
