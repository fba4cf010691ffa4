"""The scores of the facts-then-law judge: the law from gold facts, reading per fact,
pair accuracy and flip rate, computed by hand on a small run; the eval CLI and the
report show them (and still show the old ci-reasoner records)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cases import (
    VERDICT_ORDER,
    Case,
    Dataset,
    DatasetReport,
    GoldFacts,
    Protocol,
    Task,
    load_dataset,
)
from privacy_ci.ci import Flow, Verdict
from privacy_ci.cli.evaluate import eval_command
from privacy_ci.evaluation import (
    Pair,
    build_report,
    compute_metrics,
    load_run,
    pair_scores,
    proportion_bootstrap,
    record_facts,
    run_eval_sync,
)
from privacy_ci.judging import Event, Judgment, MethodIdentity, StepRecord

from . import HashMethod, toy_dataset

P, X, NA = Verdict.PERMIT, Verdict.PROHIBIT, Verdict.NOT_APPLICABLE

GOLD = {
    "holder": "covered_entity",
    "information": "phi",
    "recipient": "other",
    "purpose": "underwriting",
    "authorization": "valid",
}  # the law permits this (a valid authorization); not_covering / absent: prohibited


def _gold(**changes: str) -> GoldFacts:
    return GoldFacts({**GOLD, **changes})


def _case(cid: str, label: Verdict, facts: GoldFacts | None, pair: str | None) -> Case:
    return Case(
        id=cid,
        dataset="hand",
        regulation="hipaa",
        text=f"Case {cid}: a family practice mailed office notes to a life insurer.",
        flow=Flow.of(information_type="office notes"),
        label=label,
        gold_facts=facts,
        pair_id=pair,
    )


CASES = (
    _case("p1a", P, _gold(), "p1"),
    _case("p1b", X, _gold(authorization="not_covering"), "p1"),
    _case("p2a", P, _gold(), "p2"),
    _case("p2b", X, _gold(authorization="absent"), "p2"),
    _case("c5", P, _gold(authorization="not_covering"), None),  # mislabelled: the law prohibits
    _case("c6", NA, None, None),  # no gold facts, unpaired
)


def hand_dataset(cases: tuple[Case, ...] = CASES) -> Dataset:
    protocol = Protocol(
        name="hand",
        description="hand-made cases with gold facts and pairs",
        regulation="hipaa",
        task=Task.THREE_WAY,
        labels=VERDICT_ORDER,
        inclusion="all",
        label_field="label",
        gold_field="facts",
        text_field="text",
        source="hand.jsonl",
        sha256=hashlib.sha256(b"hand").hexdigest(),
    )
    return Dataset("hand", protocol, cases, protocol.sha256, DatasetReport(source="hand"))


def _as_read(facts: dict[str, str]) -> dict[str, Any]:
    """Facts as the ci-reasoner records them (`FactValue.as_dict`)."""
    return {k: {"value": v, "source": "read", "quote": f"the {k}"} for k, v in facts.items()}


def _decision(verdict: Verdict) -> dict[str, Any]:
    return {
        "verdict": verdict.value,
        "determined": False,
        "rule": {
            "id": "164.508(a)(1)-authorization",
            "paragraph": "164.508(a)(1)",
            "title": "Use or disclosure consistent with a valid authorization",
            "effect": "permit",
        },
        "used": {"authorization": {"value": "valid", "source": "read", "quote": "signed"}},
        "presumed": {"restriction": "none"},
        "questions": [
            {
                "fact": "restriction",
                "question": "Did the covered entity agree to a restriction on this disclosure?",
                "text": "prohibited if an agreed restriction covers it; permitted otherwise",
                "branches": [],
            }
        ],
        "near_misses": [],
        "exhausted": False,
    }


# case id -> (verdict, the steps' facts, in order: the last step's are the method's final)
PLAN: dict[str, tuple[Verdict | None, list[tuple[str, Any]]]] = {
    "p1a": (P, [("reason", _as_read(GOLD))]),  # every fact right
    # authorization wrong (not_covering -> valid), purpose missing
    "p1b": (
        X,
        [
            (
                "reason",
                _as_read(
                    {k: v for k, v in GOLD.items() if k != "purpose"} | {"authorization": "valid"}
                ),
            )
        ],
    ),
    # verdict wrong; recipient wrong (other -> government_agency)
    "p2a": (X, [("reason", _as_read({**GOLD, "recipient": "government_agency"}))]),
    # plain values; authorization missing (its presumption, absent, is the gold value)
    "p2b": (X, [("reason", {k: v for k, v in GOLD.items() if k != "authorization"})]),
    # a later step's facts win over an earlier step's
    "c5": (
        P,
        [
            ("reason", _as_read(dict.fromkeys(GOLD, "other"))),  # (a judgment too)
            ("combine", _as_read({**GOLD, "authorization": "not_covering"})),
        ],
    ),
    "c6": (NA, []),
}


@dataclass
class PlannedMethod:
    """A `Method` that answers each case as `PLAN` says, recording facts as the
    ci-reasoner does (a step whose parsed result holds ``facts`` and ``decision``)."""

    name: str = "ci-reasoner"
    backend: str = "model-free"
    calls: list[str] = field(default_factory=list)

    def identity(self) -> MethodIdentity:
        return MethodIdentity(self.name)

    async def judge(self, event: Event) -> Judgment:
        self.calls.append(event.id)
        assert not event.facts  # gold facts never reach the method
        verdict, steps = PLAN[event.id]
        records = []
        for name, facts in steps:
            parsed = {"verdict": None if verdict is None else verdict.value, "facts": facts}
            parsed["decision"] = _decision(verdict or P)
            records.append(StepRecord(name=name, prompt_name=None, parsed=parsed))
        return Judgment(self.name, verdict, steps=records, backend=self.backend)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("facts-run")
    return run_eval_sync(PlannedMethod(), hand_dataset(), out, progress=False, bootstrap=200)


# ---------------------------------------------------------------------------------
# pure functions
# ---------------------------------------------------------------------------------
def test_pair_scores_by_hand() -> None:
    groups: list[list[Pair]] = [
        [("permit", "permit"), ("prohibit", "prohibit")],  # both right, flipped
        [("permit", "permit"), ("prohibit", "permit")],  # one wrong, no flip
        [("permit", None), ("prohibit", "prohibit")],  # unparsed: wrong, never a flip
        [("permit", "prohibit"), ("prohibit", "permit")],  # both wrong, flipped
        [("permit", "permit")],  # one member: not a pair
    ]
    scores = pair_scores(groups, incomplete=2, bootstrap=500, seed=3)
    assert (scores.pairs, scores.incomplete) == (4, 3)
    assert (scores.both_right, scores.flipped) == (1, 2)
    assert scores.pair_accuracy == 0.25 and scores.flip_rate == 0.5
    assert scores.pair_accuracy_ci is not None and scores.flip_rate_ci is not None
    assert scores.pair_accuracy_ci.low <= 0.25 <= scores.pair_accuracy_ci.high
    assert scores.flip_rate_ci.low <= 0.5 <= scores.flip_rate_ci.high
    assert scores.flip_rate_ci.method == "bootstrap percentile, 500 resamples, seed 3"
    # the same pairs, the same seed: the same interval
    again = pair_scores(groups, incomplete=2, bootstrap=500, seed=3)
    assert again.as_dict() == scores.as_dict()
    assert pair_scores(groups, bootstrap=0).flip_rate_ci is None
    empty = pair_scores([])
    assert (empty.pairs, empty.pair_accuracy, empty.flip_rate) == (0, 0.0, 0.0)


def test_proportion_bootstrap_bounds() -> None:
    hits = [True] * 30 + [False] * 10
    ci = proportion_bootstrap(hits, resamples=400, seed=0)
    assert 0.5 < ci.low < 0.75 < ci.high < 0.95
    assert proportion_bootstrap([True, True], resamples=50).low == 1.0
    assert proportion_bootstrap([]).high == 0.0
    with pytest.raises(ValueError):
        proportion_bootstrap(hits, resamples=0)


def test_record_facts_reads_the_last_judgment() -> None:
    decided = {"verdict": "permit"}
    read = {"name": "read", "parsed": {"facts": {"holder": {"value": "other"}}}}
    record = {
        "steps": [
            read,  # read, not decided on (checklist-qa's first step)
            {
                "name": "combine",
                "parsed": {"facts": {"holder": "covered_entity", "x": 3}, "decision": decided},
            },
            {"name": "explain", "parsed": "free text"},
        ]
    }
    assert record_facts(record) == {"holder": "covered_entity"}
    # the model's answers failed: no final facts (the reader's are not the method's)
    failed = {"name": "combine", "parsed": {"verdict": None, "calls": 1}}
    assert record_facts({"steps": [read, failed]}) is None
    assert record_facts({"steps": [{"name": "decide", "parsed": "permit"}]}) is None
    assert record_facts({}) is None


# ---------------------------------------------------------------------------------
# a run, by hand
# ---------------------------------------------------------------------------------
def test_law_from_gold_by_hand(run: Any) -> None:
    law = run.metrics["gold_facts"]["law_from_gold"]
    assert run.metrics["gold_facts"]["cases"] == 5
    assert (law["n"], law["correct"]) == (5, 4)  # c5 is labelled permit; the law prohibits
    assert law["accuracy"] == 0.8
    assert law["law"].startswith("hipaa-law-v")
    assert [w["case"] for w in law["wrong"]] == ["c5"]
    assert law["wrong"][0]["gold"] == "permit" and law["wrong"][0]["law"] == "prohibit"
    assert law["accuracy_ci"]["method"] == "wilson"


def test_reading_per_fact_by_hand(run: Any) -> None:
    reading = run.metrics["gold_facts"]["reading"]
    assert reading["cases"] == 5 and reading["without_facts"] == 0
    facts = reading["facts"]
    assert list(facts) == ["holder", "information", "recipient", "purpose", "authorization"]

    def counts(name: str) -> tuple[int, int, int, int, int]:
        f = facts[name]
        return (f["gold"], f["right"], f["wrong"], f["missing"], f["missing_presumed"])

    assert counts("holder") == (5, 5, 0, 0, 0)
    assert counts("information") == (5, 5, 0, 0, 0)
    assert counts("recipient") == (5, 4, 1, 0, 0)
    assert counts("purpose") == (5, 4, 0, 1, 0)
    assert counts("authorization") == (5, 3, 1, 1, 1)  # absent is the presumption
    assert facts["recipient"]["confusions"] == {"other -> government_agency": 1}
    assert facts["recipient"]["wrong_cases"] == ["p2a"]
    assert facts["authorization"]["confusions"] == {"not_covering -> valid": 1}
    assert facts["authorization"]["missing_cases"] == ["p2b"]
    assert facts["purpose"]["missing_cases"] == ["p1b"]
    assert facts["recipient"]["accuracy"] == 0.8
    overall = reading["overall"]
    assert (overall["gold"], overall["right"], overall["wrong"], overall["missing"]) == (
        25,
        21,
        2,
        2,
    )
    assert overall["accuracy"] == 0.84
    assert reading["all_right_cases"] == 2  # p1a and c5


def test_pairs_and_baselines_by_hand(run: Any) -> None:
    pairs = run.metrics["pairs"]
    # p1: permit / prohibit, both right and flipped; p2: prohibit / prohibit, neither
    assert (pairs["pairs"], pairs["incomplete"], pairs["both_right"], pairs["flipped"]) == (
        2,
        0,
        1,
        1,
    )
    assert pairs["pair_accuracy"] == 0.5 and pairs["flip_rate"] == 0.5
    assert pairs["pair_accuracy_ci"]["method"].startswith("bootstrap percentile, 200")
    always = pairs["baselines"]["always-permit"]
    assert (always["both_right"], always["flipped"]) == (0, 0)
    assert set(pairs["baselines"]) == {"majority", "health-rule", "always-permit"}
    # the always-permit baseline is scored as every baseline is: 3 of 6 gold permits
    base = run.metrics["baselines"]["always-permit"]["scores"]["main"]
    assert base["accuracy"] == 0.5 and base["per_class"]["prohibit"]["f1"] == 0.0
    # end to end as always: p1a, p1b, p2b, c5 (its label), c6 right; p2a wrong
    assert run.metrics["scores"]["main"]["correct"] == 5
    assert run.metrics["backend"] == "model-free"


def test_records_carry_the_gold_for_the_report(run: Any) -> None:
    by_id = {r["case_id"]: r for r in run.records}
    assert by_id["p1b"]["gold_facts"]["authorization"] == "not_covering"
    assert by_id["p1b"]["pair_id"] == "p1"
    assert "gold_facts" not in by_id["c6"] and "pair_id" not in by_id["c6"]


def test_a_pair_cut_by_the_case_selection_is_incomplete() -> None:
    method = PlannedMethod()
    cases = [c for c in CASES if c.id != "p2b"]
    records = []
    for case in cases:
        verdict, _ = PLAN[case.id]
        records.append({"case_id": case.id, "verdict": None if verdict is None else verdict.value})
    metrics = compute_metrics(records, hand_dataset(tuple(cases)), cases, bootstrap=0)
    assert metrics["pairs"]["pairs"] == 1 and metrics["pairs"]["incomplete"] == 1
    assert metrics["gold_facts"]["reading"] is None  # these records carry no facts
    assert "no facts" in metrics["gold_facts"]["reading_note"]
    assert not method.calls


def test_runs_without_gold_facts_or_pairs_keep_their_metrics(tmp_path: Path) -> None:
    result = run_eval_sync(HashMethod(), toy_dataset(10), tmp_path, progress=False, bootstrap=50)
    assert "gold_facts" not in result.metrics and "pairs" not in result.metrics
    assert set(result.metrics["baselines"]) == {"majority", "health-rule"}
    assert all("gold_facts" not in r for r in result.records)


def test_facts_without_pairs_and_pairs_without_facts(tmp_path: Path) -> None:
    only_facts = tuple(
        dataclasses.replace(c, pair_id=None) for c in CASES if c.gold_facts is not None
    )
    result = run_eval_sync(
        PlannedMethod(), hand_dataset(only_facts), tmp_path / "a", progress=False, bootstrap=0
    )
    assert "pairs" not in result.metrics and result.metrics["gold_facts"]["cases"] == 5
    only_pairs = tuple(dataclasses.replace(c, gold_facts=None) for c in CASES)
    result = run_eval_sync(
        PlannedMethod(), hand_dataset(only_pairs), tmp_path / "b", progress=False, bootstrap=0
    )
    assert "gold_facts" not in result.metrics and result.metrics["pairs"]["pairs"] == 2
    assert "always-permit" in result.metrics["baselines"]


# ---------------------------------------------------------------------------------
# the CLI and the report
# ---------------------------------------------------------------------------------
app = typer.Typer()
app.command("eval")(eval_command)
app.command("other")(lambda: None)  # (a group, so that "eval" is a subcommand)


def _write_cases(path: Path) -> Path:
    lines = []
    for case in CASES[:4]:
        entry = {
            "id": case.id,
            "context": case.text,
            "label": case.label.value,
            "information_type": "office notes",
            "facts": dict(case.gold_facts or {}),
            "pair_id": case.pair_id,
        }
        lines.append(json.dumps(entry))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_eval_prints_and_carries_the_new_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "privacy_ci.cli.evaluate.build_eval_method", lambda *a, **k: PlannedMethod()
    )
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVACY_CI_CONFIG", raising=False)
    for name in ("PROVIDER", "MODEL", "BASE_URL", "CACHE_PATH"):
        monkeypatch.delenv(f"PRIVACY_CI_LLM_{name}", raising=False)
    cases = _write_cases(tmp_path / "hand.jsonl")
    runner = CliRunner()
    args = ["eval", "--method", "ci-reasoner", "--dataset", str(cases), "--no-progress"]
    shown = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "backend model-free" in text
    assert "law from gold facts" in text and "4/4 right" in text
    assert "reading per fact" in text and "minimal pairs: 2 complete" in text
    assert "baseline: always-permit" in text and "baseline: health-rule" in text
    as_json = runner.invoke(app, [*args, "--out", str(tmp_path / "run2"), "--json"])
    assert as_json.exit_code == 0, as_json.output
    metrics = json.loads(as_json.stdout)
    assert metrics["backend"] == "model-free"
    assert metrics["gold_facts"]["law_from_gold"]["accuracy"] == 1.0
    assert metrics["gold_facts"]["reading"]["facts"]["authorization"]["gold"] == 4
    assert metrics["pairs"]["pair_accuracy"] == 0.5


def test_eval_refuses_a_case_file_with_an_unknown_fact(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"context": "A clinic sent notes.", "label": "permit", "facts": {"holdr": "x"}})
        + "\n"
    )
    result = CliRunner().invoke(
        app, ["eval", "--method", "ci-reasoner", "--dataset", str(bad), "--no-progress"]
    )
    assert result.exit_code == 2
    assert "line 1" in result.output and "'holdr'" in result.output
    assert "Traceback" not in result.output


def test_report_shows_facts_rule_presumptions_and_questions(run: Any) -> None:
    report = build_report([load_run(run.out_dir)], plots=False)
    page = report.html()
    assert 'table class="facts"' in page
    assert "deciding rule: 164.508(a)(1)-authorization" in page
    assert "presumed (not stated): restriction = none" in page
    assert "Did the covered entity agree to a restriction on this disclosure?" in page
    assert "✗ gold: not_covering" in page  # p1b read authorization valid
    assert "gold facts: holder = covered_entity" in page and "minimal pair p1" in page
    markdown = report.markdown()
    assert "Facts, then law" in markdown and "Minimal pairs" in markdown
    assert "Reading per fact" in markdown and "baseline: always Permit" in markdown


def test_report_still_shows_old_ci_reasoner_records(tmp_path: Path) -> None:
    old = {
        "verdict": "prohibit",
        "rule": "a contradicted permission",
        "applicability": {"applicable": True, "reasons": ["the sender is a covered entity"]},
        "deciding": {
            "id": "psychotherapy-notes",
            "paragraph": "164.508(a)(2)",
            "title": "Psychotherapy notes",
            "effect": "prohibit",
            "conditions": [
                {
                    "id": "notes",
                    "status": "met",
                    "question": "Are these psychotherapy notes?",
                    "evidence": [{"quote": "session notes", "start": 4, "end": 17}],
                }
            ],
        },
        "candidates": [],
    }

    @dataclass
    class OldReasoner:
        name: str = "ci-reasoner"

        def identity(self) -> MethodIdentity:
            return MethodIdentity(self.name)

        async def judge(self, event: Event) -> Judgment:
            step = StepRecord(name="reason", prompt_name=None, parsed=old)
            return Judgment(self.name, X, steps=[step], backend="model-free")

    result = run_eval_sync(OldReasoner(), toy_dataset(3), tmp_path, progress=False, bootstrap=0)
    page = build_report([load_run(result.out_dir)], plots=False).html()
    assert "deciding norm: psychotherapy-notes" in page
    assert "Are these psychotherapy notes?" in page and "session notes" in page
    assert 'table class="facts"' not in page


@pytest.mark.slow
def test_the_ci_reasoner_on_two_development_pairs(tmp_path: Path) -> None:
    """The real method: the blocks agree with its records, counted here by hand."""
    from privacy_ci.judging import build_method

    full = load_dataset("pairs-dev")
    cases = full.cases[:4]
    dataset = Dataset(full.name, full.protocol, cases, full.sha256, full.report)
    result = run_eval_sync(
        build_method("ci-reasoner", None), dataset, tmp_path, progress=False, bootstrap=100
    )
    metrics = result.metrics
    assert metrics["gold_facts"]["law_from_gold"]["accuracy"] == 1.0
    by_id = {r["case_id"]: r for r in result.records}
    right = wrong = missing = 0
    for case in cases:
        assert case.gold_facts is not None
        read = record_facts(by_id[case.id])
        assert read is not None  # the reason step records the facts
        for name, value in case.gold_facts.items():
            got = read.get(name)
            right += got == value
            wrong += got is not None and got != value
            missing += got is None
    overall = metrics["gold_facts"]["reading"]["overall"]
    assert (overall["right"], overall["wrong"], overall["missing"]) == (right, wrong, missing)
    verdicts = [by_id[c.id]["verdict"] for c in cases]
    flips = sum(verdicts[i] != verdicts[i + 1] for i in (0, 2))
    both = sum(
        all(by_id[c.id]["verdict"] == c.label.value for c in cases[i : i + 2]) for i in (0, 2)
    )
    assert metrics["pairs"]["flipped"] == flips and metrics["pairs"]["both_right"] == both


# ---------------------------------------------------------------------------------
# a hand-made file of two pairs: every number of the report, known by hand
# ---------------------------------------------------------------------------------
# p1a: every fact right, Permit (right); p1b: purpose missing, authorization read
# valid (gold not_covering), Prohibit (right); p2a: recipient wrong, Prohibit (gold
# Permit: wrong); p2b: authorization missing, Prohibit (right).
# Law from gold: 4/4. Reading: 5 + 3 + 4 + 4 = 16 of 20 gold facts; every fact right
# on p1a only. End to end: 3/4; always Permit 2/4. Pairs: p1 both right and flipped,
# p2 neither: 1 of 2 each.


@pytest.fixture(scope="module")
def file_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("file-run")
    cases = _write_cases(root / "hand.jsonl")
    runner = CliRunner()
    args = ["eval", "--method", "ci-reasoner", "--dataset", str(cases), "--no-progress"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("privacy_ci.cli.evaluate.build_eval_method", lambda *a, **k: PlannedMethod())
        mp.setenv("PRIVACY_CI_CACHE", str(root / "cache"))
        mp.delenv("PRIVACY_CI_CONFIG", raising=False)
        for name in ("PROVIDER", "MODEL", "BASE_URL", "CACHE_PATH"):
            mp.delenv(f"PRIVACY_CI_LLM_{name}", raising=False)
        shown = runner.invoke(app, [*args, "--out", str(root / "run")], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        as_json = runner.invoke(app, [*args, "--out", str(root / "run"), "--json"])
        assert as_json.exit_code == 0, as_json.output
    return {
        "out": root / "run",
        "text": " ".join(shown.output.split()),
        "metrics": json.loads(as_json.stdout),
    }


def _tables(file_run: dict[str, Any]) -> dict[str, Any]:
    report = build_report([load_run(file_run["out"])], plots=False)
    return {t.title.split(",")[0]: t for s in report.sections for t in s.tables}


def test_the_json_of_a_hand_made_file(file_run: dict[str, Any]) -> None:
    metrics = file_run["metrics"]
    block = metrics["gold_facts"]
    law = block["law_from_gold"]
    assert (law["n"], law["correct"], law["wrong"]) == (4, 4, [])
    overall = block["reading"]["overall"]
    assert (overall["gold"], overall["right"], overall["wrong"], overall["missing"]) == (
        20,
        16,
        2,
        2,
    )
    assert overall["accuracy"] == 0.8 and block["reading"]["all_right_cases"] == 1
    authorization = block["reading"]["facts"]["authorization"]
    assert (authorization["right"], authorization["wrong"], authorization["missing"]) == (2, 1, 1)
    end = block["end_to_end"]
    assert (end["n"], end["correct"], end["accuracy"]) == (4, 3, 0.75)
    assert end["accuracy_ci"]["method"] == "wilson"
    assert metrics["scores"]["main"]["correct"] == 3  # the same cases: the same count
    assert block["baselines"]["always-permit"]["correct"] == 2
    assert set(block["baselines"]) == {"majority", "health-rule", "always-permit"}
    pairs = metrics["pairs"]
    assert (pairs["pairs"], pairs["both_right"], pairs["flipped"]) == (2, 1, 1)
    assert pairs["pair_accuracy"] == 0.5 and pairs["flip_rate"] == 0.5
    assert pairs["baselines"]["always-permit"]["pair_accuracy"] == 0.0


def test_the_terminal_shows_the_three_scores_and_the_pairs(file_run: dict[str, Any]) -> None:
    text = file_run["text"]
    assert "law from gold facts" in text and "4/4 right, 100.00%" in text
    assert "reading per fact (4 cases): 16/20 gold facts right, 80.00%" in text
    assert "every fact right on 1 cases" in text
    assert "end to end (4 cases with gold facts): 3/4 right, 75.00%" in text
    assert "always-permit 50.00%" in text and "health-rule" in text
    assert "minimal pairs: 2 complete" in text
    # the model-free method's title names no model URL
    assert "embedded://" not in text and "(http" not in text


def test_the_report_sections_of_a_hand_made_file(file_run: dict[str, Any]) -> None:
    from privacy_ci.evaluation import health_rule_baseline
    from privacy_ci.evaluation._gold_facts import end_to_end

    tables = _tables(file_run)
    facts = tables["Facts"]
    assert facts.header == [
        "method · backend",
        "law from gold facts",
        "facts read right",
        "cases with every fact right",
        "end to end",
    ]
    method, *baselines = facts.rows
    assert method[0] == "ci-reasoner · model-free"
    assert method[1].startswith("100") and method[1].endswith("(4/4)")
    assert method[2].startswith("80") and method[2].endswith("(16/20)")
    assert method[3] == "1/4"
    assert method[4].startswith("75") and method[4].endswith("(3/4)")
    by_label = {row[0]: row for row in baselines}
    permit = by_label["baseline: always Permit (model-free)"]
    assert permit[1:4] == ["—", "—", "—"] and permit[4].startswith("50") and "(2/4)" in permit[4]
    # the health rule, on the same four cases, as its own predictions score it
    loaded = load_dataset(str(file_run["out"].parent / "hand.jsonl"))
    predicted = {k: v.value for k, v in health_rule_baseline(loaded.cases).predictions.items()}
    health = end_to_end(loaded.cases, predicted, loaded.protocol)
    assert (
        f"({health['correct']}/4)" in by_label["baseline: health-information rule (model-free)"][4]
    )
    reading = {row[0]: row[1] for row in tables["Reading per fact"].rows}
    assert reading["holder"] == "100 (4 right, 0 wrong, 0 missing of 4)"
    assert reading["recipient"] == "75 (3 right, 1 wrong, 0 missing of 4)"
    assert reading["purpose"] == "75 (3 right, 0 wrong, 1 missing of 4)"
    assert reading["authorization"] == "50 (2 right, 1 wrong, 1 missing of 4)"
    pairs = tables["Minimal pairs"]
    assert pairs.header == ["method · backend", "pair accuracy", "flip rate", "pairs"]
    first = pairs.rows[0]
    assert first[0] == "ci-reasoner · model-free" and first[3] == "2"
    assert first[1].startswith("50") and first[2].startswith("50")
    always = next(r for r in pairs.rows if r[0] == "baseline: always Permit (model-free)")
    assert always[1].startswith("0") and always[2].startswith("0")


def _detail(page: str, case_id: str) -> str:
    """The drill-down row of one case in the report's page."""
    rows = [part.split('<tr class="case"', 1)[0] for part in page.split('<tr class="detail"')[1:]]
    [found] = [row for row in rows if f"<pre>Case {case_id}:" in row]
    return found


def test_the_case_page_shows_read_facts_beside_the_gold(file_run: dict[str, Any]) -> None:
    page = build_report([load_run(file_run["out"])], plots=False).html()
    p1a = _detail(page, "p1a")
    assert "gold facts: holder = covered_entity, information = phi" in p1a
    assert "minimal pair p1" in p1a
    assert p1a.count('<span class="ok">✓') == 5 and "✗ gold" not in p1a  # every fact right
    assert "“the authorization”" in p1a  # the quote it was read from
    assert "deciding rule: 164.508(a)(1)-authorization (164.508(a)(1))" in p1a
    p1b = _detail(page, "p1b")
    assert "authorization = not_covering" in p1b  # the gold line
    assert 'valid <span class="bad">✗ gold: not_covering</span>' in p1b  # read wrong
    # a gold fact the method has no value for: its own row, marked
    assert (
        '<tr><th scope="row">purpose</th><td>— <span class="bad">✗ gold: underwriting</span>'
        "</td><td>not read</td>" in p1b
    )
    p2a = _detail(page, "p2a")
    assert 'government_agency <span class="bad">✗ gold: other</span>' in p2a


# ---------------------------------------------------------------------------------
# groups of three, and a pair id of one case
# ---------------------------------------------------------------------------------
def test_a_group_of_three_is_scored_as_one() -> None:
    groups: list[list[Pair]] = [
        [("permit", "permit"), ("prohibit", "prohibit"), ("prohibit", "prohibit")],
        [("permit", "permit"), ("permit", "permit"), ("prohibit", "permit")],
        [("permit", "prohibit"), ("prohibit", "prohibit"), ("prohibit", None)],
    ]
    scores = pair_scores(groups, bootstrap=0)
    assert (scores.pairs, scores.both_right, scores.flipped) == (3, 1, 1)


def test_a_file_with_a_group_of_three_loads_and_scores(tmp_path: Path) -> None:
    lines = []
    for i, (label, authorization) in enumerate(
        [("permit", "valid"), ("prohibit", "not_covering"), ("prohibit", "absent")]
    ):
        lines.append(
            {
                "id": f"g{i}",
                "context": f"Case g{i}: a family practice mailed office notes to a life insurer.",
                "label": label,
                "facts": {**GOLD, "authorization": authorization},
                "pair_id": "g",
            }
        )
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    dataset = load_dataset(str(path))
    assert [c.pair_id for c in dataset] == ["g", "g", "g"]
    assert any(
        "1 shared by more than two cases, scored as groups: g" in n for n in dataset.report.notes
    )
    records = [
        {"case_id": "g0", "verdict": "permit"},
        {"case_id": "g1", "verdict": "prohibit"},
        {"case_id": "g2", "verdict": "prohibit"},
    ]
    metrics = compute_metrics(records, dataset, dataset.cases, bootstrap=0)
    pairs = metrics["pairs"]
    assert (pairs["pairs"], pairs["both_right"], pairs["flipped"], pairs["incomplete"]) == (
        1,
        1,
        1,
        0,
    )
    assert metrics["gold_facts"]["law_from_gold"]["correct"] == 3


def test_a_pair_id_of_one_case_is_refused(tmp_path: Path) -> None:
    from privacy_ci.errors import ValidationFailed

    entries = [
        {"context": "A clinic mailed notes.", "label": "permit", "pair_id": "a"},
        {"context": "A clinic mailed notes.", "label": "prohibit", "pair_id": "a"},
        {"context": "A clinic faxed notes.", "label": "permit", "pair_id": "lonely"},
    ]
    path = tmp_path / "lonely.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in entries))
    with pytest.raises(ValidationFailed) as info:
        load_dataset(str(path))
    message = str(info.value)
    assert f"{path} line 3: field 'pair_id': no other case has pair id 'lonely'" in message
    assert "line 1" not in message and "line 2" not in message
    result = CliRunner().invoke(
        app, ["eval", "--method", "ci-reasoner", "--dataset", str(path), "--no-progress"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "no other case has pair id 'lonely'" in " ".join(result.output.split())
    # one case of a file judged alone (judge --case) is no pair to score: allowed there
    from privacy_ci.cases import read_case_file

    assert read_case_file(path)[2].pair_id == "lonely"


# ---------------------------------------------------------------------------------
# the cross-check's flags, as the judge CLI, the report's tables and case pages show them
# ---------------------------------------------------------------------------------
def _flagged_check() -> Any:
    from privacy_ci.judging import CrossCheck

    return CrossCheck(
        model_verdict=P,
        reasoner_verdict=X,
        reasoner_rule="164.502(a)-general-rule",
        agree=False,
        determined=False,
        flag="permit-unsupported",
        reason="the model permits, but on the facts read the law prohibits: ...",
        rule={
            "id": "164.502(a)-general-rule",
            "paragraph": "164.502(a)",
            "title": "No use or disclosure except as permitted",
            "effect": "prohibit",
        },
        facts={
            "recipient": {
                "value": "other",
                "source": "read",
                "quote": "the insurer",
                "start": 4,
                "end": 15,
            },
            "authorization": {"value": "absent", "source": "presumed"},
        },
        near_misses=[
            {
                "rule": "164.508(a)(1)-authorization",
                "paragraph": "164.508(a)(1)",
                "title": "Use or disclosure consistent with a valid authorization",
                "failing": [{"fact": "authorization", "value": None, "needs": ["valid"]}],
            }
        ],
        questions=[
            {
                "fact": "authorization",
                "question": "Did the patient sign a valid authorization?",
                "text": "permitted if valid; prohibited otherwise",
                "branches": [],
            }
        ],
    )


def test_the_judge_cli_prints_the_flags_rule_facts_and_questions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from privacy_ci.cli.judge import _render_cross_check
    from privacy_ci.judging import CrossCheck

    _render_cross_check(_flagged_check())
    out = " ".join(capsys.readouterr().out.split())
    assert "ci-reasoner: prohibit (on presumptions) (disagrees with the model)" in out
    assert "flagged permit-unsupported: the model permits" in out
    assert "rule: 164.502(a) No use or disclosure except as permitted" in out
    assert "(164.502(a)-general-rule: prohibit)" in out
    assert 'recipient = other read: "the insurer" at 4-15' in out
    assert "authorization = absent presumed: not stated" in out
    assert "near miss 164.508(a)(1) Use or disclosure consistent with a valid authorization" in out
    assert "authorization is unknown, needs valid" in out
    assert "question authorization: Did the patient sign a valid authorization?" in out
    assert "conditions" not in out
    quiet = CrossCheck(P, P, "164.506(c)(1)-own-treatment", True, True)
    _render_cross_check(quiet)
    out = " ".join(capsys.readouterr().out.split())
    assert "ci-reasoner: permit (agrees with the model)" in out
    assert "rule: 164.506(c)(1)-own-treatment" in out and "not flagged" in out
    failed = CrossCheck(P, None, "", False, error="the reasoner failed: no NLP model")
    _render_cross_check(failed)
    out = " ".join(capsys.readouterr().out.split())
    assert "no verdict (it failed)" in out and "no NLP model" in out


def test_the_report_shows_a_flags_rule_facts_and_questions() -> None:
    from privacy_ci.evaluation._report import _flag_row
    from privacy_ci.evaluation._report_cases import _cross_check_html

    check = _flagged_check().as_dict()
    row = _flag_row({"case_id": "c1", "gold": "prohibit", "cross_check": check})
    assert row[:4] == ["c1", "Prohibit", "Permit", "Prohibit (on presumptions)"]
    assert row[4].startswith("permit-unsupported: the model permits")
    assert row[5] == "164.502(a)-general-rule (164.502(a))"
    assert row[6] == 'recipient = other (read: "the insurer"); authorization = absent (presumed)'
    assert (
        "near miss 164.508(a)(1)-authorization (164.508(a)(1)): authorization is unknown"
        in (row[7])
    )
    assert "Did the patient sign a valid authorization?" in row[7]
    page = _cross_check_html(check, {"authorization": "valid"})
    assert "the ci-reasoner says Prohibit (on presumptions) (disagrees)" in page
    assert "deciding rule: 164.502(a)-general-rule (164.502(a))" in page
    assert "“the insurer”" in page and "✗ gold: valid" in page
    assert "Did the patient sign a valid authorization?" in page
    assert "164.508(a)(1)-authorization (164.508(a)(1))" in page  # the near miss
    assert "None (" not in page
    # an older run's flag (the condition catalogue) keeps its shape
    old = {
        "reasoner": "ci-reasoner",
        "model_verdict": "permit",
        "reasoner_verdict": "prohibit",
        "agree": False,
        "flagged": True,
        "flag": {
            "kind": "permit-unsupported",
            "reason": "unstated",
            "norm": {"id": "n1", "paragraph": "164.508(a)"},
            "conditions": [
                {"id": "signed", "status": "unstated", "question": "Signed?", "evidence": []}
            ],
        },
    }
    row = _flag_row({"case_id": "c2", "gold": "permit", "cross_check": old})
    assert row[5] == "n1 (164.508(a))" and row[6] == "signed: unstated" and row[7] == ""
    assert "norm: n1 (164.508(a))" in _cross_check_html(old)


def test_eval_prints_the_cross_checks_kinds_and_presumptions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from privacy_ci.cli.evaluate import print_cross_check

    block = {
        "reasoner": "ci-reasoner",
        "compared": 4,
        "rows": ["permit", "prohibit", "not_applicable", "unparsed"],
        "columns": ["permit", "prohibit", "not_applicable", "failed"],
        "counts": [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        "agreed": 2,
        "agreement": 0.5,
        "on_presumptions": 3,
        "flagged": 2,
        "flags": {"permit-unsupported": 1, "prohibit-despite-permission": 1},
        "flagged_cases": ["a", "b"],
        "reasoner_errors": 0,
    }
    print_cross_check(block)
    out = " ".join(capsys.readouterr().out.split())
    assert "2 flagged (1 permit-unsupported, 1 prohibit-despite-permission)" in out
    assert "rests on presumptions in 3" in out and "failed" in out
