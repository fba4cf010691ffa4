"""`load_dataset`: the named evaluation datasets, read from the data directory.

Sources (see the data notes, ``SOURCES.md``):

* GoldCoin / Privacy Checklist JSON (``cases/goldcoin/{real,synthetic}.json``):
  ``refer_ids``, role strings ``sender``/``recipient``/``subject``, ``norm_type``
  (``not applicable``/``positive_norm``/``negative_norm``), ``context``.
* GoldCoin CSV splits (``cases/goldcoin/*.csv``): ``generate_HIPAA_type``
  (``Not Applicable``/``Permit``/``Forbid``), ``generate_background`` and the
  Python-literal columns ``generate_characteristics`` (a dict) and the gold-id
  list. The test applicability file has *two* columns named ``refer_regulation``;
  the first holds the gold ids and the second is empty (pandas reads them as
  ``refer_regulation`` and ``refer_regulation.1``; `csv.DictReader` would keep
  the empty one), so columns are looked up by first occurrence.
* PrivaCI-Bench JSONL (``cases/privaci_bench/*.jsonl``): list-valued CI fields,
  ``followed_articles`` + ``violated_articles``, ``case_content``; ACLU has a
  list ``consent_form``, ``"null"``/``"**None**"``/JSON-null articles and
  ``sender_is_subject``.
* Packaged with the code (``privacy_ci/cases/packaged/*.jsonl``, no data directory
  needed): HIPAA cases and minimal pairs in the users' case-file format
  (`privacy_ci.cases.load_case_file`) with gold facts (``facts``) and pair ids
  (``pair_id``): ``pairs-dev`` and ``pairs-validation`` (development data: written
  for developing the facts-then-law judge and checked against while tuning it),
  ``pairs-heldout`` and ``cases-heldout`` (written blind by a separate writer, for
  measuring only: never used to tune anything).

Loading is all or nothing: every problem in a file is collected and raised as
one `ValidationFailed`; no partial dataset is returned or cached.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import hashlib
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from privacy_ci._structured import DuplicateKeyError, load_json
from privacy_ci.cases._case import (
    CI_FIELDS,
    VERDICT_ORDER,
    Case,
    Dataset,
    DatasetReport,
    Protocol,
    SkippedRow,
    Task,
    UnresolvedGold,
)
from privacy_ci.cases._gold import GoldKind, GoldResolver, gold_resolver
from privacy_ci.ci import FIELDS, Flow, Verdict, is_placeholder
from privacy_ci.errors import DataMissingError, PrivacyCIError, ValidationFailed
from privacy_ci.regulations import RegulationSpec, regulations

__all__ = [
    "DATASET_NAMES",
    "LABEL_SPELLINGS",
    "PACKAGED_DATASETS",
    "UnknownDataset",
    "list_datasets",
    "load_dataset",
    "packaged_path",
    "parse_label",
]

_MAX_PROBLEMS = 20

LABEL_SPELLINGS: dict[str, Verdict] = {
    "permit": Verdict.PERMIT,
    "positive_norm": Verdict.PERMIT,
    "prohibit": Verdict.PROHIBIT,
    "negative_norm": Verdict.PROHIBIT,
    "forbid": Verdict.PROHIBIT,
    "not applicable": Verdict.NOT_APPLICABLE,
    "not_applicable": Verdict.NOT_APPLICABLE,
}
"""Label spellings of the case files (compared stripped and case-folded)."""


class UnknownDataset(PrivacyCIError, KeyError):
    """`load_dataset` was given a name it does not know (the message lists the known ones)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def parse_label(value: object) -> Verdict | None:
    """Map a label as written in a case file to a `Verdict`.

    Args:
        value: e.g. ``Not Applicable``, ``positive_norm``, ``Forbid``, ``prohibit``.

    Returns:
        The verdict, or None for an unknown spelling or a non-string.
    """
    if not isinstance(value, str):
        return None
    return LABEL_SPELLINGS.get(" ".join(value.split()).casefold())


# ---------------------------------------------------------------------------------
# placeholders
# ---------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------
# the dataset table
# ---------------------------------------------------------------------------------
_THREE = VERDICT_ORDER
_BINARY = (Verdict.PERMIT, Verdict.PROHIBIT)
_GC = "cases/goldcoin/"
_PB = "cases/privaci_bench/"
_CHECKLIST = "Privacy Checklist section 5, Tables 1-2 (three-way)"
_TABLE4 = "GoldCoin compliance task; Privacy Checklist Appendix E, Table 4"
_APPL = "GoldCoin applicability task"


@dataclass(frozen=True)
class _Spec:
    name: str
    description: str
    regulation: str
    task: Task
    labels: tuple[Verdict, ...]
    source: str
    fmt: str  # goldcoin-json | goldcoin-csv | privaci-jsonl | packaged
    id_prefix: str
    label_field: str
    gold_field: str
    text_field: str
    inclusion: str
    paper: str = ""

    def protocol(self, sha256: str) -> Protocol:
        return Protocol(
            name=self.name,
            description=self.description,
            regulation=self.regulation,
            task=self.task,
            labels=self.labels,
            inclusion=self.inclusion,
            label_field=self.label_field,
            gold_field=self.gold_field,
            text_field=self.text_field,
            source=self.source,
            sha256=sha256,
            paper=self.paper,
        )


def _gc_json(name: str, file: str, what: str, paper: str) -> _Spec:
    return _Spec(
        name=name,
        description=what,
        regulation="hipaa",
        task=Task.THREE_WAY,
        labels=_THREE,
        source=_GC + file,
        fmt="goldcoin-json",
        id_prefix=f"goldcoin-{name}",
        label_field="norm_type",
        gold_field="refer_ids",
        text_field="context",
        inclusion="every entry, in file order",
        paper=paper,
    )


def _gc_csv(name: str, file: str, task: Task, what: str, gold: str, paper: str) -> _Spec:
    compliance = task is Task.COMPLIANCE
    return _Spec(
        name=name,
        description=what,
        regulation="hipaa",
        task=task,
        labels=_BINARY if compliance else _THREE,
        source=_GC + file,
        fmt="goldcoin-csv",
        id_prefix=name,
        label_field="generate_HIPAA_type",
        gold_field=gold,
        text_field="generate_background",
        inclusion=(
            "the applicable cases (Permit/Forbid) of the split, as published, in file order"
            if compliance
            else "every row of the split, in file order"
        ),
        paper=paper,
    )


def _pb(
    regulation: str,
    task: Task,
    labels: tuple[Verdict, ...],
    what: str,
    paper: str,
    source: str | None = None,
) -> _Spec:
    return _Spec(
        name=f"privaci-{regulation}",
        description=what,
        regulation=regulation,
        task=task,
        labels=labels,
        source=source or f"{_PB}{regulation}.jsonl",
        fmt="privaci-jsonl",
        id_prefix=f"privaci-{regulation}",
        label_field="norm_type",
        gold_field="followed_articles + violated_articles",
        text_field="case_content",
        inclusion="every line, in file order",
        paper=paper,
    )


def _registered(spec: RegulationSpec) -> _Spec | None:
    """The ``privaci-<key>`` dataset of a registered regulation's case file."""
    cases = spec.cases
    if cases is None:
        return None
    task = Task(cases.task)
    labels = _BINARY if task is Task.COMPLIANCE else _THREE
    return _pb(spec.key, task, labels, cases.description, cases.paper, cases.file)


# The GoldCoin files (HIPAA); each registered regulation's case file follows, then ACLU.
_GOLDCOIN: dict[str, _Spec] = {
    s.name: s
    for s in (
        _gc_json(
            "real",
            "real.json",
            "214 real HIPAA court cases (GoldCoin test set): permit/prohibit/not applicable",
            _CHECKLIST,
        ),
        _gc_json(
            "synthetic",
            "synthetic.json",
            "618 GPT-generated HIPAA cases (GoldCoin train set): permit/prohibit/not applicable",
            _CHECKLIST,
        ),
        _gc_csv(
            "goldcoin-real-applicability",
            "test_real_cases_hipaa_applicability.csv",
            Task.APPLICABILITY,
            "GoldCoin test split, 214 real cases, scored applicable vs not applicable",
            "refer_regulation (first of the two columns so named)",
            _APPL,
        ),
        _gc_csv(
            "goldcoin-real-compliance",
            "test_real_cases_hipaa_compliance.csv",
            Task.COMPLIANCE,
            "GoldCoin test split, the 107 applicable real cases, Permit vs Forbid (Table 4)",
            "refer_regulation",
            _TABLE4,
        ),
        _gc_csv(
            "goldcoin-synthetic-applicability",
            "train_generate_cases_hipaa_applicability.csv",
            Task.APPLICABILITY,
            "GoldCoin train split, 618 generated cases, applicable vs not applicable",
            "generate_regulation_ids",
            _APPL,
        ),
        _gc_csv(
            "goldcoin-synthetic-compliance",
            "train_generate_cases_hipaa_compliance.csv",
            Task.COMPLIANCE,
            "GoldCoin train split, the 309 applicable generated cases, Permit vs Forbid",
            "generate_regulation_ids",
            "GoldCoin compliance task",
        ),
        _gc_csv(
            "goldcoin-val-applicability",
            "val_generate_cases_hipaa_applicability.csv",
            Task.APPLICABILITY,
            "GoldCoin validation split, 40 generated cases, applicable vs not applicable",
            "generate_regulation_ids",
            _APPL,
        ),
        _gc_csv(
            "goldcoin-val-compliance",
            "val_generate_cases_hipaa_compliance.csv",
            Task.COMPLIANCE,
            "GoldCoin validation split, the 20 applicable generated cases, Permit vs Forbid",
            "generate_regulation_ids",
            "GoldCoin compliance task",
        ),
    )
}
_ACLU = _pb(
    "aclu",
    Task.COMPLIANCE,
    _BINARY,
    "PrivaCI-Bench ACLU, 69 civil-liberties flows, permit vs prohibit (no tree)",
    "PrivaCI-Bench",
)


_PACKAGED_DIR = "packaged"  # under privacy_ci/cases
_PACKAGED_SOURCE = "privacy_ci/cases/packaged/"  # how a protocol names the file


def _packaged(name: str, file: str, what: str) -> _Spec:
    return _Spec(
        name=name,
        description=what,
        regulation="hipaa",
        task=Task.THREE_WAY,
        labels=_THREE,
        source=file,
        fmt="packaged",
        id_prefix=name,
        label_field="label",
        gold_field="facts (gold facts of the disclosure; no regulation ids)",
        text_field="context",
        inclusion="every line, in file order (ids and pair ids as written)",
        paper="privacy-ci issue 25 (facts-then-law judge)",
    )


# Written for the facts-then-law judge, shipped in the package (see the module notes).
_PACKAGED: dict[str, _Spec] = {
    s.name: s
    for s in (
        _packaged(
            "pairs-dev",
            "hipaa-pairs-dev.jsonl",
            "HIPAA minimal pairs with gold facts, written for development (tuned on)",
        ),
        _packaged(
            "pairs-validation",
            "hipaa-pairs-validation.jsonl",
            "HIPAA minimal pairs with gold facts, written for development (validated on, "
            "not held out)",
        ),
        _packaged(
            "pairs-heldout",
            "hipaa-pairs-heldout.jsonl",
            "HIPAA minimal pairs with gold facts, written blind by a separate writer; "
            "never tuned on",
        ),
        _packaged(
            "cases-heldout",
            "hipaa-cases-heldout.jsonl",
            "HIPAA cases with gold facts, written blind by a separate writer; never tuned on",
        ),
    )
}


PACKAGED_DATASETS: tuple[str, ...] = tuple(_PACKAGED)
"""The datasets shipped in the package (no data directory needed)."""


def _specs() -> dict[str, _Spec]:
    """Every dataset, the registered regulations' read from the registry now."""
    registered = [x for x in map(_registered, regulations()) if x is not None]
    return {s.name: s for s in (*_GOLDCOIN.values(), *registered, _ACLU, *_PACKAGED.values())}


def packaged_path(name: str) -> Path:
    """The file of a packaged dataset (``pairs-dev``, ``pairs-validation``,
    ``pairs-heldout``, ``cases-heldout``).

    Raises:
        UnknownDataset: `name` is not a packaged dataset.
    """
    spec = _PACKAGED.get(name)
    if spec is None:
        raise UnknownDataset(
            f"{name!r} is not a packaged dataset; packaged: {', '.join(_PACKAGED)}"
        )
    return Path(str(resources.files("privacy_ci.cases") / _PACKAGED_DIR / spec.source))


def _load_packaged(
    spec: _Spec, data_dir: Path | str | None, resolve_gold: bool, hipaa_tree: str
) -> Dataset:
    from privacy_ci.cases._user import load_case_file

    path = packaged_path(spec.name)
    if not path.is_file():
        raise DataMissingError(
            f"dataset {spec.name!r}: {path} is missing from the installed package "
            "(a broken install: reinstall privacy-ci)"
        )
    loaded = load_case_file(
        path,
        regulation=spec.regulation,
        data_dir=data_dir,
        resolve_gold=resolve_gold,
        hipaa_tree=hipaa_tree,
        name=spec.name,
    )
    protocol = dataclasses.replace(
        spec.protocol(loaded.sha256), source=_PACKAGED_SOURCE + spec.source
    )
    return Dataset(spec.name, protocol, loaded.cases, loaded.sha256, loaded.report)


DATASET_NAMES: tuple[str, ...] = tuple(_specs())
"""The names `load_dataset` accepts (as imported; `list_datasets` adds regulations
registered since)."""


def list_datasets() -> dict[str, str]:
    """The named datasets with a one-line description each.

    Returns:
        name -> description, in a fixed order.
    """
    return {name: spec.description for name, spec in _specs().items()}


# ---------------------------------------------------------------------------------
# reading rows
# ---------------------------------------------------------------------------------
@dataclass
class _Row:
    """One source row before validation."""

    where: str  # "entry [6]", "line 7", "row 7 (line 12)"
    number: int  # 1-based row/line for SkippedRow
    text: Any
    label: Any
    gold: Any  # expected: a list of str (None elements allowed)
    fields: dict[str, Any]  # CI field -> raw value
    extra: dict[str, Any] = field(default_factory=dict)


class _Problems:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.path}: {where}: {message}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        shown = self.items[:_MAX_PROBLEMS]
        if len(self.items) > _MAX_PROBLEMS:
            shown.append(f"{self.path}: ... and {len(self.items) - _MAX_PROBLEMS} more problem(s)")
        raise ValidationFailed(shown)


_GC_JSON_FIELDS = (
    "refer_ids",
    "sender",
    "subject",
    "recipient",
    "norm_type",
    "context",
    "information_type",
    "purpose",
)


def _read_goldcoin_json(text: str, problems: _Problems) -> list[_Row]:
    try:
        data = load_json(text)
    except DuplicateKeyError as exc:
        for dup in exc.duplicates:
            problems.add(dup.where, dup.problem)
        return []
    except json.JSONDecodeError as exc:
        problems.add(f"line {exc.lineno} column {exc.colno}", f"not valid JSON ({exc.msg})")
        return []
    if not isinstance(data, list):
        problems.add("top level", f"expected a JSON list of cases, found {type(data).__name__}")
        return []
    rows: list[_Row] = []
    for i, entry in enumerate(data):
        where = f"entry [{i}]"
        if not isinstance(entry, dict):
            problems.add(where, f"expected an object, found {type(entry).__name__}")
            continue
        missing = [f for f in _GC_JSON_FIELDS if f not in entry]
        if missing:
            problems.add(where, f"missing field(s) {', '.join(missing)}")
            continue
        rows.append(
            _Row(
                where=where,
                number=i + 1,
                text=entry["context"],
                label=entry["norm_type"],
                gold=entry["refer_ids"],
                fields={
                    # the file holds only role strings (= the CSV's Sender/About/Recipient Role)
                    "sender_role": entry["sender"],
                    "recipient_role": entry["recipient"],
                    "subject_role": entry["subject"],
                    "information_type": entry["information_type"],
                    "purpose": entry["purpose"],
                },
            )
        )
    return rows


_CHAR_KEYS: dict[str, str] = {
    "sender": "Sender",
    "sender_role": "Sender Role",
    "recipient": "Recipient",
    "recipient_role": "Recipient Role",
    "subject": "About",
    "subject_role": "About Role",
    "information_type": "Type",
    "purpose": "Purpose",
}
_CHAR_OPTIONAL = {"consent_form": "Consented By"}
_CHAR_EXTRA = {"in_reply_to": "In Reply To", "belief": "Belief"}


def _literal(cell: str, where: str, column: str, problems: _Problems) -> Any:
    try:
        return ast.literal_eval(cell)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        problems.add(where, f"column {column!r} is not a Python literal ({type(exc).__name__})")
        return None


def _read_goldcoin_csv(text: str, spec: _Spec, problems: _Problems) -> tuple[list[_Row], list[str]]:
    notes: list[str] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        problems.add("line 1", "empty file (no header)")
        return [], notes
    except csv.Error as exc:
        problems.add("line 1", f"not valid CSV ({exc})")
        return [], notes
    first: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in first:
            notes.append(
                f"column {name!r} appears more than once; "
                f"the first (column {first[name] + 1}) is used"
            )
            continue
        first[name] = i
    gold_column = spec.gold_field.split(" ")[0]
    wanted = [gold_column, "generate_HIPAA_type", "generate_background", "generate_characteristics"]
    missing = [c for c in wanted if c not in first]
    if missing:
        problems.add("header", f"missing column(s) {', '.join(missing)}")
        return [], notes
    rows: list[_Row] = []
    number = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.add(f"line {reader.line_num}", f"not valid CSV ({exc})")
            break
        number += 1
        where = f"row {number} (line {reader.line_num})"
        if len(cells) != len(header):
            problems.add(where, f"{len(cells)} cell(s), the header has {len(header)}")
            continue

        def cell(column: str, cells: list[str] = cells) -> str:
            return cells[first[column]]

        column = "generate_characteristics"
        chars = _literal(cell(column), where, column, problems)
        if chars is None:
            continue
        if not isinstance(chars, dict):
            problems.add(where, "column 'generate_characteristics' is not a dict")
            continue
        absent = [key for key in _CHAR_KEYS.values() if key not in chars]
        if absent:
            problems.add(where, f"generate_characteristics lacks key(s) {', '.join(absent)}")
            continue
        raw_gold = cell(gold_column).strip()
        gold = _literal(raw_gold, where, gold_column, problems) if raw_gold else []
        if raw_gold and gold is None:
            continue
        extra: dict[str, Any] = {}
        for name, key in _CHAR_EXTRA.items():
            if key in chars:
                extra[name] = chars[key]
        if "refer_id" in first and cell("refer_id").strip():
            extra["seed_id"] = cell("refer_id").strip()
        if "generate_regulation_type" in first and cell("generate_regulation_type").strip():
            extra["generate_regulation_type"] = cell("generate_regulation_type").strip()
        fields = {name: chars[key] for name, key in _CHAR_KEYS.items()}
        for name, key in _CHAR_OPTIONAL.items():
            fields[name] = chars.get(key)
        rows.append(
            _Row(
                where=where,
                number=number,
                text=cell("generate_background"),
                label=cell("generate_HIPAA_type"),
                gold=gold,
                fields=fields,
                extra=extra,
            )
        )
    return rows, notes


_PB_FIELDS = (
    "norm_type",
    *FIELDS,
    "followed_articles",
    "violated_articles",
    "case_content",
)


def _read_privaci_jsonl(text: str, problems: _Problems, skipped: list[SkippedRow]) -> list[_Row]:
    rows: list[_Row] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        where = f"line {line_no}"
        if not line.strip():
            skipped.append(SkippedRow(line_no, "blank line"))
            continue
        try:
            entry = load_json(line)
        except DuplicateKeyError as exc:
            for dup in exc.duplicates:
                inner = "" if dup.where == "top level" else f" in {dup.where}"
                problems.add(where, f"duplicate key {dup.key!r}{inner}")
            continue
        except json.JSONDecodeError as exc:
            problems.add(where, f"not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(entry, dict):
            problems.add(where, f"expected a JSON object, found {type(entry).__name__}")
            continue
        missing = [f for f in _PB_FIELDS if f not in entry]
        if missing:
            problems.add(where, f"missing field(s) {', '.join(missing)}")
            continue
        followed, violated = entry["followed_articles"], entry["violated_articles"]
        for name, value in (("followed_articles", followed), ("violated_articles", violated)):
            if not isinstance(value, list):
                problems.add(where, f"field {name!r} is not a list")
        if not isinstance(followed, list) or not isinstance(violated, list):
            continue
        extra: dict[str, Any] = {
            "line": line_no,
            "followed_articles": tuple(followed),
            "violated_articles": tuple(violated),
        }
        for key in ("sender_is_subject", "recipient_is_subject"):
            if key in entry:
                extra[key] = entry[key]
        rows.append(
            _Row(
                where=where,
                number=line_no,
                text=entry["case_content"],
                label=entry["norm_type"],
                gold=[*followed, *violated],
                fields={name: entry[name] for name in CI_FIELDS},
                extra=extra,
            )
        )
    return rows


# ---------------------------------------------------------------------------------
# building cases
# ---------------------------------------------------------------------------------
def _normalise(
    name: str,
    value: Any,
    where: str,
    problems: _Problems,
    report: DatasetReport,
    raw_kept: dict[str, Any],
) -> str | None:
    """A CI field value -> a string or None (lists joined, placeholders -> None)."""
    if value is None:
        report.placeholders[(name, "null")] += 1
        raw_kept[name] = None
        return None
    if isinstance(value, str):
        if is_placeholder(value):
            report.placeholders[(name, value)] += 1
            raw_kept[name] = value
            return None
        return value.strip()
    if isinstance(value, list):
        items: list[str] = []
        dropped = False
        for item in value:
            if item is None or (isinstance(item, str) and is_placeholder(item)):
                report.placeholders[(name, "null" if item is None else item)] += 1
                dropped = True
                continue
            if not isinstance(item, str):
                problems.add(where, f"field {name!r}: list element {item!r} is not a string")
                return None
            text = item.strip()
            if text not in items:
                items.append(text)
        if dropped:
            raw_kept[name] = list(value)
        return "; ".join(items) if items else None
    problems.add(where, f"field {name!r}: expected a string or a list of strings, found {value!r}")
    return None


def _gold_ids(
    value: Any, where: str, problems: _Problems, report: DatasetReport
) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        problems.add(where, f"gold ids: expected a list, found {type(value).__name__}")
        return None
    out: list[str] = []
    for item in value:
        if item is None or (isinstance(item, str) and is_placeholder(item)):
            report.placeholders[("gold_ids", "null" if item is None else item)] += 1
            continue
        if not isinstance(item, str):
            problems.add(where, f"gold ids: element {item!r} is not a string")
            return None
        out.append(item)
    return tuple(out)


def resolve_gold_ids(
    case_id: str, gold: tuple[str, ...], resolver: GoldResolver | None, report: DatasetReport
) -> tuple[str, ...]:
    """The tree nodes a case's gold ids reach; counts and failures go to `report`."""
    nodes: list[str] = []
    report.gold_mentions += len(gold)
    if resolver is None or not resolver.applicable:
        return ()
    for raw in gold:
        res = resolver.resolve(raw)
        report.gold_kinds[res.kind.value] += 1
        if res.resolved:
            report.gold_resolved += 1
            nodes.extend(n for n in res.nodes if n not in nodes)
        if res.kind in (GoldKind.UNRESOLVED, GoldKind.PARTIAL):
            report.unresolved.append(
                UnresolvedGold(case_id, raw, res.note, res.kind is GoldKind.PARTIAL)
            )
        elif res.kind is GoldKind.REDUCED:
            report.reductions[(raw, res.note)] += 1
    return tuple(nodes)


def _build_cases(
    spec: _Spec,
    rows: Iterable[_Row],
    problems: _Problems,
    report: DatasetReport,
    resolver: GoldResolver | None,
) -> list[Case]:
    cases: list[Case] = []
    for index, row in enumerate(rows):
        case_id = f"{spec.id_prefix}-{index:04d}"
        label = parse_label(row.label)
        if label is None:
            known = ", ".join(sorted({k for k in LABEL_SPELLINGS}))
            problems.add(row.where, f"unknown label {row.label!r} (expected one of: {known})")
            continue
        if label not in spec.labels:
            allowed = "/".join(v.value for v in spec.labels)
            problems.add(
                row.where, f"label {row.label!r} is not allowed in {spec.name} ({allowed})"
            )
            continue
        if not isinstance(row.text, str) or not row.text.strip():
            problems.add(row.where, f"field {spec.text_field!r}: expected non-empty text")
            continue
        raw_kept: dict[str, Any] = {}
        values = {
            name: _normalise(name, row.fields.get(name), row.where, problems, report, raw_kept)
            if name in row.fields
            else None
            for name in CI_FIELDS
        }
        gold = _gold_ids(row.gold, row.where, problems, report)
        if gold is None:
            continue
        nodes = resolve_gold_ids(case_id, gold, resolver, report)
        extra: dict[str, Any] = {"row": index, **row.extra}
        if raw_kept:
            extra["placeholders"] = raw_kept
        cases.append(
            Case(
                id=case_id,
                dataset=spec.name,
                regulation=spec.regulation,
                text=row.text.strip(),
                label=label,
                gold_ids=gold,
                gold_nodes=nodes,
                extra=extra,
                flow=Flow.of(values, clean=False),  # validated and normalised above
            )
        )
    return cases


# ---------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------
def _manifest_sha256(relative: str) -> str | None:
    from privacy_ci.data import SOURCES_BY_PATH

    source = SOURCES_BY_PATH.get(relative)
    return source.sha256 if source is not None else None


_CASE_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson")


def _is_case_file(name: str | Path) -> bool:
    """Whether `load_dataset` reads `name` as a user's case file rather than a dataset name."""
    if isinstance(name, Path):
        return True
    path = Path(name)
    return path.suffix.lower() in _CASE_FILE_SUFFIXES or "/" in name or path.is_file()


def load_dataset(
    name: str | Path,
    data_dir: Path | str | None = None,
    *,
    resolve_gold: bool = True,
    hipaa_tree: str = "ecfr",
) -> Dataset:
    """Load a named evaluation dataset, or a user's file of cases.

    Args:
        name: one of `list_datasets` (``real``, ``synthetic``,
            ``goldcoin-real-applicability``, ``goldcoin-real-compliance``, ...,
            ``privaci-hipaa``, ``privaci-gdpr``, ``privaci-ai_act``, ``privaci-aclu``,
            and the packaged ``pairs-dev``, ``pairs-validation``, ``pairs-heldout``,
            ``cases-heldout``),
            or the path of a JSON/JSONL file of cases (`privacy_ci.cases.load_case_file`:
            a three-way dataset named after the file's stem). A known name wins
            over a file of that name.
        data_dir: the data directory; default `privacy_ci.data.data_dir()`.
        resolve_gold: resolve gold ids to tree nodes (loads the regulation tree
            once per process); False leaves ``gold_nodes`` empty and loads no tree.
        hipaa_tree: the HIPAA tree to resolve against: ``ecfr`` (the knowledge
            base's default, canonical ids) or ``published`` (GoldCoin GraphML).

    Returns:
        The dataset; ``dataset.report`` lists placeholders, skipped rows and
        unresolved gold ids.

    Raises:
        UnknownDataset: unknown name (the message lists the known names).
        DataMissingError: the source file (or, with ``resolve_gold``, a tree file) is missing.
        ValidationFailed: the file is malformed (every problem listed, with file and
            row or line); nothing is returned.
    """
    specs = _specs()
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is not None and spec.fmt == "packaged":
        return _load_packaged(spec, data_dir, resolve_gold, hipaa_tree)
    if spec is None and _is_case_file(name):
        from privacy_ci.cases._user import load_case_file

        return load_case_file(
            name, data_dir=data_dir, resolve_gold=resolve_gold, hipaa_tree=hipaa_tree
        )
    if spec is None:
        raise UnknownDataset(
            f"unknown dataset {name!r}; known datasets: {', '.join(specs)} "
            "(or give the path of a .json/.jsonl file of cases)"
        )
    if data_dir is None:
        from privacy_ci.data import data_dir as default_data_dir

        root = default_data_dir()
    else:
        root = Path(data_dir)
    path = root / spec.source
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataMissingError(
            f"dataset {name!r} needs {spec.source}, which is missing from {root}. "
            "Run `privacy-ci data fetch` to download it, or set PRIVACY_CI_DATA to a "
            "directory that has it."
        ) from None
    except OSError as exc:
        raise DataMissingError(f"{path}: cannot be read ({exc.strerror})") from None
    sha256 = hashlib.sha256(raw).hexdigest()
    problems = _Problems(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed([f"{path}: byte {exc.start}: not UTF-8 text"]) from None
    report = DatasetReport(source=str(path), manifest_sha256=_manifest_sha256(spec.source))
    if report.manifest_sha256 is not None and report.manifest_sha256 != sha256:
        report.notes.append(
            f"sha256 {sha256[:16]}… differs from the manifest's {report.manifest_sha256[:16]}…;"
            " numbers may not be comparable with the published file"
        )
    readers: dict[str, Callable[[], list[_Row]]] = {
        "goldcoin-json": lambda: _read_goldcoin_json(text, problems),
        "privaci-jsonl": lambda: _read_privaci_jsonl(text, problems, report.skipped),
    }
    if spec.fmt == "goldcoin-csv":
        rows, notes = _read_goldcoin_csv(text, spec, problems)
        report.notes.extend(notes)
    else:
        rows = readers[spec.fmt]()
    report.rows = len(rows) + len(report.skipped)
    problems.raise_if_any()
    if spec.fmt == "goldcoin-json":
        report.notes.append(
            "the file holds role strings only: sender/recipient/subject are None, "
            "the roles are in sender_role/recipient_role/subject_role"
        )
    resolver: GoldResolver | None = None
    cites = any(isinstance(row.gold, list) and row.gold for row in rows)
    if resolve_gold and not cites:
        report.gold_status = "resolved"  # nothing to resolve: no tree loaded
    elif resolve_gold:
        resolver = gold_resolver(spec.regulation, root, hipaa_tree)
        report.gold_status = (
            "resolved" if resolver.applicable else f"no regulation tree ({spec.regulation})"
        )
    else:
        report.gold_status = "not resolved (resolve_gold=False)"
    cases = _build_cases(spec, rows, problems, report, resolver)
    problems.raise_if_any()
    odd = [c.id for c in cases if not c.applicable and c.gold_ids]
    if odd:
        report.notes.append(
            f"{len(odd)} not-applicable case(s) cite gold ids (kept as in the file): "
            + ", ".join(odd[:5])
        )
    return Dataset(spec.name, spec.protocol(sha256), tuple(cases), sha256, report)
