"""Benchmark of the model-free ``ci-reasoner`` (issue 13's targets), beside the baselines.

For the GoldCoin real cases (the report set) and the synthetic cases (the
development set): accuracy, prohibit F1 and macro-F1 (with intervals), coverage
and accuracy on answered cases (the reasoner abstains when no norm applies; an
abstention counts wrong), beside the majority and the health-information rule
baselines on the same cases; then speed: the median and p99 time per case once
loaded, and the wall time of the 214 real cases from a cold start (a fresh process
that loads spaCy, the knowledge base and the catalogue).

Targets (printed, not asserted): real cases accuracy >= 0.93, prohibit F1 >= 0.70,
macro-F1 >= 0.85; synthetic accuracy >= 0.90; median <= 50 ms per case; the real
cases in <= 20 s from a cold start.

Run: ``.venv/bin/python benchmarks/judge.py`` (``--quick``: 60 cases of each set,
no cold start). The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

TARGETS = {
    "real_accuracy": 0.93,
    "real_prohibit_f1": 0.70,
    "real_macro_f1": 0.85,
    "synthetic_accuracy": 0.90,
    "median_ms": 50.0,
    "cold_real_s": 20.0,
}


def evaluate(name: str, limit: int | None) -> dict[str, Any]:
    """Judge a dataset's cases with the reasoner; scores, baselines and timings."""
    from privacy_ci.cases import load_dataset
    from privacy_ci.evaluation import baseline_scores, score_run
    from privacy_ci.reasoning import CIReasoner

    dataset = load_dataset(name)
    cases = list(dataset.cases if limit is None else dataset.sample(limit, 0).cases)
    reasoner = CIReasoner()
    reasoner.judge("warm up: a clinic sent a record.")
    pairs, times, abstained, right_answered = [], [], 0, 0
    for case in cases:
        start = time.perf_counter()
        result = reasoner.judge(case.text, case.flow)
        times.append((time.perf_counter() - start) * 1000)
        verdict = None if result.verdict is None else result.verdict.value
        pairs.append((case.label.value, verdict))
        if verdict is None:
            abstained += 1
        elif verdict == case.label.value:
            right_answered += 1
    scores = score_run(pairs, dataset.protocol.task.value, bootstrap=1000, seed=0).as_dict()
    main = scores["main"]
    answered = len(cases) - abstained
    times.sort()
    base = baseline_scores(cases, dataset.protocol, bootstrap=200, seed=0)
    return {
        "dataset": name,
        "cases": len(cases),
        "accuracy": main["accuracy"],
        "accuracy_ci": main["accuracy_ci"],
        "macro_f1": main["macro_f1"],
        "prohibit_f1": main["per_class"]["prohibit"]["f1"],
        "per_class": main["per_class"],
        "confusion": main["confusion"],
        "abstained": abstained,
        "coverage": round(answered / len(cases), 4),
        "accuracy_on_answered": round(right_answered / answered, 4) if answered else None,
        "median_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[min(len(times) - 1, int(0.99 * len(times)))], 2),
        "baselines": {
            k: {
                "accuracy": v["scores"]["main"]["accuracy"],
                "macro_f1": v["scores"]["main"]["macro_f1"],
                "prohibit_f1": v["scores"]["main"]["per_class"]["prohibit"]["f1"],
            }
            for k, v in base.items()
        },
    }


def cold_start() -> float:
    """Wall seconds for a fresh process to load everything and judge the 214 real cases."""
    code = (
        "from privacy_ci.cases import load_dataset\n"
        "from privacy_ci.reasoning import CIReasoner\n"
        "r = CIReasoner()\n"
        "for c in load_dataset('real').cases: r.judge(c.text, c.flow)\n"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 cases of each set, no cold start")
    args = parser.parse_args(argv)
    limit = 60 if args.quick else None
    real = evaluate("real", limit)
    synthetic = evaluate("synthetic", limit)
    cold = None if args.quick else round(cold_start(), 2)
    for fig in (real, synthetic):
        print(
            f"{fig['dataset']:9s} ({fig['cases']} cases): accuracy {fig['accuracy']:.3f}"
            f" [{fig['accuracy_ci']['low']:.3f}, {fig['accuracy_ci']['high']:.3f}],"
            f" prohibit F1 {fig['prohibit_f1']:.3f}, macro-F1 {fig['macro_f1']:.3f};"
            f" coverage {fig['coverage']:.3f} ({fig['abstained']} abstained), accuracy on"
            f" answered {fig['accuracy_on_answered']}; median {fig['median_ms']} ms, p99"
            f" {fig['p99_ms']} ms"
        )
        for name, b in fig["baselines"].items():
            print(
                f"          baseline {name}: accuracy {b['accuracy']:.3f}, prohibit F1"
                f" {b['prohibit_f1']:.3f}, macro-F1 {b['macro_f1']:.3f}"
            )
    if cold is not None:
        print(f"cold start: the 214 real cases judged in {cold} s (a fresh process, all loads)")
    met = {
        "real_accuracy": real["accuracy"] >= TARGETS["real_accuracy"],
        "real_prohibit_f1": real["prohibit_f1"] >= TARGETS["real_prohibit_f1"],
        "real_macro_f1": real["macro_f1"] >= TARGETS["real_macro_f1"],
        "synthetic_accuracy": synthetic["accuracy"] >= TARGETS["synthetic_accuracy"],
        "median_ms": real["median_ms"] <= TARGETS["median_ms"],
        "cold_real_s": None if cold is None else cold <= TARGETS["cold_real_s"],
    }
    print(
        "targets: "
        + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items() if v is not None)
    )
    figures = {
        "benchmark": "judge",
        "method": "ci-reasoner (model-free)",
        "quick": args.quick,
        "real": {k: v for k, v in real.items() if k not in ("per_class", "confusion")},
        "synthetic": {k: v for k, v in synthetic.items() if k not in ("per_class", "confusion")},
        "real_confusion": real["confusion"],
        "cold_real_s": cold,
        "targets": TARGETS,
        "targets_met": met,
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
