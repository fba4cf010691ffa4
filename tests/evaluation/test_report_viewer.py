"""The report's headline (per-run numbers and flags) and the HTML per-case drill-down."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from privacy_ci.ci import Verdict
from privacy_ci.evaluation import load_run, run_eval_sync, write_report
from privacy_ci.evaluation._report import (
    FLAG_CONSTANT,
    FLAG_EMBEDDED,
    FLAG_HEALTH_RULE,
    FLAG_MAJORITY,
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
            rows.setdefault(line.split(" | ")[0], line)
    assert FLAG_CONSTANT in rows["| flat-run"] and FLAG_CONSTANT not in rows["| good-run"]
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
    assert '<th class="num">n</th>' in page and "<th>run</th>" in page
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
            r'<td data-run="([^"]+)" data-verdict="([^"]*)" data-wrong="(true|false)">', body
        )
        assert [c[0] for c in cells] == ["good-run", "flat-run"]
        for run, verdict, wrong in cells:
            rec = records[(run, data["case"])]
            assert data["gold"] == rec["gold"] and verdict == str(rec["verdict"])
            assert wrong == str(rec["gold"] != rec["verdict"]).lower()
        assert data["wrong"] == str(any(c[2] == "true" for c in cells)).lower()
        assert data["disagree"] == str(len({c[1] for c in cells}) > 1).lower()
        assert "<details><summary>" in body and "prompt" in body
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
