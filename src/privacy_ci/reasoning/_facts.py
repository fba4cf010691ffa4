"""The facts of one disclosure: a typed, versioned model per regulation, and where each
fact came from.

A regulation's fact schema (``facts/<regulation>.yaml``) names every fact the law
engine (`privacy_ci.reasoning._law`) decides on: who holds the information, what it
is, who receives it, for what purpose, whether an authorization covers it, under what
legal process, how the individual responded, and the rest the regulation's
conditions need. Each fact has a closed set of values, each value a label and a
description (the meaning a narrative reader matches clauses against), a question,
the paragraph it comes from, and optionally a presumption: the value taken when
nobody stated the fact (an authorization nobody mentions is presumed absent), which
a verdict resting on it always names.

`Facts` holds the values known for one disclosure, each a `FactValue` with its
source: given (by a user or a CI field), read (a quote of the narrative and its
offsets), answered (by a model, with its verified quote) or presumed. A fact nobody
stated is simply absent: unknown. Files of facts (JSON or YAML, ``judge --facts``)
and ``--fact key=value`` arguments are read by `load_facts_file` / `parse_fact_args`;
an unknown key or value is one error naming it and what is allowed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from privacy_ci.errors import PrivacyCIError

__all__ = [
    "FACTS_SCHEMA_ID",
    "FactError",
    "FactSchema",
    "FactSpec",
    "FactValue",
    "Facts",
    "Source",
    "ValueSpec",
    "load_fact_schema",
    "load_facts_file",
    "parse_fact_args",
]

FACTS_SCHEMA_ID = "https://privacy-ci.dev/schemas/facts/{regulation}-v{version}.json"
"""The ``$id`` of a regulation's facts JSON Schema (an identifier, never fetched)."""

_MAX_FACTS_FILE = 1 << 20  # a facts file is a few hundred bytes; refuse anything huge


class FactError(PrivacyCIError):
    """A fact, a facts file or a fact schema that is not valid (names what and where)."""


class Source(StrEnum):
    """Where a fact's value came from."""

    GIVEN = "given"  # stated by the user or a CI field of the case
    READ = "read"  # read from the narrative (quote and offsets)
    ANSWERED = "answered"  # answered by a model (with its verified quote)
    PRESUMED = "presumed"  # nobody stated it: the schema's presumption


@dataclass(frozen=True)
class FactValue:
    """One fact's value and its provenance.

    Args:
        value: one of the fact's values.
        source: where it came from.
        quote: the narrative's words (read, answered), or the field's text (given).
        start / end: the quote's character offsets in the narrative (read, answered).
        note: how it was found (the CI field, the reader's rule, the model).
    """

    value: str
    source: Source = Source.GIVEN
    quote: str = ""
    start: int | None = None
    end: int | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "source": self.source.value}
        if self.quote:
            out["quote"] = self.quote
        if self.start is not None:
            out["start"], out["end"] = self.start, self.end
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class ValueSpec:
    """One value a fact can take."""

    name: str
    label: str
    description: str
    cues: tuple[str, ...] = ()


@dataclass(frozen=True)
class FactSpec:
    """One fact of the schema.

    Args:
        name: the fact's key.
        question: what to ask to learn it.
        paragraph: the regulation paragraph it comes from.
        values: its values, in the schema's order.
        presume: the value taken when nobody stated it (None: no presumption).
        presume_note: why the regulation supports the presumption.
        role_terms: value -> role-graph terms that name it (CI roles are read through them).
        phi_like: for the information fact, the values that are protected information.
    """

    name: str
    question: str
    paragraph: str
    values: dict[str, ValueSpec]
    presume: str | None = None
    presume_note: str = ""
    role_terms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    phi_like: tuple[str, ...] = ()

    def label(self, value: str) -> str:
        return self.values[value].label


@dataclass(frozen=True)
class FactSchema:
    """A regulation's facts, in order (the order questions are asked in, all else equal)."""

    regulation: str
    version: int
    facts: dict[str, FactSpec]

    def __contains__(self, name: object) -> bool:
        return name in self.facts

    def __iter__(self) -> Iterator[FactSpec]:
        return iter(self.facts.values())

    def spec(self, name: str) -> FactSpec:
        found = self.facts.get(name)
        if found is None:
            raise FactError(
                f"unknown fact {name!r}; the {self.regulation} facts are {self._names()}"
            )
        return found

    def check(self, name: str, value: str, where: str = "") -> None:
        """Raise a `FactError` naming `where` unless `value` is one of `name`'s values."""
        spec = self.facts.get(name)
        if spec is None:
            raise FactError(
                f"{where}unknown fact {name!r}; the {self.regulation} facts are {self._names()}"
            )
        if value not in spec.values:
            allowed = ", ".join(spec.values)
            raise FactError(
                f"{where}fact {name!r}: unknown value {value!r}; expected one of {allowed}"
            )

    def _names(self) -> str:
        return ", ".join(self.facts)

    @property
    def version_id(self) -> str:
        return f"{self.regulation}-facts-v{self.version}"

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of a facts file for this regulation.

        A facts file is an object: each key a fact, each value either the value's
        name or ``{"value": ..., "source": ..., "quote": ..., "start": ..., "end": ...}``.
        """
        properties: dict[str, Any] = {}
        for spec in self:
            names = list(spec.values)
            described = " ".join(f"{name}: {v.label}." for name, v in spec.values.items())
            value = {"type": "string", "enum": names}
            properties[spec.name] = {
                "title": spec.question,
                "description": f"{spec.paragraph}. {described}"
                + (f" Presumed {spec.presume!r} when not stated." if spec.presume else ""),
                "oneOf": [
                    value,
                    {
                        "type": "object",
                        "properties": {
                            "value": value,
                            "source": {"type": "string", "enum": [s.value for s in Source]},
                            "quote": {"type": "string"},
                            "start": {"type": "integer", "minimum": 0},
                            "end": {"type": "integer", "minimum": 0},
                            "note": {"type": "string"},
                        },
                        "required": ["value"],
                        "additionalProperties": False,
                    },
                ],
            }
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": FACTS_SCHEMA_ID.format(regulation=self.regulation, version=self.version),
            "title": (
                f"The facts of one disclosure under {self.regulation} (version {self.version})"
            ),
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }


class Facts(Mapping[str, FactValue]):
    """The known facts of one disclosure (an unknown fact is absent), immutable.

    Args:
        schema: the regulation's fact schema (every value is checked against it).
        values: fact name -> its value.
    """

    def __init__(self, schema: FactSchema, values: Mapping[str, FactValue] | None = None) -> None:
        self.schema = schema
        checked: dict[str, FactValue] = {}
        for name, fact in (values or {}).items():
            schema.check(name, fact.value)
            checked[name] = fact
        # schema order, so output and questions are stable
        self._values = {s.name: checked[s.name] for s in schema if s.name in checked}

    def __getitem__(self, name: str) -> FactValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v.value}" for k, v in self._values.items())
        return f"Facts({inner})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Facts):
            return NotImplemented
        return self.schema.regulation == other.schema.regulation and self._values == other._values

    def __hash__(self) -> int:
        return hash((self.schema.regulation, tuple(self._values.items())))

    def value(self, name: str) -> str | None:
        """The fact's value, or None when it is unknown."""
        found = self._values.get(name)
        return None if found is None else found.value

    def plain(self) -> dict[str, str]:
        """Every known fact's value (name -> value)."""
        return {k: v.value for k, v in self._values.items()}

    def with_facts(self, more: Mapping[str, FactValue], *, override: bool = True) -> Facts:
        """These facts and `more` (`more` wins unless `override` is False)."""
        merged = dict(self._values)
        for name, fact in more.items():
            if override or name not in merged:
                merged[name] = fact
        return Facts(self.schema, merged)

    def without(self, names: Iterable[str]) -> Facts:
        drop = set(names)
        return Facts(self.schema, {k: v for k, v in self._values.items() if k not in drop})

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {k: v.as_dict() for k, v in self._values.items()}

    @classmethod
    def from_mapping(
        cls,
        schema: FactSchema,
        data: Mapping[str, Any],
        *,
        source: Source = Source.GIVEN,
        where: str = "facts",
    ) -> Facts:
        """Facts from a mapping of fact -> value (or -> an object with ``value`` and
        provenance), as in a facts file.

        Raises:
            FactError: an unknown fact or value, or a malformed entry (naming `where`
                and the key).
        """
        if not isinstance(data, Mapping):
            raise FactError(f"{where}: expected an object of facts, got {type(data).__name__}")
        values: dict[str, FactValue] = {}
        for key, raw in data.items():
            if not isinstance(key, str):
                raise FactError(f"{where}: fact names are strings, got {key!r}")
            at = f"{where}: "
            if isinstance(raw, Mapping):
                values[key] = _fact_object(schema, key, raw, at)
                continue
            if isinstance(raw, bool):  # YAML reads yes/no as booleans
                raw = "yes" if raw else "no"
            if not isinstance(raw, str):
                raise FactError(
                    f"{at}fact {key!r}: expected a value name or an object,"
                    f" got {type(raw).__name__}"
                )
            schema.check(key, raw, at)
            values[key] = FactValue(raw, source)
        return cls(schema, values)


def _fact_object(schema: FactSchema, key: str, raw: Mapping[str, Any], at: str) -> FactValue:
    allowed = {"value", "source", "quote", "start", "end", "note"}
    extra = sorted(set(map(str, raw)) - allowed)
    if extra:
        raise FactError(f"{at}fact {key!r}: unknown field(s) {extra}; allowed: {sorted(allowed)}")
    value = raw.get("value")
    if isinstance(value, bool):
        value = "yes" if value else "no"
    if not isinstance(value, str):
        raise FactError(f"{at}fact {key!r}: 'value' must be a value name")
    schema.check(key, value, at)
    try:
        source = Source(raw.get("source", Source.GIVEN.value))
    except ValueError:
        kinds = ", ".join(s.value for s in Source)
        raise FactError(f"{at}fact {key!r}: 'source' must be one of {kinds}") from None
    quote = raw.get("quote", "")
    note = raw.get("note", "")
    start, end = raw.get("start"), raw.get("end")
    if not isinstance(quote, str) or not isinstance(note, str):
        raise FactError(f"{at}fact {key!r}: 'quote' and 'note' must be strings")
    for name, offset in (("start", start), ("end", end)):
        if offset is not None and (
            isinstance(offset, bool) or not isinstance(offset, int) or offset < 0
        ):
            raise FactError(
                f"{at}fact {key!r}: {name!r} must be a character offset (an integer >= 0)"
            )
    return FactValue(value, source, quote, start, end, note)


def _value_specs(fact: str, raw: Any, where: str) -> dict[str, ValueSpec]:
    if not isinstance(raw, Mapping) or not raw:
        raise FactError(f"{where}: fact {fact!r}: 'values' must be a non-empty mapping")
    out: dict[str, ValueSpec] = {}
    for name, spec in raw.items():
        name = "yes" if name is True else "no" if name is False else name
        if not isinstance(name, str) or not isinstance(spec, Mapping):
            raise FactError(
                f"{where}: fact {fact!r}: value {name!r} must map to label and description"
            )
        label, description = spec.get("label"), spec.get("description")
        cues = spec.get("cues", [])
        if not isinstance(label, str) or not isinstance(description, str) or not label:
            raise FactError(
                f"{where}: fact {fact!r}: value {name!r} needs a label and a description"
            )
        if not isinstance(cues, list) or not all(isinstance(c, str) and c.strip() for c in cues):
            raise FactError(
                f"{where}: fact {fact!r}: value {name!r}: 'cues' must be a list of phrases"
            )
        out[name] = ValueSpec(name, label, " ".join(description.split()), tuple(cues))
    return out


def _parse_schema(data: Any, where: str) -> FactSchema:
    if not isinstance(data, Mapping):
        raise FactError(f"{where}: expected a mapping with regulation, version and facts")
    regulation, version, facts = data.get("regulation"), data.get("version"), data.get("facts")
    if (
        not isinstance(regulation, str)
        or not isinstance(version, int)
        or not isinstance(facts, Mapping)
    ):
        raise FactError(f"{where}: needs 'regulation' (a name), 'version' (an integer) and 'facts'")
    specs: dict[str, FactSpec] = {}
    for name, raw in facts.items():
        if not isinstance(raw, Mapping):
            raise FactError(f"{where}: fact {name!r} must be a mapping")
        values = _value_specs(name, raw.get("values"), where)
        presume = raw.get("presume")
        if isinstance(presume, bool):
            presume = "yes" if presume else "no"
        if presume is not None and presume not in values:
            raise FactError(
                f"{where}: fact {name!r}: presumption {presume!r} is not one of its values"
            )
        role_terms = {
            str(k): tuple(str(t) for t in v) for k, v in (raw.get("role_terms") or {}).items()
        }
        for key in role_terms:
            if key not in values:
                raise FactError(f"{where}: fact {name!r}: role_terms names unknown value {key!r}")
        phi_like = tuple(raw.get("phi_like") or ())
        for key in phi_like:
            if key not in values:
                raise FactError(f"{where}: fact {name!r}: phi_like names unknown value {key!r}")
        question, paragraph = raw.get("question"), raw.get("paragraph")
        if not isinstance(question, str) or not isinstance(paragraph, str):
            raise FactError(f"{where}: fact {name!r} needs a question and a paragraph")
        specs[str(name)] = FactSpec(
            str(name),
            question,
            paragraph,
            values,
            presume,
            " ".join(str(raw.get("presume_note", "")).split()),
            role_terms,
            phi_like,
        )
    return FactSchema(regulation, version, specs)


def _read_yaml(path: Path, where: str) -> Any:
    from privacy_ci._structured import load_yaml

    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except Exception as exc:  # a packaged file: any failure is a broken install
        raise FactError(f"{where}: cannot be read ({exc})") from None


@functools.cache
def load_fact_schema(regulation: str = "hipaa") -> FactSchema:
    """The packaged fact schema of a regulation.

    Raises:
        FactError: the regulation has no fact schema (naming those that do).
    """
    folder = resources.files("privacy_ci.reasoning") / "facts"
    path = Path(str(folder / f"{regulation}.yaml"))
    if not path.is_file():
        have = sorted(p.name.removesuffix(".yaml") for p in Path(str(folder)).glob("*.yaml"))
        raise FactError(
            f"no fact model for regulation {regulation!r}; the law engine covers: {', '.join(have)}"
        )
    schema = _parse_schema(_read_yaml(path, str(path)), f"facts/{regulation}.yaml")
    if schema.regulation != regulation:
        raise FactError(f"facts/{regulation}.yaml: says regulation {schema.regulation!r}")
    return schema


def load_facts_file(path: Path | str, schema: FactSchema) -> Facts:
    """Facts from a JSON or YAML file (an object of fact -> value).

    Raises:
        FactError: the file cannot be read or parsed, or names an unknown fact or value
            (the message names the file and the key).
    """
    p = Path(path)
    try:
        if p.stat().st_size > _MAX_FACTS_FILE:
            raise FactError(
                f"{p}: {p.stat().st_size:,} bytes; a facts file is at most {_MAX_FACTS_FILE:,}"
            )
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FactError(f"{p}: no such facts file") from None
    except UnicodeDecodeError:
        raise FactError(f"{p}: not UTF-8 text") from None
    except OSError as exc:
        raise FactError(f"{p}: cannot be read ({exc.strerror})") from None
    from privacy_ci._structured import load_json, load_yaml

    try:
        data = load_json(text) if p.suffix.lower() == ".json" else load_yaml(text)
    except Exception as exc:  # JSON/YAML syntax, duplicate keys, bounds: one clear line
        raise FactError(f"{p}: not a valid facts file ({exc})") from None
    if data is None:
        data = {}
    return Facts.from_mapping(schema, data, where=str(p))


def parse_fact_args(args: Iterable[str], schema: FactSchema) -> Facts:
    """Facts from ``key=value`` arguments (``--fact authorization=absent``).

    Raises:
        FactError: an argument without ``=``, or an unknown fact or value.
    """
    values: dict[str, FactValue] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise FactError(f"--fact {arg!r}: expected KEY=VALUE, e.g. authorization=absent")
        schema.check(key, value, f"--fact {arg!r}: ")
        values[key] = FactValue(value, Source.GIVEN, note="--fact")
    return Facts(schema, values)


def presumed(schema: FactSchema, facts: Facts) -> dict[str, FactValue]:
    """The presumption of every fact `facts` leaves unknown that has one."""
    return {
        spec.name: FactValue(spec.presume, Source.PRESUMED, note=spec.presume_note)
        for spec in schema
        if spec.presume is not None and spec.name not in facts
    }
