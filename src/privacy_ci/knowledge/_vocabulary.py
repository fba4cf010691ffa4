"""Vocabulary normalisation for the annotated knowledge bases.

The published KBs were written by GPT-4 and re-serialised by hand, so the same
meaning is spelled many ways: ``none``, ``none;``, ``None``, ``null``, ``N/A``,
``not specified`` and ``""`` all mean "no value"; ``no``/``NO``/``No`` and
``not sure``/``Not Sure`` are the same ternary answers; ``authorization (§ 164.508(a)(4))``
is an authorization. This module maps them to one spelling and records every
change in a `NormalisationReport`. Values that cannot be mapped (an unknown
ternary, a consent form outside the vocabulary, a list element that is not a
string) are kept where possible and *listed* in the report, never dropped silently.

It also holds `term_key`, the lemma-ish key shared by the role/attribute graph
matcher and the definition lookup ("covered entities" and "cover entity" get
the same key).
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as _field
from enum import StrEnum
from typing import Any

from privacy_ci.ci import is_placeholder

__all__ = [
    "CONSENT_FORMS",
    "NormType",
    "NormalisationReport",
    "ReferenceKind",
    "Ternary",
    "UnnormalisedValue",
    "clean_text",
    "is_placeholder",
    "normalise_consent_form",
    "normalise_list",
    "normalise_norm_type",
    "normalise_reference_kind",
    "normalise_scalar",
    "normalise_ternary",
    "similarity",
    "term_key",
    "term_tokens",
]

_EXAMPLES = 5


class NormType(StrEnum):
    """The three-way specification classification of section 3.2."""

    POSITIVE = "positive"
    NEGATIVE = "negative"
    GENERAL_DEFINITION = "general_definition"


class Ternary(StrEnum):
    """An annotator's yes / no / not sure answer."""

    YES = "yes"
    NO = "no"
    UNSURE = "unsure"


class ReferenceKind(StrEnum):
    """How a cited node relates to the citing norm (section 3.2, reference annotation)."""

    SUPPORT = "support"
    EXCEPTION = "exception"


_NORM_TYPES: dict[str, NormType] = {
    "positive": NormType.POSITIVE,
    "positive_norm": NormType.POSITIVE,
    "permit": NormType.POSITIVE,
    "negative": NormType.NEGATIVE,
    "negative_norm": NormType.NEGATIVE,
    "prohibit": NormType.NEGATIVE,
    "general_definition": NormType.GENERAL_DEFINITION,
    "general definition": NormType.GENERAL_DEFINITION,
}

_TERNARIES: dict[str, Ternary] = {
    "yes": Ternary.YES,
    "y": Ternary.YES,
    "true": Ternary.YES,
    "no": Ternary.NO,
    "n": Ternary.NO,
    "false": Ternary.NO,
    "not sure": Ternary.UNSURE,
    "unsure": Ternary.UNSURE,
    "unknown": Ternary.UNSURE,
}

CONSENT_FORMS: tuple[str, ...] = (
    "authorization",
    "consent",
    "data use agreement",
    "waiver of authorization",
    "opportunity to agree or object",
    "agreement",
    "satisfactory assurance",
    "certification",
    "contract",
    "written notice",
)
"""The canonical consent forms. Other spellings map onto these via `_CONSENT_SYNONYMS`."""

_CONSENT_SYNONYMS: dict[str, str] = {
    "waiver": "waiver of authorization",
    "alteration or waiver of authorization": "waiver of authorization",
    "waiver or alteration of authorization": "waiver of authorization",
    "conditioned authorization": "authorization",
    "oral agreement or objection": "opportunity to agree or object",
    "opportunity to agree or object to the use or disclosure": "opportunity to agree or object",
    "satisfactory assurances": "satisfactory assurance",
    "certification by the plan sponsor": "certification",
    "consent by unemancipated minor": "consent",
    "consent by the minor, court, or another person authorized by law": "consent",
    "oral agreement": "agreement",
    "oral documented agreement": "agreement",
    "agreement in advance": "agreement",
    "individual's agreement": "agreement",
    "individual's agreement to the disclosure": "agreement",
    "written notice to the individual": "written notice",
}

_TRAILING_REMARK = re.compile(r"^(?P<base>[^()]+?)\s*(\(.*\)|under §.*)$")
_TRAILING_PUNCT = ";.,:"
_WS = re.compile(r"\s+")


# ---------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------
@dataclass
class UnnormalisedValue:
    """A value that could not be mapped to the vocabulary (kept or defaulted, and listed).

    Args:
        field: the KB field, e.g. ``consent_form``.
        value: the value as found (after decoding), e.g. ``choice``.
        count: how many entries hold it.
        example_ids: up to five ids of entries that hold it.
        action: what the loader did with it (``kept as free text``, ``set to unsure``, ...).
    """

    field: str
    value: str
    count: int = 0
    example_ids: list[str] = _field(default_factory=list)
    action: str = ""


@dataclass
class NormalisationReport:
    """What vocabulary normalisation changed, and what it could not normalise.

    Args:
        source: the file the values came from.
        normalised: ``(field, rule) -> count`` of values changed by a rule, e.g.
            ``("consent_form", "placeholder 'none;' -> None") -> 7``.
        unnormalised: ``(field, value) -> UnnormalisedValue`` for every value that
            is outside the vocabulary.
    """

    source: str = ""
    normalised: Counter[tuple[str, str]] = _field(default_factory=Counter)
    unnormalised: dict[tuple[str, str], UnnormalisedValue] = _field(default_factory=dict)

    def note(self, field_name: str, rule: str, count: int = 1) -> None:
        """Count one application of a normalisation rule.

        Args:
            field_name: the KB field.
            rule: a short description of the change, e.g. ``"lowercased"``.
            count: how many values it changed.
        """
        self.normalised[(field_name, rule)] += count

    def unrecognised(self, field_name: str, value: Any, entry_id: str, action: str) -> None:
        """Record a value outside the vocabulary.

        Args:
            field_name: the KB field.
            value: the offending value.
            entry_id: the id of the entry holding it.
            action: what was done with it.
        """
        text = value if isinstance(value, str) else repr(value)
        item = self.unnormalised.setdefault(
            (field_name, text), UnnormalisedValue(field_name, text, action=action)
        )
        item.count += 1
        if len(item.example_ids) < _EXAMPLES and entry_id not in item.example_ids:
            item.example_ids.append(entry_id)

    def merge(self, other: NormalisationReport) -> None:
        """Add another report's counts and listings into this one.

        Args:
            other: the report to fold in.
        """
        self.normalised.update(other.normalised)
        for key, item in other.unnormalised.items():
            mine = self.unnormalised.setdefault(
                key, UnnormalisedValue(item.field, item.value, action=item.action)
            )
            mine.count += item.count
            for eid in item.example_ids:
                if len(mine.example_ids) < _EXAMPLES and eid not in mine.example_ids:
                    mine.example_ids.append(eid)

    def rule_counts(self, field_name: str | None = None) -> dict[str, int]:
        """The rule counts, optionally for one field.

        Args:
            field_name: restrict to this field; None for all (keys ``field: rule``).

        Returns:
            rule -> count, most frequent first.
        """
        items = sorted(self.normalised.items(), key=lambda kv: (-kv[1], kv[0]))
        if field_name is None:
            return {f"{f}: {r}": n for (f, r), n in items}
        return {r: n for (f, r), n in items if f == field_name}

    def unnormalised_values(self, field_name: str | None = None) -> list[UnnormalisedValue]:
        """The values that could not be normalised, most frequent first.

        Args:
            field_name: restrict to this field; None for all.

        Returns:
            The listed values.
        """
        items = [v for v in self.unnormalised.values() if field_name in (None, v.field)]
        return sorted(items, key=lambda v: (-v.count, v.field, v.value))

    @property
    def total_normalised(self) -> int:
        """How many values were changed by some rule."""
        return sum(self.normalised.values())

    @property
    def total_unnormalised(self) -> int:
        """How many values (occurrences) could not be normalised."""
        return sum(v.count for v in self.unnormalised.values())

    def summary(self, top: int = 10) -> str:
        """A short human-readable summary.

        Args:
            top: how many rules and unnormalised values to show.

        Returns:
            Several lines of text.
        """
        lines = [
            f"{self.source}: {self.total_normalised} value(s) normalised, "
            f"{self.total_unnormalised} occurrence(s) of {len(self.unnormalised)} value(s) "
            "outside the vocabulary"
        ]
        for key, n in list(self.rule_counts().items())[:top]:
            lines.append(f"  {n:5d}  {key}")
        for item in self.unnormalised_values()[:top]:
            lines.append(
                f"  ?{item.count:4d}  {item.field}={item.value!r} ({item.action}; "
                f"e.g. {', '.join(item.example_ids)})"
            )
        return "\n".join(lines)


# ---------------------------------------------------------------------------------
# cleaning
# ---------------------------------------------------------------------------------
def clean_text(value: str) -> str:
    """Unicode-normalise, collapse whitespace, lowercase and strip trailing ``;.,:``.

    Args:
        value: the raw string.

    Returns:
        The cleaned string (possibly empty).
    """
    text = unicodedata.normalize("NFKC", value)
    text = _WS.sub(" ", text).strip().lower()
    while text and text[-1] in _TRAILING_PUNCT:
        text = text[:-1].rstrip()
    return text


def _describe_change(raw: str, cleaned: str) -> str | None:
    """Name the cleaning rule that turned `raw` into `cleaned` (None if unchanged)."""
    if raw == cleaned:
        return None
    collapsed = _WS.sub(" ", unicodedata.normalize("NFKC", raw)).strip()
    if collapsed.lower() == cleaned:
        if collapsed == raw:
            return "lowercased"
        return "whitespace" if collapsed.lower() == collapsed else "whitespace+lowercased"
    return "trailing punctuation stripped"


def _clean_one(
    field_name: str, value: Any, entry_id: str, report: NormalisationReport
) -> str | None:
    """Clean one string value; None for placeholders and for non-strings (listed)."""
    if value is None:
        report.note(field_name, "null -> None")
        return None
    if not isinstance(value, str):
        report.unrecognised(field_name, value, entry_id, "not a string; dropped")
        return None
    cleaned = clean_text(value)
    if is_placeholder(cleaned):
        report.note(field_name, f"placeholder {value!r} -> None")
        return None
    change = _describe_change(value, cleaned)
    if change:
        report.note(field_name, change)
    return cleaned


def normalise_list(
    field_name: str, values: Iterable[Any], entry_id: str, report: NormalisationReport
) -> tuple[str, ...]:
    """Normalise a list of actors (sender/recipient/subject).

    Placeholders are removed (so ``["none"]`` and ``[]`` both give ``()``),
    duplicates after cleaning are removed, order is kept.

    Args:
        field_name: the KB field (for the report).
        values: the raw list.
        entry_id: the entry's id (for the report).
        report: where changes are counted.

    Returns:
        The cleaned values.
    """
    out: list[str] = []
    for value in values:
        cleaned = _clean_one(field_name, value, entry_id, report)
        if cleaned is None:
            continue
        if cleaned in out:
            report.note(field_name, "duplicate removed")
            continue
        out.append(cleaned)
    return tuple(out)


def normalise_scalar(
    field_name: str, value: Any, entry_id: str, report: NormalisationReport
) -> str | None:
    """Normalise a free-text field (role, information type, purpose).

    The PrivaCI-Bench KBs store these as lists: an empty list is None, one
    element is that element, several are joined with ``"; "`` (counted).

    Args:
        field_name: the KB field.
        value: a string, None, or a list of strings.
        entry_id: the entry's id (for the report).
        report: where changes are counted.

    Returns:
        The cleaned value or None.
    """
    if isinstance(value, list):
        items = normalise_list(field_name, value, entry_id, report)
        if not items:
            return None
        if len(items) > 1:
            report.note(field_name, "several values joined with '; '")
        return "; ".join(items)
    return _clean_one(field_name, value, entry_id, report)


def normalise_consent_form(value: Any, entry_id: str, report: NormalisationReport) -> str | None:
    """Map a consent form onto `CONSENT_FORMS`.

    Placeholders (``none``, ``none;``, ``None``, ``""``, ...) and ``none (remark)``
    give None. ``authorization (remark)`` and ``authorization under § 164.508``
    give ``authorization``; synonyms (``waiver``, ``satisfactory assurances``, ...)
    give the canonical spelling. Anything else is kept as cleaned free text and
    listed in the report.

    Args:
        value: the raw value (a string, None, or a one-element list).
        entry_id: the entry's id (for the report).
        report: where changes are counted.

    Returns:
        The canonical consent form, the cleaned free text, or None.
    """
    name = "consent_form"
    if isinstance(value, list):
        if len(value) > 1:
            report.unrecognised(name, value, entry_id, "several values; joined")
        value = "; ".join(str(v) for v in value) if value else None
    cleaned = _clean_one(name, value, entry_id, report)
    if cleaned is None or cleaned in CONSENT_FORMS:
        return cleaned
    if cleaned in _CONSENT_SYNONYMS:
        report.note(name, f"synonym {cleaned!r} -> {_CONSENT_SYNONYMS[cleaned]!r}")
        return _CONSENT_SYNONYMS[cleaned]
    match = _TRAILING_REMARK.match(cleaned)
    if match:
        base = match.group("base").strip()
        canonical = base if base in CONSENT_FORMS else _CONSENT_SYNONYMS.get(base)
        if canonical is not None:
            report.note(name, f"remark stripped -> {canonical!r}")
            return canonical
    report.unrecognised(name, cleaned, entry_id, "kept as free text")
    return cleaned


def normalise_ternary(
    field_name: str, value: Any, entry_id: str, report: NormalisationReport
) -> Ternary:
    """Map ``yes``/``YES``/``no``/``NO``/``No``/``not sure``/``Not Sure`` to a `Ternary`.

    Args:
        field_name: the KB field.
        value: the raw value.
        entry_id: the entry's id (for the report).
        report: where changes are counted; unknown values are listed and become UNSURE.

    Returns:
        The ternary.
    """
    if isinstance(value, str):
        cleaned = clean_text(value)
        found = _TERNARIES.get(cleaned)
        if found is not None:
            if value != found.value:
                report.note(field_name, f"{value!r} -> {found.value}")
            return found
    report.unrecognised(field_name, value, entry_id, "set to unsure")
    return Ternary.UNSURE


def normalise_norm_type(value: Any) -> NormType | None:
    """Map a norm type spelling (``positive_norm``, ``Permit``, ``General Definition``...).

    Args:
        value: the raw value.

    Returns:
        The norm type, or None if the value is not a known spelling.
    """
    if not isinstance(value, str):
        return None
    return _NORM_TYPES.get(clean_text(value))


def normalise_reference_kind(value: Any) -> ReferenceKind | None:
    """Map a reference label (``support``, ``Support``, ``exception``, ``None``).

    Args:
        value: the raw label.

    Returns:
        The kind, or None for an explicit "no relation" label (``None``, null,
        ``""``), which the loaders drop and count.

    Raises:
        ValueError: an unknown label (not support, exception or a placeholder).
    """
    if value is None:
        return None
    if isinstance(value, str):
        cleaned = clean_text(value)
        if cleaned in ("support", "supports"):
            return ReferenceKind.SUPPORT
        if cleaned in ("exception", "exceptions"):
            return ReferenceKind.EXCEPTION
        if is_placeholder(cleaned):
            return None
    raise ValueError(f"unknown reference label {value!r} (expected support or exception)")


# ---------------------------------------------------------------------------------
# lemma-ish keys and similarity (graphs, definitions)
# ---------------------------------------------------------------------------------
_IRREGULAR = {
    "media": "medium",
    "children": "child",
    "people": "person",
    "men": "man",
    "women": "woman",
    "criteria": "criterion",
    "data": "data",
    "covered": "cover",
    "protected": "protect",
}
_KEEP_S = ("ss", "us", "is", "ous")
_TOKEN = re.compile(r"[a-z0-9]+")


def _stem(token: str) -> str:
    """A crude, consistent stemmer (applied to both sides of every comparison)."""
    if token in _IRREGULAR:
        return _IRREGULAR[token]
    if len(token) <= 3 or token.isdigit():
        return token
    if token.endswith("ies") and len(token) > 4:
        token = token[:-3] + "y"
    elif token.endswith("sses"):
        token = token[:-2]
    elif token.endswith("s") and not token.endswith(_KEEP_S):
        token = token[:-1]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            if len(token) > 3 and token[-1] == token[-2] and token[-1] not in "lsz":
                token = token[:-1]
            break
    if token.endswith("e") and len(token) > 3:
        token = token[:-1]
    return token


@functools.lru_cache(maxsize=65536)  # graph terms are tokenised again for every query
def term_tokens(term: str) -> tuple[str, ...]:
    """The stemmed tokens of a term (``"Covered Entities"`` -> ``("cover", "entity")``).

    Args:
        term: any text.

    Returns:
        The stems, in order.
    """
    text = unicodedata.normalize("NFKC", term).lower().replace("_", " ").replace("%20", " ")
    return tuple(_stem(t) for t in _TOKEN.findall(text))


def term_key(term: str) -> str:
    """The lemma-ish key two spellings of the same term share.

    Args:
        term: any text.

    Returns:
        The stems joined by single spaces.
    """
    return " ".join(term_tokens(term))


def similarity(query: str, candidate: str) -> tuple[float, str]:
    """Score how close two terms are (0..1) and name the method.

    The score is the larger of the token overlap (Jaccard over stems, raised to
    at least 0.5 + 0.4 x shared/longer when one side's tokens all occur in the
    other) and 0.9 x the difflib ratio of the keys; equal keys score 1.0.

    Args:
        query: the term looked up.
        candidate: a vocabulary term.

    Returns:
        ``(score, method)`` with method ``"normalised"``, ``"token"`` or ``"fuzzy"``.
    """
    q, c = term_tokens(query), term_tokens(candidate)
    qk, ck = " ".join(q), " ".join(c)
    if qk == ck:
        return 1.0, "normalised"
    qs, cs = set(q), set(c)
    token = 0.0
    if qs and cs:
        inter = len(qs & cs)
        token = inter / len(qs | cs)
        if inter and (qs <= cs or cs <= qs):
            token = max(token, 0.5 + 0.4 * inter / max(len(qs), len(cs)))
    ratio = 0.9 * difflib.SequenceMatcher(None, qk, ck, autojunk=False).ratio()
    if token >= ratio and token > 0:
        return round(token, 4), "token"
    return round(ratio, 4), "fuzzy"
