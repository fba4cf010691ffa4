"""`label report --html`: one self-contained page with the Conductor paper's Figures 2
and 3, their alt text and data tables stating the analysis's numbers."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Label, SensitivityTier
from privacy_ci.labeling import LabelingReport, analyze_run, run_from_labels
from privacy_ci.labeling._html import html_report
from privacy_ci.llm.testing import TEST_DOUBLE_PROVIDER

from . import relabeled
from .test_cli import env, error_line, invoke, model

__all__ = ["env", "model"]
CLINICAL = SensitivityTier.CLINICAL_STANDARD


class Page(HTMLParser):
    """Every tag's attributes, the figures' alt texts, and the text of the table cells."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    @property
    def images(self) -> list[dict[str, str]]:
        return [attrs for tag, attrs in self.tags if tag == "img"]


def _change_roles(role: str, add: bool) -> Any:
    def change(label: Label) -> dict[str, Any] | None:
        if label.sensitivity_tier is not CLINICAL:
            return None
        roles = label.permitted_receiver_roles
        if add == (role in roles):
            return None
        return {"permitted_receiver_roles": roles | {role} if add else roles - {role}}

    return change


@pytest.fixture(scope="module")
def reports(corpus: Corpus) -> list[LabelingReport]:
    """Three draws that over-grant, under-grant and agree; and a one-draw test double."""
    draws = [
        relabeled(corpus, _change_roles("Billing Specialist", add=True)),
        relabeled(corpus, _change_roles("Nurse", add=False)),
        list(corpus.labels),
    ]
    one = [relabeled(corpus, _change_roles("Nurse", add=True))]
    return [
        analyze_run(run_from_labels(draws, name="mixed"), corpus),
        analyze_run(
            run_from_labels(one, name="double", backend=f"{TEST_DOUBLE_PROVIDER}:scripted"),
            corpus,
        ),
    ]


@pytest.fixture(scope="module")
def text(reports: list[LabelingReport]) -> str:
    return html_report(reports, generated_at="2026-01-01 00:00 UTC")


def _roles(corpus: Corpus, labels: list[Label]) -> tuple[int, int]:
    """(roles added, roles omitted) against the authored ACLs, counted here."""
    added = omitted = 0
    for label in labels:
        authored = corpus.label(label.doc_id).permitted_receiver_roles
        added += len(label.permitted_receiver_roles - authored)
        omitted += len(authored - label.permitted_receiver_roles)
    return added, omitted


def test_both_figures_state_the_analysis_numbers(
    reports: list[LabelingReport], text: str, corpus: Corpus
) -> None:
    mixed = reports[0]
    # the analysis agrees with a count made here, so the page is checked against both
    billing = relabeled(corpus, _change_roles("Billing Specialist", add=True))
    assert (mixed.per_draw[0].roles_added, mixed.per_draw[0].roles_omitted) == _roles(
        corpus, billing
    )
    assert mixed.per_draw[0].roles_added > 0 and mixed.per_draw[1].roles_omitted > 0
    page = Page(text)
    fig2, fig3 = page.images
    for image in (fig2, fig3):
        assert image["src"].startswith("data:image/png;base64,")
        png = base64.b64decode(image["src"].split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    alt2 = fig2["alt"]
    for report in reports:  # both configurations, every draw
        for n, c in enumerate(report.per_draw, start=1):
            assert (
                f"{report.name}{' (TEST DOUBLE)' if report.test_double else ''} · draw {n}:"
                f" {c.roles_added} role(s) over-granted, {c.roles_omitted} under-granted"
            ) in alt2
    assert "draw 2: 0 role(s) over-granted, 33 under-granted (O:U 0.00)" in alt2
    stability = mixed.stability
    assert stability is not None and stability.unstable_flows > stability.unstable_denied > 0
    share = f"{100 * stability.unstable_flows / mixed.flows:.1f}%"
    assert (
        f"mixed (3 draws): {stability.unstable_flows:,} of 2,520 decisions change ({share}),"
        f" {stability.unstable_denied:,} of them on flows the authored policy denies"
    ) in fig3["alt"]
    assert "double" not in fig3["alt"]  # one draw: nothing to compare it with
    # the data tables hold the same numbers, cell by cell
    cells = page.cells
    for n, c in enumerate(mixed.per_draw, start=1):
        row = ["mixed", str(n), str(c.roles_added), str(c.roles_omitted)]
        assert any(cells[i : i + 4] == row for i in range(len(cells))), row
        assert any(
            cells[i : i + 7] == [*row, cells[i + 4], str(c.privacy_violations), str(c.over_blocks)]
            for i in range(len(cells))
        )
    fig3_row = ["mixed", "3", "2,520", f"{stability.unstable_flows:,}", share]
    assert any(cells[i : i + 5] == fig3_row for i in range(len(cells)))
    assert f"{stability.unstable_denied:,}" in cells
    # and the report's tables follow: Tables VII-IX
    for caption in ("Table VII", "Table VIII", "Table IX", "Fig. 2 data", "Fig. 3 data"):
        assert f"<caption>{caption}" in text
    assert "produced by the scripted test double, not a model" in text
    assert "The two panels are not proportional." in text


def test_the_page_is_self_contained(text: str) -> None:
    page = Page(text)
    for tag, attrs in page.tags:
        for name in ("src", "href"):
            value = attrs.get(name, "")
            assert not value or value.startswith(("data:", "#")), (tag, name, value[:60])
        assert tag not in ("link", "iframe", "object", "embed"), tag
        assert not (tag == "script" and "src" in attrs)
    without_images = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)
    assert not re.search(r"https?://|url\(|@import", without_images)


def test_one_draw_draws_figure_2_only(reports: list[LabelingReport]) -> None:
    text = html_report(reports[1:])
    page = Page(text)
    assert len(page.images) == 1 and page.images[0]["alt"].startswith("Fig. 2: Direction")
    assert "(TEST DOUBLE)" in page.images[0]["alt"]
    assert "Not drawn: Fig. 3 compares draws with one another" in text


def test_label_report_html_of_a_run_folder(env: Path, model: dict[str, Any]) -> None:
    out = env / "run"
    res = invoke("run", "--out", str(out), "--draws", "2", "--name", "authored", "--json")
    assert res.exit_code == 0, res.output
    page_file = env / "reports" / "labels.html"
    res = invoke("report", str(out), "--html", str(page_file))
    assert res.exit_code == 0, res.output
    assert f"wrote {page_file}" in " ".join(res.stdout.split())
    page = Page(page_file.read_text(encoding="utf-8"))
    fig2, fig3 = page.images
    # the authored labels, twice: no role over- or under-granted, no decision changes
    assert "authored (TEST DOUBLE) · draw 2: 0 role(s) over-granted, 0 under-granted" in fig2["alt"]
    assert "0 of 2,520 decisions change (0.0%), 0 of them" in fig3["alt"]


def test_bad_run_folders_are_one_error(env: Path) -> None:
    html = str(env / "out.html")
    line = error_line(invoke("report", str(env / "nowhere"), "--html", html))
    assert "not a labeling run (no manifest.json" in line
    other = env / "eval-run"
    other.mkdir()
    (other / "manifest.json").write_text('{"identity": {"experiment": "eval"}}')
    assert "the manifest is not a labeling run's" in error_line(
        invoke("report", str(other), "--html", html)
    )
    (other / "manifest.json").write_text("{not json")
    assert "not JSON" in error_line(invoke("report", str(other), "--html", html))
    assert not Path(html).exists()


def test_an_unwritable_html_path_is_one_error(env: Path, corpus: Corpus) -> None:
    from privacy_ci.conductor import riverside_dir

    (env / "taken").mkdir()
    res = invoke("report", "--labels", str(riverside_dir() / "labels.yaml"), "--html", "taken")
    assert "cannot write taken" in error_line(res)
