"""A cross-checked run: each record's ``cross_check`` entry, the metrics block, the
run's identity, and the report's section; a run without it has none of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError
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
from privacy_ci.reasoning import FactJudge, Facts, FactValue, Source, load_fact_schema

from . import HashMethod, hashed_verdict, toy_dataset

SCHEMA = load_fact_schema("hipaa")
CORE = {"holder": "covered_entity", "information": "phi"}
TREATMENT = {**CORE, "recipient": "health_care_provider", "purpose": "treatment"}
# what the stub reader reads for a toy case, by its number (None: the reader fails)
KINDS: list[dict[str, str] | None] = [
    {**TREATMENT, "restriction": "none"},  # a determined permit: a prohibit is flagged
    # a prohibit on presumptions (no authorization stated): a permit is flagged
    {**CORE, "recipient": "other", "purpose": "other"},
    {"holder": "employer", "information": "employment_record"},  # not applicable
    None,  # the reader fails: an error entry
    TREATMENT,  # a permit on presumptions (restriction presumed none)
]
VERDICTS = [Verdict.PERMIT, Verdict.PROHIBIT, Verdict.NOT_APPLICABLE, None, Verdict.PERMIT]
QUOTE = "the narrative's words for the recipient"


def kind(text: str | None) -> int:
    """Which facts a toy case gets (from its number)."""
    number = re.search(r"number (\d+)", text or "")
    assert number is not None
    return int(number.group(1)) % len(KINDS)


class KindReader:
    def read(self, text: str | None = None, flow: Flow | None = None) -> Facts:
        values = KINDS[kind(text)]
        if values is None:
            raise PrivacyCIError("the NLP model is missing")
        facts = {k: FactValue(v, Source.READ) for k, v in values.items()}
        if "recipient" in facts:
            facts["recipient"] = FactValue(values["recipient"], Source.READ, QUOTE, 0, 9)
        return Facts(SCHEMA, facts)


def checker() -> CrossChecker:
    return CrossChecker(reasoner=FactJudge("hipaa", reader=KindReader()))  # type: ignore[arg-type]


def expected_flag(index: int, verdict: Verdict | None) -> str | None:
    k = index % len(KINDS)
    if verdict is Verdict.PROHIBIT and k in (0, 4):
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
    """The run's records in the dataset's order (the file has them as they finished)."""
    lines = (path / RECORDS_FILE).read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: str(r["case_id"]))


def test_each_record_has_its_cross_check(runs: dict[str, Path]) -> None:
    for rec in records(runs["xc"]):
        index = int(str(rec["case_id"]).split("-")[1])
        verdict = hashed_verdict(str(rec["case_id"]))
        entry = rec["cross_check"]
        assert isinstance(entry, dict)
        reasoner = VERDICTS[index % len(KINDS)]
        assert entry["model_verdict"] == (None if verdict is None else verdict.value)
        assert entry["reasoner_verdict"] == (None if reasoner is None else reasoner.value)
        assert entry["agree"] is (verdict is not None and verdict is reasoner)
        assert entry["reasoner_determined"] is (index % len(KINDS) in (0, 2))
        assert (entry["error"] is not None) is (reasoner is None)
        want = expected_flag(index, verdict)
        assert entry["flagged"] is (want is not None)
        if want is None:
            assert entry["flag"] is None
            continue
        flag = entry["flag"]
        assert flag["kind"] == want and flag["reason"]
        assert flag["rule"]["id"] == entry["reasoner_rule"]
        expected = (
            "164.506(c)(2)-treatment"
            if index % len(KINDS) in (0, 4)
            else ("164.502(a)-general-rule")
        )
        assert flag["rule"]["id"] == expected
        assert flag["facts"]["holder"] == {"value": "covered_entity", "source": "read"}
        if want == "prohibit-despite-permission":
            assert flag["facts"]["recipient"]["quote"] == QUOTE


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
    agreed = errors = presumed = 0
    flagged = []
    kinds = {"permit-unsupported": 0, "prohibit-despite-permission": 0}
    for rec in recs:
        entry = rec["cross_check"]
        assert isinstance(entry, dict)
        row = CROSS_CHECK_ROWS.index(entry["model_verdict"] or "unparsed")
        col = CROSS_CHECK_COLUMNS.index(entry["reasoner_verdict"] or "failed")
        by_hand[row][col] += 1
        agreed += entry["agree"]
        errors += entry["error"] is not None
        presumed += entry["reasoner_verdict"] is not None and not entry["reasoner_determined"]
        if entry["flagged"]:
            flagged.append(rec["case_id"])
            kinds[entry["flag"]["kind"]] += 1
    assert block["counts"] == by_hand and block["agreed"] == agreed
    assert block["agreement"] == round(agreed / 30, 4)
    assert block["flagged"] == len(flagged) > 0 and block["flagged_cases"] == flagged
    assert block["flags"] == kinds and all(kinds.values())
    assert block["reasoner_errors"] == errors == 30 // 5  # the cases whose reader fails
    assert block["on_presumptions"] == presumed == 2 * 30 // 5  # kinds 1 and 4


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
        "failed",
    ]
    block = loaded[0].metrics["cross_check"]
    assert [row[1:] for row in agreement.rows] == [[str(x) for x in r] for r in block["counts"]]
    assert f"{block['flagged']} flagged" in agreement.notes[0]
    [flagged] = [t for t in tables if t.title.startswith("Flagged cases")]
    assert sorted(row[0] for row in flagged.rows) == block["flagged_cases"]
    for row in flagged.rows:
        assert row[4].startswith(("permit-unsupported: ", "prohibit-despite-permission: "))
    # only the cross-checked run has the section
    assert sum(t.title.startswith("Cross-check") for t in tables) == 1
    written = write_report(loaded, tmp_path / "report", plots=False)
    md = written["markdown"].read_text()
    page = written["html"].read_text()
    for text in ("Cross-check with the ci-reasoner", "Flagged cases", block["flagged_cases"][0]):
        assert text in md and text in page
    assert "<strong>cross-check</strong>: the ci-reasoner says" in page
    alone = build_report([loaded[1]], plots=False)
    assert not any("Cross-check" in t.title for s in alone.sections for t in s.tables)


def test_the_report_names_the_flagged_rule_and_its_facts(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Each flagged case: the deciding rule, and the facts it used with their quotes, in
    the table and in the case's drill-down."""
    loaded = [load_run(runs["xc"])]
    tables = [t for s in build_report(loaded, plots=False).sections for t in s.tables]
    [flagged] = [t for t in tables if t.title.startswith("Flagged cases")]
    by_id = {str(r["case_id"]): r["cross_check"] for r in loaded[0].records}
    for row in flagged.rows:
        rule = by_id[row[0]]["flag"]["rule"]
        assert row[5] == f"{rule['id']} ({rule['paragraph']})"
        assert "holder = covered_entity" in row[6]
    despite = [r for r in flagged.rows if r[4].startswith("prohibit-despite-permission")]
    assert despite and all(QUOTE in r[6] for r in despite)
    page = write_report(loaded, tmp_path / "report", plots=False)["html"].read_text()
    assert "164.506(c)(2)-treatment" in page and QUOTE.replace("'", "&#x27;") in page
