"""The report's per-case drill-down: one HTML table row per case, filterable offline.

Each case row carries ``data-*`` attributes (gold class, any run wrong, runs
disagree, any run failed or unparsed; per run cell: its verdict, wrong, failed)
that a few lines of inline JavaScript filter on. The case id is a button that opens
the row below it: the case text, and for every run its verdict, the ci-reasoner's
conditions with their quoted evidence where the run has them (its own reasoning,
checklist-qa's, or a cross-check), then every step: tokens, latency, retrieved ids,
raw output, parsed result and the prompt. Without JavaScript every detail row is
simply shown.

Links elsewhere in the report (a confusion cell, McNemar's b and c, the headline's
counts) carry their case ids (``a.case-link``, ``data-cases``); following one shows
exactly those cases here. Everything taken from the run files is HTML-escaped, and
nothing refers outside the page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from privacy_ci.evaluation._report import RunData

__all__ = [
    "CLASS_TITLES",
    "DRILLDOWN_CSS",
    "DRILLDOWN_SCRIPT",
    "case_drilldown",
    "class_title",
    "is_failed",
    "is_wrong",
    "verdict_text",
]

CLASS_TITLES = {
    "permit": "Permit",
    "prohibit": "Prohibit",
    "not_applicable": "Not applicable",
    "applicable": "Applicable",
    "unparsed": "unparsed",
    "undetermined": "undetermined",
}
"""The one wording of the classes, everywhere in the report."""


def class_title(value: object) -> str:
    """A class or verdict as the report words it (``not_applicable`` -> ``Not applicable``)."""
    text = str(value)
    return CLASS_TITLES.get(text, text)


DRILLDOWN_CSS = (
    ".drilldown .filters{display:flex;flex-wrap:wrap;gap:.5em 1.5em;margin:.5em 0;"
    "align-items:center}"
    ".drilldown .selection{background:#e8f0fe;border:1px solid #4a6fa5;padding:.15em .5em}"
    ".drilldown tr.case td,.drilldown tr.case th{vertical-align:top}"
    ".drilldown button.open{font:inherit;background:none;border:0;padding:0;color:#0b57d0;"
    "text-decoration:underline;cursor:pointer;text-align:left;white-space:nowrap}"
    ".drilldown button.open::before{content:'\\25B8 ';display:inline-block;width:1em}"
    ".drilldown button.open[aria-expanded=true]::before{content:'\\25BE '}"
    ".drilldown .ok{color:#1a7f37}.drilldown .bad{color:#b3261e;font-weight:bold}"
    ".drilldown tr.detail>td{background:#fafafa}"
    ".detail-body{position:sticky;left:0;max-width:min(70em,calc(100vw - 3.5em))}"
    ".detail-body pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f0f0f0;"
    "padding:.4em;margin:.2em 0}"
    ".detail-body h4{margin:.8em 0 .2em}.detail-body h5{margin:.6em 0 .1em}"
    ".detail-body .meta{margin:.1em 0;color:#444;font-size:.9em;overflow-wrap:anywhere}"
    ".detail-body ul{margin:.2em 0;padding-left:1.2em}"
    ".st-met{color:#1a7f37;font-weight:bold}.st-contradicted,.st-not_met{color:#b3261e;"
    "font-weight:bold}.st-unstated{color:#555;font-weight:bold}"
    ".sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);"
    "white-space:nowrap}"
)

# Filters on the rows' data attributes; opens detail rows; follows case links.
DRILLDOWN_SCRIPT = """<script>
(function () {
  function each(list, fn) { Array.prototype.forEach.call(list, fn); }
  each(document.querySelectorAll(".drilldown"), function (box) {
    box.classList.add("js");
    var form = box.querySelector("form");
    var rows = box.querySelectorAll("tr.case");
    var count = box.querySelector(".shown");
    var chip = box.querySelector(".selection");
    var chipText = box.querySelector(".selection-text");
    var selection = null;
    function runCell(row, run) {
      var found = null;
      each(row.querySelectorAll("td[data-run]"), function (td) {
        if (td.dataset.run === run) { found = td; }
      });
      return found;
    }
    function apply() {
      var gold = form.elements["gold"].value;
      var run = form.elements["run"].value;
      var wrong = form.elements["wrong"].checked;
      var disagree = form.elements["disagree"].checked;
      var failed = form.elements["failed"].checked;
      var shown = 0;
      each(rows, function (row) {
        var d = row.dataset;
        var cell = run ? runCell(row, run) : null;
        var isWrong = run ? !!cell && cell.dataset.wrong === "true" : d.wrong === "true";
        var isFailed = run ? !!cell && cell.dataset.failed === "true" : d.failed === "true";
        var keep = (!selection || selection[d.case] === true) &&
          (!gold || d.gold === gold) && (!wrong || isWrong) &&
          (!disagree || d.disagree === "true") && (!failed || isFailed);
        row.hidden = !keep;
        var button = row.querySelector("button.open");
        var detail = document.getElementById(button.getAttribute("aria-controls"));
        detail.hidden = !keep || button.getAttribute("aria-expanded") !== "true";
        shown += keep ? 1 : 0;
      });
      count.textContent = shown + " of " + rows.length + " cases shown";
    }
    box.selectCases = function (ids, label) {
      form.reset();
      selection = Object.create(null);
      ids.forEach(function (id) { selection[id] = true; });
      chipText.textContent = label + " (" + ids.length + ")";
      chip.hidden = false;
      apply();
    };
    chip.querySelector("button").addEventListener("click", function () {
      selection = null;
      chip.hidden = true;
      apply();
    });
    each(box.querySelectorAll("button.open"), function (button) {
      button.addEventListener("click", function () {
        var open = button.getAttribute("aria-expanded") !== "true";
        button.setAttribute("aria-expanded", open ? "true" : "false");
        document.getElementById(button.getAttribute("aria-controls")).hidden = !open;
      });
    });
    form.addEventListener("change", apply);
    form.addEventListener("submit", function (ev) { ev.preventDefault(); });
    apply();
  });
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest ? ev.target.closest("a.case-link") : null;
    if (!link) { return; }
    var box = document.getElementById(link.getAttribute("href").slice(1));
    if (!box || !box.selectCases) { return; }
    ev.preventDefault();
    box.selectCases(JSON.parse(link.dataset.cases), link.dataset.label);
    box.scrollIntoView();
    box.focus({preventScroll: true});
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


def _folded(summary: str, body: str) -> str:
    return f"<details><summary>{_e(summary)}</summary>{body}</details>"


def _quote(evidence: Any) -> str:
    if not isinstance(evidence, list) or not evidence:
        return ""
    first = evidence[0] if isinstance(evidence[0], dict) else {}
    quote = first.get("quote")
    if not quote:
        return ""
    where = ""
    if first.get("start") is not None and first.get("end") is not None:
        where = f" (characters {first['start']}-{first['end']})"
    return f" — “{_e(str(quote))}”{_e(where)}"


def _conditions(conditions: Any) -> str:
    if not isinstance(conditions, list) or not conditions:
        return '<p class="meta">no conditions to check</p>'
    items = []
    for cond in conditions:
        if not isinstance(cond, dict):
            continue
        status = str(cond.get("status") or "?")
        question = cond.get("question") or cond.get("id") or ""
        paragraph = f" ({cond['paragraph']})" if cond.get("paragraph") else ""
        items.append(
            f'<li><span class="st-{_e(status)}">{_e(status)}</span>: '
            f"{_e(str(question))}{_e(paragraph)}{_quote(cond.get('evidence'))}</li>"
        )
    return f"<ul>{''.join(items)}</ul>"


def _norm_line(norm: Mapping[str, Any]) -> str:
    title = f" {norm['title']}" if norm.get("title") else ""
    effect = f" [{norm['effect']}]" if norm.get("effect") else ""
    holds = ""
    if "holds" in norm:
        holds = " — holds" if norm.get("holds") else " — does not hold"
    return _e(f"{norm.get('id')} ({norm.get('paragraph')}){title}{effect}{holds}")


def is_reasoning(parsed: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a step's parsed result is the ci-reasoner's reasoning (`Reasoning.as_dict`)."""
    return isinstance(parsed, dict) and "candidates" in parsed and "applicability" in parsed


def _reasoning_html(parsed: Mapping[str, Any]) -> str:
    verdict = parsed.get("verdict")
    shown = "undetermined" if verdict is None else class_title(verdict)
    parts = [f"<p><strong>ci-reasoner</strong>: {_e(shown)} ({_e(str(parsed.get('rule')))})</p>"]
    applicability = parsed.get("applicability") or {}
    reasons = applicability.get("reasons") or []
    if reasons:
        parts.append(
            "<ul>" + "".join(f"<li>applicability: {_e(str(r))}</li>" for r in reasons) + "</ul>"
        )
    deciding = parsed.get("deciding")
    if isinstance(deciding, dict):
        parts.append(f"<p>deciding norm: {_norm_line(deciding)}</p>")
        parts.append(_conditions(deciding.get("conditions")))
    deciding_id = deciding.get("id") if isinstance(deciding, dict) else None
    others = [
        c
        for c in parsed.get("candidates") or []
        if isinstance(c, dict) and (deciding_id is None or c.get("id") != deciding_id)
    ]
    if others:
        body = "".join(f"<p>{_norm_line(c)}</p>{_conditions(c.get('conditions'))}" for c in others)
        parts.append(_folded(f"other candidate norms ({len(others)})", body))
    return f'<div class="reasoning">{"".join(parts)}</div>'


def _cross_check_html(check: Mapping[str, Any]) -> str:
    reasoner = str(check.get("reasoner") or "ci-reasoner")
    verdict = check.get("reasoner_verdict")
    shown = "undetermined" if verdict is None else class_title(verdict)
    agree = "agrees" if check.get("agree") else "disagrees"
    parts = [f"<p><strong>cross-check</strong>: the {_e(reasoner)} says {_e(shown)} ({agree})"]
    if check.get("error"):
        parts.append(f"; it failed: {_e(str(check['error']))}")
    parts.append("</p>")
    flag = check.get("flag")
    if isinstance(flag, dict):
        parts.append(f"<p>flag {_e(str(flag.get('kind')))}: {_e(str(flag.get('reason')))}</p>")
        norm = flag.get("norm")
        if isinstance(norm, dict):
            parts.append(f"<p>norm: {_norm_line(norm)}</p>")
        parts.append(_conditions(flag.get("conditions")))
    return f'<div class="reasoning">{"".join(parts)}</div>'


def _step_html(step: Mapping[str, Any]) -> str:
    name = str(step.get("name") or "step")
    prompt_name = step.get("prompt_name")
    title = f"step {name} (prompt {prompt_name})" if prompt_name else f"step {name}"
    tokens = (
        f"{step.get('prompt_tokens', 0)} prompt + {step.get('completion_tokens', 0)} "
        "completion tokens"
    )
    latency = f"{float(step.get('latency_s') or 0.0):.3f} s"
    ids = ", ".join(str(i) for i in step.get("retrieved_ids") or [])
    extra = " · cached" if step.get("cached") else ""
    if step.get("retries"):
        extra += f" · {step['retries']} retries"
    parts = [
        f"<h5>{_e(title)}</h5>",
        f'<p class="meta">{_e(tokens)} · {_e(latency)}{_e(extra)} · retrieved ids: '
        f"{_e(ids or '—')}</p>",
    ]
    if step.get("error"):
        parts.append(f'<p class="meta">error: {_e(str(step["error"]))}</p>')
    parsed = step.get("parsed")
    if is_reasoning(parsed):
        parts.append(_reasoning_html(parsed))
    raw = step.get("raw_output")
    if raw or prompt_name:
        parts.append(f'<p class="meta">raw output</p>{_pre(raw)}')
    shown = _pre(parsed)
    if isinstance(parsed, (dict, list)) and len(shown) > 400:
        parts.append(_folded("parsed result (JSON)", shown))
    else:
        parts.append(f'<p class="meta">parsed result</p>{shown}')
    prompt = step.get("prompt")
    if prompt:
        parts.append(_folded(f"prompt ({len(str(prompt)):,} characters)", _pre(prompt)))
    return f'<div class="step">{"".join(parts)}</div>'


def is_wrong(record: Mapping[str, Any]) -> bool:
    """The runner's own scoring (labels mapped through the dataset's task protocol)."""
    return not bool(record.get("correct"))


def is_failed(record: Mapping[str, Any]) -> bool:
    """An error or an unparsed answer (an abstention is an answer, not a failure)."""
    unparsed = record.get("verdict") is None and not record.get("abstained")
    return bool(record.get("error")) or unparsed


def verdict_text(record: Mapping[str, Any]) -> str:
    """A record's verdict as shown: the class title, ``abstained`` or ``unparsed``."""
    verdict = record.get("verdict")
    shown = class_title(verdict)
    if verdict is None:
        shown = "abstained" if record.get("abstained") else "unparsed"
    if record.get("error"):
        shown += " (error)"
    return shown


def _case_text(records: Sequence[Mapping[str, Any]], fallback: str | None) -> str | None:
    for rec in records:
        for key in ("text", "case_text"):
            if isinstance(rec.get(key), str) and rec[key]:
                return str(rec[key])
    return fallback


def case_drilldown(
    runs: Sequence[RunData],
    names: Mapping[int, str],
    title: str,
    *,
    box_id: str = "cases",
    texts: Mapping[str, str] | None = None,
) -> str:
    """The drill-down over runs of one dataset, as an HTML fragment.

    Args:
        runs: the runs (same cases).
        names: ``id(run)`` -> the run's display name.
        title: the table's caption.
        box_id: the element id links to these cases point at (``href="#box_id"``).
        texts: case id -> case text, for records that do not carry it (older runs).

    Returns:
        The fragment (filter form, table in a scroll container); "" without records.
    """
    by_run = [{str(r["case_id"]): r for r in run.records} for run in runs]
    case_ids: list[str] = list(dict.fromkeys(cid for found in by_run for cid in found))
    if not case_ids:
        return ""
    texts = texts or {}
    golds: list[str] = []
    rows: list[str] = []
    columns = 2 + len(runs)
    for number, cid in enumerate(case_ids):
        recs = [found.get(cid) for found in by_run]
        present = [r for r in recs if r is not None]
        gold = str(present[0].get("gold"))
        if gold not in golds:
            golds.append(gold)
        verdicts = {str(r.get("verdict")) for r in present}
        wrong = any(is_wrong(r) for r in present)
        failed = any(is_failed(r) for r in present)
        detail_id = f"{box_id}-d{number}"
        attrs = (
            f'data-case="{_e(cid)}" data-gold="{_e(gold)}" data-wrong="{str(wrong).lower()}" '
            f'data-disagree="{str(len(verdicts) > 1).lower()}" data-failed="{str(failed).lower()}"'
        )
        cells = [
            f'<th scope="row"><button type="button" class="open" aria-expanded="false" '
            f'aria-controls="{detail_id}">{_e(cid)}</button></th>',
            f"<td>{_e(class_title(gold))}</td>",
        ]
        text = _case_text(present, texts.get(cid))
        details = [
            f"<h4>case text</h4>{_pre(text)}"
            if text
            else "<p>The run folders do not store the case text, and its dataset could not "
            "be read; the prompts below contain it.</p>"
        ]
        for run, rec in zip(runs, recs, strict=True):
            name = names[id(run)]
            if rec is None:
                cells.append(f'<td data-run="{_e(name)}">not judged</td>')
                continue
            shown = verdict_text(rec)
            bad = is_wrong(rec)
            mark = (
                '<span class="bad">✗<span class="sr"> wrong</span></span>'
                if bad
                else '<span class="ok">✓<span class="sr"> right</span></span>'
            )
            cells.append(
                f'<td data-run="{_e(name)}" data-verdict="{_e(str(rec.get("verdict")))}" '
                f'data-wrong="{str(bad).lower()}" data-failed="{str(is_failed(rec)).lower()}">'
                f"{_e(shown)} {mark}</td>"
            )
            details.append(
                f"<h4>{_e(name)} ({_e(run.method)} · {_e(run.backend)}): {_e(shown)} "
                f"{'✗ wrong' if bad else '✓ right'}</h4>"
            )
            if rec.get("error"):
                details.append(f"<p>error: {_e(str(rec['error']))}</p>")
            check = rec.get("cross_check")
            if isinstance(check, dict):
                details.append(_cross_check_html(check))
            details += [_step_html(s) for s in rec.get("steps") or [] if isinstance(s, dict)]
        rows.append(f'<tr class="case" {attrs}>{"".join(cells)}</tr>')
        rows.append(
            f'<tr class="detail" id="{detail_id}"><td colspan="{columns}">'
            f'<div class="detail-body">{"".join(details)}</div></td></tr>'
        )
    gold_options = '<option value="">all</option>' + "".join(
        f'<option value="{_e(g)}">{_e(class_title(g))}</option>' for g in golds
    )
    run_options = '<option value="">any run</option>' + "".join(
        f'<option value="{_e(names[id(r)])}">{_e(names[id(r)])}</option>' for r in runs
    )
    header = [
        '<th scope="col">case</th>',
        '<th scope="col">gold</th>',
        *(f'<th scope="col">{_e(names[id(r)])} ({_e(r.method)})</th>' for r in runs),
    ]
    return "".join(
        [
            f'<div class="drilldown" id="{_e(box_id)}" tabindex="-1"><form class="filters">',
            f'<label>gold <select name="gold">{gold_options}</select></label>',
            f'<label>run <select name="run">{run_options}</select></label>',
            '<label><input type="checkbox" name="wrong"> wrong only</label>',
            '<label><input type="checkbox" name="disagree"> runs disagree</label>',
            '<label><input type="checkbox" name="failed"> errors or unparsed</label>',
            '<span class="selection" hidden><span class="selection-text"></span> '
            '<button type="button">show all</button></span>',
            f'<span class="shown" aria-live="polite">{len(case_ids)} cases</span></form>',
            f'<div class="table-scroll"><table><caption>{_e(title)} (select a case id to see '
            "its text, prompts and raw outputs)</caption><thead><tr>",
            "".join(header),
            "</tr></thead><tbody>",
            "\n".join(rows),
            "</tbody></table></div></div>",
        ]
    )
