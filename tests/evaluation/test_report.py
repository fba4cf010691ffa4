"""Reports: Markdown tables, self-contained HTML, test-double marking, McNemar."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from privacy_ci.errors import PrivacyCIError
from privacy_ci.evaluation import build_report, load_run, run_eval_sync, write_report
from privacy_ci.evaluation._report import TEST_DOUBLE_MARK

from . import HashMethod, toy_dataset


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    ds = toy_dataset(30)
    specs = [
        ("dp-double", HashMethod(name="dp", salt="a")),
        ("cot-model", HashMethod(name="cot-auto", salt="b", backend="openai-compatible:llama3")),
        ("dp-model", HashMethod(name="dp", salt="c", backend="openai-compatible:llama3")),
    ]
    out = []
    for name, method in specs:
        run_eval_sync(method, ds, root / name, progress=False, bootstrap=100)
        out.append(root / name)
    return out


def test_markdown_and_html(runs: list[Path], tmp_path: Path) -> None:
    written = write_report(runs, tmp_path / "report")
    md = written["markdown"].read_text()
    page = written["html"].read_text()
    for title in (
        "Accuracy (Table 2 style)",
        "Per class (Table 3 style)",
        "Binary compliance (Table 4 style)",
        "Confusion: dp on toy",
        "McNemar, toy",
    ):
        assert title in md and title in page
    # the grid: methods as columns in the paper's order, models as rows, baselines beside
    header = next(line for line in md.splitlines() if line.startswith("| model (backend)"))
    assert re.sub(r" +", " ", header) == "| model (backend) | dp | cot-auto |"
    assert re.search(r"^\| openai-compatible:llama3 +\|", md, re.M)
    assert "baseline: majority class (model-free)" in md
    assert "baseline: health-information rule (model-free)" in md
    assert "| unparsed |" in md  # the confusion matrices' unparsed column
    assert not re.search(r'(src|href)="(https?:)?//', page)  # self-contained
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page


def test_html_embeds_the_f1_plot_as_base64_png(runs: list[Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = write_report(runs, tmp_path / "report")
    md = written["markdown"].read_text()
    page = written["html"].read_text()
    assert '<img src="data:image/png;base64,' in page
    pngs = [p for k, p in written.items() if k.startswith("figure:")]
    assert pngs and pngs[0].read_bytes().startswith(b"\x89PNG")
    assert f"]({pngs[0].name})" in md
    # the alt text states the data, in the report's words for the classes
    alt = re.search(r'<img src="data:image/png;base64,[^"]+" alt="([^"]+)"', page)
    assert alt is not None and alt.group(1).startswith("Bar chart of per-class F1 in percent")
    assert re.search(
        r"dp-double: dp · scripted-test-double:hash \(TEST DOUBLE\): Permit \d+", alt.group(1)
    )
    assert "Not applicable" in alt.group(1) and "not_applicable" not in alt.group(1)
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_test_double_is_marked_in_every_table(runs: list[Path]) -> None:
    report = build_report([load_run(r) for r in runs], plots=False)
    assert any("NOT model accuracy" in w for w in report.warnings)
    tables = [t for s in report.sections for t in s.tables]
    for table in tables:
        cells = " ".join(" ".join(row) for row in table.rows)
        has_double_run = "dp-double" in cells or "scripted-test-double" in cells
        if has_double_run or "Confusion: dp on toy · scripted" in table.title:
            assert TEST_DOUBLE_MARK in cells or TEST_DOUBLE_MARK in table.title, table.title
    grid = next(t for t in tables if t.title.startswith("Accuracy"))
    double_rows = [r for r in grid.rows if "scripted-test-double" in r[0]]
    assert double_rows and all(TEST_DOUBLE_MARK in r[0] for r in double_rows)
    assert any("scripted test backend" in n for n in grid.notes)
    html = report.html()
    assert 'class="warn"' in html and "NOT model accuracy" in html


def test_backend_named_in_every_table(runs: list[Path]) -> None:
    report = build_report([load_run(r) for r in runs], plots=False)
    for section in report.sections:
        for table in section.tables:
            text = table.title + " ".join(" ".join(r) for r in table.rows)
            assert "openai-compatible:llama3" in text or "scripted-test-double" in text


def test_mcnemar_between_runs_on_the_same_cases(runs: list[Path]) -> None:
    loaded = [load_run(r) for r in runs]
    report = build_report(loaded, plots=False)
    table = next(t for s in report.sections for t in s.tables if t.title.startswith("McNemar"))
    assert len(table.rows) == 3  # three runs, three pairs
    for row in table.rows:
        assert row[2] == "30" and 0.0 <= float(row[5]) <= 1.0


def test_load_run_errors(tmp_path: Path, runs: list[Path]) -> None:
    with pytest.raises(PrivacyCIError, match="not a run folder"):
        load_run(tmp_path)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "manifest.json").write_text(json.dumps({"identity": {}}))
    with pytest.raises(PrivacyCIError, match="did not finish"):
        load_run(unfinished)
    with pytest.raises(PrivacyCIError, match="no runs"):
        build_report([])
