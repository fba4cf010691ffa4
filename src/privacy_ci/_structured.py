"""Strict YAML and JSON reading for user files: a key given twice is an error.

PyYAML and the json module both keep the last of two equal keys without a word,
so a second ``permitted_receiver_roles`` under a label would silently replace
the first and change what the gate decides. `load_yaml` and `load_json` refuse
duplicates, naming the document (the mapping's ``doc_id`` or ``id``, else its
path in the file), the key and both lines. Callers add the file name.
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

__all__ = ["Duplicate", "DuplicateKeyError", "UniqueKeyLoader", "load_json", "load_yaml"]

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


class UniqueKeyLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """`yaml.SafeLoader` that raises `DuplicateKeyError` when a mapping repeats a key.

    Keys are compared by value after YAML resolution (``1`` and ``"1"`` differ,
    ``yes`` and ``true`` do not). Keys merged in with ``<<`` may be overridden,
    as YAML intends.
    """

    def construct_document(self, node: Node) -> Any:
        duplicates = self._duplicates(node)
        if duplicates:
            raise DuplicateKeyError(duplicates)
        return super().construct_document(node)

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
        seen: set[int] = set()  # aliases share nodes (and may be recursive)
        stack: list[tuple[Node, KeyPath, Entry | None]] = [(root, (), None)]
        while stack:
            node, path, entry = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, SequenceNode):
                stack.extend((item, (*path, i), entry) for i, item in enumerate(node.value))
            elif isinstance(node, MappingNode):
                entry = _yaml_identity(node, path) or entry
                first: dict[Hashable, int] = {}
                for key_node, value_node in node.value:
                    key = self._key(key_node)
                    line = key_node.start_mark.line + 1
                    if key is not None and key in first:
                        shown = key_node.value if isinstance(key_node, ScalarNode) else key
                        found.append(Duplicate(shown, line, first[key], _where(path, entry)))
                    elif key is not None:
                        first[key] = line
                    part = key if isinstance(key, str | int) else str(key_node.value)
                    stack.append((value_node, (*path, part), entry))
        return found


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
    """Parse one YAML document safely, refusing duplicate keys.

    Raises:
        DuplicateKeyError: a mapping gives a key twice (every case listed).
        yaml.YAMLError: the text is not valid YAML.
    """
    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects


# ---------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------
class _Repeated(Exception):
    """Raised by the pairs hook: some object repeats a key (located afterwards)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Repeated
    return out


def load_json(text: str) -> Any:
    """Parse JSON, refusing duplicate keys.

    Raises:
        DuplicateKeyError: an object gives a key twice (every case listed).
        json.JSONDecodeError: the text is not valid JSON.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _Repeated:
        pass
    # Rare path: walk the (valid) text again to find lines and entries.
    raise DuplicateKeyError(_JsonLocator(text).find())


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
