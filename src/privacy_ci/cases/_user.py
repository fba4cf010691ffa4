"""Users' own case files: `load_case_file` (a dataset) and `read_case_file` (entries).

A file holds one JSON object, a JSON list of objects, or one object per line
(JSONL; ``.jsonl``/``.ndjson`` files always read so, other files when the whole
text is not one JSON value). Each object is a case in one of two schemas:

* GoldCoin (narrative in ``context``): ``sender``, ``recipient``, ``subject``,
  ``information_type``, ``purpose`` are one string each; ``norm_type``;
  ``refer_ids`` (a list of ids).
* PrivaCI-Bench (narrative in ``case_content``, or ``followed_articles`` /
  ``violated_articles`` given): CI fields are strings or lists of strings (joined
  with ``"; "``); the gold ids are ``followed_articles`` + ``violated_articles``.

Either may also use ``text`` (or ``event``) for the narrative, the flat names
``sender_role``, ``recipient_role``, ``subject_role``, ``consent_form``, ``label``
for the label, ``gold_ids`` for ids, ``id`` (the case id) and ``regulation``. As in
GoldCoin's files, ``sender``/``recipient``/``subject`` are the parties' *roles*
unless the matching ``*_role`` field is given too, when they are their names.

Two optional keys score the facts-then-law judge: ``facts``, the gold facts of the
disclosure (an object of fact -> value name, checked against the regulation's fact
schema, `privacy_ci.reasoning.load_fact_schema`: an unknown fact or value is an
error naming the line and the key), and ``pair_id``, the minimal pair the case
belongs to. In a file of labelled cases (`load_case_file`) every pair id must be
shared by at least two cases: a pair id of one case is an error naming its line (a
typo, or half a pair, that would never be scored). Three or more cases may share one:
they are scored as one group (right when every member is right, a flip when their
verdicts are not all the same; `privacy_ci.evaluation.pair_scores`). Every other key
is kept, as written, in the case's ``extra["metadata"]``.

Every entry is validated; all problems are raised together as one
`ValidationFailed`, each naming the file, the line (JSONL) or item (JSON list)
and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci._files import read_user_file
from privacy_ci._structured import (
    MAX_INPUT_BYTES_ENV,
    DuplicateKeyError,
    InputLimitError,
    load_json,
    max_input_bytes,
)
from privacy_ci.cases._case import (
    VERDICT_ORDER,
    Case,
    Dataset,
    DatasetReport,
    GoldFacts,
    Protocol,
    SkippedRow,
    Task,
)
from privacy_ci.cases._gold import TREELESS, GoldResolver, gold_resolver
from privacy_ci.cases._loaders import LABEL_SPELLINGS, parse_label, resolve_gold_ids
from privacy_ci.ci import FIELDS, Flow, Verdict, clean_value, is_placeholder
from privacy_ci.errors import DataMissingError, PrivacyCIError, ValidationFailed
from privacy_ci.regulations import find_regulation, regulation_keys

__all__ = ["UserCase", "load_case_file", "read_case_file"]

_MAX_PROBLEMS = 20
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_NARRATIVE = ("context", "text", "case_content", "event")
_LABELS = ("norm_type", "label")
_GOLD = ("refer_ids", "gold_ids", "followed_articles", "violated_articles")
_PB_MARKERS = ("case_content", "followed_articles", "violated_articles")
_PARTIES = ("sender", "recipient", "subject")
_OWN = frozenset({*_NARRATIVE, *_LABELS, *_GOLD, *FIELDS, "id", "regulation", "facts", "pair_id"})
_KNOWN_LABELS = ", ".join(sorted(LABEL_SPELLINGS))


@dataclass(frozen=True)
class UserCase:
    """One validated entry of a user's case file (its label and narrative may be absent).

    Args:
        where: its place, ``line 7`` (JSONL) or ``item [3]`` (JSON list); "" when
            the file is one JSON object.
        index: its position among the file's cases, from 0.
        text: the narrative, or None.
        flow: the CI fields, cleaned with `privacy_ci.ci.clean_value`.
        label: the gold verdict, or None.
        gold_ids: the gold regulation ids as written (placeholders dropped).
        id: the entry's own ``id``, or None.
        regulation: the ``regulation`` it names, or None.
        metadata: every key outside the schema, as written.
        placeholders: CI field -> the raw value read as "no value".
        gold_fields: gold field -> its ids (``refer_ids``, ``followed_articles`` ...).
        facts: the gold facts (``facts``), or None; every name and value is one of the
            regulation's fact schema (`privacy_ci.reasoning.load_fact_schema`).
        pair_id: the minimal pair it belongs to (``pair_id``), or None.
    """

    where: str
    index: int
    text: str | None
    flow: Flow
    label: Verdict | None = None
    gold_ids: tuple[str, ...] = ()
    id: str | None = None
    regulation: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    placeholders: dict[str, Any] = field(default_factory=dict)
    gold_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    facts: GoldFacts | None = None
    pair_id: str | None = None


class _Problems:
    """Problems of one file, as ``<file> <where>: <message>``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.path} {where}: {message}" if where else f"{self.path}: {message}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        shown = self.items[:_MAX_PROBLEMS]
        if len(self.items) > _MAX_PROBLEMS:
            shown.append(f"{self.path}: ... and {len(self.items) - _MAX_PROBLEMS} more problem(s)")
        raise ValidationFailed(shown)


@dataclass
class _Parsed:
    entries: list[UserCase]
    skipped: list[SkippedRow]
    sha256: str
    placeholders: Counter[tuple[str, str]]


def _kind(value: Any) -> str:
    """A JSON type name for messages."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------------
# the file -> (where, value) per entry
# ---------------------------------------------------------------------------------
def _json_error(exc: json.JSONDecodeError) -> str:
    return f"not valid JSON ({exc.msg} at column {exc.colno})"


def _duplicates(exc: DuplicateKeyError, problems: _Problems, prefix: str) -> None:
    for dup in exc.duplicates:
        where = dup.where
        if prefix:  # a list's entries are "[3]", "[3].x": name them as items
            where = f"{prefix} {where}" if where.startswith("[") else prefix
        problems.add("" if where == "top level" else where, dup.problem)


def _entries(
    path: Path, text: str, problems: _Problems, skipped: list[SkippedRow]
) -> list[tuple[str, Any]]:
    """``(where, value)`` of each entry, in file order."""
    if not text.strip():
        problems.add("", "empty file (no cases)")
        return []
    if path.suffix.lower() not in _JSONL_SUFFIXES:
        try:
            whole = load_json(text)
        except InputLimitError as exc:  # before the JSON error it also is
            problems.add(f"line {exc.line}" if exc.line else "", exc.problem)
            return []
        except DuplicateKeyError as exc:
            _duplicates(exc, problems, "item" if text.lstrip().startswith("[") else "")
            return []
        except json.JSONDecodeError as exc:
            first = text.lstrip().splitlines()[0]
            if text.lstrip().startswith("[") or not _parses(first):
                problems.add(f"line {exc.lineno}", _json_error(exc))
                return []
            whole = None  # one JSON value per line: read as JSONL below
        else:
            if isinstance(whole, list):
                if not whole:
                    problems.add("", "the JSON list holds no cases")
                return [(f"item [{i}]", value) for i, value in enumerate(whole)]
            if isinstance(whole, dict):
                return [("", whole)]
            problems.add(
                "",
                f"expected a JSON object, a list of objects or one object per line (JSONL), "
                f"found {_kind(whole)}",
            )
            return []
    out: list[tuple[str, Any]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        where = f"line {line_no}"
        if not line.strip():
            skipped.append(SkippedRow(line_no, "blank line"))
            continue
        try:
            out.append((where, load_json(line)))
        except InputLimitError as exc:  # (its own line is the file's line)
            problems.add(where, exc.problem)
        except DuplicateKeyError as exc:
            for dup in exc.duplicates:
                inner = "" if dup.where == "top level" else f" in {dup.where}"
                problems.add(where, f"duplicate key {dup.key!r}{inner}")
        except json.JSONDecodeError as exc:
            problems.add(where, _json_error(exc))
    if not out and not problems.items:
        problems.add("", "empty file (no cases)")
    return out


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a line nested too deeply
        return False
    return True


# ---------------------------------------------------------------------------------
# one entry -> a UserCase
# ---------------------------------------------------------------------------------
def _narrative(
    where: str, entry: dict[str, Any], problems: _Problems, required: bool
) -> str | None:
    texts: dict[str, str] = {}
    for key in _NARRATIVE:
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            problems.add(
                where, f"field {key!r}: expected the narrative as a string, found {_kind(value)}"
            )
            return None
        if value.strip():
            texts[key] = value.strip()
    if len(set(texts.values())) > 1:
        names = " and ".join(repr(k) for k in texts)
        problems.add(where, f"fields {names} give different narratives; keep one")
        return None
    if texts:
        return next(iter(texts.values()))
    if required:
        empty = [k for k in _NARRATIVE if k in entry]
        problems.add(
            where,
            f"field {empty[0]!r}: the narrative is empty"
            if empty
            else "field 'context': missing (the narrative; 'text' or 'case_content' also work)",
        )
    return None


def _label(
    where: str, entry: dict[str, Any], problems: _Problems, required: bool
) -> Verdict | None:
    found: Verdict | None = None
    given = False
    for key in _LABELS:
        raw = entry.get(key)
        if raw is None:
            continue
        given = True
        verdict = parse_label(raw)
        if not isinstance(raw, str):
            problems.add(where, f"field {key!r}: expected a label string, found {_kind(raw)}")
        elif verdict is None:
            problems.add(
                where, f"field {key!r}: {raw!r} is not a label (expected one of {_KNOWN_LABELS})"
            )
        elif found is not None and verdict is not found:
            problems.add(where, "fields 'norm_type' and 'label' disagree; keep one")
        else:
            found = verdict
    if required and not given:
        problems.add(
            where,
            f"field 'norm_type': missing (scoring needs each case's label, one of {_KNOWN_LABELS})",
        )
    return found


def _ci_fields(
    where: str,
    entry: dict[str, Any],
    problems: _Problems,
    goldcoin: bool,
    counts: Counter[tuple[str, str]],
) -> tuple[Flow, dict[str, Any]] | None:
    # (flow field, file key): GoldCoin's party fields are roles unless *_role is given
    pairs: list[tuple[str, str]] = []
    for party in _PARTIES:
        role = f"{party}_role"
        if role in entry:
            pairs += [(party, party), (role, role)]
        else:
            pairs.append((role, party))
    pairs += [(k, k) for k in ("information_type", "purpose", "consent_form")]
    values: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    ok = True
    for name, key in pairs:
        if key not in entry:
            continue
        raw = entry[key]
        if isinstance(raw, list) and goldcoin:
            problems.add(
                where,
                f"field {key!r}: expected a string, found a list (a GoldCoin case, with "
                "'context', holds one string per field; lists of strings belong to "
                "PrivaCI-Bench cases, with 'case_content')",
            )
            ok = False
            continue
        if isinstance(raw, list):
            bad = [item for item in raw if item is not None and not isinstance(item, str)]
            if bad:
                problems.add(where, f"field {key!r}: list element {bad[0]!r} is not a string")
                ok = False
                continue
        elif raw is not None and not isinstance(raw, str):
            expected = "a string or null" if goldcoin else "a string, a list of strings or null"
            problems.add(where, f"field {key!r}: expected {expected}, found {_kind(raw)}")
            ok = False
            continue
        cleaned = clean_value(raw)
        values[name] = cleaned
        items = raw if isinstance(raw, list) else [raw]
        dropped = [i for i in items if i is None or clean_value(i) is None]
        for item in dropped:
            counts[(name, "null" if item is None else str(item))] += 1
        if dropped:
            kept[name] = raw
    if not ok:
        return None
    return Flow.of(values, clean=False), kept  # cleaned above


def _gold(
    where: str, entry: dict[str, Any], problems: _Problems, counts: Counter[tuple[str, str]]
) -> dict[str, tuple[str, ...]] | None:
    out: dict[str, tuple[str, ...]] = {}
    ok = True
    for key in _GOLD:
        raw = entry.get(key)
        if raw is None:
            continue
        if not isinstance(raw, list):
            problems.add(
                where, f"field {key!r}: expected a list of regulation ids, found {_kind(raw)}"
            )
            ok = False
            continue
        ids: list[str] = []
        for item in raw:
            if item is None or (isinstance(item, str) and is_placeholder(item)):
                counts[("gold_ids", "null" if item is None else item)] += 1
            elif not isinstance(item, str):
                problems.add(where, f"field {key!r}: id {item!r} is not a string")
                ok = False
                break
            else:
                ids.append(item.strip())
        out[key] = tuple(ids)
    return out if ok else None


def _gold_facts(
    where: str, entry: dict[str, Any], problems: _Problems, regulation: str | None
) -> GoldFacts | None:
    """The entry's ``facts``, every name and value checked against `regulation`'s fact
    schema (None: the regulation is not valid, already reported; the shape is checked)."""
    raw = entry.get("facts")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.add(
            where, f"field 'facts': expected an object of fact -> value, found {_kind(raw)}"
        )
        return None
    bad = [k for k, v in raw.items() if not isinstance(v, str) or not v.strip()]
    for key in bad:
        problems.add(
            where,
            f"field 'facts': fact {key!r}: expected a value name (a string), found "
            + ("an empty string" if isinstance(raw[key], str) else _kind(raw[key])),
        )
    if bad:
        return None
    facts = GoldFacts({k: v.strip() for k, v in raw.items()})
    if regulation is None:
        return facts
    from privacy_ci.reasoning import FactError, load_fact_schema  # (loaded once, cached)

    try:
        schema = load_fact_schema(regulation)
    except FactError as exc:
        problems.add(where, f"field 'facts': gold facts need a fact model: {exc}")
        return None
    ok = True
    for key, value in facts.items():
        try:
            schema.check(key, value)
        except FactError as exc:
            problems.add(where, f"field 'facts': {exc}")
            ok = False
    return facts if ok else None


def _entry(
    where: str,
    index: int,
    value: Any,
    problems: _Problems,
    *,
    require_text: bool,
    require_label: bool,
    counts: Counter[tuple[str, str]],
    asked: str | None = None,
) -> UserCase | None:
    if not isinstance(value, dict):
        problems.add(where, f"expected a JSON object (one case), found {_kind(value)}")
        return None
    before = len(problems.items)
    privaci = any(k in value for k in _PB_MARKERS)
    text = _narrative(where, value, problems, require_text)
    label = _label(where, value, problems, require_label)
    ci = _ci_fields(where, value, problems, not privaci and "context" in value, counts)
    gold = _gold(where, value, problems, counts)
    case_id = value.get("id")
    if case_id is not None and (
        isinstance(case_id, bool) or not isinstance(case_id, str | int) or not str(case_id).strip()
    ):
        problems.add(
            where, f"field 'id': expected a non-empty string or an integer, found {case_id!r}"
        )
    pair_id = value.get("pair_id")
    if pair_id is not None and (
        isinstance(pair_id, bool) or not isinstance(pair_id, str | int) or not str(pair_id).strip()
    ):
        problems.add(
            where, f"field 'pair_id': expected a non-empty string or an integer, found {pair_id!r}"
        )
    regulation = value.get("regulation")
    if regulation is not None and (
        not isinstance(regulation, str)
        or (find_regulation(regulation) is None and regulation not in TREELESS)
    ):
        known = ", ".join((*regulation_keys(), *TREELESS))
        problems.add(
            where, f"field 'regulation': {regulation!r} is not a registered regulation ({known})"
        )
        facts = _gold_facts(where, value, problems, None)
    else:  # the facts of the regulation asked for, else the entry's, else HIPAA's
        facts = _gold_facts(where, value, problems, asked or regulation or "hipaa")
    if len(problems.items) > before or ci is None or gold is None:
        return None
    flow, kept = ci
    return UserCase(
        where=where,
        index=index,
        text=text,
        flow=flow,
        label=label,
        gold_ids=tuple(i for ids in gold.values() for i in ids),
        id=None if case_id is None else str(case_id).strip(),
        regulation=regulation,
        metadata={k: v for k, v in value.items() if k not in _OWN},
        placeholders=kept,
        gold_fields=gold,
        facts=facts,
        pair_id=None if pair_id is None else str(pair_id).strip(),
    )


def _parse(
    path: Path, *, require_text: bool, require_label: bool, regulation: str | None = None
) -> _Parsed:
    try:
        # a regular file within the input limit: a FIFO or a device would never end
        raw = read_user_file(path, limit=max_input_bytes(), env=MAX_INPUT_BYTES_ENV)
    except PrivacyCIError as exc:
        if os.path.lexists(path):
            raise ValidationFailed([str(exc)]) from None
        raise DataMissingError(
            f"{path}: cannot read the file (No such file or directory)"
        ) from None
    problems = _Problems(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed([f"{path}: byte {exc.start}: not UTF-8 text"]) from None
    skipped: list[SkippedRow] = []
    counts: Counter[tuple[str, str]] = Counter()
    entries: list[UserCase] = []
    for index, (where, value) in enumerate(_entries(path, text, problems, skipped)):
        entry = _entry(
            where,
            index,
            value,
            problems,
            require_text=require_text,
            require_label=require_label,
            counts=counts,
            asked=regulation,
        )
        if entry is not None:
            entries.append(entry)
    problems.raise_if_any()
    return _Parsed(entries, skipped, hashlib.sha256(raw).hexdigest(), counts)


# ---------------------------------------------------------------------------------
# the entry points
# ---------------------------------------------------------------------------------
def read_case_file(
    path: Path | str, *, require_text: bool = True, require_label: bool = False
) -> tuple[UserCase, ...]:
    """Read and validate every case of a user's file, without building a dataset.

    Args:
        path: a JSON (one object or a list) or JSONL file of cases.
        require_text: an entry without a narrative is an error.
        require_label: an entry without ``norm_type`` (or ``label``) is an error.

    Returns:
        The entries, in file order.

    Raises:
        DataMissingError: the file cannot be read.
        ValidationFailed: the file is empty, not JSON, or an entry is malformed,
            including gold facts the regulation's fact schema does not know (every
            problem, naming the file, line or item, and field).
    """
    parsed = _parse(Path(path), require_text=require_text, require_label=require_label)
    return tuple(parsed.entries)


def _check_regulation(regulation: str) -> None:
    if find_regulation(regulation) is None and regulation not in TREELESS:
        known = ", ".join((*regulation_keys(), *TREELESS))
        raise PrivacyCIError(f"unknown regulation {regulation!r} (known: {known})")


def _unify(
    entries: list[UserCase], regulation: str | None, problems: _Problems, stem: str
) -> tuple[str, list[str]]:
    """The file's one regulation and each entry's case id (problems for conflicts)."""
    chosen, first_where = regulation, "--regulation"
    ids: list[str] = []
    seen: dict[str, str] = {}
    for entry in entries:
        if entry.regulation is not None:
            if chosen is None:
                chosen, first_where = entry.regulation, entry.where
            elif entry.regulation != chosen:
                problems.add(
                    entry.where,
                    f"field 'regulation': {entry.regulation!r}, but {first_where} names "
                    f"{chosen!r} (a file holds cases of one regulation)",
                )
        case_id = entry.id if entry.id is not None else f"{stem}-{entry.index:04d}"
        if case_id in seen:
            problems.add(entry.where, f"field 'id': {case_id!r} is also the id of {seen[case_id]}")
        seen.setdefault(case_id, entry.where or "the file")
        ids.append(case_id)
    return chosen or "hipaa", ids


def _lone_pairs(entries: list[UserCase], problems: _Problems) -> None:
    """A pair id no other case shares: never scored, so an error (see the module notes)."""
    members = Counter(e.pair_id for e in entries if e.pair_id is not None)
    for entry in entries:
        if entry.pair_id is not None and members[entry.pair_id] == 1:
            problems.add(
                entry.where,
                f"field 'pair_id': no other case has pair id {entry.pair_id!r}; a minimal "
                "pair needs two or more cases sharing it (leave 'pair_id' out for an "
                "unpaired case)",
            )


def load_case_file(
    path: Path | str,
    *,
    regulation: str | None = None,
    data_dir: Path | str | None = None,
    resolve_gold: bool = True,
    hipaa_tree: str = "ecfr",
    name: str | None = None,
) -> Dataset:
    """Load a user's file of labelled cases as a three-way dataset.

    The dataset is named after the file's stem (or `name`), its sha256 is the file's,
    and its protocol is three-way (permit / prohibit / not applicable). Case ids are
    the entries' ``id`` fields, else ``<name>-<index>`` (index from 0, 4 digits).
    Gold facts (``facts``) and pair ids (``pair_id``) become the cases' `gold_facts`
    and `pair_id`.

    Args:
        path: a JSON (one object or a list) or JSONL file of cases (see the module).
        regulation: the regulation the cases are judged against; default the one
            the entries' ``regulation`` fields name, else ``hipaa``.
        data_dir: the data directory holding the regulation trees.
        resolve_gold: resolve gold ids to tree nodes; when the tree is missing from
            the data directory they stay unresolved (the report says so).
        hipaa_tree: ``ecfr`` or ``published`` (see `privacy_ci.cases.load_dataset`).
        name: the dataset's name; default the file's stem.

    Returns:
        The dataset; each case's ``extra`` holds ``row``, ``line`` (JSONL) or
        ``item`` (JSON list), and ``metadata`` (the keys outside the schema).

    Raises:
        DataMissingError: the file cannot be read.
        ValidationFailed: the file is empty or malformed, an entry lacks a
            narrative or a label, its gold facts name a fact or value the
            regulation's fact schema does not have, or its pair id is shared by no
            other case (every problem, naming the file, line and field).
        PrivacyCIError: ``regulation`` is not registered.
    """
    source = Path(path)
    if regulation is not None:
        _check_regulation(regulation)
    parsed = _parse(source, require_text=True, require_label=True, regulation=regulation)
    stem = name or source.stem
    problems = _Problems(source)
    chosen, ids = _unify(parsed.entries, regulation, problems, stem)
    _lone_pairs(parsed.entries, problems)
    problems.raise_if_any()
    report = DatasetReport(source=str(source), rows=len(parsed.entries) + len(parsed.skipped))
    report.skipped.extend(parsed.skipped)
    report.placeholders.update(parsed.placeholders)
    resolver: GoldResolver | None = None
    if not resolve_gold:
        report.gold_status = "not resolved (resolve_gold=False)"
    elif not any(e.gold_ids for e in parsed.entries):
        report.gold_status = "resolved"  # nothing to resolve: no tree loaded
    else:
        try:
            resolver = gold_resolver(chosen, data_dir, hipaa_tree)
        except DataMissingError as exc:
            # the cases can still be judged; only gold-id scoring needs the tree
            report.gold_status = "not resolved (no regulation tree)"
            report.notes.append(f"gold ids not resolved: {exc}")
        else:
            report.gold_status = (
                "resolved" if resolver.applicable else f"no regulation tree ({chosen})"
            )
    cases: list[Case] = []
    for entry, case_id in zip(parsed.entries, ids, strict=True):
        assert entry.text is not None and entry.label is not None  # required above
        extra: dict[str, Any] = {"row": entry.index}
        if entry.where:
            kind, _, number = entry.where.partition(" ")
            extra[kind] = int(number.strip("[]"))
        extra.update({k: v for k, v in entry.gold_fields.items() if k in _PB_MARKERS})
        if entry.metadata:
            extra["metadata"] = dict(entry.metadata)
        if entry.placeholders:
            extra["placeholders"] = dict(entry.placeholders)
        cases.append(
            Case(
                id=case_id,
                dataset=stem,
                regulation=chosen,
                text=entry.text,
                flow=entry.flow,
                label=entry.label,
                gold_ids=entry.gold_ids,
                gold_nodes=resolve_gold_ids(case_id, entry.gold_ids, resolver, report),
                gold_facts=entry.facts,
                pair_id=entry.pair_id,
                extra=extra,
            )
        )
    with_facts = sum(1 for c in cases if c.gold_facts is not None)
    if with_facts:
        report.notes.append(f"{with_facts} case(s) carry gold facts ('facts')")
    members = Counter(c.pair_id for c in cases if c.pair_id is not None)
    if members:
        groups = sorted(p for p, n in members.items() if n > 2)
        report.notes.append(
            f"{len(members)} pair id(s) ('pair_id')"
            + (
                f"; {len(groups)} shared by more than two cases, scored as groups: "
                + ", ".join(groups[:5])
                if groups
                else ""
            )
        )
    keys = sorted({k for e in parsed.entries for k in e.metadata})
    if keys:
        report.notes.append(f"kept as metadata (extra['metadata']): {', '.join(keys)}")
    protocol = Protocol(
        name=stem,
        description=f"{len(cases)} user case(s) from {source.name}: permit/prohibit/not applicable",
        regulation=chosen,
        task=Task.THREE_WAY,
        labels=VERDICT_ORDER,
        inclusion="every case of the file, in file order",
        label_field="norm_type (or label)",
        gold_field="refer_ids / gold_ids / followed_articles + violated_articles",
        text_field="context / text / case_content",
        source=str(source.resolve()),
        sha256=parsed.sha256,
    )
    return Dataset(stem, protocol, tuple(cases), parsed.sha256, report)
