"""A cross-checked run: each record's ``cross_check`` entry, the metrics block, the
run's identity, and the report's section; a run without it has none of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from privacy_ci.ci import Verdict
from privacy_ci.evaluation import (
    CROSS_CHECK_COLUMNS,
    CROSS_CHECK_ROWS,
    RECORDS_FILE,
    RunMismatch,
    build_report,
    cross_check_metrics,
    load_run,
    run_eval_sync,
    write_report,
)
from privacy_ci.judging import CrossChecker
from privacy_ci.reasoning import Reasoning, Status
from tests._norms import (
    NOT_APPLICABLE,
    SALE,
    TREATMENT,
    StubReasoner,
    candidate,
    reasoning,
)

from . import HashMethod, hashed_verdict, toy_dataset

MET, UNSTATED = Status.MET, Status.UNSTATED
HELD = candidate(TREATMENT, 2, MET, MET)
UNSUPPORTED = candidate(TREATMENT, 2, MET, UNSTATED)
KINDS: list[Reasoning] = [
    reasoning(Verdict.PERMIT, [HELD], HELD),  # a permission met: a prohibit is flagged
    reasoning(Verdict.PERMIT, [UNSUPPORTED], UNSUPPORTED),  # a permit on unstated: flagged
    reasoning(Verdict.NOT_APPLICABLE, applicability=NOT_APPLICABLE),
    reasoning(None),  # undetermined
    reasoning(Verdict.PROHIBIT, [candidate(SALE, 1, MET)], candidate(SALE, 1, MET)),
]


def kind(text: str) -> int:
    """Which reasoning a toy case gets (from its number)."""
    number = re.search(r"number (\d+)", text)
    assert number is not None
    return int(number.group(1)) % len(KINDS)


def checker() -> CrossChecker:
    stub = StubReasoner(lambda text: KINDS[kind(text)])
    return CrossChecker(reasoner=stub)  # type: ignore[arg-type]


def expected_flag(index: int, verdict: Verdict | None) -> str | None:
    k = index % len(KINDS)
    if verdict is Verdict.PROHIBIT and k == 0:
        return "prohibit-despite-permission"
    if verdict is Verdict.PERMIT and k == 1:
        return "permit-unsupported"
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    ds = toy_dataset(30)
    run_eval_sync(
        HashMethod(name="dp"), ds, root / "xc", progress=False, bootstrap=50, cross_check=checker()
    )
    run_eval_sync(HashMethod(name="dp"), ds, root / "plain", progress=False, bootstrap=50)
    return {"xc": root / "xc", "plain": root / "plain"}


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (path / RECORDS_FILE).read_text().splitlines()]


def test_each_record_has_its_cross_check(runs: dict[str, Path]) -> None:
    for rec in records(runs["xc"]):
        index = int(str(rec["case_id"]).split("-")[1])
        verdict = hashed_verdict(str(rec["case_id"]))
        entry = rec["cross_check"]
        assert isinstance(entry, dict)
        reasoner = KINDS[index % len(KINDS)].verdict
        assert entry["model_verdict"] == (None if verdict is None else verdict.value)
        assert entry["reasoner_verdict"] == (None if reasoner is None else reasoner.value)
        assert entry["agree"] is (verdict is not None and verdict is reasoner)
        want = expected_flag(index, verdict)
        assert entry["flagged"] is (want is not None)
        if want is None:
            assert entry["flag"] is None
        else:
            assert entry["flag"]["kind"] == want and entry["flag"]["reason"]
            assert entry["flag"]["norm"]["id"] == TREATMENT.id
            assert [c["id"] for c in entry["flag"]["conditions"]] == [
                "for-treatment",
                "to-provider",
            ]
            assert entry["flag"]["conditions"][0]["evidence"][0]["quote"]


def test_the_metrics_block(runs: dict[str, Path]) -> None:
    metrics = load_run(runs["xc"]).metrics
    block = metrics["cross_check"]
    recs = records(runs["xc"])
    assert block == cross_check_metrics(recs)
    assert block["reasoner"] == "ci-reasoner" and block["compared"] == 30
    assert (
        block["rows"]
        == list(CROSS_CHECK_ROWS)
        == [
            "permit",
            "prohibit",
            "not_applicable",
            "unparsed",
        ]
    )
    assert block["columns"] == list(CROSS_CHECK_COLUMNS)
    assert sum(map(sum, block["counts"])) == 30
    by_hand = [[0] * 4 for _ in range(4)]
    agreed = 0
    flagged = []
    for rec in recs:
        entry = rec["cross_check"]
        assert isinstance(entry, dict)
        row = CROSS_CHECK_ROWS.index(entry["model_verdict"] or "unparsed")
        col = CROSS_CHECK_COLUMNS.index(entry["reasoner_verdict"] or "undetermined")
        by_hand[row][col] += 1
        agreed += entry["agree"]
        if entry["flagged"]:
            flagged.append(rec["case_id"])
    assert block["counts"] == by_hand and block["agreed"] == agreed
    assert block["agreement"] == round(agreed / 30, 4)
    assert block["flagged"] == len(flagged) > 0 and block["flagged_cases"] == flagged
    assert block["reasoner_errors"] == 0


def test_a_run_without_it_has_no_new_keys(runs: dict[str, Path]) -> None:
    plain = load_run(runs["plain"])
    assert "cross_check" not in plain.metrics
    assert "cross_check" not in plain.manifest["identity"]
    assert all("cross_check" not in r for r in plain.records)
    assert cross_check_metrics(plain.records) is None
    # everything else is the same run's
    xc = load_run(runs["xc"])
    assert {
        k: v for k, v in xc.metrics.items() if k not in ("cross_check", "run", "generated_at")
    } == {k: v for k, v in plain.metrics.items() if k not in ("run", "generated_at")}


def test_the_cross_check_is_part_of_the_identity(runs: dict[str, Path], tmp_path: Path) -> None:
    identity = load_run(runs["xc"]).manifest["identity"]["cross_check"]
    assert identity == checker().identity()
    ds = toy_dataset(30)
    with pytest.raises(RunMismatch, match="cross_check"):
        run_eval_sync(HashMethod(name="dp"), ds, runs["xc"], progress=False, bootstrap=50)
    with pytest.raises(RunMismatch, match="cross_check"):
        run_eval_sync(
            HashMethod(name="dp"), ds, runs["plain"], progress=False, cross_check=checker()
        )
    # resuming with it: nothing judged again
    result = run_eval_sync(
        HashMethod(name="dp"), ds, runs["xc"], progress=False, bootstrap=50, cross_check=checker()
    )
    assert result.judged == 0 and result.metrics["cross_check"]["compared"] == 30


def test_the_report_shows_the_table_and_the_flagged_cases(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    loaded = [load_run(runs["xc"]), load_run(runs["plain"])]
    report = build_report(loaded, plots=False)
    tables = [t for s in report.sections for t in s.tables]
    [agreement] = [t for t in tables if t.title.startswith("Cross-check with the ci-reasoner")]
    assert "dp on toy" in agreement.title and "scripted-test-double:hash" in agreement.title
    assert agreement.header == [
        "model \\ ci-reasoner",
        "Permit",
        "Prohibit",
        "Not applicable",
        "undetermined",
    ]
    block = loaded[0].metrics["cross_check"]
    assert [row[1:] for row in agreement.rows] == [[str(x) for x in r] for r in block["counts"]]
    assert f"{block['flagged']} flagged" in agreement.notes[0]
    [flagged] = [t for t in tables if t.title.startswith("Flagged cases")]
    assert [row[0] for row in flagged.rows] == block["flagged_cases"]
    row = flagged.rows[0]
    assert row[4].startswith(("permit-unsupported: ", "prohibit-despite-permission: "))
    assert row[5] == f"{TREATMENT.id} ({TREATMENT.paragraph})"
    assert 'for-treatment: met "quote for for-treatment"' in row[6]
    # only the cross-checked run has the section
    assert sum(t.title.startswith("Cross-check") for t in tables) == 1
    written = write_report(loaded, tmp_path / "report", plots=False)
    md = written["markdown"].read_text()
    page = written["html"].read_text()
    for text in ("Cross-check with the ci-reasoner", "Flagged cases", block["flagged_cases"][0]):
        assert text in md and text in page
    # each flagged case's drill-down shows the conditions and their quoted evidence
    assert "<strong>cross-check</strong>: the ci-reasoner says" in page
    assert 'class="st-met">met</span>' in page and "“quote for for-treatment”" in page
    alone = build_report([loaded[1]], plots=False)
    assert not any("Cross-check" in t.title for s in alone.sections for t in s.tables)
