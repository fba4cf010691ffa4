"""The report's per-case drill-down: one HTML table row per case, filterable offline.

Each case row carries ``data-*`` attributes (gold class, any run wrong, runs
disagree, any run failed or unparsed; per run cell: its verdict, wrong, failed)
that a few lines of inline JavaScript filter on. The case id is a button that opens
the row below it: the case text, and for every run its verdict, how the
ci-reasoner decided where the run has it, then every step: tokens, latency,
retrieved ids, raw output, parsed result and the prompt. Without JavaScript every
detail row is simply shown.

The ci-reasoner's records come in two shapes. Runs of the facts-then-law judge
(`privacy_ci.reasoning.FactJudgment.as_dict`: ``facts`` and ``decision``) show
every fact with its value, source and quote, the deciding rule, the presumptions
the verdict rests on and the questions that would settle it (`is_fact_judgment`).
Older runs of the condition-catalogue reasoner (``applicability`` and
``candidates``) keep showing their norms with conditions and quoted evidence
(`is_reasoning`), as do checklist-qa records and cross-checks of that shape.

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
    "is_fact_judgment",
    "is_failed",
    "is_reasoning",
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
    ".detail-body table.facts{margin:.2em 0;font-size:.9em}"
    ".detail-body table.facts td,.detail-body table.facts th{padding:.1em .5em;"
    "vertical-align:top;text-align:left}"
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
    """Whether a step's parsed result is the condition-catalogue reasoner's reasoning
    (`Reasoning.as_dict`, the ci-reasoner's records before the facts-then-law judge)."""
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


def is_fact_judgment(parsed: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a step's parsed result is a facts-then-law judgment (`FactJudgment.as_dict`:
    the facts with their provenance and the law's decision)."""
    return (
        isinstance(parsed, dict)
        and isinstance(parsed.get("facts"), dict)
        and isinstance(parsed.get("decision"), dict)
    )


def _fact_cells(name: str, fact: Any, used: bool, gold: Mapping[str, Any]) -> str:
    if not isinstance(fact, Mapping):
        fact = {"value": fact}
    value = _e(str(fact.get("value")))
    if name in gold and gold[name] != fact.get("value"):
        value += f' <span class="bad">✗ gold: {_e(str(gold[name]))}</span>'
    elif name in gold:
        value += ' <span class="ok">✓<span class="sr"> as the gold</span></span>'
    quote = str(fact.get("quote") or "")
    where = ""
    if fact.get("start") is not None and fact.get("end") is not None:
        where = f" (characters {fact['start']}-{fact['end']})"
    shown = f"“{_e(quote)}”{_e(where)}" if quote else "—"
    note = f'<br><span class="meta">{_e(str(fact["note"]))}</span>' if fact.get("note") else ""
    mark = " <strong>(used)</strong>" if used else ""
    return (
        f'<tr><th scope="row">{_e(name)}{mark}</th><td>{value}</td>'
        f"<td>{_e(str(fact.get('source') or ''))}</td><td>{shown}{note}</td></tr>"
    )


def _fact_judgment_html(parsed: Mapping[str, Any], gold: Mapping[str, Any] | None = None) -> str:
    gold = gold or {}
    decision = parsed.get("decision") or {}
    verdict = decision.get("verdict", parsed.get("verdict"))
    shown = "undetermined" if verdict is None else class_title(verdict)
    if not decision.get("determined", parsed.get("determined", True)):
        shown += " (on presumptions)"
    parts = [f"<p><strong>ci-reasoner</strong>: {_e(shown)}"]
    if parsed.get("law"):
        parts.append(f' <span class="meta">({_e(str(parsed["law"]))})</span>')
    parts.append("</p>")
    rule = decision.get("rule")
    if isinstance(rule, Mapping):
        parts.append(f"<p>deciding rule: {_norm_line(rule)}</p>")
    facts = parsed.get("facts") or {}
    found = decision.get("used")
    used: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    rows = [_fact_cells(str(k), v, k in used, gold) for k, v in facts.items()]
    # presumed facts the rule read are not among the facts read: show them too
    rows += [
        _fact_cells(str(k), v, True, gold)
        for k, v in used.items()
        if k not in facts and isinstance(v, Mapping)
    ]
    rows += [  # gold facts it has no value for
        f'<tr><th scope="row">{_e(str(k))}</th><td>— <span class="bad">✗ gold: '
        f"{_e(str(v))}</span></td><td>not read</td><td>—</td></tr>"
        for k, v in gold.items()
        if k not in facts and k not in used
    ]
    if rows:
        parts.append(_facts_table(rows))
    else:
        parts.append('<p class="meta">no facts read or given</p>')
    presumed = decision.get("presumed")
    if isinstance(presumed, Mapping) and presumed:
        shown_presumed = ", ".join(f"{k} = {v}" for k, v in presumed.items())
        parts.append(f"<p>presumed (not stated): {_e(shown_presumed)}</p>")
    parts.append(_questions_html(decision.get("questions")))
    parts.append(_near_misses_html(decision.get("near_misses")))
    return f'<div class="reasoning">{"".join(parts)}</div>'


def _facts_table(rows: list[str]) -> str:
    return (
        '<table class="facts"><thead><tr><th scope="col">fact</th><th scope="col">'
        'value</th><th scope="col">source</th><th scope="col">quote</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _questions_html(questions: Any) -> str:
    """The questions a verdict on presumptions hinges on (`Question.as_dict`)."""
    found = [q for q in questions or [] if isinstance(q, Mapping)]
    if not found:
        return ""
    items = "".join(
        f"<li>{_e(str(q.get('question') or q.get('fact')))} — {_e(str(q.get('text') or ''))}</li>"
        for q in found
    )
    return f"<p>questions that would settle it:</p><ul>{items}</ul>"


def _near_misses_html(near_misses: Any) -> str:
    """Permissions that fail on one fact (`NearMiss.as_dict`), folded."""
    misses = [m for m in near_misses or [] if isinstance(m, Mapping)]
    if not misses:
        return ""
    items = "".join(
        f"<li>{_norm_line({**m, 'id': m.get('rule', m.get('id'))})}: "
        + _e(
            "; ".join(
                f"{f.get('fact')} is {f.get('value') or 'unknown'}, needs "
                + " or ".join(str(x) for x in f.get("needs") or [])
                for f in m.get("failing") or []
                if isinstance(f, Mapping)
            )
        )
        + "</li>"
        for m in misses
    )
    return _folded(f"permissions that nearly apply ({len(misses)})", f"<ul>{items}</ul>")


def _cross_check_html(check: Mapping[str, Any], gold: Mapping[str, Any] | None = None) -> str:
    """A record's cross-check (`CrossCheck.as_dict`): the law's verdict on the facts read,
    and for a flag its deciding rule, the facts it used (against the gold facts, when the
    case has them), the near misses and the questions. Older runs' flags (the condition
    catalogue's norm and conditions) keep their shape."""
    reasoner = str(check.get("reasoner") or "ci-reasoner")
    verdict = check.get("reasoner_verdict")
    new_shape = "reasoner_determined" in check
    if verdict is None:
        shown = "nothing: it failed" if new_shape else "undetermined"
    else:
        shown = class_title(verdict)
        if new_shape and not check.get("reasoner_determined"):
            shown += " (on presumptions)"
    agree = "agrees" if check.get("agree") else "disagrees"
    parts = [f"<p><strong>cross-check</strong>: the {_e(reasoner)} says {_e(shown)} ({agree})"]
    if check.get("error"):
        parts.append(f"; it failed: {_e(str(check['error']))}")
    parts.append("</p>")
    flag = check.get("flag")
    if not isinstance(flag, dict):
        if check.get("reasoner_rule"):
            parts.append(f'<p class="meta">rule: {_e(str(check["reasoner_rule"]))}</p>')
        return f'<div class="reasoning">{"".join(parts)}</div>'
    parts.append(f"<p>flag {_e(str(flag.get('kind')))}: {_e(str(flag.get('reason')))}</p>")
    rule = flag.get("rule")
    if isinstance(rule, Mapping):
        parts.append(f"<p>deciding rule: {_norm_line(rule)}</p>")
        facts = flag.get("facts")
        if isinstance(facts, Mapping) and facts:
            rows = [_fact_cells(str(k), v, False, gold or {}) for k, v in facts.items()]
            parts.append("<p>facts the rule used:</p>" + _facts_table(rows))
        parts.append(_questions_html(flag.get("questions")))
        parts.append(_near_misses_html(flag.get("near_misses")))
    else:  # older runs: the condition catalogue
        norm = flag.get("norm")
        if isinstance(norm, dict):
            parts.append(f"<p>norm: {_norm_line(norm)}</p>")
        parts.append(_conditions(flag.get("conditions")))
    return f'<div class="reasoning">{"".join(parts)}</div>'


def _step_html(step: Mapping[str, Any], gold: Mapping[str, Any] | None = None) -> str:
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
    if is_fact_judgment(parsed):
        parts.append(_fact_judgment_html(parsed, gold))
    elif is_reasoning(parsed):
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
        gold_facts = next(
            (r["gold_facts"] for r in present if isinstance(r.get("gold_facts"), dict)), None
        )
        if gold_facts is not None:
            shown_gold = ", ".join(f"{k} = {v}" for k, v in gold_facts.items()) or "none stated"
            details.append(f'<p class="meta">gold facts: {_e(shown_gold)}</p>')
        pair = next((r["pair_id"] for r in present if r.get("pair_id")), None)
        if pair is not None:
            details.append(f'<p class="meta">minimal pair {_e(str(pair))}</p>')
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
            gold_facts = rec.get("gold_facts") if isinstance(rec.get("gold_facts"), dict) else None
            check = rec.get("cross_check")
            if isinstance(check, dict):
                details.append(_cross_check_html(check, gold_facts))
            details += [
                _step_html(s, gold_facts) for s in rec.get("steps") or [] if isinstance(s, dict)
            ]
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
