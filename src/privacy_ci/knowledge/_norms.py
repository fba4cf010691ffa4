"""Annotated norms (section 3.2) and the loaders of both published KB formats.

* `load_checklist_kb`: the Privacy Checklist ``hipaa/kb_annotated.json`` (an
  object ``{node_id: entry}``; 591 entries).
* `load_privaci_kb`: the PrivaCI-Bench ``kb/privaci_bench/{hipaa,gdpr,ai_act}.jsonl``
  (one object per line, every value JSON-encoded a second time, except 506 GDPR
  ``regulation_id`` values that are plain strings).

Both produce the same `Norm` objects; on HIPAA they agree entry for entry.

Validation policy. Every problem is collected and reported together with the
file and the entry (key or line number). With ``strict=True`` any problem raises
one `ValidationFailed` and nothing is returned. With ``strict=False`` a defective
*entry* (invalid JSON, unknown or missing fields, wrong types, unknown norm type,
an id that does not resolve to a tree node or is malformed, a duplicate id) is
skipped, and a defective *reference* (a target that does not resolve, an unknown
label) is dropped from its norm; both are counted and listed in the
`KBLoadReport`. A file that cannot be read at all always raises.

Per-file defaults (`STRICT_DEFAULTS`), chosen so that the default passes on the
real published files only where they are clean:

========================  ======  ===========================================
file                      strict  why
========================  ======  ===========================================
hipaa/kb_annotated.json   True    passes
kb/privaci_bench/hipaa    True    passes
kb/privaci_bench/gdpr     False   14 reference targets are not node ids
                                  (``article_89``, ``Chapter III``,
                                  ``Directive 2002/58/EC``); `alias_resolver`
                                  fixes 13 of them
kb/privaci_bench/ai_act   False   21 malformed ids (``….article102.[*``,
                                  ``….article102.‘W``: skipped) and 833
                                  reference targets absent from the tree: 704
                                  recitals and 104 annexes (the law tree has
                                  neither), 1 ``relation``, and 24 bare
                                  ``articleN``/``chapterN`` that
                                  `alias_resolver` resolves
========================  ======  ===========================================
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci.ci import FIELDS, Flow, Party, TransmissionPrinciple
from privacy_ci.errors import ValidationFailed
from privacy_ci.knowledge._vocabulary import (
    NormalisationReport,
    NormType,
    ReferenceKind,
    Ternary,
    normalise_consent_form,
    normalise_list,
    normalise_norm_type,
    normalise_reference_kind,
    normalise_scalar,
    normalise_ternary,
)
from privacy_ci.regulations import (
    RegulationTree,
    Resolver,
    alias_resolver,
    exact_resolver,
    is_malformed_id,
)

__all__ = [
    "CHECKLIST_FIELDS",
    "PRIVACI_FIELDS",
    "STRICT_DEFAULTS",
    "DroppedReference",
    "KBLoadReport",
    "Norm",
    "Reference",
    "Resolver",
    "SkippedEntry",
    "alias_resolver",
    "exact_resolver",
    "load_checklist_kb",
    "load_privaci_kb",
]

CHECKLIST_FIELDS: frozenset[str] = frozenset(
    {
        "text",
        "node_index",
        "refer_list",
        "norm_type",
        *FIELDS,
        "sender_is_subject",
        "recipient_is_subject",
    }
)
"""Required fields of a `kb_annotated.json` entry (``gpt_response`` is optional, and so
is ``provenance``, which a knowledge base built by `privacy-ci kb build` adds)."""

_CHECKLIST_OPTIONAL = frozenset({"gpt_response", "provenance"})  # provenance: built KBs

PRIVACI_FIELDS: frozenset[str] = frozenset(
    {
        "norm_type",
        *FIELDS,
        "sender_is_subject",
        "recipient_is_subject",
        "regulation_id",
        "regulation_content",
        "reference",
    }
)
"""Fields of a PrivaCI-Bench KB line (all required, no others allowed)."""

STRICT_DEFAULTS: dict[str, bool] = {
    "checklist:hipaa": True,
    "privaci:hipaa": True,
    "privaci:gdpr": False,
    "privaci:ai_act": False,
}
"""Default ``strict`` per ``format:regulation`` (see the module docstring)."""


# ---------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Reference:
    """A norm's annotated reference to another node.

    Args:
        target_id: the cited tree node id.
        kind: support (the cited node must hold) or exception (it must not apply).
    """

    target_id: str
    kind: ReferenceKind


@dataclass(frozen=True, slots=True)
class Norm:
    """One annotated leaf specification with its CI characteristics (section 3.2).

    Equality ignores the provenance fields (`source_id`, `origin`, `raw`), so the
    same norm loaded from either published format compares equal.

    Args:
        id: the tree node id.
        regulation: ``hipaa``, ``gdpr`` or ``ai_act``.
        norm_type: positive, negative or general definition.
        text: the full specification as given in the KB file (stripped).
        sender, recipient, subject: the actors (normalised, placeholders removed).
        sender_role, recipient_role, subject_role: the actors' roles, or None.
        information_type: the transmitted attribute, or None.
        purpose: the purpose of the transmission, or None.
        consent_form: a `CONSENT_FORMS` value, other cleaned free text, or None.
        sender_is_subject, recipient_is_subject: the annotator's ternary answers.
        references: the annotated references (support/exception), in file order.
        source_id: the id as written in the file (before `resolve`).
        origin: ``file#key`` or ``file:line`` of the entry.
        raw: the decoded entry as read, for provenance.
    """

    id: str
    regulation: str
    norm_type: NormType
    text: str
    sender: tuple[str, ...] = ()
    recipient: tuple[str, ...] = ()
    subject: tuple[str, ...] = ()
    sender_role: str | None = None
    recipient_role: str | None = None
    subject_role: str | None = None
    information_type: str | None = None
    purpose: str | None = None
    consent_form: str | None = None
    sender_is_subject: Ternary = Ternary.UNSURE
    recipient_is_subject: Ternary = Ternary.UNSURE
    references: tuple[Reference, ...] = ()
    source_id: str = field(default="", compare=False)
    origin: str = field(default="", compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def flow(self) -> Flow:
        """The norm's CI characteristics as a `Flow` (several annotated actors of one
        party are joined with ``"; "``)."""
        return Flow(
            sender=Party("; ".join(self.sender) or None, self.sender_role),
            recipient=Party("; ".join(self.recipient) or None, self.recipient_role),
            subject=Party("; ".join(self.subject) or None, self.subject_role),
            information_type=self.information_type,
            principle=TransmissionPrinciple(self.purpose, self.consent_form),
        )

    @property
    def is_norm(self) -> bool:
        """True for positive and negative norms (not general definitions)."""
        return self.norm_type is not NormType.GENERAL_DEFINITION

    def reference_ids(self, kind: ReferenceKind | None = None) -> tuple[str, ...]:
        """The cited node ids, optionally of one kind.

        Args:
            kind: support or exception; None for all.

        Returns:
            The target ids in file order.
        """
        return tuple(r.target_id for r in self.references if kind in (None, r.kind))


@dataclass(frozen=True, slots=True)
class SkippedEntry:
    """An entry left out with ``strict=False``.

    Args:
        location: ``file#key`` or ``file:line``.
        entry_id: the id as written (may be empty if unreadable).
        problems: why it was skipped.
    """

    location: str
    entry_id: str
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DroppedReference:
    """A reference left out of its norm with ``strict=False``.

    Args:
        norm_id: the citing norm.
        target: the target as written in the file.
        label: the label as written.
        reason: why it was dropped.
    """

    norm_id: str
    target: str
    label: str
    reason: str


@dataclass
class KBLoadReport:
    """What a KB loader read, repaired, skipped and normalised.

    Args:
        source: the file.
        regulation: the regulation.
        strict: the policy used.
        entries: entries found in the file.
        loaded: norms returned.
        skipped: entries left out (``strict=False``).
        dropped_references: references left out (``strict=False``).
        unlabelled_references: references with an explicit "no relation" label
            (``None``), dropped by design, as ``(norm_id, target)``.
        aliases: ids the resolver mapped to a different node id (``as written -> node``).
        notes: other observations (e.g. plain-string ids in a double-encoded file).
        normalisation: the vocabulary normalisation report.
    """

    source: str
    regulation: str
    strict: bool
    entries: int = 0
    loaded: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    dropped_references: list[DroppedReference] = field(default_factory=list)
    unlabelled_references: list[tuple[str, str]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    normalisation: NormalisationReport = field(default_factory=NormalisationReport)

    def summary(self) -> str:
        """A few lines for humans.

        Returns:
            The summary text.
        """
        lines = [
            f"{self.source}: {self.loaded}/{self.entries} norm(s) loaded "
            f"(strict={self.strict}), {len(self.skipped)} entr(y/ies) skipped, "
            f"{len(self.dropped_references)} reference(s) dropped, "
            f"{len(self.unlabelled_references)} unlabelled reference(s) ignored, "
            f"{len(self.aliases)} id(s) resolved through aliases",
            *(f"  note: {n}" for n in self.notes),
        ]
        lines.extend(
            f"  skipped {s.location} ({s.entry_id}): {'; '.join(s.problems)}"
            for s in self.skipped[:10]
        )
        lines.append(self.normalisation.summary())
        return "\n".join(lines)


# The resolvers (`exact_resolver`, `alias_resolver`) and every other id spelling
# rule live in `privacy_ci.regulations._ids`; they are re-exported here.


# ---------------------------------------------------------------------------------
# shared entry conversion
# ---------------------------------------------------------------------------------
class _Collector:
    """Collects problems per entry and applies the strict/lenient policy."""

    def __init__(self, report: KBLoadReport) -> None:
        self.report = report
        self.fatal: list[str] = []  # every problem, for strict mode

    def skip(self, location: str, entry_id: str, problems: list[str]) -> None:
        self.fatal.extend(f"{location}: {p}" for p in problems)
        self.report.skipped.append(SkippedEntry(location, entry_id, tuple(problems)))

    def drop_reference(self, location: str, ref: DroppedReference) -> None:
        self.fatal.append(f"{location}: reference {ref.target!r}: {ref.reason}")
        self.report.dropped_references.append(ref)

    def finish(self) -> None:
        if self.report.strict and self.fatal:
            raise ValidationFailed(self.fatal)


def _check_list_of_str(name: str, value: Any, problems: list[str]) -> None:
    if not isinstance(value, list):
        problems.append(f"field {name!r}: expected a list of strings, got {type(value).__name__}")
    elif not all(isinstance(v, str) for v in value):
        problems.append(f"field {name!r}: expected a list of strings, got {value!r}")


def _check_str(name: str, value: Any, problems: list[str], nullable: bool = False) -> None:
    if isinstance(value, str) or (nullable and value is None):
        return
    problems.append(f"field {name!r}: expected a string, got {type(value).__name__}")


def _check_str_or_list(name: str, value: Any, problems: list[str]) -> None:
    if isinstance(value, str):
        return
    _check_list_of_str(name, value, problems)


def _resolve_id(
    kb_id: str, tree: RegulationTree, resolve: Resolver, report: KBLoadReport, problems: list[str]
) -> str | None:
    if not kb_id.strip():
        problems.append("empty node id")
        return None
    if is_malformed_id(kb_id):
        problems.append(
            f"malformed node id {kb_id!r} (contains a text fragment such as '[' or a curly quote)"
        )
        return None
    node_id = resolve(kb_id)
    if node_id is None or node_id not in tree:
        problems.append(f"node {kb_id!r} is not in the {tree.regulation} tree ({tree.source})")
        return None
    if not tree.in_tree(node_id):
        problems.append(f"node {node_id!r} is a stub, not reachable from the root {tree.root!r}")
        return None
    if node_id != kb_id:
        report.aliases[kb_id] = node_id
    return node_id


def _references(
    refs: Any,
    norm_id: str,
    location: str,
    tree: RegulationTree,
    resolve: Resolver,
    collector: _Collector,
) -> tuple[Reference, ...]:
    """Convert a ``{target: label}`` mapping (or ``[]``) to references."""
    report = collector.report
    out: list[Reference] = []
    if isinstance(refs, list):  # [] means "no references" in both formats
        return ()
    assert isinstance(refs, dict)
    for target, label in refs.items():
        try:
            kind = normalise_reference_kind(label)
        except ValueError as exc:
            collector.drop_reference(
                location, DroppedReference(norm_id, str(target), repr(label), str(exc))
            )
            continue
        if kind is None:
            report.unlabelled_references.append((norm_id, str(target)))
            report.normalisation.note("reference", f"label {label!r} (no relation) -> dropped")
            continue
        if not isinstance(label, str) or label != kind.value:
            report.normalisation.note("reference", f"label {label!r} -> {kind.value}")
        resolved = resolve(str(target))
        if resolved is None or resolved not in tree:
            collector.drop_reference(
                location,
                DroppedReference(
                    norm_id, str(target), str(label), f"target is not in the {tree.regulation} tree"
                ),
            )
            continue
        if resolved != target:
            report.aliases[str(target)] = resolved
        if any(r.target_id == resolved for r in out):
            report.normalisation.note("reference", "duplicate target removed")
            continue
        out.append(Reference(resolved, kind))
    return tuple(out)


def _norm_from_fields(
    *,
    node_id: str,
    source_id: str,
    regulation: str,
    norm_type: NormType,
    text: str,
    values: Mapping[str, Any],
    references: tuple[Reference, ...],
    origin: str,
    raw: Mapping[str, Any],
    nrep: NormalisationReport,
) -> Norm:
    return Norm(
        id=node_id,
        regulation=regulation,
        norm_type=norm_type,
        text=text.strip(),
        sender=normalise_list("sender", values["sender"], node_id, nrep),
        recipient=normalise_list("recipient", values["recipient"], node_id, nrep),
        subject=normalise_list("subject", values["subject"], node_id, nrep),
        sender_role=normalise_scalar("sender_role", values["sender_role"], node_id, nrep),
        recipient_role=normalise_scalar("recipient_role", values["recipient_role"], node_id, nrep),
        subject_role=normalise_scalar("subject_role", values["subject_role"], node_id, nrep),
        information_type=normalise_scalar(
            "information_type", values["information_type"], node_id, nrep
        ),
        purpose=normalise_scalar("purpose", values["purpose"], node_id, nrep),
        consent_form=normalise_consent_form(values["consent_form"], node_id, nrep),
        sender_is_subject=normalise_ternary(
            "sender_is_subject", values["sender_is_subject"], node_id, nrep
        ),
        recipient_is_subject=normalise_ternary(
            "recipient_is_subject", values["recipient_is_subject"], node_id, nrep
        ),
        references=references,
        source_id=source_id,
        origin=origin,
        raw=dict(raw),
    )


def _check_fields(
    entry: Mapping[str, Any], required: frozenset[str], optional: frozenset[str]
) -> list[str]:
    problems: list[str] = []
    unknown = sorted(set(entry) - required - optional)
    missing = sorted(required - set(entry))
    if unknown:
        problems.append(f"unknown field(s) {', '.join(map(repr, unknown))}")
    if missing:
        problems.append(f"missing field(s) {', '.join(map(repr, missing))}")
    return problems


def _check_value_types(values: Mapping[str, Any], problems: list[str], privaci: bool) -> None:
    for name in ("sender", "recipient", "subject"):
        if name in values:
            _check_list_of_str(name, values[name], problems)
    for name in ("sender_role", "recipient_role", "subject_role", "information_type", "purpose"):
        if name in values:
            (_check_str_or_list if privaci else _check_str)(name, values[name], problems)
    if "consent_form" in values:
        _check_str("consent_form", values["consent_form"], problems, nullable=privaci)
    for name in ("sender_is_subject", "recipient_is_subject"):
        if name in values:
            _check_str(name, values[name], problems)


def _check_refs_shape(name: str, refs: Any, problems: list[str]) -> None:
    if isinstance(refs, list):
        if refs:
            problems.append(f"field {name!r}: a list must be empty; references are a dict")
    elif isinstance(refs, dict):
        bad = [k for k, v in refs.items() if not isinstance(v, str | None)]
        if bad:
            problems.append(f"field {name!r}: labels must be strings (targets {bad[:3]!r})")
    else:
        problems.append(
            f"field {name!r}: expected [] or a {{target: label}} dict, got {type(refs).__name__}"
        )


# ---------------------------------------------------------------------------------
# Privacy Checklist kb_annotated.json
# ---------------------------------------------------------------------------------
def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dupes: list[str] = []
    for key, value in pairs:
        if key in out:
            dupes.append(key)
        out[key] = value
    if dupes:
        out["\x00duplicates"] = dupes
    return out


@dataclass(frozen=True)
class _Layout:
    """Where a KB format keeps the fields the two loaders check the same way."""

    text: str
    references: str
    norm_types: str  # the spellings it uses, for messages


_CHECKLIST_LAYOUT = _Layout(
    "text", "refer_list", "positive_norm, negative_norm or general_definition"
)
_PRIVACI_LAYOUT = _Layout(
    "regulation_content", "reference", "General Definition, Permit or Prohibit"
)


@dataclass
class _Admission:
    """The shared end of both loaders: check an entry's text, references, norm type and
    id, then accept it as a `Norm` or skip it into the report with every problem."""

    regulation: str
    tree: RegulationTree
    resolve: Resolver
    report: KBLoadReport
    collector: _Collector
    norms: list[Norm]
    seen: set[str] = field(default_factory=set)

    def admit(
        self,
        values: dict[str, Any],
        source_id: str,
        location: str,
        problems: list[str],
        layout: _Layout,
        *,
        has_id: bool,
    ) -> None:
        if layout.text in values:
            _check_str(layout.text, values[layout.text], problems)
        if layout.references in values:
            _check_refs_shape(layout.references, values[layout.references], problems)
        norm_type = normalise_norm_type(values.get("norm_type"))
        if "norm_type" in values and norm_type is None:
            problems.append(
                f"unknown norm_type {values['norm_type']!r} (expected {layout.norm_types})"
            )
        node_id = None
        if has_id:
            node_id = _resolve_id(source_id, self.tree, self.resolve, self.report, problems)
        if node_id is not None and node_id in self.seen:
            problems.append(f"node {node_id!r} is annotated twice")
        if problems or node_id is None or norm_type is None:
            self.collector.skip(location, source_id, problems)
            return
        self.seen.add(node_id)
        refs = _references(
            values[layout.references], node_id, location, self.tree, self.resolve, self.collector
        )
        self.norms.append(
            _norm_from_fields(
                node_id=node_id,
                source_id=source_id,
                regulation=self.regulation,
                norm_type=norm_type,
                text=values[layout.text],
                values=values,
                references=refs,
                origin=location,
                raw=values,
                nrep=self.report.normalisation,
            )
        )


def load_checklist_kb(
    path: Path | str,
    tree: RegulationTree,
    resolve: Resolver | None = None,
    strict: bool | None = None,
) -> tuple[list[Norm], KBLoadReport]:
    """Load the Privacy Checklist annotated KB (``hipaa/kb_annotated.json``).

    Args:
        path: the JSON file: ``{node_id: entry}`` with the fields `CHECKLIST_FIELDS`
            (``gpt_response`` optional); ``node_index`` must equal the key.
        tree: the regulation tree the ids refer to.
        resolve: maps a KB id (and a reference target) to a tree node id;
            default `exact_resolver`.
        strict: raise on any problem (default ``STRICT_DEFAULTS["checklist:<regulation>"]``,
            True for HIPAA); False skips defective entries into the report.

    Returns:
        The norms in file order, and the load report.

    Raises:
        ValidationFailed: the file is missing or not a JSON object, or (strict) any
            entry or reference is defective; every problem names the file and entry.
    """
    path = Path(path)
    regulation = tree.regulation
    if strict is None:
        strict = STRICT_DEFAULTS.get(f"checklist:{regulation}", True)
    resolve = resolve or exact_resolver(tree)
    report = KBLoadReport(str(path), regulation, strict)
    report.normalisation.source = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_reject_duplicates)
    except FileNotFoundError:
        raise ValidationFailed([f"{path}: file not found"]) from None
    except json.JSONDecodeError as exc:
        raise ValidationFailed(
            [f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]
        ) from None
    if not isinstance(data, dict):
        raise ValidationFailed([f"{path}: expected a JSON object {{node_id: entry}}"])
    collector = _Collector(report)
    for key in data.pop("\x00duplicates", []):
        collector.skip(f"{path}#{key}", key, ["duplicate key (the last occurrence was kept)"])
    norms: list[Norm] = []
    load = _Admission(regulation, tree, resolve, report, collector, norms)
    for key, entry in data.items():
        report.entries += 1
        location = f"{path}#{key}"
        if not isinstance(entry, dict):
            collector.skip(location, key, [f"expected an object, got {type(entry).__name__}"])
            continue
        entry.pop("\x00duplicates", None)
        problems = _check_fields(entry, CHECKLIST_FIELDS, _CHECKLIST_OPTIONAL)
        if "node_index" in entry and entry["node_index"] != key:
            problems.append(f"node_index {entry['node_index']!r} differs from the key")
        _check_value_types(entry, problems, privaci=False)
        load.admit(entry, key, location, problems, _CHECKLIST_LAYOUT, has_id=True)
    collector.finish()
    report.loaded = len(norms)
    return norms, report


# ---------------------------------------------------------------------------------
# PrivaCI-Bench JSONL
# ---------------------------------------------------------------------------------
def _iter_jsonl(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as fh:
            yield from enumerate(fh, start=1)
    except FileNotFoundError:
        raise ValidationFailed([f"{path}: file not found"]) from None


def _decode_privaci_line(
    row: Mapping[str, Any], report: KBLoadReport, problems: list[str]
) -> dict[str, Any]:
    """Decode the second JSON layer of every value; problems name the field."""
    values: dict[str, Any] = {}
    for name, encoded in row.items():
        if name not in PRIVACI_FIELDS:
            continue
        if not isinstance(encoded, str):
            problems.append(
                f"field {name!r}: expected a JSON-encoded string, got {type(encoded).__name__}"
            )
            continue
        try:
            decoded = json.loads(encoded)
        except json.JSONDecodeError as exc:
            if name == "regulation_id":
                report.normalisation.note("regulation_id", "plain string (not JSON-encoded)")
                values[name] = encoded
                continue
            problems.append(f"field {name!r}: inner value is not valid JSON ({exc.msg})")
            continue
        if name == "regulation_id" and not isinstance(decoded, str):
            report.normalisation.note("regulation_id", "plain string (not JSON-encoded)")
            decoded = encoded
        values[name] = decoded
    return values


def load_privaci_kb(
    path: Path | str,
    regulation: str,
    tree: RegulationTree,
    resolve: Resolver | None = None,
    strict: bool | None = None,
) -> tuple[list[Norm], KBLoadReport]:
    """Load a PrivaCI-Bench KB (``kb/privaci_bench/<regulation>.jsonl``).

    Each line is a JSON object with the fields `PRIVACI_FIELDS`; each value is a
    JSON-encoded string that is decoded a second time (a ``regulation_id`` that is
    not JSON, like GDPR ``Article 1(1)``, is taken as written and counted).
    Norm types are ``General Definition``/``Permit``/``Prohibit``; reference labels
    ``Support``/``Exception``/``None`` (``None`` = no relation: dropped, counted).

    Args:
        path: the JSONL file.
        regulation: ``hipaa``, ``gdpr`` or ``ai_act``.
        tree: the regulation tree the ids refer to.
        resolve: maps a KB id (and a reference target) to a tree node id;
            default `exact_resolver`.
        strict: raise on any problem; default ``STRICT_DEFAULTS["privaci:<regulation>"]``
            (True for HIPAA, False for GDPR and the AI Act, whose published files
            have defects). False skips defective entries and references into the report.

    Returns:
        The norms in file order, and the load report.

    Raises:
        ValidationFailed: the file is missing, or (strict) any line is invalid
            JSON, has unknown or missing fields, bad values, an unknown norm type, an
            id or reference target not in the tree; every problem names file and line.
    """
    path = Path(path)
    if tree.regulation != regulation:
        raise ValueError(
            f"{path}: a {regulation} KB needs a {regulation} tree, not {tree.regulation}"
        )
    if strict is None:
        strict = STRICT_DEFAULTS.get(f"privaci:{regulation}", True)
    resolve = resolve or exact_resolver(tree)
    report = KBLoadReport(str(path), regulation, strict)
    report.normalisation.source = str(path)
    collector = _Collector(report)
    norms: list[Norm] = []
    load = _Admission(regulation, tree, resolve, report, collector, norms)
    for lineno, line in _iter_jsonl(path):
        if not line.strip():
            continue
        report.entries += 1
        location = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            collector.skip(location, "", [f"invalid JSON (column {exc.colno}: {exc.msg})"])
            continue
        if not isinstance(row, dict):
            collector.skip(location, "", [f"expected a JSON object, got {type(row).__name__}"])
            continue
        problems = _check_fields(row, PRIVACI_FIELDS, frozenset())
        values = _decode_privaci_line(row, report, problems)
        raw_id = values.get("regulation_id")
        kb_id = raw_id if isinstance(raw_id, str) else ""
        _check_value_types(values, problems, privaci=True)
        has_id = "regulation_id" in values
        load.admit(values, kb_id, location, problems, _PRIVACI_LAYOUT, has_id=has_id)
    collector.finish()
    report.loaded = len(norms)
    return norms, report
