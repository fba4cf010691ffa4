"""The CI characteristics as the judging prompts spell them, and back to a `Flow`.

The CI extraction prompt (Table 10) names nine fields in title case; `CI_JSON_FIELDS`
maps them to `privacy_ci.ci.FIELDS`. A model's answer becomes a `Flow` through the
one normaliser of "no value" (`privacy_ci.ci.clean_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privacy_ci.ci import CHARACTERISTICS, FIELD_TITLES, Flow, clean_value

__all__ = ["CI_JSON_FIELDS", "answer_flow", "ci_schema", "event_characteristics"]

CI_JSON_FIELDS: dict[str, str] = FIELD_TITLES
"""The CI extraction prompt's field names -> `privacy_ci.ci.FIELDS`."""


def _answer_value(value: Any) -> str | None:
    # a model's "Treatment." is "Treatment": trailing periods and spaces dropped
    text = clean_value(value)
    return (text.strip(" .") or None) if text is not None else None


def answer_flow(answer: Mapping[str, Any]) -> Flow:
    """A CI extraction answer (the prompt's field names) as a `Flow`."""
    return Flow.of(
        {key: _answer_value(answer.get(name)) for name, key in CI_JSON_FIELDS.items()},
        clean=False,
    )


def event_characteristics(flow: Flow) -> Flow:
    """The characteristics a case gives (roles, information type, purpose, consent),
    cleaned like a model's answer; the parties' names are left out."""
    return Flow.of({n: _answer_value(flow.get(n)) for n in CHARACTERISTICS}, clean=False)


def ci_schema(constrained: bool = False, field_chars: int = 32) -> dict[str, Any]:
    """The JSON schema of the CI extraction (every field a string, all required).

    Args:
        constrained: add ``maxLength`` to every field (for small local models).
        field_chars: that ``maxLength``.

    Returns:
        The schema.
    """
    prop: dict[str, Any] = {"type": "string"}
    if constrained:
        prop = {"type": "string", "maxLength": field_chars}
    return {
        "type": "object",
        "properties": {name: dict(prop) for name in CI_JSON_FIELDS},
        "required": list(CI_JSON_FIELDS),
        "additionalProperties": False,
    }
