"""Scale benchmark of the gated retrieval path (issue 15): the Riverside corpus
replicated to N documents, loaded as a corpus folder, then served in-process.

For each N (default 2,000 and 10,000; ``--quick``: 2,000 only) and each store
(SQLite in a temporary folder; PostgreSQL too with ``--pg URL``, a database it
empties first): load time and documents/s (`load_corpus` + `load_corpus_into`,
and `load_corpus_into` alone: the store's bulk writes),
the first snapshot's build time, peak RSS, `retrieve_for` latency p50/p99 over 50
queries from four requesters (warm), the first request after a write (an
assignment), and `decide_for` p99. Each replicated document keeps its subject,
so a doctor's authorized set grows with N like everyone's.

Targets of the issue, for later sessions (printed, not asserted): at 1M documents
retrieve p99 <= 50 ms warm and after a write, RSS <= 2 GB. This benchmark does
not yet run the PostgreSQL full-text-search baselines.

Run: ``.venv/bin/python benchmarks/scale.py [--quick] [--n 2000 10000] [--pg URL]``.
The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUERIES = [
    "lipid panel cholesterol",
    "blood pressure medication",
    "discharge summary",
    "insurance claim denied",
    "mri imaging report",
    "psychotherapy session notes",
    "allergy penicillin",
    "billing statement balance",
    "lab results glucose",
    "referral cardiology",
]
REQUESTERS = ("D01", "D02", "N01", "B01")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def build_corpus(n: int, folder: Path) -> Any:
    """Riverside replicated to `n` documents: each replica is a new set of patients.

    Document ``i`` copies Riverside label ``i % 105`` into replica ``r = i // 105``,
    whose subjects are new people (``P01~00007``); each requester keeps its
    Riverside assignments in every twelfth replica only, so a doctor is assigned
    to about 1% of the subjects at every N (D01: 3 of Riverside's 25 subjects, in
    one replica of twelve). Organisation-level documents replicate too. The texts
    are Riverside's rendered documents, written once as files.
    """
    from privacy_ci.conductor import Corpus, LabelSet, load_corpus, render_corpus

    base = load_corpus()
    texts = render_corpus(base)
    docs = folder / "documents"
    docs.mkdir()
    labels = []
    base_labels = list(base.labels)
    replicas = (n + len(base_labels) - 1) // len(base_labels)
    for i in range(n):
        label = base_labels[i % len(base_labels)]
        r = i // len(base_labels)
        subject = None if label.subject is None else f"{label.subject}~{r:05d}"
        doc_id = f"{label.doc_id}-{r:05d}"
        labels.append(label.model_copy(update={"doc_id": doc_id, "subject": subject}))
        (docs / f"{doc_id}.txt").write_text(texts[label.doc_id], encoding="utf-8")
    assignments = {
        agent: frozenset(f"{s}~{r:05d}" for s in subjects for r in range(0, replicas, 12))
        for agent, subjects in base.assignments.items()
    }
    return Corpus(base.policy, base.directory, LabelSet(labels), assignments, folder)


def measure(url: str, corpus: Any, n: int) -> dict[str, Any]:
    from privacy_ci.conductor import Label
    from privacy_ci.store import DocumentStore, decide_for, load_corpus_into, retrieve_for

    store = DocumentStore(url)
    store.init_schema()
    start = time.perf_counter()
    load_corpus_into(store, corpus)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    snap = store.snapshot()
    index_s = time.perf_counter() - start
    requesters = [snap.requester(a) for a in REQUESTERS]
    authorized = {r.id: snap.index.scope(r).authorized for r in requesters}
    for r in requesters:
        retrieve_for(store, r, QUERIES[0], k=5)
    times = []
    for i in range(200):
        requester = requesters[i % len(requesters)]
        t = time.perf_counter()
        retrieve_for(store, requester, QUERIES[i % len(QUERIES)], k=5)
        times.append((time.perf_counter() - t) * 1000)
    # the first request after each kind of write (the next request must see it)
    after: dict[str, float] = {}
    first = next(iter(corpus.labels))
    writes = {
        "assign": lambda: store.assign("N01", "P01~00001", "bench"),
        "unassign": lambda: store.unassign("N01", "P01~00001", "bench"),
        "revoke": lambda: store.revoke_label(first.doc_id, "bench"),
        "propose": lambda: store.propose_label(
            Label.model_validate({**first.model_dump(mode="json"), "title": "edited"}), "bench"
        ),
        "approve": lambda: store.approve_label(first.doc_id, "bench"),
        "put_document": lambda: store.put_document(first.doc_id, "lipid panel again", "bench"),
    }
    for name, write in writes.items():
        write()
        t = time.perf_counter()
        retrieve_for(store, store.snapshot().requester("N01"), QUERIES[1], k=5)
        after[name] = round((time.perf_counter() - t) * 1000, 2)
    ids = [label.doc_id for label in corpus.labels]
    decide = []
    for i in range(200):
        t = time.perf_counter()
        decide_for(store, requesters[i % len(requesters)], ids[(i * 7919) % len(ids)])
        decide.append((time.perf_counter() - t) * 1000)
    store.close()
    return {
        "documents": n,
        "load_s": round(load_s, 2),
        "load_docs_per_s": round(n / load_s),
        "index_build_s": round(index_s, 3),
        "rss_peak_mb": round(_rss_mb()),
        "authorized": authorized,
        "retrieve_p50_ms": round(statistics.median(times), 2),
        "retrieve_p99_ms": round(_percentile(times, 0.99), 2),
        "after_write_ms": after,
        "after_write_max_ms": max(after.values()),
        "decide_p99_ms": round(_percentile(decide, 0.99), 2),
    }


def _empty_pg(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 2,000 only")
    parser.add_argument("--n", type=int, nargs="+", default=None, help="document counts")
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (emptied first)")
    args = parser.parse_args(argv)
    if not os.environ.get("PRIVACY_CI_DATA"):
        default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
        if (default / "SOURCES.md").exists():
            os.environ["PRIVACY_CI_DATA"] = str(default)
    sizes = args.n or ([2000] if args.quick else [2000, 10000])
    runs: list[dict[str, Any]] = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="privacy-ci-scale-") as tmp:
            folder = Path(tmp) / "corpus"
            folder.mkdir()
            corpus = build_corpus(n, folder)
            targets = [("sqlite", str(Path(tmp) / "store.db"))]
            if args.pg:
                targets.append(("postgresql", args.pg))
            for engine, url in targets:
                if engine == "postgresql":
                    _empty_pg(url)
                figures = {"store": engine, **measure(url, corpus, n)}
                runs.append(figures)
                print(
                    f"{engine:10} N={n:>7,}: load {figures['load_s']} s"
                    f" ({figures['load_docs_per_s']}/s), index {figures['index_build_s']} s,"
                    f" retrieve p50 {figures['retrieve_p50_ms']} ms p99"
                    f" {figures['retrieve_p99_ms']} ms, after a write (max)"
                    f" {figures['after_write_max_ms']} ms, decide p99"
                    f" {figures['decide_p99_ms']} ms, peak RSS {figures['rss_peak_mb']} MB",
                    flush=True,
                )
    print(json.dumps({"benchmark": "scale", "quick": args.quick, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
