"""`Case`, `Protocol` and `Dataset`: evaluation cases with the protocol they are scored under.

A `Case` is one narrative with its CI fields, gold label and gold regulation ids.
A `Dataset` is the cases of one named protocol (`Protocol`: label set, which
cases are included, which field holds the gold ids, the source file and its
sha256), plus a `DatasetReport` of everything the loader normalised, skipped or
could not resolve, so that numbers computed on it stay comparable.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from privacy_ci.ci import FIELDS, Flow, Verdict

__all__ = [
    "CI_FIELDS",
    "VERDICT_ORDER",
    "Case",
    "Dataset",
    "DatasetReport",
    "GoldFacts",
    "Protocol",
    "SkippedRow",
    "Task",
    "UnresolvedGold",
]

VERDICT_ORDER: tuple[Verdict, ...] = (Verdict.PERMIT, Verdict.PROHIBIT, Verdict.NOT_APPLICABLE)
"""The order labels are listed in (counts, reports)."""

CI_FIELDS: tuple[str, ...] = FIELDS
"""The CI fields of a case file, in order (`privacy_ci.ci.FIELDS`)."""


class GoldFacts(Mapping[str, str]):
    """A case's gold facts: fact -> value name, immutable and hashable.

    Case files give them under ``facts``; loading validates every key and value
    against the regulation's fact schema (`privacy_ci.reasoning.load_fact_schema`),
    so a `Case` only ever carries facts the law engine knows. A fact absent here is
    one the case's writer left unstated (the law engine's presumptions apply).

    Args:
        values: fact -> value (a mapping, or (fact, value) pairs), in file order.
    """

    __slots__ = ("_items",)

    def __init__(self, values: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = dict(values)

    def __getitem__(self, name: str) -> str:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GoldFacts):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items())))

    def __repr__(self) -> str:
        return f"GoldFacts({self._items!r})"


@dataclass(frozen=True)
class Case:
    """One evaluation case.

    Its CI fields are a `Flow` (values are strings or None: list values are joined
    with ``"; "`` and placeholders such as ``None``, ``null``, ``N/A``, ``""``,
    ``None specified`` become None; the raw value is kept in
    ``extra["placeholders"]``).

    Args:
        id: stable id, ``<dataset prefix>-<row>``, e.g. ``goldcoin-real-0007`` (row
            counted from 0 in file order).
        dataset: the dataset name, e.g. ``real``.
        regulation: ``hipaa``, ``gdpr``, ``ai_act`` or ``aclu``.
        text: the case narrative.
        flow: sender, recipient and subject (name and role), information type,
            purpose and consent form, as the case file gives them.
        label: the gold verdict.
        gold_ids: the gold regulation ids as written in the file (placeholders removed).
        gold_nodes: the tree node ids they resolve to (empty when not resolved);
            unresolved ids are listed in the dataset's report.
        gold_facts: the facts of the disclosure as the case's writer states them
            (validated against the regulation's fact schema), or None when the case
            carries none. Never shown to a method: they score the law engine and the
            readers (`privacy_ci.evaluation`).
        pair_id: the minimal pair (or group) the case belongs to: cases that share
            it differ in the one fact that decides them; None when unpaired.
        extra: provenance (source row/line, fields the file has beyond the CI ones).
    """

    id: str
    dataset: str
    regulation: str
    text: str
    flow: Flow
    label: Verdict
    gold_ids: tuple[str, ...] = ()
    gold_nodes: tuple[str, ...] = ()
    gold_facts: GoldFacts | None = None
    pair_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def applicable(self) -> bool:
        """Whether the regulation applies (the label is not NOT_APPLICABLE)."""
        return self.label is not Verdict.NOT_APPLICABLE

    def to_dict(self) -> dict[str, Any]:
        """The case as JSON-ready values.

        Returns:
            A dict with every field, the flow's as flat `CI_FIELDS`; the label as its
            string value; ``gold_facts`` and ``pair_id`` only when the case has them.
        """
        out: dict[str, Any] = {
            "id": self.id,
            "dataset": self.dataset,
            "regulation": self.regulation,
            "label": self.label.value,
            "text": self.text,
        }
        out.update(self.flow.fields())
        out["gold_ids"] = list(self.gold_ids)
        out["gold_nodes"] = list(self.gold_nodes)
        if self.gold_facts is not None:  # keys only when present: older outputs stay the same
            out["gold_facts"] = dict(self.gold_facts)
        if self.pair_id is not None:
            out["pair_id"] = self.pair_id
        out["extra"] = dict(self.extra)
        return out


class Task(StrEnum):
    """What a protocol scores."""

    THREE_WAY = "three_way"
    """Permit / prohibit / not applicable (Privacy Checklist Tables 1-2; Conductor V-G)."""
    COMPLIANCE = "compliance"
    """Permit vs prohibit on applicable cases (GoldCoin's compliance task; Checklist Table 4)."""
    APPLICABILITY = "applicability"
    """Applicable vs not applicable (GoldCoin's applicability task)."""


@dataclass(frozen=True)
class Protocol:
    """How a dataset is built and scored, so that numbers stay comparable.

    Args:
        name: the dataset name.
        description: one line.
        regulation: ``hipaa``, ``gdpr``, ``ai_act`` or ``aclu``.
        task: what is scored (`Task`).
        labels: the gold labels cases may carry, in `VERDICT_ORDER`.
        inclusion: which cases are included.
        label_field: the file field the label comes from.
        gold_field: the file field the gold ids come from.
        text_field: the file field the narrative comes from.
        source: the source file, relative to the data directory.
        sha256: the source file's sha256 (filled in when loaded).
        paper: where the protocol is used.
        subset: "" for the whole dataset, else how the cases were selected
            (``applicable``, ``stratified sample n=50 seed=0``).
    """

    name: str
    description: str
    regulation: str
    task: Task
    labels: tuple[Verdict, ...]
    inclusion: str
    label_field: str
    gold_field: str
    text_field: str
    source: str
    sha256: str = ""
    paper: str = ""
    subset: str = ""

    @property
    def classes(self) -> tuple[str, ...]:
        """The classes scored under the task (see `target`)."""
        if self.task is Task.APPLICABILITY:
            return ("applicable", "not_applicable")
        if self.task is Task.COMPLIANCE:
            return (Verdict.PERMIT.value, Verdict.PROHIBIT.value)
        return tuple(v.value for v in VERDICT_ORDER)

    def target(self, verdict: Verdict) -> str:
        """The class a verdict counts as under this protocol's task.

        Args:
            verdict: a gold or predicted verdict.

        Returns:
            ``applicable``/``not_applicable`` for applicability, else the verdict's value
            (a NOT_APPLICABLE prediction in a compliance task stays ``not_applicable``:
            it is wrong for every gold label).
        """
        if self.task is Task.APPLICABILITY:
            return "not_applicable" if verdict is Verdict.NOT_APPLICABLE else "applicable"
        return verdict.value


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A source row the loader did not turn into a case.

    Args:
        row: 1-based line (JSONL) or row (JSON list entry, CSV data row) number.
        reason: why.
    """

    row: int
    reason: str


@dataclass(frozen=True, slots=True)
class UnresolvedGold:
    """A gold id that reached no tree node (or only partly).

    Args:
        case_id: the case that cites it.
        raw: the id as written.
        reason: why it did not resolve.
        partial: True when some of the articles it names did resolve.
    """

    case_id: str
    raw: str
    reason: str
    partial: bool = False


@dataclass
class DatasetReport:
    """What loading a dataset read, normalised, skipped and could not resolve.

    Args:
        source: the source file path.
        rows: how many rows the file holds.
        skipped: rows not turned into cases, with reasons.
        placeholders: ``(field, raw value) -> count`` of values normalised to None.
        gold_status: ``resolved``, ``not resolved (resolve_gold=False)`` or
            ``no regulation tree (aclu)``.
        gold_mentions: how many gold ids the cases cite.
        gold_resolved: how many reached at least one tree node.
        gold_kinds: ``kind -> count`` (`GoldKind` values: exact, alias, reduced, ...).
        unresolved: every id that did not resolve (or only partly), per case.
        reductions: ``(raw, note) -> count`` for ids mapped to coarser nodes.
        notes: anything else worth knowing about the file.
        manifest_sha256: the sha256 pinned in the data manifest (None if not listed).
    """

    source: str
    rows: int = 0
    skipped: list[SkippedRow] = field(default_factory=list)
    placeholders: Counter[tuple[str, str]] = field(default_factory=Counter)
    gold_status: str = ""
    gold_mentions: int = 0
    gold_resolved: int = 0
    gold_kinds: Counter[str] = field(default_factory=Counter)
    unresolved: list[UnresolvedGold] = field(default_factory=list)
    reductions: Counter[tuple[str, str]] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    manifest_sha256: str | None = None

    @property
    def resolution_rate(self) -> float | None:
        """Resolved / cited gold ids (None when nothing was resolved or none are cited)."""
        if self.gold_status != "resolved" or not self.gold_mentions:
            return None
        return self.gold_resolved / self.gold_mentions

    def placeholder_counts(self) -> dict[str, int]:
        """How many values were normalised to None, per field.

        Returns:
            field -> count, most frequent first.
        """
        counts: Counter[str] = Counter()
        for (name, _raw), n in self.placeholders.items():
            counts[name] += n
        return dict(counts.most_common())

    def summary(self, top: int = 5) -> str:
        """A few lines for people.

        Args:
            top: how many unresolved ids and placeholder fields to list.

        Returns:
            The text.
        """
        lines = [f"{self.source}: {self.rows} row(s), {len(self.skipped)} skipped"]
        if self.gold_status == "resolved":
            rate = self.resolution_rate
            shown = f" ({rate:.2%})" if rate is not None else ""
            kinds = ", ".join(f"{k} {n}" for k, n in self.gold_kinds.most_common())
            lines.append(
                f"  gold ids: {self.gold_resolved}/{self.gold_mentions} resolved{shown}"
                + (f" [{kinds}]" if kinds else "")
            )
        else:
            lines.append(f"  gold ids: {self.gold_mentions} cited, {self.gold_status}")
        seen: Counter[tuple[str, str]] = Counter((u.raw, u.reason) for u in self.unresolved)
        for (raw, reason), n in seen.most_common(top):
            lines.append(f"    unresolved x{n}: {raw!r} ({reason})")
        counts = self.placeholder_counts()
        if counts:
            shown_counts = ", ".join(f"{k} {n}" for k, n in list(counts.items())[:top])
            lines.append(f"  placeholders -> None: {shown_counts}")
        for row in self.skipped[:top]:
            lines.append(f"  skipped row {row.row}: {row.reason}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)


def _rank(seed: int, case_id: str) -> str:
    return hashlib.sha256(f"{seed}:{case_id}".encode()).hexdigest()


def _allocate(n: int, sizes: dict[Verdict, int]) -> dict[Verdict, int]:
    """Proportional allocation (largest remainder), at least one per label when n allows."""
    total = sum(sizes.values())
    exact = {k: n * v / total for k, v in sizes.items()}
    alloc = {k: int(x) for k, x in exact.items()}
    order = sorted(sizes, key=lambda k: (-(exact[k] - alloc[k]), VERDICT_ORDER.index(k)))
    for k in order[: n - sum(alloc.values())]:
        alloc[k] += 1
    present = [k for k in sizes if sizes[k] > 0]
    if n >= len(present):
        for k in present:
            if alloc[k] == 0:
                donor = max(present, key=lambda d: (alloc[d], -VERDICT_ORDER.index(d)))
                alloc[donor] -= 1
                alloc[k] = 1
    return alloc


@dataclass(frozen=True)
class Dataset:
    """The cases of one named protocol.

    Args:
        name: the dataset name, e.g. ``real`` or ``goldcoin-real-compliance``.
        protocol: how it was built and is scored.
        cases: the cases, in source order.
        sha256: the source file's sha256.
        report: what the loader did.
    """

    name: str
    protocol: Protocol
    cases: tuple[Case, ...]
    sha256: str
    report: DatasetReport = field(compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __getitem__(self, index: int) -> Case:
        return self.cases[index]

    def get(self, case_id: str) -> Case | None:
        """The case with an id, or None.

        Args:
            case_id: e.g. ``goldcoin-real-0007``.

        Returns:
            The case or None.
        """
        for case in self.cases:
            if case.id == case_id:
                return case
        return None

    def label_counts(self) -> dict[Verdict, int]:
        """How many cases carry each label of the protocol.

        Returns:
            verdict -> count in `VERDICT_ORDER`, zero counts included for the
            protocol's labels.
        """
        counts = Counter(case.label for case in self.cases)
        return {v: counts[v] for v in VERDICT_ORDER if v in self.protocol.labels or counts[v]}

    def _subset(self, cases: tuple[Case, ...], subset: str, **changes: Any) -> Dataset:
        prior = self.protocol.subset
        protocol = dataclasses.replace(
            self.protocol, subset=f"{prior}; {subset}" if prior else subset, **changes
        )
        return Dataset(self.name, protocol, cases, self.sha256, self.report)

    def applicable(self) -> Dataset:
        """The cases whose label is not NOT_APPLICABLE, in order.

        Returns:
            A dataset scored as a compliance task (permit vs prohibit).
        """
        cases = tuple(c for c in self.cases if c.applicable)
        labels = tuple(v for v in self.protocol.labels if v is not Verdict.NOT_APPLICABLE)
        return self._subset(cases, "applicable", task=Task.COMPLIANCE, labels=labels)

    def sample(self, n: int, seed: int = 0) -> Dataset:
        """A deterministic sample stratified by label.

        Each label gets a share of ``n`` proportional to its size (largest
        remainder; at least one case per label when ``n`` allows). Within a label,
        cases are ranked by ``sha256(f"{seed}:{case.id}")``, so the sample depends
        only on the seed and the ids (not on the Python version), and a larger
        ``n`` with the same seed mostly extends a smaller one. Cases keep source order.

        Args:
            n: how many cases; ``n >= len(self)`` gives every case.
            seed: the seed.

        Returns:
            The sample, with ``protocol.subset`` recording ``n`` and ``seed``.

        Raises:
            ValueError: ``n`` is negative.
        """
        if n < 0:
            raise ValueError(f"sample size must be >= 0, not {n}")
        label = f"stratified sample n={n} seed={seed}"
        if n >= len(self.cases):
            return self._subset(self.cases, label)
        by_label: dict[Verdict, list[Case]] = {}
        for case in self.cases:
            by_label.setdefault(case.label, []).append(case)
        alloc = _allocate(n, {k: len(v) for k, v in by_label.items()})
        chosen: set[str] = set()
        for verdict, group in by_label.items():
            ranked = sorted(group, key=lambda c: _rank(seed, c.id))
            chosen.update(c.id for c in ranked[: alloc[verdict]])
        return self._subset(tuple(c for c in self.cases if c.id in chosen), label)
