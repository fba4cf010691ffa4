"""The evaluation report in a real browser (Chromium, through Playwright).

One report, built once for the module from scripted-backend runs
(`tests.evaluation.viewer_runs`): the headline in the first screen of a laptop,
nothing cut off on a phone, the filters and the links to cases doing what they say,
two clicks from the headline to a case's raw output, and no request off the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.evaluation import write_report
from privacy_ci.evaluation._report_chart import CHART_CSS, ChartRun, ChartValue, chart
from tests._browser import PageRequests, open_page

from .viewer_runs import HOSTILE, build_runs

RUNS = ("dp-run", "cot-run", "reasoner-run")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("viewer-browser")
    # in a thread of its own: Playwright's sync API keeps an event loop running in this
    # one once the browser is up, and the runs need one of their own
    with ThreadPoolExecutor(1) as pool:
        folders = pool.submit(build_runs, root / "runs").result()
    written = write_report(folders, root / "report")
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for folder in folders:
        lines = (folder / "records.jsonl").read_text().splitlines()
        records[folder.name] = {r["case_id"]: r for r in map(json.loads, lines)}
    return {"url": written["html"].as_uri(), "records": records}


@pytest.fixture
def errors() -> Iterator[list[str]]:
    """JavaScript errors of the pages a test opens (asserted empty afterwards)."""
    seen: list[str] = []
    yield seen
    assert seen == []


def _open(browser: Any, report: dict[str, Any], errors: list[str], width: int, height: int) -> Any:
    page, _ = _open_recorded(browser, report, errors, width, height)
    return page


def _open_recorded(
    browser: Any, report: dict[str, Any], errors: list[str], width: int, height: int
) -> tuple[Any, PageRequests]:
    page, requests = open_page(browser, report["url"], width=width, height=height)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.reload()  # the listener now sees the load's script run too
    return page, requests


def _shown(page: Any) -> list[str]:
    """Case ids of the drill-down rows now visible."""
    ids: list[str] = page.eval_on_selector_all(
        ".drilldown tr.case", "rows => rows.filter(r => !r.hidden).map(r => r.dataset.case)"
    )
    return ids


def _wrong(records: dict[str, dict[str, Any]]) -> set[str]:
    return {cid for cid, rec in records.items() if not rec["correct"]}


def test_headline_is_in_the_first_screen_at_1280x800(
    browser: Any, report: dict[str, Any], errors: list[str]
) -> None:
    page = _open(browser, report, errors, 1280, 800)
    assert page.evaluate("window.scrollY") == 0
    for selector in (".headline table", ".headline .chart"):
        box = page.locator(selector).bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800, selector
    caption = page.locator(".headline caption").inner_text()
    assert caption == "Per run: accuracy and macro-F1"
    heads = page.locator(".headline tbody th").all_inner_texts()
    assert heads == list(RUNS)
    # the chart states its numbers to a screen reader
    label = page.locator(".headline [role=img]").get_attribute("aria-label")
    assert "dp-run" in label and "accuracy 83" in label and "majority baseline 40" in label
    page.context.close()


_OVERFLOW = """() => {
  const limit = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest(".table-scroll") && !el.classList.contains("table-scroll")) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.left < -0.5 || r.right > limit + 0.5) {
      out.push(el.tagName + "." + el.className + " " + Math.round(r.left) + ".." +
        Math.round(r.right));
    }
  }
  return {out: out, scroll: document.documentElement.scrollWidth, limit: limit};
}"""


def test_nothing_is_cut_off_at_390_px(
    browser: Any, report: dict[str, Any], errors: list[str]
) -> None:
    page = _open(browser, report, errors, 390, 844)
    found = page.evaluate(_OVERFLOW)
    assert found["out"] == [] and found["scroll"] <= found["limit"], found
    # the wide tables scroll inside their containers instead
    widths = page.eval_on_selector_all(
        ".table-scroll", "els => els.map(e => e.scrollWidth > e.clientWidth)"
    )
    assert any(widths)
    # and their captions wrap within the screen, however wide the table
    rights = page.eval_on_selector_all(
        "caption", "els => els.map(e => e.getBoundingClientRect().right)"
    )
    assert rights and max(rights) <= 390
    # an opened case stays readable without scrolling sideways
    page.locator(".drilldown button.open").first.click()
    body = page.locator(".drilldown tr.detail:not([hidden]) .detail-body").first
    box = body.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    found = page.evaluate(_OVERFLOW)
    assert found["out"] == [] and found["scroll"] <= found["limit"], found
    page.context.close()


def test_wrong_only_shows_exactly_the_wrong_cases(
    browser: Any, report: dict[str, Any], errors: list[str]
) -> None:
    records = report["records"]
    page = _open(browser, report, errors, 1280, 800)
    every = set(records["dp-run"])
    assert set(_shown(page)) == every
    page.get_by_label("wrong only").check()
    wrong_anywhere = set().union(*(_wrong(records[run]) for run in RUNS))
    assert set(_shown(page)) == wrong_anywhere != every
    # wrong is not disagreeing: on case 20 the runs agree and all are wrong
    assert "toy-0020" in wrong_anywhere
    page.get_by_label("wrong only").uncheck()
    page.get_by_label("runs disagree").check()
    verdicts = {c: {str(records[run][c]["verdict"]) for run in RUNS} for c in every}
    assert set(_shown(page)) == {c for c in every if len(verdicts[c]) > 1}
    assert "toy-0020" not in _shown(page)
    page.get_by_label("runs disagree").uncheck()
    page.get_by_label("wrong only").check()
    assert page.locator(".drilldown .shown").inner_text().startswith(f"{len(wrong_anywhere)} of")
    page.locator(".drilldown select[name=run]").select_option("dp-run")
    assert (
        set(_shown(page))
        == _wrong(records["dp-run"])
        == {f"toy-{i:04d}" for i in (3, 6, 13, 20, 27)}
    )
    page.get_by_label("wrong only").uncheck()
    page.get_by_label("errors or unparsed").check()
    assert _shown(page) == ["toy-0003"]
    page.context.close()


def test_a_confusion_cell_and_mcnemar_b_list_their_cases(
    browser: Any, report: dict[str, Any], errors: list[str]
) -> None:
    records = report["records"]["dp-run"]
    page = _open(browser, report, errors, 1280, 800)
    table = page.locator("table", has=page.locator("caption", has_text="Confusion: dp on toy"))
    links = table.locator("a.case-link")
    assert links.count() >= 4
    for i in range(links.count()):
        link = links.nth(i)
        gold, predicted = link.evaluate(
            "a => [a.closest('tr').querySelector('th').textContent,"
            " a.closest('table').querySelectorAll('thead th')[a.closest('td').cellIndex]"
            ".textContent]"
        )
        link.click()
        expected = {
            cid
            for cid, rec in records.items()
            if _title(rec["gold_class"]) == gold and _title(rec["predicted_class"]) == predicted
        }
        assert set(_shown(page)) == expected and len(expected) == int(link.inner_text())
        assert page.locator(".drilldown .selection").is_visible()
    # McNemar's b: the cases only run A got right
    mcnemar = page.locator("table", has=page.locator("caption", has_text="McNemar"))
    row = mcnemar.locator("tr", has_text="dp-run: dp").filter(has_text="cot-run: cot-auto")
    row.locator("a.case-link").first.click()
    cot = report["records"]["cot-run"]
    only_dp = {c for c in records if records[c]["correct"] and not cot[c]["correct"]}
    assert set(_shown(page)) == only_dp
    page.locator(".drilldown .selection button").click()
    assert len(_shown(page)) == len(records)
    page.context.close()


def _title(value: str | None) -> str:
    from privacy_ci.evaluation._report_cases import class_title

    return class_title(value or "unparsed")


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_two_clicks_from_the_headline_to_a_raw_output(
    browser: Any, report: dict[str, Any], errors: list[str], width: int, height: int
) -> None:
    page = _open(browser, report, errors, width, height)
    headline_wrong = page.locator(".headline tbody tr", has_text="dp-run").locator("a.case-link")
    headline_wrong.nth(1).click()  # 1: dp-run's wrong cases
    assert set(_shown(page)) == _wrong(report["records"]["dp-run"])
    row = page.locator(".drilldown tr.case", has_text="toy-0006")
    row.locator("button.open").click()  # 2: the case
    detail = page.locator(".drilldown tr.detail:not([hidden])")
    assert detail.count() == 1
    raw = detail.locator("pre", has_text="Choice: B. Permitted").first
    assert raw.is_visible()
    box = raw.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    assert detail.locator("pre", has_text="Toy event number 6:").first.is_visible()
    # the ci-reasoner's deciding rule and the fact it read, with its quote
    reasoning = detail.locator(".reasoning").first
    assert reasoning.is_visible() and "deciding rule: 164." in reasoning.inner_text()
    assert "“Toy event number 6:" in reasoning.inner_text()
    page.context.close()


def test_the_file_makes_no_network_request(
    browser: Any, report: dict[str, Any], errors: list[str]
) -> None:
    page, requests = _open_recorded(browser, report, errors, 1280, 800)
    page.locator(".drilldown tr.case", has_text="toy-0003").locator("button.open").click()
    detail = page.locator(".drilldown tr.detail:not([hidden])")
    assert HOSTILE in detail.inner_text()  # shown as text, neither loaded nor run
    page.wait_for_load_state("networkidle")
    assert requests.urls and requests.external == []
    assert page.locator("img[src^='http'], script[src], link[href]").count() == 0
    page.context.close()


def test_a_zero_bar_is_drawn_visibly(browser: Any, tmp_path: Path) -> None:
    fragment = chart(
        [
            ChartRun(
                "r",
                "m · b",
                (ChartValue("accuracy", 0.0, 0.0, 0.1, digits=0), ChartValue("macro-F1", None)),
            )
        ],
        "zero",
    )
    file = tmp_path / "zero.html"
    file.write_text(f"<style>{CHART_CSS}</style>{fragment}", encoding="utf-8")
    page, _ = open_page(browser, file.as_uri(), width=600, height=300)
    bars = page.locator(".chart-bar")
    assert bars.count() == 1  # no bar for an undefined score, which says so
    box = bars.first.bounding_box()
    assert box is not None and box["width"] >= 2
    assert page.locator(".chart-metric .chart-value").all_inner_texts() == ["0", "undefined"]
    page.context.close()
