"""Benchmark of the model-free ``ci-reasoner`` (facts, then law; issue 25's targets).

One run judges, through the evaluation runner (`privacy_ci.evaluation.run_eval`, the
same scores as ``privacy-ci eval``), and prints side by side:

* ``pairs-dev`` and ``pairs-validation``: the development minimal pairs (written for
  development, tuned and validated on);
* ``pairs-heldout`` and ``cases-heldout``: written blind by a separate writer, never
  used to tune anything;
* GoldCoin ``real`` (214 court cases) and ``synthetic`` (618 generated cases), when
  the shared data is installed (``PRIVACY_CI_DATA``); skipped otherwise.

For each: accuracy (Wilson interval), prohibit F1, pair accuracy and flip rate
(bootstrap intervals; pair sets only), the accuracy of the law from the gold facts
and the share of gold facts read right (sets with gold facts), and the median and
p90 milliseconds per case once loaded (one case at a time); beside the
always-Permit and the health-information rule baselines on the same cases.

Targets (printed, not asserted; nothing is tuned on them): the law from gold facts
100% on the development pairs; on the held-out pairs, pair accuracy >= 0.70 and
flip rate >= 0.80; real cases accuracy >= 0.87 and prohibit F1 >= 0.40;
synthetic accuracy >= 0.90; median <= 50 ms per case.

Run: ``.venv/bin/python benchmarks/judge.py`` (``--quick``: 40 cases of each set, the
first 40 of a pair set, a stratified sample of the others). The last line of the
output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import tempfile
from typing import Any

from privacy_ci.cases import Dataset, load_dataset
from privacy_ci.errors import DataMissingError
from privacy_ci.evaluation import baseline_scores, run_eval
from privacy_ci.judging import Event, Method, build_method

SETS: tuple[tuple[str, str], ...] = (
    ("pairs-dev", "development pairs (tuned on)"),
    ("pairs-validation", "validation pairs (development data, validated on)"),
    ("pairs-heldout", "held-out pairs (never tuned on)"),
    ("cases-heldout", "held-out cases (never tuned on)"),
    ("real", "GoldCoin real (214 court cases)"),
    ("synthetic", "GoldCoin synthetic (618 generated)"),
)

TARGETS = {
    "pairs_dev_law_from_gold": 1.0,
    "pairs_heldout_pair_accuracy": 0.70,
    "pairs_heldout_flip_rate": 0.80,
    "real_accuracy": 0.87,
    "real_prohibit_f1": 0.40,
    "synthetic_accuracy": 0.90,
    "median_ms": 50.0,
}

BASELINES = ("always-permit", "health-rule")


def _first(dataset: Dataset, n: int) -> Dataset:
    """The first `n` cases (pairs are adjacent in the files, so they stay whole)."""
    protocol = dataclasses.replace(dataset.protocol, subset=f"first {n} cases")
    return Dataset(dataset.name, protocol, dataset.cases[:n], dataset.sha256, dataset.report)


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def evaluate(method: Method, name: str, limit: int | None) -> dict[str, Any]:
    """Judge one set with the method through the runner; scores, baselines, timings."""
    try:
        dataset = load_dataset(name)
    except DataMissingError as exc:
        return {"dataset": name, "skipped": str(exc)}
    if limit is not None and limit < len(dataset):
        # pair sets keep whole pairs; GoldCoin's files are ordered by label: a stratified sample
        paired = any(c.pair_id is not None for c in dataset.cases)
        dataset = _first(dataset, limit) if paired else dataset.sample(limit, 0)
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(
            run_eval(method, dataset, tmp, concurrency=1, progress=False, bootstrap=1000)
        )
    metrics = result.metrics
    main = metrics["scores"]["main"]
    times = sorted(1000 * float(r["elapsed_s"]) for r in result.records)
    out: dict[str, Any] = {
        "dataset": name,
        "cases": len(dataset),
        "backend": metrics["backend"],
        "accuracy": main["accuracy"],
        "accuracy_ci": main["accuracy_ci"],
        "prohibit_f1": main["per_class"]["prohibit"]["f1"],
        "macro_f1": main["macro_f1"],
        "errors": metrics["errors"],
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(_quantile(times, 0.9), 2),
        "pair_accuracy": None,
        "flip_rate": None,
        "law_from_gold": None,
        "facts_read_right": None,
        "confusion": main["confusion"],
    }
    pairs = metrics.get("pairs")
    if pairs:
        out["pairs"] = pairs["pairs"]
        out["pair_accuracy"] = pairs["pair_accuracy"]
        out["pair_accuracy_ci"] = pairs["pair_accuracy_ci"]
        out["flip_rate"] = pairs["flip_rate"]
        out["flip_rate_ci"] = pairs["flip_rate_ci"]
    gold = metrics.get("gold_facts")
    if gold:
        law = gold.get("law_from_gold") or {}
        out["law_from_gold"] = law.get("accuracy")
        out["law_from_gold_wrong"] = [w["case"] for w in law.get("wrong", [])]
        reading = gold.get("reading")
        if reading:
            out["facts_read_right"] = reading["overall"]["accuracy"]
            out["reading_per_fact"] = {k: v["accuracy"] for k, v in reading["facts"].items()}
    # the same baselines for every set, GoldCoin's included (its runs record only
    # majority and health-rule)
    base = baseline_scores(list(dataset.cases), dataset.protocol, bootstrap=0, always_permit=True)
    out["baselines"] = {}
    for key in BASELINES:
        s = base[key]["scores"]["main"]
        row: dict[str, Any] = {
            "accuracy": s["accuracy"],
            "prohibit_f1": s["per_class"]["prohibit"]["f1"],
        }
        if pairs:
            p = pairs["baselines"][key]
            row["pair_accuracy"], row["flip_rate"] = p["pair_accuracy"], p["flip_rate"]
        out["baselines"][key] = row
    return out


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(figures: list[dict[str, Any]]) -> list[str]:
    shown = [f for f in figures if "skipped" not in f]
    rows: list[tuple[str, list[str]]] = [
        ("cases", [_cell(f["cases"]) for f in shown]),
        ("accuracy", [_cell(f["accuracy"]) for f in shown]),
        (
            "  95% CI",
            [f"{f['accuracy_ci']['low']:.2f}-{f['accuracy_ci']['high']:.2f}" for f in shown],
        ),
        ("prohibit F1", [_cell(f["prohibit_f1"]) for f in shown]),
        ("pair accuracy", [_cell(f["pair_accuracy"]) for f in shown]),
        ("flip rate", [_cell(f["flip_rate"]) for f in shown]),
        ("law from gold facts", [_cell(f["law_from_gold"]) for f in shown]),
        ("facts read right", [_cell(f["facts_read_right"]) for f in shown]),
        ("median ms / case", [_cell(f["median_ms"], 1) for f in shown]),
        ("p90 ms / case", [_cell(f["p90_ms"], 1) for f in shown]),
    ]
    for key in BASELINES:
        rows.append((f"{key}: accuracy", [_cell(f["baselines"][key]["accuracy"]) for f in shown]))
        rows.append(
            (f"{key}: prohibit F1", [_cell(f["baselines"][key]["prohibit_f1"]) for f in shown])
        )
        rows.append(
            (
                f"{key}: pair acc / flip",
                [
                    f"{_cell(f['baselines'][key]['pair_accuracy'])} / "
                    f"{_cell(f['baselines'][key]['flip_rate'])}"
                    if "pair_accuracy" in f["baselines"][key]
                    else "—"
                    for f in shown
                ],
            )
        )
    width = max(len(label) for label, _ in rows)
    columns = [max(len(f["dataset"]), *(len(r[1][i]) for r in rows)) for i, f in enumerate(shown)]
    lines = [
        " " * width
        + "  "
        + "  ".join(f["dataset"].rjust(w) for f, w in zip(shown, columns, strict=True))
    ]
    for label, cells in rows:
        lines.append(
            label.ljust(width)
            + "  "
            + "  ".join(c.rjust(w) for c, w in zip(cells, columns, strict=True))
        )
    lines += [f"{f['dataset']}: skipped ({f['skipped']})" for f in figures if "skipped" in f]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 cases of each set")
    args = parser.parse_args(argv)
    limit = 40 if args.quick else None
    method = build_method("ci-reasoner", None)
    # loads the reader, the embeddings and the law book, so that timings are per case
    asyncio.run(method.judge(Event("Warm-up: a clinic mailed a patient's chart to a lawyer.")))
    figures = [evaluate(method, name, limit) for name, _ in SETS]
    by_name = {f["dataset"]: f for f in figures}
    backend = next((f["backend"] for f in figures if "backend" in f), "?")
    print(f"ci-reasoner (backend {backend}), one case at a time, beside the baselines:")
    for name, what in SETS:
        print(f"  {name}: {what}")
    for line in _table(figures):
        print(line)

    def value(name: str, key: str) -> Any:
        found = by_name.get(name, {})
        return None if "skipped" in found else found.get(key)

    checks = {
        "pairs_dev_law_from_gold": (value("pairs-dev", "law_from_gold"), ">="),
        "pairs_heldout_pair_accuracy": (value("pairs-heldout", "pair_accuracy"), ">="),
        "pairs_heldout_flip_rate": (value("pairs-heldout", "flip_rate"), ">="),
        "real_accuracy": (value("real", "accuracy"), ">="),
        "real_prohibit_f1": (value("real", "prohibit_f1"), ">="),
        "synthetic_accuracy": (value("synthetic", "accuracy"), ">="),
        "median_ms": (  # the slowest set's median
            max((f["median_ms"] for f in figures if "median_ms" in f), default=None),
            "<=",
        ),
    }
    met: dict[str, bool | None] = {}
    for key, (got, how) in checks.items():
        target = TARGETS[key]
        met[key] = None if got is None else (got >= target if how == ">=" else got <= target)
    print(
        "targets: "
        + ", ".join(
            f"{k} {_cell(checks[k][0])} {checks[k][1]} {TARGETS[k]}: "
            + ("n/a" if v is None else "met" if v else "NOT met")
            for k, v in met.items()
        )
    )
    summary = {
        "benchmark": "judge",
        "method": "ci-reasoner (facts, then law; model-free)",
        "backend": backend,
        "quick": args.quick,
        "sets": {f["dataset"]: {k: v for k, v in f.items() if k != "confusion"} for f in figures},
        "confusion": {f["dataset"]: f["confusion"] for f in figures if "confusion" in f},
        "targets": TARGETS,
        "targets_met": met,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
