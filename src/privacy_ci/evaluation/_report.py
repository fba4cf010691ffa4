"""Reports over run folders: Markdown and self-contained HTML.

`build_report` turns runs (`load_run`) into sections of tables and figures, and
`write_report` writes ``report.md`` (with the PNG figures beside it) and
``report.html`` (the same content, figures embedded as base64 PNG, no external
resource). Tables, per dataset:

* accuracy over methods x models (the Privacy Checklist's Table 2), with Wilson
  intervals and the model-free baselines beside the models;
* per-class precision / recall / F1 and macro-F1 (Table 3);
* binary compliance, permit vs prohibit on the applicable cases (Table 4);
* a confusion matrix per run (with the unparsed column);
* McNemar's test between every two runs on the same cases;
* tokens, latency and cost per run;
* on cases with gold facts: the law from gold facts, reading accuracy per fact and
  end-to-end accuracy beside the baselines'; on minimal pairs: pair accuracy and flip
  rate beside the baselines';
* for a run made with ``--cross-check``: the agreement table of its verdicts with
  the ci-reasoner's and the cases the cross-check flagged (with the deciding rule,
  the facts it used and their quotes, the near misses and the questions);
* a per-class F1 bar plot (matplotlib, Agg backend).

The HTML opens on the headline: per run accuracy and macro-F1 with intervals and
flags, as a table and a chart (`_report_chart`), and ends each dataset with the
per-case drill-down (`_report_cases`); confusion cells, McNemar's b and c and the
headline's counts link to their cases there. Runs are named by the shortest tail of
their folder path that tells them apart, never by an absolute path. Percentages
carry as many decimals as the number of cases supports (`digits_for`).

Every table names the backend of each row. A run whose backend is the scripted
test double (provider ``scripted-test-double``) is marked as such in every table
it appears in: its numbers are a test of the plumbing, not a model's accuracy.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import html
import io
import json
import os
import re
import statistics
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.evaluation._metrics import UNPARSED, mcnemar
from privacy_ci.evaluation._report_cases import (
    DRILLDOWN_CSS,
    DRILLDOWN_SCRIPT,
    case_drilldown,
    class_title,
    is_wrong,
)
from privacy_ci.evaluation._report_chart import CHART_CSS, ChartRun, ChartValue, chart
from privacy_ci.evaluation._runner import (
    MANIFEST_FILE,
    METRICS_FILE,
    RECORDS_FILE,
    is_test_double,
    read_records,
)

__all__ = [
    "FLAG_CONSTANT",
    "FLAG_EMBEDDED",
    "FLAG_HEALTH_RULE",
    "FLAG_MAJORITY",
    "FLAG_TEST_DOUBLE",
    "METHOD_ORDER",
    "TEST_DOUBLE_MARK",
    "CaseLink",
    "Figure",
    "Report",
    "RunData",
    "Section",
    "Table",
    "backend_label",
    "build_report",
    "case_texts_from_datasets",
    "digits_for",
    "load_run",
    "pct",
    "run_flags",
    "write_report",
]

METHOD_ORDER: tuple[str, ...] = (
    "dp",
    "cot-auto",
    "cot-manual",
    "agent-id",
    "bm25-content",
    "ci-es-content",
)
"""The paper's column order (Table 2); other methods follow alphabetically."""

TEST_DOUBLE_MARK = "⚠ TEST DOUBLE (scripted-test-double), not model accuracy"

BASELINE_LABELS = {
    "majority": "baseline: majority class (model-free)",
    "health-rule": "baseline: health-information rule (model-free)",
    "always-permit": "baseline: always Permit (model-free)",
}


def pct(value: float | None, digits: int = 2) -> str:
    """A proportion as a percentage string (``"—"`` for None)."""
    return "—" if value is None else f"{100 * value:.{digits}f}"


def digits_for(n: int | None) -> int:
    """Decimals of a percentage over `n` cases: one case moves it by 100/n points, so
    whole percents below 100 cases, one decimal below 10,000, two above."""
    if not n or n < 100:
        return 0
    return 1 if n < 10_000 else 2


# ---------------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------------
@dataclass
class RunData:
    """One run folder, read back.

    Args:
        path: the folder.
        manifest: ``manifest.json``.
        metrics: ``metrics.json``.
        records: ``records.jsonl`` (complete records only).
    """

    path: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    label: str = ""

    @property
    def name(self) -> str:
        """How the report names the run: `label` (set by `build_report` to the shortest
        tail of the path that tells the runs apart), else the folder's name."""
        return self.label or self.path.name

    @property
    def method(self) -> str:
        return str(self.metrics.get("method") or self.manifest.get("method") or "?")

    @property
    def dataset(self) -> str:
        return str(self.metrics.get("dataset", {}).get("name", "?"))

    @property
    def backend(self) -> str:
        """``provider:model`` as the judgments name it (else from the manifest)."""
        named = str(self.metrics.get("backend") or "")
        if named:
            return named
        model = self.manifest.get("model") or {}
        if model:
            return f"{model.get('provider', '?')}:{model.get('model', '?')}"
        return "unknown backend"

    @property
    def test_double(self) -> bool:
        model = self.manifest.get("model") or {}
        return bool(self.metrics.get("test_double")) or is_test_double(model.get("provider"))

    @property
    def group(self) -> tuple[str, str, str, str]:
        """Runs comparable in one table: dataset name, task, subset, sha256."""
        d = self.metrics.get("dataset", {})
        return (
            str(d.get("name", "?")),
            str(d.get("task", "?")),
            str(d.get("subset", "")),
            str(d.get("sha256", "")),
        )


def load_run(path: Path | str) -> RunData:
    """Read a run folder written by `run_eval`.

    Args:
        path: the folder.

    Returns:
        The `RunData`.

    Raises:
        PrivacyCIError: not a run folder, or its metrics are missing (an unfinished
            run: run the same ``privacy-ci eval`` again to resume it).
    """
    folder = Path(path)
    manifest_path = folder / MANIFEST_FILE
    metrics_path = folder / METRICS_FILE
    if not manifest_path.exists():
        raise PrivacyCIError(f"{folder}: not a run folder (no {MANIFEST_FILE})")
    if not metrics_path.exists():
        raise PrivacyCIError(
            f"{folder}: no {METRICS_FILE} yet (the run did not finish); run the same "
            "`privacy-ci eval ... --out` command again to resume it"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PrivacyCIError(f"{folder}: unreadable run files ({exc})") from None
    records = read_records(folder / RECORDS_FILE).records
    return RunData(folder, manifest, metrics, records)


def backend_label(run: RunData) -> str:
    """The backend as shown in tables, with the test-double mark when it is one."""
    return f"{run.backend} {TEST_DOUBLE_MARK}" if run.test_double else run.backend


# ---------------------------------------------------------------------------------
# the report's structure
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CaseLink:
    """A cell that lists cases in the HTML drill-down when followed.

    Args:
        target: the element id of the drill-down.
        cases: the case ids.
        label: what the selection is, in words (shown above the cases).
    """

    target: str
    cases: tuple[str, ...]
    label: str


@dataclass
class Table:
    """A table: a title, a header row, rows of cells, notes under it.

    ``links`` maps (row, column) to the cases the cell counts (HTML only);
    ``row_headers`` makes each row's first cell its header.
    """

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    links: dict[tuple[int, int], CaseLink] = field(default_factory=dict)
    row_headers: bool = True


@dataclass
class Figure:
    """A PNG figure."""

    title: str
    filename: str
    png: bytes
    caption: str = ""
    alt: str = ""  # the data the figure shows, in words


@dataclass
class Section:
    """A titled part of the report."""

    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    html_extra: str = ""  # HTML-only content (the per-case drill-down)


@dataclass
class Report:
    """A whole report, renderable as Markdown or HTML."""

    title: str
    generated_at: str
    warnings: list[str]
    sections: list[Section]
    headline: Table | None = None
    headline_chart: str = ""  # HTML-only: the chart with whiskers under the headline table

    def markdown(self) -> str:
        """The report as Markdown (figures referenced by file name)."""
        out = [f"# {self.title}", "", f"Generated {self.generated_at}.", ""]
        if self.headline is not None:
            out += ["## Headline", "", *_md_table(self.headline)]
        for w in self.warnings:
            out += [f"> **{w}**", ""]
        for section in self.sections:
            out += [f"## {section.title}", ""]
            for p in section.paragraphs:
                out += [p, ""]
            for table in section.tables:
                out += _md_table(table)
            for fig in section.figures:
                out += [f"![{fig.alt or fig.title}]({fig.filename})", ""]
                if fig.caption:
                    out += [f"*{fig.caption}*", ""]
            if section.html_extra:
                out += [
                    "*The per-case drill-down (verdicts, prompts, raw outputs) is in report.html.*",
                    "",
                ]
        return "\n".join(out).rstrip() + "\n"

    def html(self) -> str:
        """The report as one self-contained HTML page (figures as base64 PNG)."""
        e = html.escape
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{e(self.title)}</title>",
            "<style>body{font-family:system-ui,sans-serif;margin:1em;max-width:90em}"
            ".table-scroll{overflow-x:auto;max-width:100%;position:relative}"
            "table{border-collapse:collapse;margin:.5em 0 1em}"
            "caption{text-align:left;font-weight:bold;padding:.25em 0;position:sticky;left:0;"
            "max-width:calc(100vw - 3em)}"
            "th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left}"
            "th.num,td.num{text-align:right;white-space:nowrap}th{background:#eee}"
            ".warn{background:#fff3cd;border:1px solid #e0a800;padding:.5em}"
            ".headline{border-left:4px solid #555;padding-left:.75em}"
            ".note{color:#555;font-size:.9em}img{max-width:100%;height:auto}"
            "tbody th{font-weight:normal;background:#f7f7f7}"
            ".headline tbody th{white-space:nowrap}.headline td:last-child{min-width:20em}"
            "a.case-link{font-variant-numeric:tabular-nums}"
            + CHART_CSS
            + DRILLDOWN_CSS
            + "</style>",
            "</head><body>",
            f"<h1>{e(self.title)}</h1>",
            f"<p>Generated {e(self.generated_at)}.</p>",
        ]
        if self.headline is not None:
            parts.append('<section class="headline"><h2>Headline</h2>')
            parts += _html_table(self.headline)
            parts.append(self.headline_chart)
            parts.append("</section>")
        parts += [f'<p class="warn"><strong>{e(w)}</strong></p>' for w in self.warnings]
        drilldown = False
        for section in self.sections:
            parts.append(f"<h2>{e(section.title)}</h2>")
            parts += [f"<p>{e(p)}</p>" for p in section.paragraphs]
            for table in section.tables:
                parts += _html_table(table)
            for fig in section.figures:
                data = base64.b64encode(fig.png).decode("ascii")
                parts.append(
                    f'<figure><img src="data:image/png;base64,{data}" '
                    f'alt="{e(fig.alt or fig.title)}">'
                    f"<figcaption>{e(fig.caption or fig.title)}</figcaption></figure>"
                )
            if section.html_extra:
                drilldown = True
                parts.append(section.html_extra)
        if drilldown:
            parts.append(DRILLDOWN_SCRIPT)
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def _width(text: str) -> int:
    """Columns `text` takes in a monospaced font (wide East Asian characters take two)."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _md_table(table: Table) -> list[str]:
    """The table as Markdown that also reads as plain text: columns padded to one
    width, numbers right-aligned."""
    numeric = _numeric_columns(table)
    cells = [[_md(c) for c in table.header]]
    cells += [[_md(c) for c in row] + [""] * (len(table.header) - len(row)) for row in table.rows]
    widths = [max(3, *(_width(r[i]) for r in cells)) for i in range(len(table.header))]

    def line(row: list[str]) -> str:
        padded = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - _width(cell))
            padded.append(pad + cell if numeric[i] else cell + pad)
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w - 1) + ":" if numeric[i] else "-" * w for i, w in enumerate(widths)]
    out = [f"### {table.title}", "", line(cells[0]), "| " + " | ".join(rule) + " |"]
    out += [line(row) for row in cells[1:]]
    out.append("")
    for note in table.notes:
        out += [f"*{note}*", ""]
    return out


# a number, a percentage with its interval, a p-value, or a placeholder for none
_NUMERIC = re.compile(r"^(—|undefined|-?\d+(\.\d+)?(e-?\d+)?(/\d+)?( \[[^\]]*\])?)$", re.IGNORECASE)


def _numeric_columns(table: Table) -> list[bool]:
    """Columns whose every filled cell is a number (right-aligned); others are text."""
    flags = []
    for i in range(len(table.header)):
        cells = [row[i].strip() for row in table.rows if i < len(row) and row[i].strip()]
        flags.append(bool(cells) and all(_NUMERIC.match(c) for c in cells))
    return flags


def _link(text: str, link: CaseLink | None) -> str:
    e = html.escape
    if link is None or not link.cases:
        return e(text)
    return (
        f'<a class="case-link" href="#{e(link.target)}" data-cases="{e(json.dumps(link.cases))}" '
        f'data-label="{e(link.label)}" title="{e(link.label)}">{e(text)}</a>'
    )


def _html_table(table: Table) -> list[str]:
    e = html.escape
    numeric = _numeric_columns(table)

    def cls(i: int) -> str:
        return ' class="num"' if i < len(numeric) and numeric[i] else ""

    parts = [f'<div class="table-scroll"><table><caption>{e(table.title)}</caption><thead><tr>']
    parts += [f'<th scope="col"{cls(i)}>{e(c)}</th>' for i, c in enumerate(table.header)]
    parts.append("</tr></thead><tbody>")
    for r, row in enumerate(table.rows):
        cells = []
        for i, c in enumerate(row):
            tag = "th" if i == 0 and table.row_headers else "td"
            scope = ' scope="row"' if tag == "th" else ""
            cells.append(f"<{tag}{scope}{cls(i)}>{_link(c, table.links.get((r, i)))}</{tag}>")
        marked = ' class="warn"' if TEST_DOUBLE_MARK in " ".join(row) else ""
        parts.append(f"<tr{marked}>{''.join(cells)}</tr>")
    parts.append("</tbody></table></div>")
    parts += [f'<p class="note">{e(n)}</p>' for n in table.notes]
    return parts


# ---------------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------------
_OVERVIEW_HEADER = ["run", "dataset", "judged", "method", "backend", "errors", "unparsed"]
_OVERVIEW_HEADER += ["started", "code"]


def _method_key(method: str) -> tuple[int, str]:
    return (METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER), method)


def _row_label(run: RunData) -> str:
    return f"{run.method} · {backend_label(run)}"


def _with_interval(value: float | None, ci: Mapping[str, Any] | None, digits: int) -> str:
    """A percentage with its interval ("undefined" when there is no value)."""
    if value is None:
        return "undefined"
    text = pct(value, digits)
    if ci and ci.get("low") is not None and ci.get("high") is not None:
        text += f" [{pct(ci['low'], digits)}, {pct(ci['high'], digits)}]"
    return text


def _acc_cell(scores: dict[str, Any]) -> str:
    """Accuracy with its Wilson interval; undefined on no case."""
    n = scores.get("n")
    value = scores.get("accuracy") if n else None
    return _with_interval(value, scores.get("accuracy_ci"), digits_for(n))


def _macro_cell(scores: dict[str, Any]) -> str:
    """Macro-F1 with its bootstrap interval; undefined on no case."""
    n = scores.get("n")
    value = scores.get("macro_f1") if n else None
    return _with_interval(value, scores.get("macro_f1_ci"), digits_for(n))


def _precision(scores: dict[str, Any], digits: int = 2) -> str:
    """Precision in %, or "undefined" for a class never predicted (0/0, not 0)."""
    if scores.get("predicted") == 0:
        return "undefined"
    return pct(scores["precision"], digits)


def _recall(scores: dict[str, Any], digits: int = 2) -> str:
    """Recall in %, or "undefined" for a class with no gold case."""
    if scores.get("support") == 0:
        return "undefined"
    return pct(scores["recall"], digits)


def _f1(scores: dict[str, Any], digits: int = 2) -> str:
    """F1 in %, or "undefined" when precision and recall both are (no gold case, none
    predicted)."""
    if scores.get("support") == 0 and scores.get("predicted") == 0:
        return "undefined"
    return pct(scores["f1"], digits)


def _dataset_title(group: tuple[str, str, str, str], n: int) -> str:
    name, task, subset, sha = group
    extra = f", {subset}" if subset else ""
    return f"dataset {name} ({task}{extra}, {n} cases, sha256 {sha[:12]})"


def _accuracy_table(group: tuple[str, str, str, str], runs: list[RunData]) -> Table:
    methods = sorted({r.method for r in runs}, key=_method_key)
    backends: list[str] = []
    for r in runs:
        if backend_label(r) not in backends:
            backends.append(backend_label(r))
    cell: dict[tuple[str, str], str] = {}
    for r in runs:
        cell[(backend_label(r), r.method)] = _acc_cell(r.metrics["scores"]["main"])
    rows = [[b] + [cell.get((b, m), "") for m in methods] for b in backends]
    for name, label in BASELINE_LABELS.items():
        row = [label]
        for m in methods:
            values = []
            for r in runs:
                base = r.metrics.get("baselines", {}).get(name)
                if r.method == m and base is not None:
                    values.append(_acc_cell(base["scores"]["main"]))
            row.append(" / ".join(dict.fromkeys(values)) if values else "")
        if any(row[1:]):  # (always-permit: only runs on cases with gold facts or pairs)
            rows.append(row)
    n = runs[0].metrics["scores"]["main"]["n"]
    notes = [
        "Accuracy in % with 95% Wilson intervals; unparsed answers count as wrong. "
        "Rows name the backend (provider:model) that produced the verdicts; baselines "
        "are computed on the same cases as the runs of their column."
    ]
    if any(r.test_double for r in runs):
        notes.append(f"Rows marked {TEST_DOUBLE_MARK!r} come from the scripted test backend.")
    return Table(
        f"Accuracy (Table 2 style), {_dataset_title(group, n)}",
        ["model (backend)", *methods],
        rows,
        notes,
    )


def _per_class_table(group: tuple[str, str, str, str], runs: list[RunData]) -> Table:
    classes: list[str] = list(runs[0].metrics["scores"]["main"]["classes"])
    header = ["method · backend"]
    for c in classes:
        t = class_title(c)
        header += [f"{t} P", f"{t} R", f"{t} F1"]
    header += ["Ma-F1 [95% CI]", "unparsed"]

    def row(label: str, scores: dict[str, Any]) -> list[str]:
        cells = [label]
        d = digits_for(scores.get("n"))
        for c in classes:
            s = scores["per_class"][c]
            cells += [_precision(s, d), _recall(s, d), _f1(s, d)]
        cells += [_macro_cell(scores), str(scores["unparsed"])]
        return cells

    rows = [row(_row_label(r), r.metrics["scores"]["main"]) for r in _sorted(runs)]
    rows += _baseline_rows(runs, lambda s: s["main"], row)
    n = runs[0].metrics["scores"]["main"]["n"]
    notes = [
        "Precision, recall, F1 in %; Ma-F1 = mean F1 over the classes (bootstrap CI); "
        "precision is undefined for a class the run never predicted, recall for a class "
        "with no gold case (each counts as 0 in the F1 and the macro-F1)."
    ]
    if any(r.test_double for r in runs):
        notes.append(f"Rows marked {TEST_DOUBLE_MARK!r} come from the scripted test backend.")
    return Table(f"Per class (Table 3 style), {_dataset_title(group, n)}", header, rows, notes)


def _baseline_rows(runs: list[RunData], pick: Any, row: Any) -> list[list[str]]:
    out: list[list[str]] = []
    seen: set[str] = set()
    for r in runs:
        for name, label in BASELINE_LABELS.items():
            base = r.metrics.get("baselines", {}).get(name)
            if base is None:
                continue
            scores = pick(base["scores"])
            if scores is None:
                continue
            cells = row(label, scores)
            key = json.dumps(cells)
            if key not in seen:
                seen.add(key)
                out.append(cells)
    return out


def _compliance_table(group: tuple[str, str, str, str], runs: list[RunData]) -> Table | None:
    def pick(scores: dict[str, Any]) -> dict[str, Any] | None:
        if scores.get("main", {}).get("task") == "compliance":
            return dict(scores["main"])
        comp = scores.get("compliance")
        return dict(comp) if comp else None

    usable = [r for r in _sorted(runs) if pick(r.metrics["scores"]) is not None]
    if not usable:
        return None
    permit, prohibit = class_title("permit"), class_title("prohibit")
    header = ["method · backend", f"{permit} P", f"{permit} R", f"{permit} F1"]
    header += [f"{prohibit} P", f"{prohibit} R", f"{prohibit} F1", "Ma-F1", "n"]

    def row(label: str, s: dict[str, Any]) -> list[str]:
        pc = s["per_class"]
        d = digits_for(s.get("n"))
        return [
            label,
            _precision(pc["permit"], d),
            _recall(pc["permit"], d),
            _f1(pc["permit"], d),
            _precision(pc["prohibit"], d),
            _recall(pc["prohibit"], d),
            _f1(pc["prohibit"], d),
            "undefined" if not s.get("n") else pct(s["macro_f1"], d),
            str(s["n"]),
        ]

    rows = []
    for r in usable:
        s = pick(r.metrics["scores"])
        if s is not None:
            rows.append(row(_row_label(r), s))
    rows += _baseline_rows(usable, pick, row)
    notes = [
        "Binary compliance as in GoldCoin: only cases whose gold label is Permit or "
        "Prohibit; a Not applicable or unparsed prediction on them is wrong. (The paper's "
        "Table 4 prints Table 3's three-way Permit and Prohibit columns instead.)"
    ]
    if any(r.test_double for r in usable):
        notes.append(f"Rows marked {TEST_DOUBLE_MARK!r} come from the scripted test backend.")
    n = runs[0].metrics["scores"]["main"]["n"]
    return Table(
        f"Binary compliance (Table 4 style), {_dataset_title(group, n)}", header, rows, notes
    )


def _fact_accuracy_cell(block: Mapping[str, Any]) -> str:
    """An `end_to_end` block: accuracy [interval] (right/n)."""
    n = block.get("n")
    return _with_interval(
        block.get("accuracy") if n else None, block.get("accuracy_ci"), digits_for(n)
    ) + (f" ({block.get('correct')}/{n})" if n else "")


def _pair_cell(block: Mapping[str, Any], key: str) -> str:
    n = block.get("pairs")
    return _with_interval(block.get(key) if n else None, block.get(f"{key}_ci"), digits_for(n))


def _fact_tables(group: tuple[str, str, str, str], runs: list[RunData]) -> list[Table]:
    """Law from gold facts, reading per fact and minimal pairs, for runs that have them."""
    tables: list[Table] = []
    n = runs[0].metrics["scores"]["main"]["n"]
    ordered = _sorted(runs)
    with_facts = [r for r in ordered if isinstance(r.metrics.get("gold_facts"), dict)]
    if with_facts:
        rows = []
        for r in with_facts:
            block = r.metrics["gold_facts"]
            law = block.get("law_from_gold") or {}
            reading = block.get("reading")
            law_cell = (
                str(law.get("error"))
                if law.get("error")
                else _with_interval(
                    law.get("accuracy"), law.get("accuracy_ci"), digits_for(law.get("n"))
                )
                + f" ({law.get('correct')}/{law.get('n')})"
            )
            if isinstance(reading, dict):
                overall = reading["overall"]
                read_cell = _with_interval(
                    overall["accuracy"], overall.get("accuracy_ci"), digits_for(overall["gold"])
                ) + (f" ({overall['right']}/{overall['gold']})")
                all_right = f"{reading['all_right_cases']}/{reading['cases']}"
            else:
                read_cell, all_right = "not recorded by the method", "—"
            end_block = block.get("end_to_end")
            end = (  # (runs before end_to_end was recorded: the run's accuracy)
                _fact_accuracy_cell(end_block)
                if isinstance(end_block, dict)
                else _acc_cell(r.metrics["scores"]["main"])
            )
            rows.append([_row_label(r), law_cell, read_cell, all_right, end])
        shown: set[str] = set()
        for r in with_facts:  # the baselines on the same cases: end to end only
            for name, base in (r.metrics["gold_facts"].get("baselines") or {}).items():
                cells = [
                    BASELINE_LABELS.get(name, f"baseline: {name}"),
                    "—",
                    "—",
                    "—",
                    _fact_accuracy_cell(base),
                ]
                if json.dumps(cells) not in shown:
                    shown.add(json.dumps(cells))
                    rows.append(cells)
        tables.append(
            Table(
                f"Facts, then law, {_dataset_title(group, n)}",
                [
                    "method · backend",
                    "law from gold facts",
                    "facts read right",
                    "cases with every fact right",
                    "end to end",
                ],
                rows,
                [
                    "In %, with 95% Wilson intervals, over the cases with gold facts. Law "
                    "from gold facts: the law book applied to each case's gold facts (the "
                    "same for every run). Facts read right: the method's final fact values "
                    "against the gold facts, over the facts present in the gold (a fact it "
                    "has no value for is wrong). End to end: the run's verdicts, beside the "
                    "model-free baselines' on the same cases."
                ],
            )
        )
        facts: list[str] = []
        for r in with_facts:
            reading = r.metrics["gold_facts"].get("reading")
            if isinstance(reading, dict):
                facts += [f for f in reading["facts"] if f not in facts]
        readers = [
            r for r in with_facts if isinstance(r.metrics["gold_facts"].get("reading"), dict)
        ]
        if readers:
            header = ["fact", *(_row_label(r) for r in readers)]
            rows = []
            for fact in facts:
                row = [fact]
                for r in readers:
                    t = r.metrics["gold_facts"]["reading"]["facts"].get(fact)
                    row.append(
                        "—"
                        if t is None
                        else f"{pct(t['accuracy'], digits_for(t['gold']))} ({t['right']} "
                        f"right, {t['wrong']} wrong, {t['missing']} missing of {t['gold']})"
                    )
                rows.append(row)
            tables.append(
                Table(
                    f"Reading per fact, {_dataset_title(group, n)}",
                    header,
                    rows,
                    [
                        "Per fact present in the gold: right (same value), wrong (another "
                        "value), missing (no value: unread, or left to a presumption)."
                    ],
                )
            )
    with_pairs = [r for r in ordered if isinstance(r.metrics.get("pairs"), dict)]
    if with_pairs:
        rows = []
        for r in with_pairs:
            block = r.metrics["pairs"]
            rows.append(
                [
                    _row_label(r),
                    _pair_cell(block, "pair_accuracy"),
                    _pair_cell(block, "flip_rate"),
                    str(block["pairs"]),
                ]
            )
        seen: set[str] = set()
        for r in with_pairs:
            for name, block in (r.metrics["pairs"].get("baselines") or {}).items():
                cells = [
                    BASELINE_LABELS.get(name, f"baseline: {name}"),
                    _pair_cell(block, "pair_accuracy"),
                    _pair_cell(block, "flip_rate"),
                    str(block["pairs"]),
                ]
                if json.dumps(cells) not in seen:
                    seen.add(json.dumps(cells))
                    rows.append(cells)
        incomplete = max(int(r.metrics["pairs"].get("incomplete") or 0) for r in with_pairs)
        notes = [
            "Pair accuracy: pairs whose every member is right; flip rate: pairs whose "
            "members got different verdicts (an unparsed member is no flip; cases sharing "
            "a pair id are one group, however many). In %, with 95% bootstrap intervals "
            "resampling pairs."
        ]
        if incomplete:
            notes.append(f"{incomplete} pair(s) with a member not judged are not scored.")
        tables.append(
            Table(
                f"Minimal pairs, {_dataset_title(group, n)}",
                ["method · backend", "pair accuracy", "flip rate", "pairs"],
                rows,
                notes,
            )
        )
    return tables


def _record_classes(record: Mapping[str, Any]) -> tuple[str, str]:
    """A record's gold class and predicted class (``unparsed`` for no verdict)."""
    gold = record.get("gold_class") or record.get("gold")
    predicted = record["predicted_class"] if "predicted_class" in record else record.get("verdict")
    return str(gold), UNPARSED if predicted is None else str(predicted)


def _confusion_table(run: RunData, target: str | None = None) -> Table:
    conf = run.metrics["scores"]["main"]["confusion"]
    header = ["gold \\ predicted", *(class_title(c) for c in conf["columns"])]
    rows = [
        [class_title(g), *(str(x) for x in counts)]
        for g, counts in zip(conf["rows"], conf["counts"], strict=True)
    ]
    notes = [f"Backend: {backend_label(run)}; run folder {run.name}."]
    links: dict[tuple[int, int], CaseLink] = {}
    if target is not None:
        cells: dict[tuple[str, str], list[str]] = {}
        for rec in run.records:
            cells.setdefault(_record_classes(rec), []).append(str(rec["case_id"]))
        for i, (gold, counts) in enumerate(zip(conf["rows"], conf["counts"], strict=True)):
            for j, (column, count) in enumerate(zip(conf["columns"], counts, strict=True)):
                ids = cells.get((gold, column), [])
                if count and len(ids) == count:  # a run scored on other cases gets no links
                    label = f"{run.name}: gold {class_title(gold)}, predicted {class_title(column)}"
                    links[(i, j + 1)] = CaseLink(target, tuple(ids), label)
        if links:
            notes.append("Each count links to its cases in the drill-down below.")
    return Table(
        f"Confusion: {run.method} on {run.dataset} · {backend_label(run)}",
        header,
        rows,
        notes,
        links,
    )


def _cross_check_tables(run: RunData) -> list[Table]:
    """The agreement table and the flagged cases of a cross-checked run (else none)."""
    block = run.metrics.get("cross_check")
    if not isinstance(block, dict):
        return []
    reasoner = str(block.get("reasoner") or "ci-reasoner")
    header = [f"model \\ {reasoner}", *(class_title(c) for c in block["columns"])]
    rows = [
        [class_title(r), *(str(x) for x in counts)]
        for r, counts in zip(block["rows"], block["counts"], strict=True)
    ]
    kinds = block.get("flags")
    by_kind = (
        " (" + ", ".join(f"{n} {kind}" for kind, n in kinds.items()) + ")"
        if isinstance(kinds, dict) and block.get("flagged")
        else ""
    )
    # older runs' blocks (the condition catalogue) have an "undetermined" column instead
    column = (
        "failed: the reasoner raised an error"
        if "failed" in block["columns"]
        else "undetermined: no norm of its catalogue applies"
    )
    notes = [
        f"Agreement {pct(block.get('agreement'))}% ({block.get('agreed')}/"
        f"{block.get('compared')} cases); {block.get('flagged')} flagged{by_kind}. Rows: the "
        f"model's verdict; columns: the {reasoner}'s, the law on the facts it read ({column})."
    ]
    if block.get("on_presumptions"):
        notes.append(
            f"The law's verdict rests on presumptions (facts not stated) in "
            f"{block['on_presumptions']} case(s)."
        )
    if block.get("reasoner_errors"):
        notes.append(f"The reasoner failed on {block['reasoner_errors']} case(s).")
    title = f"Cross-check with the {reasoner}: {run.method} on {run.dataset} · {backend_label(run)}"
    tables = [Table(title, header, rows, notes)]
    flagged = [r for r in run.records if (r.get("cross_check") or {}).get("flagged")]
    if flagged:
        fheader = [
            "case",
            "gold",
            "model",
            reasoner,
            "flag",
            "deciding rule",
            "facts the rule used (source: quote)",
            "what would change it",
        ]
        frows = [_flag_row(r) for r in flagged]
        fnotes = [
            "permit-unsupported: the model permits, but on the facts read the law "
            "prohibits (a prohibition, or no permission applies); prohibit-despite-"
            "permission: the model prohibits, but the law permits or requires the "
            "disclosure. A presumed fact was not stated. What would change it: the "
            "permissions that fail on one fact (near misses) and, for a verdict on "
            "presumptions, the questions whose answers decide it."
        ]
        tables.append(
            Table(f"Flagged cases: {run.method} · {backend_label(run)}", fheader, frows, fnotes)
        )
    return tables


def _flag_fact(name: str, fact: Any) -> str:
    """``name = value (source: "quote")`` of a flag's fact (`FactValue.as_dict`)."""
    if not isinstance(fact, Mapping):
        return f"{name} = {fact}"
    source = str(fact.get("source") or "given")
    quote = f': "{fact["quote"]}"' if fact.get("quote") else ""
    return f"{name} = {fact.get('value')} ({source}{quote})"


def _flag_changes(flag: Mapping[str, Any]) -> str:
    """A flag's near misses and questions, in words."""
    parts = []
    for miss in flag.get("near_misses") or []:
        if not isinstance(miss, Mapping):
            continue
        fails = "; ".join(
            f"{f.get('fact')} is {f.get('value') or 'unknown'}, needs "
            + " or ".join(str(x) for x in f.get("needs") or [])
            for f in miss.get("failing") or []
            if isinstance(f, Mapping)
        )
        parts.append(f"near miss {miss.get('rule')} ({miss.get('paragraph')}): {fails}")
    for question in flag.get("questions") or []:
        if isinstance(question, Mapping):
            parts.append(f"{question.get('question')} ({question.get('text')})")
    return " | ".join(parts)


def _flag_row(record: dict[str, Any]) -> list[str]:
    check = record["cross_check"]
    flag = check.get("flag") or {}
    rule = flag.get("rule")
    if isinstance(rule, Mapping):  # the facts-then-law cross-check
        deciding = f"{rule.get('id')} ({rule.get('paragraph')})"
        facts = "; ".join(_flag_fact(str(k), v) for k, v in (flag.get("facts") or {}).items())
        changes = _flag_changes(flag)
    else:  # older runs: the condition catalogue's norm and conditions
        norm = flag.get("norm") or {}
        deciding = f"{norm.get('id')} ({norm.get('paragraph')})"
        conditions = []
        for cond in flag.get("conditions") or []:
            evidence = cond.get("evidence") or []
            quote = f' "{evidence[0].get("quote")}"' if evidence else ""
            conditions.append(f"{cond.get('id')}: {cond.get('status')}{quote}")
        facts, changes = "; ".join(conditions), ""
    verdict = check.get("reasoner_verdict")
    # no verdict: the reasoner failed (older runs: no norm of the catalogue applied)
    shown = class_title(verdict) if verdict else "failed"
    if not verdict and "reasoner_determined" not in check:
        shown = "undetermined"
    if verdict and not check.get("reasoner_determined", True):
        shown += " (on presumptions)"
    return [
        str(record.get("case_id")),
        class_title(record.get("gold")),
        class_title(check.get("model_verdict") or "unparsed"),
        shown,
        f"{flag.get('kind')}: {flag.get('reason')}",
        deciding,
        facts,
        changes,
    ]


def _mcnemar_table(
    group: tuple[str, str, str, str], runs: list[RunData], target: str | None = None
) -> Table | None:
    rows: list[list[str]] = []
    links: dict[tuple[int, int], CaseLink] = {}
    for a, b in combinations(_sorted(runs), 2):
        ca = {str(r["case_id"]): bool(r.get("correct")) for r in a.records}
        cb = {str(r["case_id"]): bool(r.get("correct")) for r in b.records}
        common = [cid for cid in ca if cid in cb]
        if not common:
            continue
        result = mcnemar([ca[c] for c in common], [cb[c] for c in common])
        if target is not None:
            only_a = tuple(c for c in common if ca[c] and not cb[c])
            only_b = tuple(c for c in common if cb[c] and not ca[c])
            row = len(rows)
            links[(row, 3)] = CaseLink(target, only_a, f"only {a.name} right, not {b.name}")
            links[(row, 4)] = CaseLink(target, only_b, f"only {b.name} right, not {a.name}")
        rows.append(
            [
                f"{a.name}: {_row_label(a)}",
                f"{b.name}: {_row_label(b)}",
                str(result.n),
                str(result.b),
                str(result.c),
                f"{result.p_value:.4g}",
                result.method,
            ]
        )
    if not rows:
        return None
    header = ["run A", "run B", "paired cases", "b (only A right)", "c (only B right)", "p"]
    header.append("test")
    notes = [
        "McNemar's test on the cases both runs judged: exact binomial when b + c < 25, "
        "else chi-square with continuity correction; two-sided."
    ]
    if links:
        notes.append("b and c link to their cases in the drill-down below.")
    if any(r.test_double for r in runs):
        notes.append(f"Rows marked {TEST_DOUBLE_MARK!r} come from the scripted test backend.")
    return Table(f"McNemar, {group[0]}", header, rows, notes, links)


def _sorted(runs: Sequence[RunData]) -> list[RunData]:
    return sorted(runs, key=lambda r: (_method_key(r.method), r.backend, r.name))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


# Okabe & Ito's palette (distinct under the common colour-vision deficiencies) for
# runs, greys for the model-free baselines; every series also gets its own hatch.
_RUN_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
_BASELINE_COLOURS = ("#BBBBBB", "#777777")
_HATCHES = ("//", "\\\\", "xx", "..", "oo", "--", "++", "||", "**", "OO")


def _f1_figure(group: tuple[str, str, str, str], runs: list[RunData]) -> Figure | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    classes: list[str] = list(runs[0].metrics["scores"]["main"]["classes"])
    series: list[tuple[str, list[float | None], bool]] = []

    def values(per: dict[str, Any]) -> list[float | None]:
        return [None if _f1(per[c]) == "undefined" else float(per[c]["f1"]) for c in classes]

    for r in _sorted(runs):
        per = r.metrics["scores"]["main"]["per_class"]
        label = f"{r.name}: {r.method} · {r.backend}" + (" (TEST DOUBLE)" if r.test_double else "")
        series.append((label, values(per), False))
    base_seen: set[str] = set()
    for r in runs:
        for name, text in BASELINE_LABELS.items():
            base = r.metrics.get("baselines", {}).get(name)
            if base is None or name in base_seen:
                continue
            base_seen.add(name)
            series.append((text, values(base["scores"]["main"]["per_class"]), True))
    digits = digits_for(runs[0].metrics["scores"]["main"].get("n"))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(classes) + 0.5 * len(series)), 4.5))
    width = 0.8 / max(1, len(series))
    label_all = len(series) * len(classes) <= 40
    runs_drawn = baselines_drawn = 0
    for i, (label, vals, baseline) in enumerate(series):
        if baseline:
            colour = _BASELINE_COLOURS[baselines_drawn % len(_BASELINE_COLOURS)]
            baselines_drawn += 1
        else:
            colour = _RUN_COLOURS[runs_drawn % len(_RUN_COLOURS)]
            runs_drawn += 1
        xs = [k + (i - (len(series) - 1) / 2) * width for k in range(len(classes))]
        heights = [0.0 if v is None else 100 * v for v in vals]
        ax.bar(
            xs,
            heights,
            width,
            label=label,
            color=colour,
            hatch=_HATCHES[i % len(_HATCHES)],
            edgecolor="black",
            linewidth=0.6,
        )
        for x, v, h in zip(xs, vals, heights, strict=True):
            if v is None or h == 0:  # a zero (or undefined) bar is a visible stub, labelled
                ax.plot([x - width / 2, x + width / 2], [0.4, 0.4], color="black", lw=2.5)
            if label_all or v is None or h == 0:
                text = "undef." if v is None else f"{h:.{digits}f}"
                ax.annotate(
                    text,
                    (x, h),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    xytext=(0, 2),
                    textcoords="offset points",
                )
    ax.set_xticks(range(len(classes)))
    ax.set_xticklabels([class_title(c) for c in classes])
    ax.set_ylabel("F1 (%)")
    ax.set_ylim(-2, 108)
    title = f"Per-class F1, {group[0]}"
    if any(r.test_double for r in runs):
        title += "\nincludes TEST DOUBLE runs: not model accuracy"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    described = "; ".join(
        f"{label}: "
        + ", ".join(
            f"{class_title(c)} {'undefined' if v is None else pct(v, digits)}"
            for c, v in zip(classes, vals, strict=True)
        )
        for label, vals, _ in series
    )
    return Figure(
        title.replace("\n", ": "),
        f"per_class_f1_{_slug(group[0])}_{group[3][:8]}.png",
        buf.getvalue(),
        "Bars name the run and backend; grey bars are the model-free baselines; each "
        "series has its own hatch.",
        alt=f"Bar chart of per-class F1 in percent, {group[0]}. {described}.",
    )


FLAG_CONSTANT = "constant verdict"
FLAG_MAJORITY = "not better than the majority baseline"
FLAG_HEALTH_RULE = "below the model-free health-information rule"
FLAG_EMBEDDED = "embedded model: a wiring check, not accuracy"
FLAG_TEST_DOUBLE = "scripted test double: not model accuracy"


def _baseline_score(run: RunData, name: str, key: str = "accuracy") -> float | None:
    base = run.metrics.get("baselines", {}).get(name)
    if not isinstance(base, dict):
        return None
    value = base.get("scores", {}).get("main", {}).get(key)
    return None if value is None else float(value)


def run_flags(run: RunData) -> list[str]:
    """What a reader must know before trusting a run's headline numbers."""
    flags: list[str] = []
    if run.test_double:
        flags.append(FLAG_TEST_DOUBLE)
    if run.backend.split(":", 1)[0] == "embedded":
        flags.append(FLAG_EMBEDDED)
    answered = {str(r["verdict"]) for r in run.records if r.get("verdict") is not None}
    if len(answered) == 1 and sum(r.get("verdict") is not None for r in run.records) > 1:
        flags.append(f"{FLAG_CONSTANT} ({class_title(answered.pop())})")
    acc = run.metrics["scores"]["main"].get("accuracy")
    majority = _baseline_score(run, "majority")
    if acc is not None and majority is not None and acc <= majority:
        flags.append(FLAG_MAJORITY)
    rule = _baseline_score(run, "health-rule")
    if acc is not None and rule is not None and acc < rule:
        flags.append(FLAG_HEALTH_RULE)
    return flags


def _headline_table(runs: Sequence[RunData], targets: Mapping[int, str]) -> Table:
    """One row per run; its n and its wrong count link to its cases in the drill-down."""
    several = len({r.group for r in runs}) > 1
    rows: list[list[str]] = []
    links: dict[tuple[int, int], CaseLink] = {}
    for i, r in enumerate(runs):
        scores = r.metrics["scores"]["main"]
        wrong = tuple(str(rec["case_id"]) for rec in r.records if is_wrong(rec))
        # the scores first: on a phone they are what shows before the table scrolls
        row = [r.name, _acc_cell(scores), _macro_cell(scores)]
        n_col = len(row)
        row += [str(scores.get("n", "?")), str(len(wrong)), r.method, r.backend]
        if several:
            row.append(r.dataset)
        row.append("; ".join(run_flags(r)) or "—")
        rows.append(row)
        target = targets.get(id(r))
        if target is not None:
            every = tuple(str(rec["case_id"]) for rec in r.records)
            links[(i, n_col)] = CaseLink(target, every, f"{r.name}: all its cases")
            links[(i, n_col + 1)] = CaseLink(target, wrong, f"{r.name}: its wrong cases")
    header = ["run", "accuracy % [95% CI]", "macro-F1 % [95% CI]", "n", "wrong", "method"]
    header += ["backend", *(["dataset"] if several else []), "flags"]
    notes = [
        "Accuracy with 95% Wilson intervals, macro-F1 with bootstrap intervals; unparsed "
        "answers count as wrong. Flags: constant verdict (every answered case got the same "
        "verdict), not better than the majority baseline, below the model-free "
        "health-information rule, and backends whose numbers are not a model's accuracy. "
        "In the HTML, n and wrong open those cases in the drill-down."
    ]
    return Table("Per run: accuracy and macro-F1", header, rows, notes, links)


_CHART_BASELINES = (("majority", "majority baseline"), ("health-rule", "health-rule baseline"))


def _headline_chart(runs: Sequence[RunData]) -> str:
    """The headline's chart: accuracy and macro-F1 per run with whiskers and baselines."""
    bars = []
    for r in runs:
        scores = r.metrics["scores"]["main"]
        n = scores.get("n")
        values = []
        for metric, key in (("accuracy", "accuracy"), ("macro-F1", "macro_f1")):
            ci = scores.get(f"{key}_ci") or {}
            refs = []
            for name, ref in _CHART_BASELINES:
                value = _baseline_score(r, name, key)
                if value is not None:
                    refs.append((ref, value))
            values.append(
                ChartValue(
                    metric,
                    scores.get(key) if n else None,
                    ci.get("low"),
                    ci.get("high"),
                    tuple(refs),
                    digits_for(n),
                )
            )
        detail = f"{r.method} · {r.backend}" + (" (test double)" if r.test_double else "")
        bars.append(ChartRun(r.name, detail, tuple(values)))
    return chart(
        bars,
        "Accuracy and macro-F1 per run (%), whiskers: 95% intervals; lines: the model-free "
        "baselines on the same cases",
    )


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _usage_table(runs: Sequence[RunData]) -> Table:
    """Tokens, latency and cost per run (from the records, the manifest's sessions and
    the client's accounting)."""
    rows = []
    for r in runs:
        usage = r.metrics.get("usage") or {}
        n = len(r.records)
        tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        elapsed = [float(rec.get("elapsed_s") or 0.0) for rec in r.records]
        median = statistics.median(elapsed) if elapsed else None
        p90 = _quantile(elapsed, 0.9)
        walls = [float(s["wall_s"]) for s in r.manifest.get("sessions") or [] if s.get("wall_s")]
        client = (r.manifest.get("usage") or {}).get("client") or {}
        cost = client.get("cost_usd")
        rows.append(
            [
                r.name,
                backend_label(r),
                str(usage.get("model_steps", 0)),
                str(usage.get("cached_steps", 0)),
                str(usage.get("retries", 0)),
                str(usage.get("failed_steps", 0)),
                str(usage.get("prompt_tokens", 0)),
                str(usage.get("completion_tokens", 0)),
                f"{tokens / n:.0f}" if n else "undefined",
                "—" if median is None else f"{median:.3f}",
                "—" if p90 is None else f"{p90:.3f}",
                f"{sum(walls):.1f}" if walls else "—",
                "—" if cost is None else f"{float(cost):.4f}",
            ]
        )
    header = ["run", "backend", "model calls", "cached", "retries", "failed calls"]
    header += ["prompt tokens"]
    header += ["completion tokens", "tokens / case", "median s / case", "p90 s / case"]
    header += ["wall s", "cost USD"]
    notes = [
        "Calls and tokens are summed over the steps of the recorded cases; seconds per case "
        "are the method's time on a case; wall s sums the finished sessions; cost is the "
        "client's, — when no price is known for the backend (or no session finished)."
    ]
    return Table("Tokens, latency and cost per run", header, rows, notes)


def _display_names(paths: Sequence[Path]) -> list[str]:
    """The shortest tail of each run folder's path that tells it from the others."""
    parts = [Path(os.path.abspath(p)).parts[1:] or (str(p),) for p in paths]
    depth = [1] * len(paths)
    while True:
        names = ["/".join(ps[-d:]) for ps, d in zip(parts, depth, strict=True)]
        seen: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            seen.setdefault(name, []).append(i)
        clashes = [ix for ix in seen.values() if len(ix) > 1]
        grown = False
        for ix in clashes:
            for i in ix:
                if depth[i] < len(parts[i]):
                    depth[i] += 1
                    grown = True
        if not clashes or not grown:
            break
    counts: dict[str, int] = {}
    out = []
    for name in names:  # the same folder given twice
        counts[name] = counts.get(name, 0) + 1
        out.append(name if counts[name] == 1 else f"{name} #{counts[name]}")
    return out


def case_texts_from_datasets(runs: Sequence[RunData]) -> dict[str, str]:
    """Case texts for runs whose records lack them (runs written before records kept
    the text), read from their dataset when it is still there and unchanged.

    A run's dataset is looked up by its name (a named dataset) or the file its
    manifest names (a user's file); it is used only when its sha256 is the run's.
    Anything missing or changed is skipped: the report then says the text is not
    stored.

    Args:
        runs: the runs.

    Returns:
        case id -> text.
    """
    from privacy_ci.cases import list_datasets, load_dataset

    texts: dict[str, str] = {}
    tried: set[tuple[str, str]] = set()
    for r in runs:
        if not r.records or all(rec.get("text") for rec in r.records):
            continue
        name, sha = r.group[0], r.group[3]
        candidates: list[str] = [name] if name in list_datasets() else []
        source = str((r.manifest.get("dataset") or {}).get("source") or "")
        if source and Path(source).is_file():
            candidates.append(source)
        for candidate in candidates:
            if (candidate, sha) in tried:  # read (or failed) for an earlier run already
                continue
            tried.add((candidate, sha))
            try:
                dataset = load_dataset(candidate, resolve_gold=False)
            except (PrivacyCIError, OSError, ValueError):
                continue
            if dataset.sha256 != sha:
                continue
            texts.update({c.id: c.text for c in dataset.cases})
            break
    return texts


def build_report(
    runs: Sequence[RunData],
    *,
    plots: bool = True,
    case_texts: Mapping[str, str] | None = None,
) -> Report:
    """Assemble the report's sections from runs.

    Args:
        runs: the runs (any datasets, methods and models).
        plots: draw the per-class F1 figures (needs matplotlib; skipped with a
            warning when it is missing).
        case_texts: case id -> text for records that do not carry their case's text
            (see `case_texts_from_datasets`).

    Returns:
        The `Report`.

    Raises:
        PrivacyCIError: no runs.
    """
    if not runs:
        raise PrivacyCIError("no runs to report on")
    runs = [
        dataclasses.replace(r, label=name)
        for r, name in zip(runs, _display_names([r.path for r in runs]), strict=True)
    ]
    warnings: list[str] = []
    doubles = [r for r in runs if r.test_double]
    if doubles:
        names = ", ".join(r.name for r in doubles)
        warnings.append(
            f"{len(doubles)} run(s) used the scripted test backend ({names}): their numbers "
            "test the evaluation plumbing and are NOT model accuracy. They are marked in "
            "every table."
        )
    incomplete = [r for r in runs if not r.metrics.get("complete", True)]
    if incomplete:
        warnings.append(
            "incomplete run(s), scored on the cases judged so far: "
            + ", ".join(r.name for r in incomplete)
        )
    overview = Section("Runs")
    overview_rows = []
    for r in runs:
        m = r.metrics
        code = r.manifest.get("code", {})
        overview_rows.append(
            [
                r.name,
                r.dataset,
                f"{m.get('judged', '?')}/{m.get('cases', '?')}",
                r.method,
                backend_label(r),
                str(m.get("errors", 0)),
                str(m.get("unparsed", 0)),
                str(r.manifest.get("started_at", "")),
                f"{code.get('privacy_ci', '?')} {str(code.get('git_commit') or '')[:10]}".strip(),
            ]
        )
    overview.tables.append(
        Table(
            "Run folders",
            _OVERVIEW_HEADER,
            overview_rows,
            ["The backend is the provider:model that produced each run's verdicts."],
        )
    )
    overview.tables.append(_usage_table(runs))
    sections = [overview]
    groups: dict[tuple[str, str, str, str], list[RunData]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    # each dataset's drill-down, the target of every link to its cases
    box_ids = {group: f"cases-{i + 1}" for i, group in enumerate(groups)}
    targets = {id(r): box_ids[r.group] for r in runs if r.records}
    missing_plot = False
    for group, members in groups.items():
        n = members[0].metrics["scores"]["main"]["n"]
        target = box_ids[group] if any(r.records for r in members) else None
        section = Section(f"Dataset {group[0]}", [_dataset_title(group, n)])
        section.tables.append(_accuracy_table(group, members))
        section.tables.append(_per_class_table(group, members))
        comp = _compliance_table(group, members)
        if comp is not None:
            section.tables.append(comp)
        section.tables += _fact_tables(group, members)
        section.tables += [_confusion_table(r, target) for r in _sorted(members)]
        for r in _sorted(members):
            section.tables += _cross_check_tables(r)
        mc = _mcnemar_table(group, members, target)
        if mc is not None:
            section.tables.append(mc)
        ordered = _sorted(members)
        section.html_extra = case_drilldown(
            ordered,
            {id(r): r.name for r in ordered},
            f"Cases, {_dataset_title(group, n)}",
            box_id=box_ids[group],
            texts=case_texts,
        )
        if plots:
            fig = _f1_figure(group, members)
            if fig is None:
                missing_plot = True
            else:
                section.figures.append(fig)
        sections.append(section)
    if missing_plot:
        warnings.append("matplotlib is not installed: the per-class F1 figures are missing")
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return Report(
        "Privacy Checklist evaluation report",
        now,
        warnings,
        sections,
        _headline_table(runs, targets),
        _headline_chart(runs),
    )


def write_report(
    runs: Sequence[RunData] | Sequence[Path | str],
    out_dir: Path | str,
    *,
    plots: bool = True,
    read_datasets: bool = True,
) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and the figures' PNG files.

    Args:
        runs: `RunData` or run folders.
        out_dir: the output folder (created).
        plots: draw figures.
        read_datasets: for runs whose records lack the case text, read it from their
            dataset if it is still there unchanged (`case_texts_from_datasets`).

    Returns:
        ``{"markdown": path, "html": path, "figures": [...]}``-style mapping of
        ``markdown``, ``html`` and ``figure:<name>`` to paths.
    """
    loaded = [r if isinstance(r, RunData) else load_run(r) for r in runs]
    texts = case_texts_from_datasets(loaded) if read_datasets else None
    report = build_report(loaded, plots=plots, case_texts=texts)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for section in report.sections:
        for fig in section.figures:
            path = out / fig.filename
            path.write_bytes(fig.png)
            written[f"figure:{fig.filename}"] = path
    md = out / "report.md"
    md.write_text(report.markdown(), encoding="utf-8")
    page = out / "report.html"
    page.write_text(report.html(), encoding="utf-8")
    written["markdown"] = md
    written["html"] = page
    return written
