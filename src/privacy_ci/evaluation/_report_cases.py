"""The report's per-case drill-down: one HTML table row per case, filterable offline.

Each row carries ``data-*`` attributes (gold class, any run wrong, runs disagree, any
run failed or unparsed) that a few lines of inline JavaScript filter on; each row
expands (``<details>``) into the case text and every step of every run. Everything
taken from the run files is HTML-escaped, and nothing refers outside the page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privacy_ci.evaluation._report import RunData

__all__ = ["DRILLDOWN_CSS", "DRILLDOWN_SCRIPT", "case_drilldown"]

DRILLDOWN_CSS = (
    ".drilldown .filters{display:flex;flex-wrap:wrap;gap:.5em 1.5em;margin:.5em 0}"
    ".drilldown tr.case td{vertical-align:top}"
    ".drilldown .ok{color:#1a7f37}.drilldown .bad{color:#c62828;font-weight:bold}"
    ".drilldown details pre{white-space:pre-wrap;word-break:break-word;max-width:70em;"
    "background:#f6f6f6;padding:.4em;margin:.2em 0}"
    ".drilldown details[open]{min-width:min(40em,80vw)}"
    ".drilldown dl{margin:.2em 0}.drilldown dt{font-weight:bold}"
)

# Filters on the rows' data attributes; runs once per drill-down on the page.
DRILLDOWN_SCRIPT = """<script>
(function () {
  document.querySelectorAll(".drilldown").forEach(function (box) {
    var form = box.querySelector("form");
    var rows = box.querySelectorAll("tr.case");
    var count = box.querySelector(".shown");
    function apply() {
      var gold = form.elements["gold"].value;
      var wrong = form.elements["wrong"].checked;
      var disagree = form.elements["disagree"].checked;
      var failed = form.elements["failed"].checked;
      var shown = 0;
      rows.forEach(function (row) {
        var d = row.dataset;
        var keep = (!gold || d.gold === gold) && (!wrong || d.wrong === "true") &&
          (!disagree || d.disagree === "true") && (!failed || d.failed === "true");
        row.hidden = !keep;
        shown += keep ? 1 : 0;
      });
      count.textContent = shown + " of " + rows.length + " cases shown";
    }
    form.addEventListener("change", apply);
    form.addEventListener("submit", function (ev) { ev.preventDefault(); });
    apply();
  });
})();
</script>"""

_e = html.escape


def _pre(value: Any) -> str:
    if value is None or value == "":
        return "<pre>—</pre>"
    if not isinstance(value, str):
        value = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<pre>{_e(value)}</pre>"


def _step_html(step: dict[str, Any]) -> str:
    name = str(step.get("name") or "step")
    prompt_name = step.get("prompt_name")
    title = f"{name} ({prompt_name})" if prompt_name else name
    tokens = (
        f"{step.get('prompt_tokens', 0)} prompt + {step.get('completion_tokens', 0)} completion"
    )
    latency = f"{float(step.get('latency_s') or 0.0):.3f} s"
    ids = ", ".join(str(i) for i in step.get("retrieved_ids") or [])
    extra = " · cached" if step.get("cached") else ""
    if step.get("retries"):
        extra += f" · {step['retries']} retries"
    parts = [
        f"<h5>{_e(title)}</h5><dl>",
        f"<dt>tokens · latency</dt><dd>{_e(tokens)} · {_e(latency)}{_e(extra)}</dd>",
        f"<dt>retrieved ids</dt><dd>{_e(ids or '—')}</dd>",
    ]
    if step.get("error"):
        parts.append(f"<dt>error</dt><dd>{_e(str(step['error']))}</dd>")
    parts += [
        f"<dt>prompt</dt><dd>{_pre(step.get('prompt'))}</dd>",
        f"<dt>raw output</dt><dd>{_pre(step.get('raw_output'))}</dd>",
        f"<dt>parsed</dt><dd>{_pre(step.get('parsed'))}</dd>",
        "</dl>",
    ]
    return "".join(parts)


def _wrong(record: dict[str, Any]) -> bool:
    # the runner's own scoring (maps labels through the dataset's task protocol)
    return not bool(record.get("correct"))


def _failed(record: dict[str, Any]) -> bool:
    # an abstention (the ci-reasoner's "undetermined") is an answer, not a failure
    unparsed = record.get("verdict") is None and not record.get("abstained")
    return bool(record.get("error")) or unparsed


def _case_text(records: Sequence[dict[str, Any]]) -> str | None:
    for rec in records:
        for key in ("text", "case_text"):
            if isinstance(rec.get(key), str) and rec[key]:
                return str(rec[key])
    return None


def case_drilldown(runs: Sequence[RunData], names: dict[int, str], title: str) -> str:
    """The drill-down over runs of one dataset, as an HTML fragment.

    Args:
        runs: the runs (same cases).
        names: ``id(run)`` -> the run's display name (its folder's name).
        title: the table's caption.

    Returns:
        The fragment (filter form, table in a scroll container); "" without records.
    """
    by_run = [{str(r["case_id"]): r for r in run.records} for run in runs]
    case_ids: list[str] = []
    seen: set[str] = set()
    for found in by_run:
        for cid in found:
            if cid not in seen:
                seen.add(cid)
                case_ids.append(cid)
    if not case_ids:
        return ""
    golds: list[str] = []
    rows: list[str] = []
    for cid in case_ids:
        recs = [found.get(cid) for found in by_run]
        present = [r for r in recs if r is not None]
        gold = str(present[0].get("gold"))
        if gold not in golds:
            golds.append(gold)
        verdicts = {str(r.get("verdict")) for r in present}
        wrong = any(_wrong(r) for r in present)
        failed = any(_failed(r) for r in present)
        attrs = (
            f'data-case="{_e(cid)}" data-gold="{_e(gold)}" data-wrong="{str(wrong).lower()}" '
            f'data-disagree="{str(len(verdicts) > 1).lower()}" data-failed="{str(failed).lower()}"'
        )
        cells = [f"<td>{_e(cid)}</td>", f"<td>{_e(gold)}</td>"]
        details = []
        text = _case_text(present)
        details.append(
            f"<h4>case text</h4>{_pre(text)}"
            if text
            else "<p>The run folders do not store the case text; the prompts below contain it.</p>"
        )
        for run, rec in zip(runs, recs, strict=True):
            name = names[id(run)]
            if rec is None:
                cells.append(f'<td data-run="{_e(name)}">not judged</td>')
                continue
            verdict = rec.get("verdict")
            shown = str(verdict)
            if verdict is None:
                shown = "abstained" if rec.get("abstained") else "unparsed"
            if rec.get("error"):
                shown += " (error)"
            bad = _wrong(rec)
            mark = '<span class="bad">✗</span>' if bad else '<span class="ok">✓</span>'
            cells.append(
                f'<td data-run="{_e(name)}" data-verdict="{_e(str(verdict))}" '
                f'data-wrong="{str(bad).lower()}">{_e(shown)} {mark}</td>'
            )
            details.append(f"<h4>{_e(name)}: {_e(shown)}</h4>")
            if rec.get("error"):
                details.append(f"<p>error: {_e(str(rec['error']))}</p>")
            details += [_step_html(s) for s in rec.get("steps") or []]
        cells.append(f"<td><details><summary>steps</summary>{''.join(details)}</details></td>")
        rows.append(f'<tr class="case" {attrs}>{"".join(cells)}</tr>')
    options = '<option value="">all</option>' + "".join(
        f'<option value="{_e(g)}">{_e(g)}</option>' for g in golds
    )
    header = ["case", "gold", *(f"{names[id(r)]} ({r.method})" for r in runs), "details"]
    return "".join(
        [
            '<div class="drilldown"><form class="filters">',
            f'<label>gold <select name="gold">{options}</select></label>',
            '<label><input type="checkbox" name="wrong"> wrong only</label>',
            '<label><input type="checkbox" name="disagree"> runs disagree</label>',
            '<label><input type="checkbox" name="failed"> errors / unparsed</label>',
            f'<span class="shown">{len(case_ids)} cases</span></form>',
            f'<div class="table-scroll"><table><caption>{_e(title)}</caption><thead><tr>',
            "".join(f"<th>{_e(h)}</th>" for h in header),
            "</tr></thead><tbody>",
            "\n".join(rows),
            "</tbody></table></div></div>",
        ]
    )
