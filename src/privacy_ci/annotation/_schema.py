"""The answer to Table 5 as structured output: its JSON schema and its strict parser.

The keys are the paper's question labels (``Q1``..``Q5``) and, inside ``Q2``, its nine
characteristic names, so the answer reads like the prompt. Parsing is strict: every
key present, no other key, every choice one of the paper's options, every ``Q5`` key
one of the node's references. A lenient parser would turn a model's mistakes into
norms that look annotated; here they are re-asked, then recorded as failures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privacy_ci.ci import FIELD_TITLES
from privacy_ci.errors import PrivacyCIError

__all__ = [
    "CHARACTERISTICS",
    "NORM_TYPES",
    "TERNARY",
    "Annotation",
    "AnnotationOutputError",
    "annotation_schema",
    "parse_annotation",
]

CHARACTERISTICS: dict[str, str] = FIELD_TITLES
"""Q2's characteristics as Table 5 names them -> our field names (`privacy_ci.ci.FIELDS`)."""

NORM_TYPES: dict[str, str] = {
    "Prohibit": "negative_norm",
    "Permit": "positive_norm",
    "General Definition": "general_definition",
}
"""Q1's options -> the Checklist KB's ``norm_type`` spellings."""

TERNARY: dict[str, str] = {"Yes": "yes", "No": "no", "Not Sure": "not sure"}
"""Q3/Q4's options -> the Checklist KB's spellings."""

REFERENCE_KINDS: dict[str, str] = {"Exception": "exception", "Support": "support"}
"""Q5's options -> the Checklist KB's reference labels."""

QUESTIONS = ("Q1", "Q2", "Q3", "Q4", "Q5")


class AnnotationOutputError(PrivacyCIError):
    """A model's answer does not fit the Table 5 answer schema (the message says how)."""


@dataclass(frozen=True, slots=True)
class Annotation:
    """One leaf's parsed answer, in the Checklist KB's spellings.

    Args:
        norm_type: ``positive_norm``, ``negative_norm`` or ``general_definition``.
        characteristics: field name (``sender_role`` ...) -> the answer as written.
        sender_is_subject, recipient_is_subject: ``yes``, ``no`` or ``not sure``.
        references: reference id -> ``support`` or ``exception``, in the node's order.
    """

    norm_type: str
    characteristics: Mapping[str, str]
    sender_is_subject: str
    recipient_is_subject: str
    references: Mapping[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "norm_type": self.norm_type,
            "characteristics": dict(self.characteristics),
            "sender_is_subject": self.sender_is_subject,
            "recipient_is_subject": self.recipient_is_subject,
            "references": dict(self.references),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Annotation:
        return cls(
            str(data["norm_type"]),
            {str(k): str(v) for k, v in data["characteristics"].items()},
            str(data["sender_is_subject"]),
            str(data["recipient_is_subject"]),
            {str(k): str(v) for k, v in data["references"].items()},
        )


def annotation_schema(references: Sequence[str], max_chars: int | None = None) -> dict[str, Any]:
    """The JSON schema of one node's answer.

    Args:
        references: the node's references (``Q5``'s keys, all required).
        max_chars: a ``maxLength`` for each characteristic (keeps a small constrained
            model from running on until its token budget ends); None for none.

    Returns:
        The schema.
    """
    text: dict[str, Any] = {"type": "string"}
    if max_chars is not None:
        text["maxLength"] = max_chars
    return {
        "type": "object",
        "properties": {
            "Q1": {"type": "string", "enum": list(NORM_TYPES)},
            "Q2": {
                "type": "object",
                "properties": {name: dict(text) for name in CHARACTERISTICS},
                "required": list(CHARACTERISTICS),
                "additionalProperties": False,
            },
            "Q3": {"type": "string", "enum": list(TERNARY)},
            "Q4": {"type": "string", "enum": list(TERNARY)},
            "Q5": {
                "type": "object",
                "properties": {
                    ref: {"type": "string", "enum": list(REFERENCE_KINDS)} for ref in references
                },
                "required": list(references),
                "additionalProperties": False,
            },
        },
        "required": list(QUESTIONS),
        "additionalProperties": False,
    }


_SPACES = re.compile(r"[\s_]+")


def _key(text: str) -> str:
    """Case-, space- and underscore-insensitive key (``sender_role`` == ``Sender Role``)."""
    return _SPACES.sub(" ", text).strip().casefold()


def _choice(question: str, value: Any, options: Mapping[str, str]) -> str:
    """One of `options` (case-insensitive, a leading ``A.``/``B.`` option letter allowed)."""
    if not isinstance(value, str):
        raise AnnotationOutputError(
            f"{question}: expected one of {list(options)}, got {type(value).__name__}"
        )
    cleaned = re.sub(r"^[A-C][.)]\s*", "", value.strip()).strip("<> ")
    for label, canonical in options.items():
        if _key(cleaned) in (_key(label), _key(f"{label} by law")):
            return canonical
    raise AnnotationOutputError(f"{question}: {value!r} is not one of {list(options)}")


def _text(name: str, value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, str):
        return value.strip() or "None"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(v.strip() for v in value if v.strip()) or "None"
    raise AnnotationOutputError(f"Q2: {name!r} must be a string, got {type(value).__name__}")


def parse_annotation(value: Any, references: Sequence[str]) -> Annotation:
    """Check a decoded answer against the schema and convert it.

    Args:
        value: the decoded JSON.
        references: the node's references: ``Q5`` must name each exactly once and
            nothing else.

    Returns:
        The annotation.

    Raises:
        AnnotationOutputError: every problem of the answer, in one message.
    """
    if not isinstance(value, dict):
        raise AnnotationOutputError(f"expected a JSON object, got {type(value).__name__}")
    problems: list[str] = []
    by_key = {_key(str(k)): v for k, v in value.items()}
    unknown = sorted(k for k in value if _key(str(k)) not in {_key(q) for q in QUESTIONS})
    missing = [q for q in QUESTIONS if _key(q) not in by_key]
    if unknown:
        problems.append(f"unknown key(s) {unknown}")
    if missing:
        problems.append(f"missing {missing}")

    def attempt(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except AnnotationOutputError as exc:
            problems.append(str(exc))
            return None

    norm_type = attempt(_choice, "Q1", by_key.get("q1"), NORM_TYPES) if "q1" in by_key else None
    q3 = attempt(_choice, "Q3", by_key.get("q3"), TERNARY) if "q3" in by_key else None
    q4 = attempt(_choice, "Q4", by_key.get("q4"), TERNARY) if "q4" in by_key else None
    characteristics: dict[str, str] = {}
    q2 = by_key.get("q2")
    if "q2" in by_key:
        if not isinstance(q2, dict):
            problems.append(f"Q2: expected an object of characteristics, got {type(q2).__name__}")
        else:
            names = {_key(n): n for n in CHARACTERISTICS}
            given = {_key(str(k)): (str(k), v) for k, v in q2.items()}
            extra = sorted(k for k, _ in given.values() if _key(k) not in names)
            absent = [n for k, n in names.items() if k not in given]
            if extra:
                problems.append(f"Q2: unknown characteristic(s) {extra}")
            if absent:
                problems.append(f"Q2: missing characteristic(s) {absent}")
            for k, name in names.items():
                if k in given:
                    text = attempt(_text, name, given[k][1])
                    if text is not None:
                        characteristics[CHARACTERISTICS[name]] = text
    refs: dict[str, str] = {}
    q5 = by_key.get("q5")
    if "q5" in by_key:
        if isinstance(q5, list) and not q5:
            q5 = {}  # an empty list for an empty reference list
        if not isinstance(q5, dict):
            problems.append(f"Q5: expected an object {{reference: kind}}, got {type(q5).__name__}")
        else:
            wanted = list(references)
            stray = sorted(str(k) for k in q5 if k not in wanted)
            if stray:
                problems.append(f"Q5: {stray} not in the node's references {wanted}")
            absent_refs = [r for r in wanted if r not in q5]
            if absent_refs:
                problems.append(f"Q5: no answer for reference(s) {absent_refs}")
            for ref in wanted:
                if ref in q5:
                    kind = attempt(_choice, f"Q5 {ref}", q5[ref], REFERENCE_KINDS)
                    if kind is not None:
                        refs[ref] = kind
    if problems:
        raise AnnotationOutputError("; ".join(problems))
    assert norm_type is not None and q3 is not None and q4 is not None
    return Annotation(norm_type, characteristics, q3, q4, refs)
