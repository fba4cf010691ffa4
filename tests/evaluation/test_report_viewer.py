"""The report's headline (per-run numbers, flags, chart) and the HTML per-case drill-down,
as text: the browser checks are in `test_report_browser`."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from privacy_ci.cases import load_dataset
from privacy_ci.ci import Verdict
from privacy_ci.evaluation import build_report, load_run, run_eval_sync, write_report
from privacy_ci.evaluation._report import (
    FLAG_CONSTANT,
    FLAG_EMBEDDED,
    FLAG_HEALTH_RULE,
    FLAG_MAJORITY,
    case_texts_from_datasets,
    digits_for,
    run_flags,
)
from privacy_ci.judging import Event, Judgment, StepRecord

from . import HashMethod, toy_dataset

# the toy dataset's labels cycle on the case index (see `toy_dataset`)
_CYCLE = [
    Verdict.PERMIT,
    Verdict.PROHIBIT,
    Verdict.NOT_APPLICABLE,
    Verdict.NOT_APPLICABLE,
    Verdict.PERMIT,
]
_HOSTILE = '<script>alert("x")</script> see https://example.org/x'


@dataclass
class MostlyRight(HashMethod):
    """Gold for most cases, a wrong verdict on every 7th, unparsed (with a hostile raw
    output) on case 3."""

    async def judge(self, event: Event) -> Judgment:
        index = int(event.id.rsplit("-", 1)[1])
        verdict: Verdict | None = _CYCLE[index % len(_CYCLE)]
        if index % 7 == 6:
            verdict = Verdict.PROHIBIT if verdict != Verdict.PROHIBIT else Verdict.PERMIT
        raw = f"Choice: {verdict.value if verdict else '?'}"
        if index == 3:
            verdict, raw = None, _HOSTILE
        step = StepRecord(
            name="decide",
            prompt_name="dp",
            prompt=f"judge {event.text}",
            raw_output=raw,
            parsed=None if verdict is None else verdict.value,
            retrieved_ids=["164.502"],
            prompt_tokens=12,
            completion_tokens=3,
            latency_s=0.25,
        )
        return Judgment(self.name, verdict, rationale=raw, steps=[step], backend=self.backend)


@dataclass
class Constant(HashMethod):
    """Always Prohibit."""

    async def judge(self, event: Event) -> Judgment:
        step = StepRecord(name="decide", prompt=f"judge {event.text}", raw_output="Prohibit")
        return Judgment(self.name, Verdict.PROHIBIT, steps=[step], backend=self.backend)


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("viewer")
    ds = toy_dataset(30)
    out = []
    for name, method in (("good-run", MostlyRight(name="dp")), ("flat-run", Constant("cot-auto"))):
        run_eval_sync(method, ds, root / name, progress=False, bootstrap=50)
        out.append(root / name)
    return out


@pytest.fixture(scope="module")
def pages(run_dirs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    written = write_report(run_dirs, tmp_path_factory.mktemp("rep"), plots=False)
    return written["markdown"].read_text(), written["html"].read_text()


def test_headline_comes_first(pages: tuple[str, str]) -> None:
    md, page = pages
    headings = [line for line in md.splitlines() if line.startswith("### ")]
    assert headings[0] == "### Per run: accuracy and macro-F1"
    captions = re.findall(r"<caption>(.*?)</caption>", page)
    assert captions[0] == "Per run: accuracy and macro-F1"
    assert page.index("Headline") < page.index("<table")
    for text in (md, page):
        assert "good-run" in text and "flat-run" in text


def test_flags_only_where_they_apply(run_dirs: list[Path], pages: tuple[str, str]) -> None:
    good, flat = (load_run(d) for d in run_dirs)
    flat_flags = run_flags(flat)
    assert any(f.startswith(FLAG_CONSTANT) for f in flat_flags)
    assert FLAG_MAJORITY in flat_flags  # 6/30 prohibit vs a 12/30 majority class
    good_flags = run_flags(good)
    assert not any(
        f.startswith((FLAG_CONSTANT, FLAG_MAJORITY, FLAG_HEALTH_RULE, FLAG_EMBEDDED))
        for f in good_flags
    )
    assert any("test double" in f for f in good_flags)  # both runs are scripted
    embedded = dataclasses.replace(good, metrics={**good.metrics, "backend": "embedded:tiny"})
    assert FLAG_EMBEDDED in run_flags(embedded)
    md, _ = pages
    rows: dict[str, str] = {}
    for line in md.splitlines():  # the first row naming each run is the headline's
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line)
    assert FLAG_CONSTANT in rows["flat-run"] and FLAG_CONSTANT not in rows["good-run"]
    # the health-rule flag follows the baseline's accuracy on the same cases
    for run in (good, flat):
        rule = run.metrics["baselines"]["health-rule"]["scores"]["main"]["accuracy"]
        below = run.metrics["scores"]["main"]["accuracy"] < rule
        assert (FLAG_HEALTH_RULE in run_flags(run)) == below


def test_no_absolute_paths(run_dirs: list[Path], pages: tuple[str, str]) -> None:
    for text in pages:
        for d in run_dirs:
            assert str(d) not in text
            assert str(d.parent) not in text


def test_html_is_mobile_friendly(pages: tuple[str, str]) -> None:
    _, page = pages
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert ".table-scroll{overflow-x:auto" in page
    tables = page.count("<table>")
    assert tables > 3 and page.count('<div class="table-scroll"><table><caption>') == tables
    assert '<th scope="col" class="num">n</th>' in page and '<th scope="col">run</th>' in page
    # the constant run never predicts permit: its precision is undefined, not 0
    assert '<td class="num">undefined</td>' in page


def test_drilldown_rows(run_dirs: list[Path], pages: tuple[str, str]) -> None:
    _, page = pages
    rows = re.findall(r'<tr class="case" ([^>]*)>(.*?)</tr>', page, re.S)
    assert len(rows) == 30
    records = {}
    for d in run_dirs:
        for line in (d / "records.jsonl").read_text().splitlines():
            rec = json.loads(line)
            records[(d.name, rec["case_id"])] = rec
    for attrs, body in rows:
        data = dict(re.findall(r'data-([a-z]+)="([^"]*)"', attrs))
        assert set(data) >= {"case", "gold", "wrong", "disagree", "failed"}
        cells = re.findall(
            r'<td data-run="([^"]+)" data-verdict="([^"]*)" data-wrong="(true|false)" '
            r'data-failed="(?:true|false)">',
            body,
        )
        assert [c[0] for c in cells] == ["good-run", "flat-run"]
        for run, verdict, wrong in cells:
            rec = records[(run, data["case"])]
            assert data["gold"] == rec["gold"] and verdict == str(rec["verdict"])
            assert wrong == str(rec["gold"] != rec["verdict"]).lower()
        assert data["wrong"] == str(any(c[2] == "true" for c in cells)).lower()
        assert data["disagree"] == str(len({c[1] for c in cells}) > 1).lower()
        # the case id opens the detail row right below, with every step
        control = re.search(r'aria-controls="([^"]+)">' + re.escape(data["case"]) + "<", body)
        assert control is not None
        detail = re.search(
            rf'<tr class="detail" id="{control.group(1)}">(.*?)</tr>(?:\n|</tbody>)', page, re.S
        )
        assert detail is not None
        assert "raw output" in detail.group(1) and "prompt (" in detail.group(1)
        assert html.escape(f"judge Toy event number {int(data['case'][-4:])}:") in detail.group(1)
    assert 'name="gold"' in page and 'name="wrong"' in page
    assert 'name="disagree"' in page and 'name="failed"' in page
    unparsed = next(r for r in rows if 'data-case="toy-0003"' in r[0])
    assert 'data-failed="true"' in unparsed[0]


def test_untrusted_text_is_escaped_and_nothing_is_fetched(pages: tuple[str, str]) -> None:
    _, page = pages
    assert _HOSTILE not in page and html.escape(_HOSTILE) in page
    outside = re.sub(r"<pre>.*?</pre>", "", page, flags=re.S)
    assert "http://" not in outside and "https://" not in outside
    assert page.count("<script>") == 1  # the filters' own inline script
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_precision_suits_the_number_of_cases(pages: tuple[str, str]) -> None:
    assert [digits_for(n) for n in (0, 30, 99, 100, 214, 3124, 9999, 10_000)] == [
        0,
        0,
        0,
        1,
        1,
        1,
        1,
        2,
    ]
    md, _ = pages
    headline = md.split("### Per run")[1].split("*Accuracy")[0].strip().splitlines()[4:]
    cells = [c.strip() for row in headline for c in row.split("|")[2:4]]
    assert len(cells) == 4  # accuracy and macro-F1 of two runs, whole percents on 30 cases
    assert all(re.fullmatch(r"\d+ \[\d+, \d+\]", c) for c in cells), cells


def test_markdown_columns_are_aligned(pages: tuple[str, str]) -> None:
    md, _ = pages
    tables = re.findall(r"((?:^\|.*\|\n)+)", md, re.M)
    assert len(tables) > 5
    for table in tables:
        lines = table.splitlines()
        if any(ord(ch) > 0x2E7F for ch in table):  # wide characters: widths differ in code points
            continue
        assert len({len(line) for line in lines}) == 1, lines[0]
        bars = [[m.start() for m in re.finditer(r"\|", line)] for line in lines]
        assert all(b == bars[0] for b in bars)
    headline = next(t for t in tables if t.startswith("| run ") and "flags" in t)
    rule = headline.splitlines()[1]
    assert rule.count(":|") + rule.count(": |") == 4  # the four numeric columns, right-aligned


def test_one_wording_for_the_classes_and_row_headers(pages: tuple[str, str]) -> None:
    md, page = pages
    shown = re.sub(r"<pre>.*?</pre>|<script>.*?</script>|<[^>]+>", " ", page, flags=re.S)
    for raw in ("not_applicable", "Forbid", "permit ", "prohibit "):
        assert raw not in shown and raw not in md, raw
    assert "Not applicable" in shown and "Prohibit" in shown
    for body in re.findall(r"<tbody>(.*?)</tbody>", page, re.S):
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
            if row.startswith("<td colspan"):  # a case's detail row
                continue
            assert row.startswith('<th scope="row"'), row[:80]


def test_confusion_counts_and_mcnemar_link_to_exactly_their_cases(
    run_dirs: list[Path],
) -> None:
    good, flat = (load_run(d) for d in run_dirs)
    report = build_report([good, flat], plots=False)
    tables = [t for s in report.sections for t in s.tables]
    confusion = next(t for t in tables if t.title.startswith("Confusion: dp"))
    conf = good.metrics["scores"]["main"]["confusion"]
    linked = 0
    for i, counts in enumerate(conf["counts"]):
        for j, count in enumerate(counts):
            link = confusion.links.get((i, j + 1))
            if count == 0:
                assert link is None
                continue
            assert link is not None and len(link.cases) == count and link.target == "cases-1"
            gold, predicted = conf["rows"][i], conf["columns"][j]
            for cid in link.cases:
                rec = next(r for r in good.records if r["case_id"] == cid)
                assert rec["gold_class"] == gold
                assert (rec["predicted_class"] or "unparsed") == predicted
            linked += count
    assert linked == 30
    mc = next(t for t in tables if t.title.startswith("McNemar"))
    b, c = mc.links[(0, 3)], mc.links[(0, 4)]
    assert (len(b.cases), len(c.cases)) == (int(mc.rows[0][3]), int(mc.rows[0][4]))
    page = report.html()
    assert page.count('class="case-link"') == sum(
        len(t.links) for t in [*tables, report.headline] if t is not None
    )
    assert 'href="#cases-1"' in page and '<div class="drilldown" id="cases-1"' in page


def test_headline_chart_has_whiskers_baselines_and_states_its_data(
    pages: tuple[str, str], run_dirs: list[Path]
) -> None:
    _, page = pages
    chart = page.split('<section class="headline">')[1].split("</section>")[0]
    assert chart.count('class="chart-run"') == 2
    assert chart.count('class="chart-bar m0"') == 2 and chart.count('class="chart-bar m1"') == 2
    assert chart.count('class="chart-ci"') == 4
    assert chart.count('class="chart-ref r0"') == 4 and chart.count('class="chart-ref r1"') == 4
    label = html.unescape(re.search(r'role="img" aria-label="([^"]+)"', chart).group(1))
    good = load_run(run_dirs[0]).metrics
    acc = good["scores"]["main"]["accuracy"]
    majority = good["baselines"]["majority"]["scores"]["main"]["accuracy"]
    assert (
        f"good-run (dp · scripted-test-double:hash (test double)): accuracy {100 * acc:.0f}"
        in label
    )
    assert f"majority baseline {100 * majority:.0f}" in label


def test_usage_per_run(pages: tuple[str, str]) -> None:
    md, _ = pages
    table = md.split("### Tokens, latency and cost per run")[1].split("\n\n*")[0]
    good = next(line for line in table.splitlines() if line.startswith("| good-run"))
    cells = [c.strip() for c in good.strip("|").split("|")]
    # 30 model calls of 12 prompt + 3 completion tokens; no price known
    assert cells[2] == "30" and cells[6:9] == ["360", "90", "15"] and cells[-1] == "—"


def test_case_text_from_the_records_else_from_the_dataset(tmp_path: Path) -> None:
    cases = [
        {"text": f"A nurse tells a neighbour about patient {i}'s test result.", "label": lab}
        for i, lab in enumerate(["Prohibit", "Permit", "Not applicable"] * 2)
    ]
    source = tmp_path / "mine.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for c in cases))
    ds = load_dataset(source, resolve_gold=False)
    run = tmp_path / "runs" / "mine-dp"
    run_eval_sync(HashMethod(name="dp"), ds, run, progress=False, bootstrap=20)
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert [r["text"] for r in records] == [c.text for c in ds.cases]
    page = write_report([run], tmp_path / "rep1", plots=False)["html"].read_text()
    assert html.escape(cases[4]["text"]) in page
    # an older run, whose records lack the text: read from its dataset file, unchanged
    for rec in records:
        del rec["text"]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert case_texts_from_datasets([load_run(run)]) == {c.id: c.text for c in ds.cases}
    page = write_report([run], tmp_path / "rep2", plots=False)["html"].read_text()
    assert html.escape(cases[4]["text"]) in page
    # the file changed since: not used, and the report says the text is not stored
    source.write_text(source.read_text().replace("nurse", "doctor"))
    assert case_texts_from_datasets([load_run(run)]) == {}
    page = write_report([run], tmp_path / "rep3", plots=False)["html"].read_text()
    assert "do not store the case text" in page and "A doctor tells" not in page


def test_runs_named_by_the_shortest_distinct_tail(tmp_path: Path) -> None:
    ds = toy_dataset(10)
    folders = [tmp_path / "a" / "exp" / "dp", tmp_path / "b" / "exp" / "dp", tmp_path / "c" / "cot"]
    for folder in folders:
        run_eval_sync(HashMethod(name="dp"), ds, folder, progress=False, bootstrap=20)
    written = write_report(folders, tmp_path / "rep", plots=False)
    md = written["markdown"].read_text()
    page = written["html"].read_text()
    rows = [line.split("|")[1].strip() for line in md.split("### Per run")[1].splitlines()[4:7]]
    assert rows == ["a/exp/dp", "b/exp/dp", "cot"]
    for text in (md, page):
        assert str(tmp_path) not in text
