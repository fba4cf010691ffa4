"""What a backend can do, declared by the backend itself.

Callers ask `capabilities_of(backend)` instead of testing a provider's name: the
judging pipelines constrain a small local model's answers (`constrain_by_default`)
with a grammar when the backend takes one (`Capability.GRAMMAR`), and request
structured output from any backend with `Capability.JSON_SCHEMA`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Capabilities", "Capability", "capabilities_of"]


class Capability(StrEnum):
    """A feature of a backend."""

    GRAMMAR = "grammar"
    """Decoding constrained by a raw GBNF grammar (`GenerationSettings.grammar`)."""
    JSON_SCHEMA = "json_schema"
    """Structured output under a JSON schema (`GenerationSettings.json_schema`)."""
    TOOLS = "tools"
    """Tool (function) calling."""


@dataclass(frozen=True)
class Capabilities:
    """A backend's features and how callers should treat its answers.

    Args:
        features: what it supports.
        constrain_by_default: its models are small enough that callers should
            constrain their answers (grammars, length limits) unless configured
            otherwise (the embedded model).
    """

    features: frozenset[Capability] = frozenset({Capability.JSON_SCHEMA})
    constrain_by_default: bool = False

    def __contains__(self, feature: object) -> bool:
        return feature in self.features


_DEFAULT = Capabilities()


def capabilities_of(backend: Any) -> Capabilities:
    """What `backend` declares (its ``capabilities`` attribute), else the defaults:
    structured JSON output, no grammar, answers not constrained by default."""
    declared = getattr(backend, "capabilities", None)
    return declared if isinstance(declared, Capabilities) else _DEFAULT
