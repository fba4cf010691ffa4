"""Benchmark of ``privacy-ci ask`` and of ``privacy-ci judge`` on the ci-reasoner
(issue 25: each ask step < 100 ms; a judgment in under a second once loaded).

Four measurements, printed (not asserted):

* **the law on partial facts**: `apply_law` on the gold facts of the development
  pairs with each fact and each two facts removed (each set once): milliseconds per
  decision, and how many ran out of the search's limit (``exhausted``).
* **ask steps**: sessions of `privacy_ci.reasoning.Questionnaire` started from
  nothing and answered from the gold facts of the development pairs (and the schema's
  presumptions), one answer right after each step: the milliseconds of every step
  after the first (`answer` + `next_step`: the law alone). Without the background
  decisions (the worst case: nothing decided in advance) and, for a few sessions,
  with them and a pause before each answer as a person takes (``--think``).
* **ask from a narrative**: the first step (reading the narrative) and the steps
  after it.
* **judge**: ``privacy-ci judge "..."`` (the default method with no model configured)
  as a subprocess: wall time of the whole command, the time it took to load the
  reader and the judging time it prints; and, in this process, where the load goes
  (imports, spaCy, the embedding model, the reader's example bank and cue lemmas).

Run: ``.venv/bin/python benchmarks/ask.py`` (``--quick``: 6 sessions, 1 judge run).
The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

NARRATIVE = "A hospital faxed her lab results to her employer although she never signed a release."


def _gold() -> list[dict[str, str]]:
    path = Path(str(resources.files("privacy_ci.cases") / "packaged" / "hipaa-pairs-dev.jsonl"))
    return [json.loads(line)["facts"] for line in path.read_text(encoding="utf-8").splitlines()]


def _session(
    truth: Mapping[str, str], prefetch: bool, think: float
) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds (this thread's: what the step costs on an idle core) of
    every step after the first."""
    from privacy_ci.reasoning import Questionnaire, StepKind

    wall: list[float] = []
    cpu: list[float] = []
    with Questionnaire(prefetch=prefetch) as session:
        step = session.start()
        while step.kind is not StepKind.VERDICT:
            assert step.fact is not None
            time.sleep(think)
            start, start_cpu = time.perf_counter(), time.thread_time()
            session.answer(step.fact, truth.get(step.fact))
            step = session.next_step()
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.thread_time() - start_cpu) * 1000)
    return wall, cpu


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "steps": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1),
        "max_ms": round(ms[-1], 1),
        "share_under_100ms": round(sum(m < 100 for m in ms) / len(ms), 3),
    }


def ask_steps(sessions: int, think_sessions: int, think: float) -> dict[str, Any]:
    from privacy_ci.reasoning import load_fact_schema

    presumed = {s.name: s.presume for s in load_fact_schema() if s.presume is not None}
    gold = _gold()
    chosen = gold[:: max(1, len(gold) // sessions)][:sessions]
    plain: list[float] = []
    plain_cpu: list[float] = []
    for facts in chosen:
        wall, cpu = _session({**presumed, **facts}, prefetch=False, think=0)
        plain += wall
        plain_cpu += cpu
    thinking: list[float] = []
    for facts in chosen[:think_sessions]:
        thinking += _session({**presumed, **facts}, prefetch=True, think=think)[0]
    out: dict[str, Any] = {
        "sessions": len(chosen),
        "no_prefetch_wall": _summary(plain),
        "no_prefetch_cpu": _summary(plain_cpu),
    }
    if thinking:
        out[f"prefetch_think_{think}s_wall"] = _summary(thinking)
    return out


def law_partial() -> dict[str, Any]:
    from itertools import combinations

    from privacy_ci.reasoning import Facts, apply_law, load_law

    book = load_law()
    cases: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for gold in _gold():
        for size in (1, 2):
            for gone in combinations(sorted(gold), size):
                partial = {k: v for k, v in gold.items() if k not in gone}
                cases.setdefault(tuple(sorted(partial.items())), partial)
    ms: list[float] = []
    exhausted = 0
    for known in cases.values():
        facts = Facts.from_mapping(book.schema, known)
        start = time.perf_counter()
        decision = apply_law(book, facts)
        ms.append((time.perf_counter() - start) * 1000)
        exhausted += decision.exhausted
    summary = _summary(ms)
    return {
        "decisions": summary.pop("steps"),
        **{k: v for k, v in summary.items() if k != "share_under_100ms"},
        "exhausted": exhausted,
    }


def ask_narrative() -> dict[str, Any]:
    from privacy_ci.reasoning import Questionnaire, StepKind

    session = Questionnaire()
    start = time.perf_counter()
    step = session.start(NARRATIVE)
    first = time.perf_counter() - start
    times = []
    while step.kind is not StepKind.VERDICT:
        assert step.fact is not None
        start = time.perf_counter()
        if step.kind is StepKind.CONFIRM:
            session.confirm(step.fact)
        else:
            session.answer(step.fact, step.presumed)  # unknown where there is no presumption
        step = session.next_step()
        times.append((time.perf_counter() - start) * 1000)
    return {"first_step_s": round(first, 2), **_summary(times), "asked": session.asked}


def judge_command(runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVACY_CI_LLM_")}
    exe = Path(sys.executable).with_name("privacy-ci")
    walls, loads, judged = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [str(exe), "judge", NARRATIVE, "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        walls.append(time.perf_counter() - start)
        data = json.loads(done.stdout)
        assert data["method"] == "ci-reasoner", data["method"]
        loads.append(data["load_s"])
        judged.append(data["elapsed_s"])
    return {
        "runs": runs,
        "wall_s": [round(w, 2) for w in walls],
        "load_s": loads,
        "judging_s": judged,
    }


def load_breakdown() -> dict[str, float]:
    """Where the reader's load goes (each step timed once, cold: run in a fresh process
    by `main`)."""
    out: dict[str, float] = {}
    start = time.perf_counter()
    from privacy_ci.reasoning import FactReader

    out["import_s"] = time.perf_counter() - start
    reader = FactReader()
    for name, load in (
        ("spacy_s", lambda: reader.nlp),
        ("embedding_model_s", lambda: reader.embedder),
        ("example_bank_s", lambda: reader._bank),  # every example embedded, every start
        ("cue_lemmas_s", lambda: reader._cues),
        ("first_read_s", lambda: reader.read("A clinic sent a record to a hospital.")),
        ("read_s", lambda: reader.read(NARRATIVE)),
    ):
        start = time.perf_counter()
        load()
        out[name] = time.perf_counter() - start
    return {k: round(v, 3) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--think", type=float, default=2.0, help="seconds before each answer")
    parser.add_argument("--breakdown", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.breakdown:  # the child process of the load breakdown
        print(json.dumps(load_breakdown()))
        return
    sessions, think_sessions, runs = (6, 1, 1) if args.quick else (24, 2, 3)
    figures: dict[str, Any] = {"load_average": os.getloadavg()[0], "cpus": os.cpu_count()}
    figures["law_partial"] = law_partial()
    print("the law on partial facts:", figures["law_partial"])
    figures["ask_steps"] = ask_steps(sessions, think_sessions, args.think)
    print("ask steps (answered at once):", figures["ask_steps"])
    figures["ask_narrative"] = ask_narrative()
    print("ask from a narrative:", figures["ask_narrative"])
    figures["judge"] = judge_command(runs)
    print("privacy-ci judge:", figures["judge"])
    child = [sys.executable, __file__, "--breakdown"]
    done = subprocess.run(child, capture_output=True, text=True, check=True)
    figures["load"] = json.loads(done.stdout.splitlines()[-1])
    print("the reader's load:", figures["load"])
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
