"""Scale benchmark of the gated retrieval path (issue 15), side by side with
PostgreSQL full-text search.

The Riverside corpus is replicated to N documents, each replica a new set of
patients (see `build_corpus`: a doctor is assigned to about 1% of the subjects
at every N). For each N (default 10,000 and 100,000; ``--quick``: 10,000 only)
and each store (SQLite in a temporary folder; PostgreSQL too with ``--pg URL``,
a database it empties first):

* **ours**: the bulk load (`load_corpus_into`, documents/s); then, in a fresh
  process (so that its RSS is the serving process's, not the loader's): the
  access index's build time at start, `retrieve_for` p50/p99 over 200 queries
  from four requesters (warm), the first request after each kind of write
  (assign, unassign, revoke, propose, approve, new content), `decide_for` p99,
  and the process's peak RSS;
* **PostgreSQL full-text search** (``--pg`` only), on the same documents and
  queries: a ``tsvector`` column with a GIN index, ``ts_rank`` over the query's
  terms OR-ed (as BM25 matches any term), top 5, with the gate written as a SQL
  filter (approved, role on the ACL, assignment for tiers that need one) and as
  row-level security (the same rule as a policy, read by a non-owner role).

Then, per store, the exponent of a power-law fit of warm p50 against N (cost per
query grows sub-linearly when it is below 1). Targets of the issue (printed, not
asserted): at 1M documents retrieve p99 <= 50 ms warm and after a write, RSS <=
2 GB, ahead of the PostgreSQL baselines at every N.

Run: ``.venv/bin/python benchmarks/scale.py [--quick] [--n 10000 100000] [--pg URL]``.
The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
ROUNDS = 200


def _rss_mb(field: str = "VmHWM") -> float:
    """This process's peak RSS (``VmHWM``) or current RSS (``VmRSS``), on Linux from
    /proc: ``ru_maxrss`` survives exec, so a child would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _timing(times: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(_percentile(times, 0.99), 2),
    }


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


def serve(url: str) -> dict[str, Any]:
    """Our path in this (fresh) process: index build, warm and after-write latency, RSS."""
    from privacy_ci.conductor import Label
    from privacy_ci.store import DocumentStore, decide_for, retrieve_for

    store = DocumentStore(url)
    start = time.perf_counter()
    snap = store.snapshot()
    index_s = time.perf_counter() - start
    requesters = [snap.requester(a) for a in REQUESTERS]
    authorized = {r.id: snap.index.scope(r).authorized for r in requesters}
    for r in requesters:
        retrieve_for(store, r, QUERIES[0], k=5)
    times = []
    work_before = snap.index.work
    for i in range(ROUNDS):
        requester = requesters[i % len(requesters)]
        t = time.perf_counter()
        retrieve_for(store, requester, QUERIES[i % len(QUERIES)], k=5)
        times.append((time.perf_counter() - t) * 1000)
    work = (snap.index.work - work_before) / ROUNDS
    first = store.read_labels([str(store.db.query("SELECT MIN(doc_id) FROM labels")[0][0])])
    record = next(iter(first.values()))
    edited = Label.model_validate({**record.body, "title": "edited"})
    writes: dict[str, Callable[[], object]] = {
        "assign": lambda: store.assign("N01", "P01~00001", "bench"),
        "unassign": lambda: store.unassign("N01", "P01~00001", "bench"),
        "revoke": lambda: store.revoke_label(record.doc_id, "bench"),
        "propose": lambda: store.propose_label(edited, "bench"),
        "approve": lambda: store.approve_label(record.doc_id, "bench"),
        "put_document": lambda: store.put_document(record.doc_id, "lipid panel again", "bench"),
    }
    after: dict[str, float] = {}
    for name, write in writes.items():
        write()
        t = time.perf_counter()
        retrieve_for(store, store.snapshot().requester("N01"), QUERIES[1], k=5)
        after[name] = round((time.perf_counter() - t) * 1000, 2)
    ids = [r[0] for r in store.db.query("SELECT doc_id FROM labels")]
    decide = []
    for i in range(ROUNDS):
        t = time.perf_counter()
        decide_for(store, requesters[i % len(requesters)], ids[(i * 7919) % len(ids)])
        decide.append((time.perf_counter() - t) * 1000)
    store.close()
    return {
        "index_build_s": round(index_s, 2),
        "authorized": authorized,
        "retrieve": _timing(times),
        "postings_read_per_query": round(work),
        "after_write_ms": after,
        "after_write_max_ms": max(after.values()),
        "decide_p99_ms": round(_percentile(decide, 0.99), 2),
        "rss_peak_mb": round(_rss_mb()),
        "rss_serving_mb": round(_rss_mb("VmRSS")),  # after the index is built and used
    }


def _serve_in_child(url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--serve", url],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


_FTS_SETUP = [
    "DROP TABLE IF EXISTS fts_docs",
    """CREATE TABLE fts_docs AS
       SELECT l.doc_id,
              (l.body::jsonb ->> 'subject') AS subject,
              ARRAY(SELECT jsonb_array_elements_text(l.body::jsonb -> 'permitted_receiver_roles'))
                AS acl,
              COALESCE(t.needs_assignment, false) AND (l.body::jsonb ->> 'subject') IS NOT NULL
                AS needs_assignment,
              l.state = 'approved' AS approved,
              to_tsvector('english', d.content) AS tsv
       FROM labels l JOIN documents d USING (doc_id)
       LEFT JOIN fts_tiers t ON t.tier = l.body::jsonb ->> 'sensitivity_tier'""",
    "ALTER TABLE fts_docs ADD PRIMARY KEY (doc_id)",
    "CREATE INDEX fts_docs_tsv ON fts_docs USING GIN (tsv)",
    "ANALYZE fts_docs",
]
# the gate as SQL (Algorithm 1's checks 3-4; checks 1-2 are the requester's own),
# with the tier's assignment rule precomputed per row: the baseline's best case
_GATE_SQL = """approved AND %(role)s = ANY(acl)
  AND (NOT needs_assignment
       OR subject IN (SELECT subject_id FROM assignments WHERE agent_id = %(agent)s))"""
_RLS_GATE = _GATE_SQL.replace("%(role)s", "current_setting('app.role')").replace(
    "%(agent)s", "current_setting('app.agent')"
)
# the top 5 with their text, as an assistant needs them (ours fetches it too), in one query
_FTS_QUERY = """SELECT f.doc_id, f.score, d.content FROM (
    SELECT doc_id, ts_rank(tsv, q) AS score
    FROM fts_docs, to_tsquery('english', %(q)s) q
    WHERE tsv @@ q {gate}
    ORDER BY score DESC, doc_id LIMIT 5) f
  JOIN documents d USING (doc_id) ORDER BY f.score DESC, f.doc_id"""


def postgres_baselines(url: str) -> dict[str, Any]:
    """PostgreSQL full-text search with the gate as a SQL filter, and as row-level security."""
    import psycopg

    from privacy_ci.conductor import load_corpus
    from privacy_ci.store import DocumentStore

    policy = load_corpus().policy
    store = DocumentStore(url)
    snap = store.snapshot()
    requesters = [snap.requester(a) for a in REQUESTERS]
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        start = time.perf_counter()
        conn.execute("DROP TABLE IF EXISTS fts_tiers")
        conn.execute("CREATE TABLE fts_tiers (tier TEXT PRIMARY KEY, needs_assignment BOOLEAN)")
        for tier, rule in policy.tiers.items():
            conn.execute(
                "INSERT INTO fts_tiers VALUES (%s, %s)", (tier.value, rule.assignment_required)
            )
        for sql in _FTS_SETUP:
            conn.execute(sql)
        build_s = time.perf_counter() - start
        conn.execute("DROP POLICY IF EXISTS gate ON fts_docs")
        conn.execute("ALTER TABLE fts_docs ENABLE ROW LEVEL SECURITY")
        conn.execute(f"CREATE POLICY gate ON fts_docs FOR SELECT USING ({_RLS_GATE})")
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_reader')"
            " THEN CREATE ROLE bench_reader; END IF; END $$"
        )
        conn.execute("GRANT USAGE ON SCHEMA public TO bench_reader")
        conn.execute("GRANT SELECT ON fts_docs, assignments, documents TO bench_reader")
        out: dict[str, Any] = {"fts_build_s": round(build_s, 2)}
        for name, gate in (("pg_fts_filter", f"AND {_GATE_SQL}"), ("pg_fts_rls", "")):
            sql = _FTS_QUERY.format(gate=gate)
            if name == "pg_fts_rls":
                conn.execute("SET ROLE bench_reader")
            times = []
            for i in range(ROUNDS + len(requesters)):
                r = requesters[i % len(requesters)]
                q = " | ".join(QUERIES[i % len(QUERIES)].split())
                params = {"q": q, "role": r.active_role, "agent": r.id}
                if name == "pg_fts_rls":
                    conn.execute("SELECT set_config('app.role', %s, false)", (r.active_role,))
                    conn.execute("SELECT set_config('app.agent', %s, false)", (r.id,))
                t = time.perf_counter()
                conn.execute(sql, params).fetchall()
                if i >= len(requesters):  # the first round warms the caches
                    times.append((time.perf_counter() - t) * 1000)
            if name == "pg_fts_rls":
                conn.execute("RESET ROLE")
            out[name] = _timing(times)
    return out


def measure(engine: str, url: str, corpus: Any, n: int) -> dict[str, Any]:
    from privacy_ci.store import DocumentStore, load_corpus_into

    store = DocumentStore(url)
    start = time.perf_counter()
    load_corpus_into(store, corpus)
    load_s = time.perf_counter() - start
    store.close()
    figures: dict[str, Any] = {
        "store": engine,
        "documents": n,
        "load_s": round(load_s, 2),
        "load_docs_per_s": round(n / load_s),
        **_serve_in_child(url),
    }
    if engine == "postgresql":
        figures.update(postgres_baselines(url))
    return figures


def _empty_pg(url: str) -> None:
    import psycopg

    from privacy_ci.store._sql import redact

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
    except psycopg.Error as exc:  # a mistyped URL or a server that is down: say which
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SystemExit(f"scale.py: cannot use PostgreSQL at {redact(url)}: {first}") from None


def _exponent(runs: list[dict[str, Any]], key: str) -> float | None:
    """The slope of log(p50) against log(N): cost per query ~ N^slope."""
    points = [
        (math.log(r["documents"]), math.log(max(r[key]["p50_ms"], 1e-3))) for r in runs if key in r
    ]
    if len(points) < 2:
        return None
    mx = statistics.mean(x for x, _ in points)
    my = statistics.mean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return round(sum((x - mx) * (y - my) for x, y in points) / sxx, 2) if sxx else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 10,000 only")
    parser.add_argument("--n", type=int, nargs="+", default=None, help="document counts")
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (emptied first)")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if not os.environ.get("PRIVACY_CI_DATA"):
        default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
        if (default / "SOURCES.md").exists():
            os.environ["PRIVACY_CI_DATA"] = str(default)
    if args.serve:
        print(json.dumps(serve(args.serve)))
        return 0
    if args.pg:
        _empty_pg(args.pg)  # an unusable URL fails now, before any work
    sizes = args.n or ([10_000] if args.quick else [10_000, 100_000])
    runs: list[dict[str, Any]] = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="privacy-ci-scale-") as tmp:
            folder = Path(tmp) / "corpus"
            folder.mkdir()
            corpus = build_corpus(n, folder)
            targets = [("sqlite", f"sqlite:///{Path(tmp) / 'store.db'}")]
            if args.pg:
                targets.append(("postgresql", args.pg))
            for engine, url in targets:
                if engine == "postgresql":
                    _empty_pg(url)
                figures = measure(engine, url, corpus, n)
                runs.append(figures)
                line = (
                    f"{engine:10} N={n:>9,}: load {figures['load_s']} s"
                    f" ({figures['load_docs_per_s']}/s), index at start"
                    f" {figures['index_build_s']} s; retrieve p50"
                    f" {figures['retrieve']['p50_ms']} ms p99 {figures['retrieve']['p99_ms']} ms,"
                    f" after a write (max) {figures['after_write_max_ms']} ms, decide p99"
                    f" {figures['decide_p99_ms']} ms, RSS {figures['rss_serving_mb']} MB"
                    f" (peak {figures['rss_peak_mb']} MB)"
                )
                for base in ("pg_fts_filter", "pg_fts_rls"):
                    if base in figures:
                        line += (
                            f"; {base} p50 {figures[base]['p50_ms']} ms"
                            f" p99 {figures[base]['p99_ms']} ms"
                        )
                print(line, flush=True)
    fits = {}
    for engine in ("sqlite", "postgresql"):
        mine = [r for r in runs if r["store"] == engine]
        for key in ("retrieve", "pg_fts_filter", "pg_fts_rls"):
            slope = _exponent(mine, key)
            if slope is not None:
                fits[f"{engine}:{key}"] = slope
    if fits:
        print("p50 ~ N^k, k = " + ", ".join(f"{k} {v}" for k, v in fits.items()))
    print(json.dumps({"benchmark": "scale", "quick": args.quick, "runs": runs, "exponents": fits}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
