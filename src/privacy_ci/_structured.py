"""Strict YAML and JSON reading for user files: a key given twice is an error.

PyYAML and the json module both keep the last of two equal keys without a word,
so a second ``permitted_receiver_roles`` under a label would silently replace
the first and change what the gate decides. `load_yaml` and `load_json` refuse
duplicates, naming the document (the mapping's ``doc_id`` or ``id``, else its
path in the file), the key and both lines. Callers add the file name.

They also bound what a hostile file can make the reader do (`InputLimitError`, with
the line): YAML aliases are refused (a 100 KB file of anchors and aliases expands to
gigabytes; no file of privacy-ci needs them; an anchor that no alias repeats is
harmless), values nest at most `MAX_DEPTH` levels (deeper JSON would otherwise be a
RecursionError), integers have at most `MAX_INT_DIGITS` digits (5,000 digits would
be a ValueError in ``int()``; no field needs more than 20), and a text is at most
`MAX_INPUT_BYTES` long (64 MiB, or ``$PRIVACY_CI_MAX_INPUT_BYTES``).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from privacy_ci._files import byte_limit
from privacy_ci.errors import PrivacyCIError

__all__ = [
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_INPUT_BYTES_ENV",
    "MAX_INT_DIGITS",
    "Duplicate",
    "DuplicateKeyError",
    "InputLimitError",
    "JsonLimitError",
    "UniqueKeyLoader",
    "YamlLimitError",
    "load_json",
    "load_yaml",
    "max_input_bytes",
]

MAX_DEPTH = 64
"""The deepest nesting of lists and mappings read (Riverside's labels nest 3 deep)."""
MAX_INT_DIGITS = 20
"""The longest integer read, in digits (a 64-bit integer has at most 20)."""
MAX_INPUT_BYTES = 64 * 1024 * 1024
"""The largest YAML or JSON text read (about 100,000 labels), unless
`MAX_INPUT_BYTES_ENV` says otherwise."""
MAX_INPUT_BYTES_ENV = "PRIVACY_CI_MAX_INPUT_BYTES"

KeyPath = tuple[str | int, ...]
Entry = tuple[str, KeyPath]  # how an entry is named in messages, and where it starts
# Keys that name the entry a mapping describes, most specific first.
_IDENTITY_KEYS = ("doc_id", "id")


@dataclass(frozen=True, slots=True)
class Duplicate:
    """One key given twice in one mapping.

    Args:
        key: the key (as written, for YAML scalars).
        line: the line (from 1) of the repeated key.
        first_line: the line of its first occurrence.
        where: the entry holding it, e.g. ``document 'RMC-LAB-001'``,
            ``agents[0] (id 'D01')`` or ``tiers.financial``.
    """

    key: object
    line: int
    first_line: int
    where: str

    @property
    def problem(self) -> str:
        """The message without `where`."""
        first = f"first at line {self.first_line}"
        if self.line == self.first_line:
            first = "twice on that line"
        return f"duplicate key {self.key!r} at line {self.line} ({first})"

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


class DuplicateKeyError(ValueError):
    """A mapping gives the same key twice; `duplicates` lists every case in file order."""

    def __init__(self, duplicates: Sequence[Duplicate]) -> None:
        self.duplicates = sorted(duplicates, key=lambda d: (d.line, d.first_line))
        super().__init__("; ".join(str(d) for d in self.duplicates))


class InputLimitError(PrivacyCIError, ValueError):
    """A YAML or JSON text outside what privacy-ci reads: a YAML alias, values nested
    deeper than `MAX_DEPTH`, an integer longer than `MAX_INT_DIGITS`, or a text larger
    than `max_input_bytes`. ``str()`` is ``line N: problem`` (the line when known);
    callers add the file name.

    Args:
        problem: what is wrong, without the line.
        line: the line (from 1), when known.
    """

    def __init__(self, problem: str, line: int | None = None) -> None:
        self.problem = problem
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}" if self.line else self.problem


# (MarkedYAMLError types `problem` as optional; here it is always given)
class YamlLimitError(InputLimitError, yaml.MarkedYAMLError):  # type: ignore[misc]
    """`InputLimitError` from `load_yaml`: also a ``yaml.YAMLError``, so a caller that
    reports YAML errors reports it too (without a mark: its line is in the message)."""

    context = None
    context_mark = None
    problem_mark = None
    note = None

    def __str__(self) -> str:  # not MarkedYAMLError's, which prints the marks
        return InputLimitError.__str__(self)


class JsonLimitError(InputLimitError, json.JSONDecodeError):
    """`InputLimitError` from `load_json`: also a ``json.JSONDecodeError`` (``msg``,
    ``lineno``, ``colno``), so a caller that reports JSON errors reports it too.

    Args:
        problem: what is wrong.
        text: the JSON text.
        pos: where in `text`; None: nowhere in particular (no line).
    """

    def __init__(self, problem: str, text: str, pos: int | None) -> None:
        json.JSONDecodeError.__init__(self, problem, text, pos or 0)
        self.problem, self.line = problem, None if pos is None else self.lineno
        self.args = (str(self),)

    def __str__(self) -> str:
        return InputLimitError.__str__(self)


def max_input_bytes() -> int:
    """The size limit of a YAML or JSON text: `MAX_INPUT_BYTES`, or its environment variable.

    Raises:
        PrivacyCIError: the environment variable is not a positive number of bytes.
    """
    return byte_limit(MAX_INPUT_BYTES, MAX_INPUT_BYTES_ENV)


def _too_large(text: str) -> str | None:
    limit = max_input_bytes()
    if len(text) <= limit:
        return None
    return (
        f"the text is {len(text):,} characters, over the limit of {limit:,};"
        f" set {MAX_INPUT_BYTES_ENV} to raise it"
    )


_DEEP = f"values nested more than {MAX_DEPTH} levels deep (the most privacy-ci reads)"


def _long_int(digits: int) -> str:
    return f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS} are read)"


def _format_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _entry(path: KeyPath, key: str, value: str) -> Entry:
    if key == "doc_id":  # as the label validation messages name a document
        return f"document {value!r}", path
    return f"{_format_path(path) or 'top level'} ({key} {value!r})", path


def _where(path: KeyPath, entry: Entry | None) -> str:
    if entry is None:
        return _format_path(path) or "top level"
    label, entry_path = entry
    inner = _format_path(path[len(entry_path) :]).lstrip(".")
    return f"{label}, in {inner}" if inner else label


# ---------------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------------
# LibYAML's parser when PyYAML was built with it (several times faster on large label
# files); the safe constructor either way
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_INT_TAG = "tag:yaml.org,2002:int"


class UniqueKeyLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """`yaml.SafeLoader` that raises `DuplicateKeyError` when a mapping repeats a key,
    and `YamlLimitError` on an alias, nesting deeper than `MAX_DEPTH` or an integer
    longer than `MAX_INT_DIGITS`, before anything is constructed.

    Keys are compared by value after YAML resolution (``1`` and ``"1"`` differ,
    ``yes`` and ``true`` do not). A merge key (``<<: *base``) is an alias: refused.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._text = stream  # to find the first alias's line when the nodes show one

    def construct_document(self, node: Node) -> Any:
        duplicates = self._duplicates(node)
        if duplicates:
            raise DuplicateKeyError(duplicates)
        return super().construct_document(node)

    def _bounded(self, node: Node, depth: int) -> None:
        """Refuse a scalar that is an over-long integer, or a collection too deep."""
        if isinstance(node, ScalarNode):
            if node.tag == _INT_TAG:
                digits = len(node.value.lstrip("+-").replace("_", ""))
                if digits > MAX_INT_DIGITS:
                    raise YamlLimitError(_long_int(digits), node.start_mark.line + 1)
        elif depth > MAX_DEPTH:
            raise YamlLimitError(_DEEP, node.start_mark.line + 1)

    def _alias(self) -> YamlLimitError:
        line, anchor = _first_alias(self._text)
        name = f" *{anchor}" if anchor else ""
        # PyYAML's dump names its own anchors id001, id002, ... for an object used twice
        dumped = " (yaml.dump wrote it for a value used twice: dump a copy)"
        return YamlLimitError(
            f"YAML alias{name}: aliases (*name, and merges <<: *name) are not allowed;"
            f" write the value out in full{dumped if re.fullmatch(r'id[0-9]+', anchor) else ''}",
            line,
        )

    def _key(self, node: Node) -> Hashable | None:
        if node.tag == "tag:yaml.org,2002:merge":
            return "<<"
        if not isinstance(node, ScalarNode):
            return None  # an unhashable key: SafeLoader itself reports it
        key = self.construct_object(node, deep=True)
        try:
            hash(key)
        except TypeError:
            return None
        return key  # type: ignore[no-any-return]

    def _duplicates(self, root: Node) -> list[Duplicate]:
        found: list[Duplicate] = []
        seen: set[int] = set()  # an alias shares its anchor's node: met twice
        # (node, its path, the entry holding it, how many collections hold it)
        stack: list[tuple[Node, KeyPath, Entry | None, int]] = [(root, (), None, 1)]
        while stack:
            node, path, entry, depth = stack.pop()
            if id(node) in seen:
                raise self._alias()
            seen.add(id(node))
            self._bounded(node, depth)
            below: list[tuple[Node, KeyPath, Entry | None, int]] = []
            if isinstance(node, SequenceNode):
                below = [(item, (*path, i), entry, depth + 1) for i, item in enumerate(node.value)]
            elif isinstance(node, MappingNode):
                entry = _yaml_identity(node, path) or entry
                first: dict[Hashable, int] = {}
                for key_node, value_node in node.value:
                    if id(key_node) in seen:
                        raise self._alias()
                    seen.add(id(key_node))
                    self._bounded(key_node, depth + 1)
                    if not isinstance(key_node, ScalarNode):  # a complex key: bound it too
                        below.extend(
                            (item, (*path, "?"), entry, depth + 2) for item in _children(key_node)
                        )
                    key = self._key(key_node)
                    line = key_node.start_mark.line + 1
                    if key is not None and key in first:
                        shown = key_node.value if isinstance(key_node, ScalarNode) else key
                        found.append(Duplicate(shown, line, first[key], _where(path, entry)))
                    elif key is not None:
                        first[key] = line
                    part = key if isinstance(key, str | int) else str(key_node.value)
                    below.append((value_node, (*path, part), entry, depth + 1))
            stack.extend(reversed(below))  # visited in file order: the first problem is met first
        return found


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _line(mark: Any) -> int | None:
    return None if mark is None else int(mark.line) + 1


def _first_alias(text: str) -> tuple[int | None, str]:
    """The line and anchor name of the first alias in `text` (it has one)."""
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                return _line(event.start_mark), str(event.anchor)
    except yaml.YAMLError:  # pragma: no cover - the text was composed already
        pass
    return None, ""


def _deep_line(text: str) -> int | None:
    """The line where `text` first nests deeper than `MAX_DEPTH` (the events do not
    recurse, unlike the pure-Python composer)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return _line(event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass
    return None


def _yaml_identity(node: MappingNode, path: KeyPath) -> Entry | None:
    for name in _IDENTITY_KEYS:
        for key_node, value_node in node.value:
            if (
                isinstance(key_node, ScalarNode)
                and key_node.value == name
                and isinstance(value_node, ScalarNode)
                and value_node.value
            ):
                return _entry(path, name, value_node.value)
    return None


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely, refusing duplicate keys and unbounded input.

    Raises:
        DuplicateKeyError: a mapping gives a key twice (every case listed).
        YamlLimitError: an alias, values nested too deeply, an integer too long or a
            text too large (see the module docstring); a ``yaml.YAMLError`` too.
        yaml.YAMLError: the text is not valid YAML.
    """
    large = _too_large(text)
    if large is not None:
        raise YamlLimitError(large)
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader subclass: no objects
    except RecursionError:  # the pure-Python composer recurses once per level
        raise YamlLimitError(_DEEP, _deep_line(text)) from None
    except yaml.MarkedYAMLError as exc:
        if isinstance(exc, YamlLimitError) or "maximum nesting depth" not in str(exc.problem):
            raise
        # LibYAML's own bound (1,000 levels): the same message as ours
        raise YamlLimitError(_DEEP, _line(exc.problem_mark)) from None


# ---------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------
class _Repeated(Exception):
    """Raised by the pairs hook: some object repeats a key (located afterwards)."""


class _LongInt(Exception):
    """Raised by the integer hook: an integer longer than `MAX_INT_DIGITS` (located afterwards)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Repeated
    return out


def _bounded_int(digits: str) -> int:
    # before int(): 5,000 digits would be a ValueError there, 4,000 a slow conversion
    if len(digits) > MAX_INT_DIGITS and len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _LongInt
    return int(digits)


def load_json(text: str) -> Any:
    """Parse JSON, refusing duplicate keys and unbounded input.

    Raises:
        DuplicateKeyError: an object gives a key twice (every case listed).
        JsonLimitError: values nested too deeply, an integer too long or a text too
            large (see the module docstring); a ``json.JSONDecodeError`` too.
        json.JSONDecodeError: the text is not valid JSON.
    """
    large = _too_large(text)
    if large is not None:
        raise JsonLimitError(large, text, None)
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs, parse_int=_bounded_int)
    except (_LongInt, RecursionError):  # RecursionError: nested a thousand levels or so
        raise _json_limit(text) from None
    except _Repeated:
        # Rare path: walk the (valid) text again to find lines and entries, once it is
        # known to be shallow enough for the walk's recursion.
        if _json_unbounded(text) is not None:
            raise _json_limit(text) from None
        raise DuplicateKeyError(_JsonLocator(text).find()) from None
    if _nests_deeper(value, MAX_DEPTH):
        raise _json_limit(text)
    return value


_CONTAINERS = (dict, list)


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` levels in `value` (no recursion)."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:  # (json makes exact dicts and lists: type() is the quick test)
            children = item.values() if type(item) is dict else item
            below.extend([c for c in children if type(c) in _CONTAINERS])
        level = below
    return False


# a JSON string, a bracket, or a number (group 1: its fraction or exponent, if any)
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|-?\d+((?:\.\d+)?(?:[eE][-+]?\d+)?)')


def _json_unbounded(text: str) -> tuple[str, int] | None:
    """The first place where `text` nests deeper than `MAX_DEPTH` or writes an integer
    longer than `MAX_INT_DIGITS`, as (problem, position); None when it does neither."""
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        first = text[match.start()]
        if first in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _DEEP, match.start()
        elif first in "]}":
            depth -= 1
        elif first != '"' and not match.group(1):
            digits = len(match.group().lstrip("-"))
            if digits > MAX_INT_DIGITS:
                return _long_int(digits), match.start()
    return None


def _json_limit(text: str) -> JsonLimitError:
    found = _json_unbounded(text)
    problem, pos = found if found is not None else (_DEEP, None)
    return JsonLimitError(problem, text, pos)


_WS = re.compile(r"[ \t\n\r]*")


class _JsonLocator:
    """Finds every repeated key of a valid JSON text, with its line and entry."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.decoder = json.JSONDecoder()
        self.found: list[Duplicate] = []
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def find(self) -> list[Duplicate]:
        self._value(0, (), None)
        return self.found

    def _ws(self, i: int) -> int:
        match = _WS.match(self.text, i)
        return i if match is None else match.end()

    def _line(self, i: int) -> int:
        return bisect_right(self.newlines, i) + 1

    def _value(self, i: int, path: KeyPath, entry: Entry | None) -> int:
        i = self._ws(i)
        ch = self.text[i : i + 1]
        if ch == "{":
            return self._object(i, path, entry)
        if ch == "[":
            return self._array(i, path, entry)
        _, end = self.decoder.raw_decode(self.text, i)
        return int(end)

    def _array(self, i: int, path: KeyPath, entry: Entry | None) -> int:
        i = self._ws(i + 1)
        index = 0
        while self.text[i] != "]":
            i = self._ws(self._value(i, (*path, index), entry))
            index += 1
            if self.text[i] == ",":
                i = self._ws(i + 1)
        return i + 1

    def _object(self, i: int, path: KeyPath, entry: Entry | None) -> int:
        members: list[tuple[str, int, int, Any]] = []  # key, key position, value position, value
        i = self._ws(i + 1)
        while self.text[i] != "}":
            key_at = i
            key, i = self.decoder.raw_decode(self.text, i)
            i = self._ws(self._ws(i) + 1)  # past the colon
            value, end = self.decoder.raw_decode(self.text, i)
            members.append((key, key_at, i, value))
            i = self._ws(end)
            if self.text[i] == ",":
                i = self._ws(i + 1)
        for name in _IDENTITY_KEYS:
            ident = next((v for k, _, _, v in members if k == name and isinstance(v, str)), None)
            if ident:
                entry = _entry(path, name, ident)
                break
        first: dict[str, int] = {}
        for key, key_at, value_at, _ in members:
            line = self._line(key_at)
            if key in first:
                self.found.append(Duplicate(key, line, first[key], _where(path, entry)))
            else:
                first[key] = line
            if self.text[value_at] in "{[":
                self._value(value_at, (*path, key), entry)
        return i + 1
