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
* for a run made with ``--cross-check``: the agreement table of its verdicts with
  the ci-reasoner's and the cases the cross-check flagged (with their conditions
  and evidence);
* a per-class F1 bar plot (matplotlib, Agg backend).

Every table names the backend of each row. A run whose backend is the scripted
test double (provider ``scripted-test-double``) is marked as such in every table
it appears in: its numbers are a test of the plumbing, not a model's accuracy.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.evaluation._metrics import mcnemar
from privacy_ci.evaluation._report_cases import DRILLDOWN_CSS, DRILLDOWN_SCRIPT, case_drilldown
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
    "Figure",
    "Report",
    "RunData",
    "Section",
    "Table",
    "backend_label",
    "build_report",
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
}

_CLASS_TITLES = {
    "permit": "Permit",
    "prohibit": "Prohibit",
    "not_applicable": "Not applicable",
    "applicable": "Applicable",
    "unparsed": "unparsed",
}


def pct(value: float | None, digits: int = 2) -> str:
    """A proportion as a percentage string (``"—"`` for None)."""
    return "—" if value is None else f"{100 * value:.{digits}f}"


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

    @property
    def name(self) -> str:
        return self.path.name

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
@dataclass
class Table:
    """A table: a title, a header row, rows of cells, notes under it."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


@dataclass
class Figure:
    """A PNG figure."""

    title: str
    filename: str
    png: bytes
    caption: str = ""


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
            if section.html_extra:
                out += [
                    "*The per-case drill-down (verdicts, prompts, raw outputs) is in report.html.*",
                    "",
                ]
            for fig in section.figures:
                out += [f"![{fig.title}]({fig.filename})", ""]
                if fig.caption:
                    out += [f"*{fig.caption}*", ""]
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
            ".table-scroll{overflow-x:auto;max-width:100%}"
            "table{border-collapse:collapse;margin:.5em 0 1em}"
            "caption{text-align:left;font-weight:bold;padding:.25em 0}"
            "th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left}"
            "th.num,td.num{text-align:right;white-space:nowrap}th{background:#eee}"
            ".warn{background:#fff3cd;border:1px solid #e0a800;padding:.5em}"
            ".headline{border-left:4px solid #555;padding-left:.75em}"
            ".note{color:#555;font-size:.9em}img{max-width:100%}" + DRILLDOWN_CSS + "</style>",
            "</head><body>",
            f"<h1>{e(self.title)}</h1>",
            f"<p>Generated {e(self.generated_at)}.</p>",
        ]
        if self.headline is not None:
            parts.append('<section class="headline"><h2>Headline</h2>')
            parts += _html_table(self.headline)
            parts.append("</section>")
        parts += [f'<p class="warn"><strong>{e(w)}</strong></p>' for w in self.warnings]
        drilldown = False
        for section in self.sections:
            parts.append(f"<h2>{e(section.title)}</h2>")
            parts += [f"<p>{e(p)}</p>" for p in section.paragraphs]
            for table in section.tables:
                parts += _html_table(table)
            if section.html_extra:
                drilldown = True
                parts.append(section.html_extra)
            for fig in section.figures:
                data = base64.b64encode(fig.png).decode("ascii")
                parts.append(
                    f'<figure><img src="data:image/png;base64,{data}" alt="{e(fig.title)}">'
                    f"<figcaption>{e(fig.caption or fig.title)}</figcaption></figure>"
                )
        if drilldown:
            parts.append(DRILLDOWN_SCRIPT)
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> list[str]:
    out = [f"### {table.title}", ""]
    out.append("| " + " | ".join(_md(c) for c in table.header) + " |")
    out.append("|" + "|".join("---" for _ in table.header) + "|")
    for row in table.rows:
        out.append("| " + " | ".join(_md(c) for c in row) + " |")
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


def _html_table(table: Table) -> list[str]:
    e = html.escape
    numeric = _numeric_columns(table)

    def cls(i: int) -> str:
        return ' class="num"' if i < len(numeric) and numeric[i] else ""

    parts = [f'<div class="table-scroll"><table><caption>{e(table.title)}</caption><thead><tr>']
    parts += [f"<th{cls(i)}>{e(c)}</th>" for i, c in enumerate(table.header)]
    parts.append("</tr></thead><tbody>")
    for row in table.rows:
        cells = "".join(f"<td{cls(i)}>{e(c)}</td>" for i, c in enumerate(row))
        marked = ' class="warn"' if TEST_DOUBLE_MARK in " ".join(row) else ""
        parts.append(f"<tr{marked}>{cells}</tr>")
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


def _acc_cell(scores: dict[str, Any]) -> str:
    ci = scores.get("accuracy_ci") or {}
    return f"{pct(scores['accuracy'])} [{pct(ci.get('low'), 1)}, {pct(ci.get('high'), 1)}]"


def _precision(scores: dict[str, Any]) -> str:
    """Precision in %, or "undefined" for a class never predicted (0/0, not 0)."""
    if scores.get("predicted") == 0:
        return "undefined"
    return pct(scores["precision"])


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
        t = _CLASS_TITLES.get(c, c)
        header += [f"{t} P", f"{t} R", f"{t} F1"]
    header += ["Ma-F1 [95% CI]", "unparsed"]

    def row(label: str, scores: dict[str, Any]) -> list[str]:
        cells = [label]
        for c in classes:
            s = scores["per_class"][c]
            cells += [_precision(s), pct(s["recall"]), pct(s["f1"])]
        ci = scores.get("macro_f1_ci") or {}
        interval = f" [{pct(ci.get('low'), 1)}, {pct(ci.get('high'), 1)}]" if ci else ""
        cells += [pct(scores["macro_f1"]) + interval, str(scores["unparsed"])]
        return cells

    rows = [row(_row_label(r), r.metrics["scores"]["main"]) for r in _sorted(runs)]
    rows += _baseline_rows(runs, lambda s: s["main"], row)
    n = runs[0].metrics["scores"]["main"]["n"]
    notes = [
        "Precision, recall, F1 in %; Ma-F1 = mean F1 over the classes (bootstrap CI); "
        "precision is undefined for a class the run never predicted."
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
    header = ["method · backend", "Permit P", "Permit R", "Permit F1"]
    header += ["Forbid P", "Forbid R", "Forbid F1", "Ma-F1", "n"]

    def row(label: str, s: dict[str, Any]) -> list[str]:
        pc = s["per_class"]
        return [
            label,
            _precision(pc["permit"]),
            *(pct(pc["permit"][k]) for k in ("recall", "f1")),
            _precision(pc["prohibit"]),
            *(pct(pc["prohibit"][k]) for k in ("recall", "f1")),
            pct(s["macro_f1"]),
            str(s["n"]),
        ]

    rows = []
    for r in usable:
        s = pick(r.metrics["scores"])
        if s is not None:
            rows.append(row(_row_label(r), s))
    rows += _baseline_rows(usable, pick, row)
    notes = [
        "Binary compliance as in GoldCoin: only cases whose gold label is permit or "
        "prohibit; a not-applicable or unparsed prediction on them is wrong. (The paper's "
        "Table 4 prints Table 3's three-way permit/prohibit columns instead.)"
    ]
    if any(r.test_double for r in usable):
        notes.append(f"Rows marked {TEST_DOUBLE_MARK!r} come from the scripted test backend.")
    n = runs[0].metrics["scores"]["main"]["n"]
    return Table(
        f"Binary compliance (Table 4 style), {_dataset_title(group, n)}", header, rows, notes
    )


def _confusion_table(run: RunData) -> Table:
    conf = run.metrics["scores"]["main"]["confusion"]
    header = ["gold \\ predicted", *(_CLASS_TITLES.get(c, c) for c in conf["columns"])]
    rows = [
        [_CLASS_TITLES.get(g, g), *(str(x) for x in counts)]
        for g, counts in zip(conf["rows"], conf["counts"], strict=True)
    ]
    notes = [f"Backend: {backend_label(run)}; run folder {run.name}."]
    return Table(
        f"Confusion: {run.method} on {run.dataset} · {backend_label(run)}", header, rows, notes
    )


def _cross_check_tables(run: RunData) -> list[Table]:
    """The agreement table and the flagged cases of a cross-checked run (else none)."""
    block = run.metrics.get("cross_check")
    if not isinstance(block, dict):
        return []
    reasoner = str(block.get("reasoner") or "ci-reasoner")
    titles = {**_CLASS_TITLES, "undetermined": "undetermined"}
    header = [f"model \\ {reasoner}", *(titles.get(c, c) for c in block["columns"])]
    rows = [
        [titles.get(r, r), *(str(x) for x in counts)]
        for r, counts in zip(block["rows"], block["counts"], strict=True)
    ]
    notes = [
        f"Agreement {pct(block.get('agreement'))}% ({block.get('agreed')}/"
        f"{block.get('compared')} cases); {block.get('flagged')} flagged. Rows: the model's "
        f"verdict; columns: the {reasoner}'s (undetermined: no norm of its catalogue applies)."
    ]
    if block.get("reasoner_errors"):
        notes.append(f"The reasoner failed on {block['reasoner_errors']} case(s).")
    title = f"Cross-check with the {reasoner}: {run.method} on {run.dataset} · {backend_label(run)}"
    tables = [Table(title, header, rows, notes)]
    flagged = [r for r in run.records if (r.get("cross_check") or {}).get("flagged")]
    if flagged:
        fheader = ["case", "gold", "model", reasoner, "flag", "norm", "conditions (evidence)"]
        frows = [_flag_row(r) for r in flagged]
        fnotes = [
            "permit-unsupported: the model permits but the conditions of the permission "
            "it rests on are unstated or contradicted; prohibit-despite-permission: the "
            "model prohibits but every condition of an applicable permission is met."
        ]
        tables.append(
            Table(f"Flagged cases: {run.method} · {backend_label(run)}", fheader, frows, fnotes)
        )
    return tables


def _flag_row(record: dict[str, Any]) -> list[str]:
    check = record["cross_check"]
    flag = check.get("flag") or {}
    norm = flag.get("norm") or {}
    conditions = []
    for cond in flag.get("conditions") or []:
        evidence = cond.get("evidence") or []
        quote = f' "{evidence[0].get("quote")}"' if evidence else ""
        conditions.append(f"{cond.get('id')}: {cond.get('status')}{quote}")
    return [
        str(record.get("case_id")),
        str(record.get("gold")),
        str(check.get("model_verdict") or "unparsed"),
        str(check.get("reasoner_verdict") or "undetermined"),
        f"{flag.get('kind')}: {flag.get('reason')}",
        f"{norm.get('id')} ({norm.get('paragraph')})",
        "; ".join(conditions),
    ]


def _mcnemar_table(group: tuple[str, str, str, str], runs: list[RunData]) -> Table | None:
    rows = []
    for a, b in combinations(_sorted(runs), 2):
        ca = {r["case_id"]: bool(r.get("correct")) for r in a.records}
        cb = {r["case_id"]: bool(r.get("correct")) for r in b.records}
        common = [cid for cid in ca if cid in cb]
        if not common:
            continue
        result = mcnemar([ca[c] for c in common], [cb[c] for c in common])
        rows.append(
            [
                _row_label(a),
                _row_label(b),
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
    if any(r.test_double for r in runs):
        notes.append(f"Rows marked {TEST_DOUBLE_MARK!r} come from the scripted test backend.")
    return Table(f"McNemar, {group[0]}", header, rows, notes)


def _sorted(runs: Sequence[RunData]) -> list[RunData]:
    return sorted(runs, key=lambda r: (_method_key(r.method), r.backend, r.name))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _f1_figure(group: tuple[str, str, str, str], runs: list[RunData]) -> Figure | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    classes: list[str] = list(runs[0].metrics["scores"]["main"]["classes"])
    series: list[tuple[str, list[float], bool]] = []
    for r in _sorted(runs):
        per = r.metrics["scores"]["main"]["per_class"]
        label = f"{r.method} · {r.backend}" + (" (TEST DOUBLE)" if r.test_double else "")
        series.append((label, [per[c]["f1"] for c in classes], False))
    base_seen: set[str] = set()
    for r in runs:
        for name, text in BASELINE_LABELS.items():
            base = r.metrics.get("baselines", {}).get(name)
            if base is None or name in base_seen:
                continue
            base_seen.add(name)
            per = base["scores"]["main"]["per_class"]
            series.append((text, [per[c]["f1"] for c in classes], True))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(classes) + 0.5 * len(series)), 4.5))
    width = 0.8 / max(1, len(series))
    for i, (label, values, baseline) in enumerate(series):
        xs = [k + (i - (len(series) - 1) / 2) * width for k in range(len(classes))]
        ax.bar(
            xs,
            [100 * v for v in values],
            width,
            label=label,
            hatch="//" if baseline else None,
            alpha=0.6 if baseline else 1.0,
        )
    ax.set_xticks(range(len(classes)))
    ax.set_xticklabels([_CLASS_TITLES.get(c, c) for c in classes])
    ax.set_ylabel("F1 (%)")
    ax.set_ylim(0, 100)
    title = f"Per-class F1, {group[0]}"
    if any(r.test_double for r in runs):
        title += "\nincludes TEST DOUBLE runs: not model accuracy"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Figure(
        title,
        f"per_class_f1_{_slug(group[0])}_{group[3][:8]}.png",
        buf.getvalue(),
        "Bars name the backend of each run; hatched bars are model-free baselines.",
    )


FLAG_CONSTANT = "constant verdict"
FLAG_MAJORITY = "not better than the majority baseline"
FLAG_HEALTH_RULE = "below the model-free health-information rule"
FLAG_EMBEDDED = "embedded model: a wiring check, not accuracy"
FLAG_TEST_DOUBLE = "scripted test double: not model accuracy"


def _baseline_accuracy(run: RunData, name: str) -> float | None:
    base = run.metrics.get("baselines", {}).get(name)
    if not isinstance(base, dict):
        return None
    value = base.get("scores", {}).get("main", {}).get("accuracy")
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
        flags.append(f"{FLAG_CONSTANT} ({answered.pop()})")
    acc = run.metrics["scores"]["main"].get("accuracy")
    majority = _baseline_accuracy(run, "majority")
    if acc is not None and majority is not None and acc <= majority:
        flags.append(FLAG_MAJORITY)
    rule = _baseline_accuracy(run, "health-rule")
    if acc is not None and rule is not None and acc < rule:
        flags.append(FLAG_HEALTH_RULE)
    return flags


def _headline_table(runs: Sequence[RunData]) -> Table:
    rows = []
    for r in runs:
        scores = r.metrics["scores"]["main"]
        ci = scores.get("macro_f1_ci") or {}
        interval = f" [{pct(ci.get('low'), 1)}, {pct(ci.get('high'), 1)}]" if ci else ""
        rows.append(
            [
                r.name,
                r.method,
                backend_label(r),
                r.dataset,
                str(scores.get("n", "?")),
                _acc_cell(scores),
                pct(scores.get("macro_f1")) + interval,
                "; ".join(run_flags(r)) or "—",
            ]
        )
    header = ["run", "method", "backend", "dataset", "n", "accuracy % [95% CI]"]
    header += ["Ma-F1 % [95% CI]", "flags"]
    notes = [
        "Accuracy with 95% Wilson intervals, macro-F1 with bootstrap intervals; unparsed "
        "answers count as wrong. Flags: constant verdict (every answered case got the same "
        "verdict), not better than the majority baseline, below the model-free "
        "health-information rule, and backends whose numbers are not a model's accuracy."
    ]
    return Table("Per run: accuracy and macro-F1", header, rows, notes)


def build_report(runs: Sequence[RunData], *, plots: bool = True) -> Report:
    """Assemble the report's sections from runs.

    Args:
        runs: the runs (any datasets, methods and models).
        plots: draw the per-class F1 figures (needs matplotlib; skipped with a
            warning when it is missing).

    Returns:
        The `Report`.

    Raises:
        PrivacyCIError: no runs.
    """
    if not runs:
        raise PrivacyCIError("no runs to report on")
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
    sections = [overview]
    groups: dict[tuple[str, str, str, str], list[RunData]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    missing_plot = False
    for group, members in groups.items():
        n = members[0].metrics["scores"]["main"]["n"]
        section = Section(f"Dataset {group[0]}", [_dataset_title(group, n)])
        section.tables.append(_accuracy_table(group, members))
        section.tables.append(_per_class_table(group, members))
        comp = _compliance_table(group, members)
        if comp is not None:
            section.tables.append(comp)
        section.tables += [_confusion_table(r) for r in _sorted(members)]
        for r in _sorted(members):
            section.tables += _cross_check_tables(r)
        mc = _mcnemar_table(group, members)
        if mc is not None:
            section.tables.append(mc)
        ordered = _sorted(members)
        section.html_extra = case_drilldown(
            ordered, {id(r): r.name for r in ordered}, f"Cases, {_dataset_title(group, n)}"
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
        "Privacy Checklist evaluation report", now, warnings, sections, _headline_table(runs)
    )


def write_report(
    runs: Sequence[RunData] | Sequence[Path | str], out_dir: Path | str, *, plots: bool = True
) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and the figures' PNG files.

    Args:
        runs: `RunData` or run folders.
        out_dir: the output folder (created).
        plots: draw figures.

    Returns:
        ``{"markdown": path, "html": path, "figures": [...]}``-style mapping of
        ``markdown``, ``html`` and ``figure:<name>`` to paths.
    """
    loaded = [r if isinstance(r, RunData) else load_run(r) for r in runs]
    report = build_report(loaded, plots=plots)
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
