"""The files of a generated corpus's ``content/`` folder: data tables and document templates.

A content folder holds:

* ``*.yaml`` tables (the organisation, people, lab panels, drugs, visit wording...),
  read as `Node` trees whose accessors name the file and the entry in every error;
* ``templates/<document_type>.tmpl`` document templates, one per document type (spaces
  in the type become ``_``), and ``templates/_generic.tmpl`` for any other type.

Text in both is filled with ``${name}`` placeholders (string.Template style, braces
required): ``${doctor.name}`` walks into a value, ``${visit|upper}`` applies a filter
(`FILTERS`), ``$$`` is a literal ``$``; a ``$`` before anything else is kept as is, so
amounts such as ``$3.50`` need no escaping.

A ``.tmpl`` file is a document's shape and wording::

    # comments and the header come first
    department: Outpatient Pharmacy Services
    heading: PRESCRIPTION
    name label: Patient            (optional: how the subject's name line is labelled)

    --- meta                       (lines after the subject's identifiers)
    Date written: ${date}
    [if drug.schedule] DEA schedule: ${drug.schedule}

    --- para title=Interpretation: (a paragraph, wrapped; the title is its first line)
    --- text                       (lines kept as written)
    --- fields                     (``Key: value`` lines, wrapped with a hanging indent)
    --- bullets numbered           (``- `` starts an item; ``*plan`` splices a list)
    --- table                      (cells split at ``|``; ``*rows`` splices rows)

Any body line may start with ``[if name]`` or ``[unless name]``; a line that is only
``*name`` splices a list; in ``meta``, ``fields`` and ``bullets`` an indented line
continues the previous one. A block header takes ``if=name`` / ``unless=name`` too.
Header lines may be conditional as well; the first that applies wins.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from privacy_ci._files import read_user_file
from privacy_ci._structured import (
    MAX_INPUT_BYTES_ENV,
    DuplicateKeyError,
    InputLimitError,
    load_yaml,
    max_input_bytes,
)
from privacy_ci.conductor import _layout as lay
from privacy_ci.errors import PrivacyCIError

__all__ = [
    "FILTERS",
    "ContentPack",
    "DocTemplate",
    "Lazy",
    "Node",
    "Rendered",
    "Scope",
    "load_pack",
    "template_name",
]


# ------------------------------------------------------------------------- data


class Node:
    """A value read from a content table, with where it came from for error messages."""

    def __init__(self, value: object, file: str, path: str = "") -> None:
        self.value = value
        self.file = file
        self.path = path

    @property
    def where(self) -> str:
        return f"{self.file}: {self.path}" if self.path else self.file

    def _fail(self, what: str) -> PrivacyCIError:
        return PrivacyCIError(f"{self.where}: expected {what}")

    def _mapping(self) -> Mapping[str, object]:
        if not isinstance(self.value, Mapping):
            raise self._fail("a mapping")
        return self.value

    def _child(self, value: object, key: str | int) -> Node:
        if isinstance(key, int):
            return Node(value, self.file, f"{self.path}[{key}]")
        return Node(value, self.file, f"{self.path}.{key}" if self.path else key)

    def mapping(self) -> dict[str, object]:
        """A copy of the mapping (for a scope; the table is left as read)."""
        return {str(k): v for k, v in self._mapping().items()}

    def has(self, key: str) -> bool:
        return key in self._mapping()

    def get(self, key: str) -> Node | None:
        mapping = self._mapping()
        return self._child(mapping[key], key) if key in mapping else None

    def node(self, key: str) -> Node:
        mapping = self._mapping()
        if key not in mapping:
            raise PrivacyCIError(f"{self.where}: missing {key!r}")
        return self._child(mapping[key], key)

    def items(self) -> Iterator[tuple[str, Node]]:
        for key, value in self._mapping().items():
            yield str(key), self._child(value, str(key))

    def nodes(self, key: str | None = None) -> tuple[Node, ...]:
        target = self if key is None else self.node(key)
        if not isinstance(target.value, list):
            raise target._fail("a list")
        return tuple(target._child(v, i) for i, v in enumerate(target.value))

    def text(self, key: str | None = None) -> str:
        target = self if key is None else self.node(key)
        if not isinstance(target.value, str):
            raise target._fail("text (quote numbers and words such as yes/no/off)")
        return target.value

    def opt_text(self, key: str) -> str | None:
        found = self.get(key)
        return None if found is None or found.value is None else found.text()

    def texts(self, key: str | None = None) -> tuple[str, ...]:
        return tuple(n.text() for n in self.nodes(key))

    def integer(self, key: str | None = None) -> int:
        target = self if key is None else self.node(key)
        if isinstance(target.value, bool) or not isinstance(target.value, int):
            raise target._fail("a whole number")
        return target.value

    def number(self, key: str | None = None) -> float:
        target = self if key is None else self.node(key)
        if isinstance(target.value, bool) or not isinstance(target.value, int | float):
            raise target._fail("a number")
        return target.value

    def span(self, key: str | None = None) -> tuple[int, int]:
        """A ``[lo, hi]`` pair of whole numbers."""
        target = self if key is None else self.node(key)
        pair = target.nodes()
        if len(pair) != 2:
            raise target._fail("a [low, high] pair of whole numbers")
        return pair[0].integer(), pair[1].integer()

    def pairs(self, key: str | None = None) -> tuple[tuple[str, str], ...]:
        """A list of ``[code, description]`` pairs."""
        out = []
        for item in self.nodes(key):
            pair = item.texts()
            if len(pair) != 2:
                raise item._fail("a [code, description] pair")
            out.append((pair[0], pair[1]))
        return tuple(out)

    def keys(self, key: str = "keys") -> tuple[str, ...]:
        """Title words that select an entry, lower-cased as titles are matched."""
        return tuple(k.lower() for k in self.texts(key))


# ---------------------------------------------------------------------- filling


class Lazy:
    """A value computed on first use (names, staff and vitals only some templates print)."""

    def __init__(self, make: Callable[[], object]) -> None:
        self._make = make
        self._done = False
        self._value: object = None

    def get(self) -> object:
        if not self._done:
            self._value, self._done = self._make(), True
        return self._value


def _tenths(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("tenths needs a whole number")
    return lay.fixed(value, 1)


def _a_date(value: object) -> date:
    if not isinstance(value, date):
        raise ValueError("long needs a date")
    return value


FILTERS: dict[str, Callable[[object], str]] = {
    "upper": lambda v: _as_text(v).upper(),
    "lower": lambda v: _as_text(v).lower(),
    "capital": lambda v: lay.first_upper(_as_text(v)),
    "long": lambda v: lay.long_date(_a_date(v)),
    "salutation": lambda v: lay.salutation(_as_text(v)),
    "tenths": _tenths,
}
"""``${value|filter}``: upper/lower case, first letter upper, a long date ("May 4, 2025"),
a letter's greeting name, and a whole number of tenths printed as a decimal."""

_PLACEHOLDER = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<name>[A-Za-z_]\w*(?:\.\w+)*)(?P<filters>(?:\|\w+)*)\})"
)


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise ValueError("a yes/no value is not text")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, date):
        return lay.us_date(value)
    raise ValueError(f"a {type(value).__name__} is not text")


class Scope:
    """The values a template may print, looked up by dotted name; inner scopes shadow."""

    def __init__(self, values: Mapping[str, object], parent: Scope | None = None) -> None:
        self._values = dict(values)
        self._parent = parent

    def child(self, values: Mapping[str, object]) -> Scope:
        return Scope(values, self)

    def _top(self, name: str) -> object:
        scope: Scope | None = self
        while scope is not None:
            if name in scope._values:
                value = scope._values[name]
                return value.get() if isinstance(value, Lazy) else value
            scope = scope._parent
        raise KeyError(name)

    def lookup(self, path: str) -> object:
        """The value at a dotted path: mapping keys, list indexes, dataclass fields."""
        head, *rest = path.split(".")
        value = self._top(head)
        for part in rest:
            value = value.get() if isinstance(value, Lazy) else value
            if isinstance(value, Node):
                value = value.value
            if isinstance(value, Mapping) and part in value:
                value = value[part]
            elif isinstance(value, list | tuple) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            elif (
                dataclasses.is_dataclass(value)
                and not isinstance(value, type)
                and part in {f.name for f in dataclasses.fields(value)}
            ):
                value = getattr(value, part)
            else:
                raise KeyError(path)
        value = value.get() if isinstance(value, Lazy) else value
        return value.value if isinstance(value, Node) else value

    def truthy(self, name: str, where: str) -> bool:
        """Whether a condition holds; a field a table entry leaves out is false."""
        try:
            return bool(self.lookup(name))
        except KeyError:
            try:
                self._top(name.split(".")[0])
            except KeyError:
                raise PrivacyCIError(f"{where}: unknown name {name!r} in a condition") from None
            return False

    def fill(self, text: str, where: str) -> str:
        """`text` with every ``${name|filter}`` replaced; an unknown name is an error."""

        def one(match: re.Match[str]) -> str:
            if match.group("escaped"):
                return "$"
            name = match.group("name")
            try:
                value = self.lookup(name)
            except KeyError:
                raise PrivacyCIError(f"{where}: unknown name ${{{name}}}") from None
            try:
                for f in filter(None, match.group("filters").split("|")):
                    if f not in FILTERS:
                        raise ValueError(f"unknown filter {f!r} (known: {', '.join(FILTERS)})")
                    value = FILTERS[f](value)
                return _as_text(value)
            except ValueError as exc:
                raise PrivacyCIError(f"{where}: ${{{match.group(0)[2:-1]}}}: {exc}") from None

        return _PLACEHOLDER.sub(one, text)


# -------------------------------------------------------------------- templates

BLOCK_KINDS = ("meta", "fields", "para", "text", "bullets", "table")
HEADER_KEYS = {"department": "department", "heading": "heading", "name label": "name_label"}
_CONDITION = re.compile(r"^\[(if|unless) ([A-Za-z_][\w.]*)\] ?")
_SPLICE = re.compile(r"^\*([A-Za-z_][\w.]*)$")


@dataclass(frozen=True)
class _Line:
    text: str
    line: int
    condition: tuple[bool, str] | None = None  # (wanted truth, name)
    splice: str | None = None


@dataclass(frozen=True)
class _Block:
    kind: str
    line: int
    lines: tuple[_Line, ...]
    title: str | None = None
    numbered: bool = False
    condition: tuple[bool, str] | None = None


@dataclass
class Rendered:
    """A filled template: the header lines and blocks, before the frame goes round it."""

    department: str
    heading: str
    name_label: str
    meta: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)


def _condition(text: str) -> tuple[tuple[bool, str] | None, str]:
    match = _CONDITION.match(text)
    if match is None:
        return None, text
    return (match.group(1) == "if", match.group(2)), text[match.end() :]


@dataclass(frozen=True)
class DocTemplate:
    """One parsed ``.tmpl`` file (see the module docstring for the format)."""

    path: Path
    header: tuple[tuple[str, _Line], ...]
    blocks: tuple[_Block, ...]

    def _where(self, line: int) -> str:
        return f"{self.path}:{line}"

    def _holds(self, cond: tuple[bool, str] | None, scope: Scope, line: int) -> bool:
        return cond is None or scope.truthy(cond[1], self._where(line)) == cond[0]

    def _list(self, scope: Scope, name: str, line: int) -> list[Any]:
        try:
            value = scope.lookup(name)
        except KeyError:
            raise PrivacyCIError(f"{self._where(line)}: unknown list *{name}") from None
        if not isinstance(value, list | tuple):
            raise PrivacyCIError(f"{self._where(line)}: *{name} is not a list")
        return list(value)

    def _texts(self, block: _Block, scope: Scope) -> list[str]:
        out: list[str] = []
        for line in block.lines:
            if not self._holds(line.condition, scope, line.line):
                continue
            if line.splice is not None:
                for item in self._list(scope, line.splice, line.line):
                    if not isinstance(item, str):
                        raise PrivacyCIError(
                            f"{self._where(line.line)}: *{line.splice} is not a list of text"
                        )
                    out.append(item)
            else:
                out.append(scope.fill(line.text, self._where(line.line)))
        return out

    def _rows(self, block: _Block, scope: Scope) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for line in block.lines:
            if not self._holds(line.condition, scope, line.line):
                continue
            where = self._where(line.line)
            if line.splice is not None:
                for row in self._list(scope, line.splice, line.line):
                    if not isinstance(row, list | tuple) or not all(
                        isinstance(c, str) for c in row
                    ):
                        raise PrivacyCIError(f"{where}: *{line.splice} is not a list of rows")
                    rows.append(tuple(row))
            else:
                rows.append(tuple(scope.fill(c.strip(), where) for c in line.text.split("|")))
        if rows and len({len(r) for r in rows}) != 1:
            raise PrivacyCIError(
                f"{self._where(block.line)}: table rows have different numbers of cells"
            )
        return rows

    def render(self, scope: Scope) -> Rendered:
        """Fill the template: header values, meta lines and the formatted blocks."""
        header: dict[str, str] = {}
        for key, line in self.header:
            if key not in header and self._holds(line.condition, scope, line.line):
                header[key] = scope.fill(line.text, self._where(line.line))
        for key in ("department", "heading"):
            if key not in header:
                raise PrivacyCIError(f"{self.path}: no {key!r} line applies")
        out = Rendered(header["department"], header["heading"], header.get("name_label", ""))
        for block in self.blocks:
            if not self._holds(block.condition, scope, block.line):
                continue
            where = self._where(block.line)
            title = "" if block.title is None else scope.fill(block.title, where) + "\n"
            if block.kind == "meta":
                out.meta += self._texts(block, scope)
                continue
            if block.kind == "table":
                rows = self._rows(block, scope)
                body = lay.table(rows) if rows else ""
            else:
                texts = self._texts(block, scope)
                if block.kind == "para":
                    body = lay.para(" ".join(texts))
                elif block.kind == "text":
                    body = "\n".join(texts)
                elif block.kind == "fields":
                    body = lay.fields(texts)
                else:
                    body = lay.bullets(texts, numbered=block.numbered)
            if body or title:
                out.blocks.append(title + body)
        return out


def _parse_block_header(text: str, where: str) -> tuple[str, dict[str, str], set[str]]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise PrivacyCIError(f"{where}: {exc}") from None
    if not words or words[0] not in BLOCK_KINDS:
        raise PrivacyCIError(f"{where}: a block is one of {', '.join(BLOCK_KINDS)}")
    options: dict[str, str] = {}
    flags: set[str] = set()
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if eq and key in {"title", "if", "unless"}:
            options[key] = value
        elif word == "numbered":
            flags.add(word)
        else:
            raise PrivacyCIError(f"{where}: unknown block option {word!r}")
    return words[0], options, flags


def parse_template(text: str, path: Path) -> DocTemplate:
    """Parse a ``.tmpl`` file; every syntax problem names the file and the line."""
    header: list[tuple[str, _Line]] = []
    blocks: list[_Block] = []
    current: tuple[str, dict[str, str], set[str], int] | None = None
    body: list[_Line] = []

    def close() -> None:
        if current is None:
            return
        kind, options, flags, line = current
        while body and not body[-1].text.strip() and body[-1].splice is None:
            body.pop()
        cond: tuple[bool, str] | None = None
        for key in ("if", "unless"):
            if key in options:
                cond = (key == "if", options[key])
        blocks.append(
            _Block(kind, line, tuple(body), options.get("title"), "numbered" in flags, cond)
        )

    for number, raw in enumerate(text.splitlines(), 1):
        where = f"{path}:{number}"
        if raw.startswith("--- "):
            close()
            kind, options, flags = _parse_block_header(raw[4:], where)
            current, body = (kind, options, flags, number), []
            continue
        if current is None:  # the header
            if not raw.strip() or raw.startswith("#"):
                continue
            cond, rest = _condition(raw)
            key, sep, value = rest.partition(":")
            if not sep or key.strip() not in HEADER_KEYS:
                raise PrivacyCIError(
                    f"{where}: expected one of {', '.join(HEADER_KEYS)} followed by ':'"
                    " (or a '--- <block>' line)"
                )
            header.append((HEADER_KEYS[key.strip()], _Line(value.strip(), number, cond)))
            continue
        kind = current[0]
        if not raw.strip():
            if kind == "text" and body:
                body.append(_Line("", number))  # kept inside a text block, trimmed at its end
            continue
        cond, rest = _condition(raw)
        splice = _SPLICE.match(rest.strip())
        if splice is not None and kind != "para":
            body.append(_Line("", number, cond, splice.group(1)))
            continue
        continues = raw[:1] in {" ", "\t"} and cond is None
        if kind in {"meta", "fields", "bullets"} and continues and body:
            last = body[-1]
            if last.splice is not None:
                raise PrivacyCIError(f"{where}: a spliced list cannot be continued")
            body[-1] = dataclasses.replace(last, text=f"{last.text} {raw.strip()}")
            continue
        if kind == "bullets":
            if not rest.startswith("- "):
                raise PrivacyCIError(f"{where}: a bullet item starts with '- '")
            rest = rest[2:]
        body.append(_Line(rest.rstrip() if kind == "text" else rest.strip(), number, cond))
    close()
    return DocTemplate(path, tuple(header), tuple(blocks))


# ------------------------------------------------------------------------ packs


def template_name(document_type: str) -> str:
    """The template file stem of a document type: ``"lab report"`` -> ``lab_report``."""
    return re.sub(r"[^a-z0-9]+", "_", document_type.strip().lower()).strip("_")


@dataclass(frozen=True)
class ContentPack:
    """A loaded ``content/`` folder: its tables by file stem and its templates by name."""

    folder: Path
    tables: Mapping[str, Node]
    templates: Mapping[str, DocTemplate]

    def table(self, name: str) -> Node:
        found = self.tables.get(name)
        if found is None:
            raise PrivacyCIError(f"{self.folder}: missing {name}.yaml, which this document needs")
        return found

    def template(self, document_type: str) -> DocTemplate:
        found = self.templates.get(template_name(document_type)) or self.templates.get("_generic")
        if found is None:
            raise PrivacyCIError(
                f"{self.folder / 'templates'}: no {template_name(document_type)}.tmpl and no"
                " _generic.tmpl"
            )
        return found


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


_PACKS: dict[Path, tuple[tuple[tuple[str, int, int], ...], ContentPack]] = {}


def _read_text(path: Path, folder: Path) -> str:
    """A content file's text: a regular file inside `folder` (resolved), within the bound."""
    data = read_user_file(path, limit=max_input_bytes(), inside=folder, env=MAX_INPUT_BYTES_ENV)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PrivacyCIError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text's newlines did


def load_pack(folder: Path) -> ContentPack:
    """Read a content folder (cached until one of its files changes).

    Raises:
        PrivacyCIError: a table that is not valid YAML (or repeats a key), or a template
            with a syntax error; the message names the file and the line. A file that
            is not a regular file inside the folder, or is too large.
    """
    folder = folder.resolve()
    signature = _signature(folder)
    cached = _PACKS.get(folder)
    if cached is not None and cached[0] == signature:
        return cached[1]
    tables: dict[str, Node] = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            raw = load_yaml(_read_text(path, folder))
        except InputLimitError as exc:  # before the YAML error it also is
            raise PrivacyCIError(f"{path}: {exc}") from None
        except DuplicateKeyError as exc:
            raise PrivacyCIError(f"{path}: {exc}") from None
        except yaml.YAMLError as exc:
            raise PrivacyCIError(f"{path}: not valid YAML ({exc})") from None
        tables[path.stem] = Node(raw, str(path))
    templates = {
        p.stem: parse_template(_read_text(p, folder), p)
        for p in sorted((folder / "templates").glob("*.tmpl"))
    }
    pack = ContentPack(folder, tables, templates)
    _PACKS[folder] = (signature, pack)
    return pack


def plain(value: object) -> object:
    """A table value as plain data for a scope (nodes unwrapped)."""
    return value.value if isinstance(value, Node) else value


def pick_list(node: Node) -> Sequence[object]:
    """A list's raw items, for seeded picks (its length and order fix every pick)."""
    items = node.value
    if not isinstance(items, list) or not items:
        raise node._fail("a non-empty list")
    return items
