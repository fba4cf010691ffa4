"""The definition dictionary D (section 3.3): regulation terms and their definitions.

Each regulation's file and format come from its registry entry
(`privacy_ci.regulations.RegulationSpec.definitions`, ``definitions_format``):

* HIPAA: ``hipaa/definitions.json``, 54 terms, ``{term: {"content", "source"}}``
  where ``source`` is a Cornell LII URL. One key, ``Header.``, is not a term (it
  is the notice header paragraph of 164.520(b)(1)(i)); it is kept, so the count
  matches the paper, and listed in the report.
* GDPR and AI Act: ``law_trees/definitions/{gdpr,ai_act}.json``, flat
  ``{term: text}``. GDPR keys are snake_case (``personal_data``).

`Definitions.lookup` matches case-, underscore- and whitespace-insensitively
(``personal data``, ``Personal Data`` and ``personal_data`` are one key), then by
lemma key (``covered entities`` -> ``Covered entity``), then fuzzily (difflib and
token overlap, stdlib only), and returns scored matches.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci._structured import DuplicateKeyError, load_json
from privacy_ci.errors import ValidationFailed
from privacy_ci.knowledge._vocabulary import similarity, term_key
from privacy_ci.regulations import RegistryView, get_regulation, regulations

__all__ = [
    "DEFINITION_FILES",
    "Definition",
    "DefinitionMatch",
    "Definitions",
    "DefinitionsReport",
    "definition_key",
    "load_definitions",
    "load_flat_definitions",
    "load_hipaa_definitions",
]

DEFINITION_FILES: Mapping[str, str] = RegistryView(
    lambda: {spec.key: spec.definitions for spec in regulations()}
)
"""Definition file per regulation, relative to the data directory (read from the registry)."""

_WS = re.compile(r"\s+")


def definition_key(term: str) -> str:
    """The case-, underscore- and whitespace-insensitive key of a term.

    Args:
        term: e.g. ``personal_data``, ``Personal  Data``, ``Header.``.

    Returns:
        e.g. ``personal data``, ``header``.
    """
    text = unicodedata.normalize("NFKC", term).replace("_", " ")
    text = _WS.sub(" ", text).strip().lower()
    return text.rstrip(".:;, ").strip()


@dataclass(frozen=True, slots=True)
class Definition:
    """One defined term.

    Args:
        term: the term as written in the file (``personal_data``, ``Covered entity``).
        text: the definition.
        source: where it comes from (a URL for HIPAA, else the file).
    """

    term: str
    text: str
    source: str = ""

    @property
    def display_term(self) -> str:
        """The term with underscores as spaces (``personal data``)."""
        return self.term.replace("_", " ")


@dataclass(frozen=True, slots=True)
class DefinitionMatch:
    """A lookup result.

    Args:
        term: the matched term as written in the file.
        score: 1.0 for an exact or normalised match, else the similarity (0..1).
        method: ``exact`` (case/underscore/space-insensitive), ``normalised``
            (same lemma key), ``token`` or ``fuzzy``.
        definition: the matched definition.
    """

    term: str
    score: float
    method: str
    definition: Definition


@dataclass
class DefinitionsReport:
    """Observations about a definition file.

    Args:
        source: the file.
        odd_keys: keys that do not look like terms, with the reason.
        collisions: keys that normalise to the same lookup key (the first is kept).
    """

    source: str
    odd_keys: dict[str, str] = field(default_factory=dict)
    collisions: dict[str, list[str]] = field(default_factory=dict)


class Definitions:
    """A regulation's definition dictionary.

    Args:
        regulation: a registered regulation key (``hipaa``, ``gdpr``, ``ai_act``, ...).
        definitions: the definitions in file order.
        source: the file they were read from.
        report: what the loader noticed.
    """

    def __init__(
        self,
        regulation: str,
        definitions: list[Definition],
        source: str = "",
        report: DefinitionsReport | None = None,
    ) -> None:
        self.regulation = regulation
        self.source = source
        self.report = report or DefinitionsReport(source)
        self._items: dict[str, Definition] = {}
        self._by_key: dict[str, Definition] = {}
        self._by_lemma: dict[str, Definition] = {}
        for item in definitions:
            self._items[item.term] = item
            key = definition_key(item.term)
            if key in self._by_key:
                self.report.collisions.setdefault(key, [self._by_key[key].term]).append(item.term)
                continue
            self._by_key[key] = item
            self._by_lemma.setdefault(term_key(item.term), item)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Definition]:
        return iter(self._items.values())

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __getitem__(self, term: str) -> Definition:
        found = self.get(term)
        if found is None:
            near = ", ".join(m.term for m in self.lookup(term, limit=3, min_score=0.5))
            hint = f"; nearest: {near}" if near else ""
            raise KeyError(f"{self.regulation}: no definition of {term!r}{hint}")
        return found

    @property
    def terms(self) -> list[str]:
        """The terms as written in the file, in file order."""
        return list(self._items)

    def get(self, term: str) -> Definition | None:
        """The definition of a term, matched case-, underscore- and space-insensitively.

        Args:
            term: the term.

        Returns:
            The definition or None.
        """
        return self._items.get(term) or self._by_key.get(definition_key(term))

    def lookup(self, term: str, limit: int = 5, min_score: float = 0.6) -> list[DefinitionMatch]:
        """Find a term: exact (insensitive), then by lemma key, then fuzzy.

        Args:
            term: what to look up.
            limit: at most this many matches.
            min_score: drop fuzzy matches below this score.

        Returns:
            Matches, best first. An exact or normalised match is returned alone.
        """
        found = self.get(term)
        if found is not None:
            return [DefinitionMatch(found.term, 1.0, "exact", found)]
        lemma = self._by_lemma.get(term_key(term))
        if lemma is not None:
            return [DefinitionMatch(lemma.term, 1.0, "normalised", lemma)]
        scored: list[DefinitionMatch] = []
        for item in self._by_key.values():
            score, method = similarity(term, item.display_term)
            if score >= min_score:
                scored.append(DefinitionMatch(item.term, score, method, item))
        scored.sort(key=lambda m: (-m.score, m.term))
        return scored[:limit]


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        data = load_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValidationFailed([f"{path}: file not found"]) from None
    except DuplicateKeyError as exc:
        raise ValidationFailed([f"{path}: {d}" for d in exc.duplicates]) from None
    except json.JSONDecodeError as exc:
        raise ValidationFailed(
            [f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]
        ) from None
    if not isinstance(data, dict):
        raise ValidationFailed([f"{path}: expected a JSON object {{term: definition}}"])
    return data


def _odd_key_reason(term: str, text: str) -> str | None:
    if not term.strip():
        return "empty term"
    if term.rstrip() != term.rstrip(".:;"):
        return "ends with punctuation, like a paragraph heading rather than a term"
    return None


def load_hipaa_definitions(path: Path | str, regulation: str = "hipaa") -> Definitions:
    """Load ``hipaa/definitions.json`` (``{term: {"content": str, "source": str}}``).

    Args:
        path: the file.
        regulation: the regulation key (another regulation's file in this format).

    Returns:
        The definitions; odd keys (``Header.``) are kept and listed in ``report.odd_keys``.

    Raises:
        ValidationFailed: unreadable file, or entries without string content/source
            (all listed, each naming the file and the term).
    """
    path = Path(path)
    data = _read_json_object(path)
    report = DefinitionsReport(str(path))
    problems: list[str] = []
    items: list[Definition] = []
    for term, entry in data.items():
        if not isinstance(entry, dict):
            problems.append(f"{path}#{term}: expected {{content, source}}, got {entry!r:.60}")
            continue
        extra = sorted(set(entry) - {"content", "source"})
        if extra:
            problems.append(f"{path}#{term}: unknown field(s) {', '.join(map(repr, extra))}")
        content, source = entry.get("content"), entry.get("source", "")
        if not isinstance(content, str) or not content.strip():
            problems.append(f"{path}#{term}: 'content' must be a non-empty string")
            continue
        if not isinstance(source, str):
            problems.append(f"{path}#{term}: 'source' must be a string")
            continue
        reason = _odd_key_reason(term, content)
        if reason:
            report.odd_keys[term] = reason
        items.append(Definition(term, content.strip(), source))
    if problems:
        raise ValidationFailed(problems)
    return Definitions(regulation, items, str(path), report)


def load_flat_definitions(path: Path | str, regulation: str) -> Definitions:
    """Load a flat ``{term: text}`` file (``law_trees/definitions/{gdpr,ai_act}.json``).

    Args:
        path: the file.
        regulation: ``gdpr`` or ``ai_act``.

    Returns:
        The definitions (source = the file).

    Raises:
        ValidationFailed: unreadable file or non-string definitions (all listed).
    """
    path = Path(path)
    data = _read_json_object(path)
    report = DefinitionsReport(str(path))
    problems: list[str] = []
    items: list[Definition] = []
    for term, text in data.items():
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{path}#{term}: the definition must be a non-empty string")
            continue
        reason = _odd_key_reason(term, text)
        if reason:
            report.odd_keys[term] = reason
        items.append(Definition(term, text.strip(), str(path)))
    if problems:
        raise ValidationFailed(problems)
    return Definitions(regulation, items, str(path), report)


def load_definitions(regulation: str, data_dir: Path | str | None = None) -> Definitions:
    """Load a regulation's published definition dictionary.

    Args:
        regulation: a registered regulation key (``hipaa``, ``gdpr``, ``ai_act``, ...).
        data_dir: the data directory; default `privacy_ci.data.data_dir()`.

    Returns:
        The definitions.

    Raises:
        UnknownRegulation: unknown regulation (a `ValueError`).
        ValidationFailed: the file is missing or invalid.
    """
    spec = get_regulation(regulation)
    if data_dir is None:
        from privacy_ci.data import data_dir as default_data_dir

        data_dir = default_data_dir()
    path = Path(data_dir) / spec.definitions
    if spec.definitions_format == "checklist":
        return load_hipaa_definitions(path, spec.key)
    return load_flat_definitions(path, spec.key)
