"""The Contextual Integrity vocabulary shared by the Checklist and the Conductor.

A flow has five parameters (Nissenbaum; section II-A of the Conductor paper):
data subject, sender, recipient, information type and transmission principle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    """How a norm set judges a flow (the Checklist's three answers)."""

    PERMIT = "permit"
    PROHIBIT = "prohibit"
    NOT_APPLICABLE = "not_applicable"


@dataclass(frozen=True, slots=True)
class Party:
    """An actor in a flow: who it is and in what role.

    Args:
        name: the individual or organisation (may be empty when only the role is known).
        role: the capacity in which it acts (e.g. ``Doctor``, ``covered entity``).
    """

    name: str
    role: str = ""

    def __str__(self) -> str:
        if self.name and self.role:
            return f"{self.name} [{self.role}]"
        return self.name or self.role


@dataclass(frozen=True, slots=True)
class TransmissionPrinciple:
    """The terms under which information moves: purpose and consent."""

    purpose: str = ""
    consent: str = ""


@dataclass(frozen=True, slots=True)
class Flow:
    """One information flow described by its five CI parameters.

    Args:
        sender: who transmits the information.
        recipient: who receives it.
        subject: whom the information is about.
        information_type: what kind of information moves.
        principle: the transmission principle (purpose, consent).
        attributes: finer information attributes, when known.
    """

    sender: Party
    recipient: Party
    subject: Party
    information_type: str
    principle: TransmissionPrinciple = TransmissionPrinciple()
    attributes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, object]:
        """Return the five parameters as plain JSON-ready values."""
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


__all__ = ["Flow", "Party", "TransmissionPrinciple", "Verdict"]
