"""Benchmark of the Privacy Conductor gate, side by side with Cedar (cedarpy).

Measures, in one run:

* `Gate.decide` on the 2,520 Riverside flows: per-call latency (median, p99) and
  decisions per second;
* `Gate.decide_batch` for one requester over many candidates, on Riverside
  (24 requesters x 105 documents) and on a generated corpus (100,000 documents,
  1,000 agents), excluding the one-off `Gate.compile` (reported separately);
* cedarpy's `is_authorized_batch` on the same flows, with the policy set, schema
  and entities parsed once beforehand;

and prints the issue's targets beside the figures (it does not assert them).
Correctness guards (batch == single on every flow of sampled agents, Cedar ==
gate on every flow Cedar decides) raise if they fail.

Run: ``.venv/bin/python benchmarks/gate.py`` (``--quick`` for a smoke run).
The last line of the output is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

import numpy as np

from privacy_ci.conductor import Corpus, Gate, Label, Requester, Rule, load_corpus

TARGET_SINGLE_MEDIAN_US = 2.0
TARGET_BATCH_PER_S = 10_000_000
TARGET_BATCH_VS_CEDAR = 300.0


class GuardFailed(AssertionError):
    """A correctness guard of the benchmark failed."""


# -- generated corpus ------------------------------------------------------------------
def generate(
    corpus: Corpus, n_docs: int, n_agents: int, n_people: int, rng: random.Random
) -> tuple[list[Label], list[Requester]]:
    """A large corpus over the Riverside policy, shaped like Riverside.

    Each document copies the tier and ACL of a random Riverside label (so only
    the nine Riverside ACLs occur, with Riverside's tier mix) and gets a random
    subject among `n_people` people when the template has one. Each agent takes
    the role and context of a random Riverside agent and is assigned to 24-48
    random people.
    """
    people = [f"Q{i:05d}" for i in range(n_people)]
    templates = list(corpus.labels)
    labels = []
    for i in range(n_docs):
        tpl = rng.choice(templates)
        subject = None if tpl.subject is None else rng.choice(people)
        labels.append(tpl.model_copy(update={"doc_id": f"G{i:06d}", "subject": subject}))
    agents = corpus.agents
    requesters = []
    for i in range(n_agents):
        agent = rng.choice(agents)
        requesters.append(
            Requester(
                id=f"A{i:04d}",
                roles=frozenset({agent.role}),
                active_role=agent.role,
                active_context=agent.context,
                assignments=frozenset(rng.sample(people, rng.randint(24, 48))),
            )
        )
    return labels, requesters


# -- timing helpers --------------------------------------------------------------------
def _timer_overhead_ns(n: int = 200_000) -> int:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(n):
        t0 = clock()
        t1 = clock()
        samples.append(t1 - t0)
    return int(statistics.median(samples))


def _best_seconds(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_single(
    gate: Gate, flows: Sequence[tuple[Requester, Label]], repeats: int
) -> dict[str, float]:
    """Per-call latency of `Gate.decide` (each call timed alone) and loop throughput."""
    decide = gate.decide
    clock = time.perf_counter_ns
    for requester, label in flows:  # warm up
        decide(requester, label)
    overhead = _timer_overhead_ns()
    samples: list[int] = []
    append = samples.append
    for _ in range(repeats):
        for requester, label in flows:
            t0 = clock()
            decide(requester, label)
            t1 = clock()
            append(t1 - t0)
    arr = np.asarray(samples, dtype=np.float64) - overhead

    def loop() -> None:
        for requester, label in flows:
            decide(requester, label)

    seconds = _best_seconds(loop, repeats)
    return {
        "median_us": float(np.median(arr)) / 1e3,
        "p99_us": float(np.percentile(arr, 99)) / 1e3,
        "per_s": len(flows) / seconds,
        "timer_overhead_ns": float(overhead),
        "samples": float(len(samples)),
    }


def bench_batch(
    gate: Gate, requesters: Sequence[Requester], labels: Sequence[Label], repeats: int
) -> dict[str, float]:
    """`Gate.compile` once (timed), then `decide_batch` for each requester (best of `repeats`)."""
    t0 = time.perf_counter()
    compiled = gate.compile(labels)
    compile_s = time.perf_counter() - t0
    decide_batch = gate.decide_batch

    def run() -> None:
        for requester in requesters:
            decide_batch(requester, compiled)

    run()  # warm up
    seconds = _best_seconds(run, repeats)
    n = len(requesters) * len(labels)
    return {
        "compile_s": compile_s,
        "per_s": n / seconds,
        "per_call_us": seconds / len(requesters) * 1e6,
        "decisions": float(n),
    }


def guard_batch_equals_single(
    gate: Gate, requesters: Sequence[Requester], labels: Sequence[Label]
) -> int:
    """Raise unless `decide_batch` and `decide` give the same rule on every flow."""
    compiled = gate.compile(labels)
    checked = 0
    for requester in requesters:
        batch = gate.decide_batch(requester, compiled)
        single = np.fromiter(
            (gate.decide(requester, label).rule for label in labels),
            dtype=np.uint8,
            count=len(labels),
        )
        bad = np.flatnonzero(single != batch.rules)
        if bad.size:
            i = int(bad[0])
            raise GuardFailed(
                f"decide_batch disagrees with decide on {bad.size} of {len(labels)} flows of"
                f" {requester.id}; first: {labels[i].doc_id}: batch"
                f" {Rule(int(batch.rules[i])).key}, single {Rule(int(single[i])).key}"
            )
        checked += len(labels)
    return checked


def bench_cedar(
    corpus: Corpus,
    requesters: Sequence[Requester],
    labels: Sequence[Label],
    flows: Sequence[tuple[Requester, Label]],
    repeats: int,
) -> dict[str, Any]:
    """cedarpy's `is_authorized_batch` over `flows`, everything parsed once beforehand.

    Returns the best figure over two ways of calling it (schema handle passed or
    not), the build time, and the allowed flags (for the guard).
    """
    import cedarpy

    from privacy_ci.conductor._cedar import CedarAuthorizer, request

    t0 = time.perf_counter()
    authorizer = CedarAuthorizer(corpus.policy, requesters, labels)
    build_s = time.perf_counter() - t0
    requests = [request(r.id, label.doc_id) for r, label in flows]
    policy_set, entities, schema = authorizer.policy_set, authorizer.entities, authorizer.schema
    results: dict[str, float] = {}
    allowed: list[bool] = []
    for name, schema_arg in (("no schema", None), ("schema handle", schema)):

        def run(schema_arg: Any = schema_arg) -> None:
            answers = cedarpy.is_authorized_batch(requests, policy_set, entities, schema_arg)
            allowed[:] = [answer.allowed for answer in answers]

        results[name] = len(requests) / _best_seconds(run, repeats)
    best = max(results, key=lambda k: results[k])
    return {
        "per_s": results[best],
        "variant": best,
        "variants": results,
        "build_s": build_s,
        "entities": len(authorizer),
        "flows": len(requests),
        "allowed": allowed,
    }


def guard_cedar_equals_gate(
    gate: Gate, flows: Sequence[tuple[Requester, Label]], allowed: Sequence[bool]
) -> int:
    """Raise unless Cedar's decisions equal `Gate.decide` on every flow."""
    for (requester, label), cedar_allowed in zip(flows, allowed, strict=True):
        decision = gate.decide(requester, label)
        if decision.permitted != cedar_allowed:
            raise GuardFailed(
                f"Cedar says allowed={cedar_allowed} but the gate says {decision.rule.key}"
                f" for {requester.id} -> {label.doc_id}"
            )
    return len(flows)


# -- output ----------------------------------------------------------------------------
def _rate(per_s: float) -> str:
    if per_s >= 1e6:
        return f"{per_s / 1e6:,.2f} M/s"
    if per_s >= 1e3:
        return f"{per_s / 1e3:,.1f} k/s"
    return f"{per_s:,.0f} /s"


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a small smoke run (seconds)")
    parser.add_argument("--seed", type=int, default=20240611, help="seed of the generated corpus")
    args = parser.parse_args(argv)

    quick: bool = args.quick
    n_docs, n_agents, n_people = (10_000, 100, 5_000) if quick else (100_000, 1_000, 5_000)
    batch_agents = 20 if quick else 200  # agents timed over the whole generated corpus
    guard_agents = 2 if quick else 5
    single_repeats = 3 if quick else 20
    batch_repeats = 3 if quick else 10
    cedar_repeats = 1 if quick else 3
    cedar_sample = 5_000 if quick else 100_000

    rng = random.Random(args.seed)
    corpus = load_corpus()
    gate = Gate(corpus.policy)
    riverside_requesters = corpus.requesters()
    riverside_labels = list(corpus.labels)
    riverside_flows = [(r, label) for r in riverside_requesters for label in riverside_labels]

    t0 = time.perf_counter()
    gen_labels, gen_requesters = generate(corpus, n_docs, n_agents, n_people, rng)
    generate_s = time.perf_counter() - t0

    # correctness guards first: a fast wrong answer is not a result
    checked = guard_batch_equals_single(gate, riverside_requesters, riverside_labels)
    checked += guard_batch_equals_single(gate, rng.sample(gen_requesters, guard_agents), gen_labels)

    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        single = bench_single(gate, riverside_flows, single_repeats)
        batch_rs = bench_batch(gate, riverside_requesters, riverside_labels, batch_repeats)
        batch_gen = bench_batch(
            gate, gen_requesters[:batch_agents], gen_labels, max(1, batch_repeats // 3)
        )
        cedar_rs = bench_cedar(
            corpus, riverside_requesters, riverside_labels, riverside_flows, cedar_repeats
        )
        gen_flows = [
            (rng.choice(gen_requesters), rng.choice(gen_labels)) for _ in range(cedar_sample)
        ]
        cedar_gen = bench_cedar(corpus, gen_requesters, gen_labels, gen_flows, cedar_repeats)
    finally:
        if gc_was_enabled:
            gc.enable()
    cedar_checked = guard_cedar_equals_gate(gate, riverside_flows, cedar_rs["allowed"])
    cedar_checked += guard_cedar_equals_gate(gate, gen_flows, cedar_gen["allowed"])

    cedar_best = max(cedar_rs["per_s"], cedar_gen["per_s"])
    ratio_batch = batch_gen["per_s"] / cedar_best
    ratio_batch_rs = batch_rs["per_s"] / cedar_best
    ratio_single = single["per_s"] / cedar_best

    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cedarpy": metadata.version("cedarpy"),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
    rows: list[tuple[str, str, str]] = []

    def row(name: str, value: str, target: str = "") -> None:
        rows.append((name, value, target))

    row("Gate.decide, Riverside 2,520 flows", "", "")
    row(
        "  median latency per call",
        f"{single['median_us']:.2f} us",
        f"<= {TARGET_SINGLE_MEDIAN_US:g} us  "
        f"{_verdict(single['median_us'] <= TARGET_SINGLE_MEDIAN_US)}",
    )
    row("  p99 latency per call", f"{single['p99_us']:.2f} us")
    row("  decisions/s (plain loop)", _rate(single["per_s"]))
    row("Gate.decide_batch (compile excluded)", "", "")
    row("  Riverside compile, 105 docs", f"{batch_rs['compile_s'] * 1e3:.2f} ms")
    row(
        "  Riverside, 24 x 105",
        _rate(batch_rs["per_s"]),
        f">= 10 M/s  {_verdict(batch_rs['per_s'] >= TARGET_BATCH_PER_S)}",
    )
    row("    per decide_batch call", f"{batch_rs['per_call_us']:.1f} us")
    row(f"  generated compile, {n_docs:,} docs", f"{batch_gen['compile_s']:.3f} s")
    row(
        f"  generated, {batch_agents} agents x {n_docs:,} docs",
        _rate(batch_gen["per_s"]),
        f">= 10 M/s  {_verdict(batch_gen['per_s'] >= TARGET_BATCH_PER_S)}",
    )
    row("    per decide_batch call", f"{batch_gen['per_call_us'] / 1e3:.3f} ms")
    row("cedarpy is_authorized_batch (pre-parsed)", "", "")
    row(
        f"  Riverside, {cedar_rs['flows']:,} flows",
        _rate(cedar_rs["per_s"]),
        f"best of: {cedar_rs['variant']}",
    )
    row(
        f"  generated sample, {cedar_gen['flows']:,} flows",
        _rate(cedar_gen["per_s"]),
        f"best of: {cedar_gen['variant']}",
    )
    row(f"  entities build, generated ({cedar_gen['entities']:,})", f"{cedar_gen['build_s']:.2f} s")
    row("Ratios (against cedarpy's best)", "", "")
    row(
        "  batch (generated) vs cedar",
        f"{ratio_batch:,.0f}x",
        f">= {TARGET_BATCH_VS_CEDAR:g}x  {_verdict(ratio_batch >= TARGET_BATCH_VS_CEDAR)}",
    )
    row("  batch (Riverside) vs cedar", f"{ratio_batch_rs:,.0f}x")
    row("  single vs cedar", f"{ratio_single:,.1f}x")
    row("Correctness guards", "", "")
    row("  decide_batch == decide", f"{checked:,} flows", "ok")
    row("  cedar == decide", f"{cedar_checked:,} flows", "ok")

    mode = "quick" if quick else "full"
    print(
        f"Privacy Conductor gate benchmark ({mode}): python {versions['python']},"
        f" numpy {versions['numpy']}, cedarpy {versions['cedarpy']},"
        f" {versions['cpus']} CPUs ({versions['machine']})"
    )
    print(
        f"generated corpus: {n_docs:,} docs, {n_agents:,} agents, {n_people:,} people"
        f" (built in {generate_s:.2f} s); timer overhead {single['timer_overhead_ns']:.0f} ns"
        f" subtracted from {int(single['samples']):,} single-call samples; GC off while timing"
    )
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'measurement':<{width}}{'value':>14}   target")
    print("-" * (width + 40))
    for name, value, target in rows:
        print(f"{name:<{width}}{value:>14}   {target}".rstrip())

    figures = {
        "mode": mode,
        "single_decide_median_us": round(single["median_us"], 4),
        "single_decide_p99_us": round(single["p99_us"], 4),
        "single_decide_per_s": round(single["per_s"]),
        "batch_riverside_per_s": round(batch_rs["per_s"]),
        "batch_riverside_call_us": round(batch_rs["per_call_us"], 2),
        "batch_generated_per_s": round(batch_gen["per_s"]),
        "batch_generated_call_ms": round(batch_gen["per_call_us"] / 1e3, 4),
        "compile_riverside_ms": round(batch_rs["compile_s"] * 1e3, 3),
        "compile_generated_s": round(batch_gen["compile_s"], 4),
        "generated_docs": n_docs,
        "generated_agents": n_agents,
        "cedar_batch_riverside_per_s": round(cedar_rs["per_s"]),
        "cedar_batch_generated_per_s": round(cedar_gen["per_s"]),
        "cedar_batch_per_s": round(cedar_best),
        "cedar_generated_flows": cedar_gen["flows"],
        "cedar_entities_build_s": round(cedar_gen["build_s"], 3),
        "ratio_batch_vs_cedar": round(ratio_batch, 1),
        "ratio_batch_riverside_vs_cedar": round(ratio_batch_rs, 1),
        "ratio_single_vs_cedar": round(ratio_single, 2),
        "target_single_median_met": single["median_us"] <= TARGET_SINGLE_MEDIAN_US,
        "target_batch_per_s_met": batch_gen["per_s"] >= TARGET_BATCH_PER_S,
        "target_batch_vs_cedar_met": ratio_batch >= TARGET_BATCH_VS_CEDAR,
        "guard_flows_batch_vs_single": checked,
        "guard_flows_cedar_vs_gate": cedar_checked,
        "backend": {
            **versions,
            "gate_batch": "numpy vectorised (uint64 ACL bitmasks, uint8 rule codes)",
            "cedar": f"cedarpy.is_authorized_batch, PolicySet/Schema/Entities handles parsed"
            f" once; best variant: {cedar_gen['variant']}",
            "timing": "single: perf_counter_ns per call, timer overhead subtracted; batch and"
            " cedar: best of repeats, perf_counter",
        },
    }
    sys.stdout.flush()
    print(json.dumps(figures, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
