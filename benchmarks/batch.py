"""Does a batch decision's time say which requested ids exist? (issue 24)

A requester sends ``POST /v1/decide/batch`` with 500 ids, of which 0, 100, 250 or
500 exist in the store (the rest are made up); every answer is "not available" for
ids it may not see. Before, the work grew with the ids that exist (each stored label
was read and validated): 50 / 67 / 95 / 183 ms. Now the decisions come from the access
index, one lookup and the same column reads per id, known or not.

Measured side by side in one run, interleaved, on a store of Riverside replicated to
1,050 documents (SQLite): the service path (FastAPI over TestClient, the requester's
token, audit record included) and, as the reference, the label-reading path the
operator's explained view still takes. Prints each mix's median and the ratio of the
slowest to the fastest mix per path (1.0 is ideal).

Run: ``.venv/bin/python benchmarks/batch.py [--rounds 15]``; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))
from privacy_ci.service import ServiceSettings, create_app, generate_key, issue_token
from privacy_ci.service._limits import Rate
from privacy_ci.store import DocumentStore, load_corpus_into
from privacy_ci.store._retrieval import decide_label
from scale import build_corpus

MIXES = (0, 100, 250, 500)
BATCH = 500


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = build_corpus(1050, folder)
        store = DocumentStore(f"sqlite:///{folder / 'store.db'}")
        load_corpus_into(store, corpus)
        key = generate_key()
        # the rate limit is not what is measured here
        unlimited = Rate(per_s=1e9, burst=1e9)
        app = create_app(store, ServiceSettings(jwt_key=key.encode(), decision_rate=unlimited))
        # a billing specialist: most documents exist but are not hers to see
        token = issue_token(key, "B01", "Billing Specialist", "Administrative")
        headers = {"Authorization": f"Bearer {token}"}
        existing = list(corpus.labels.ids)[:BATCH]
        batches = {
            known: existing[:known] + [f"MADE-UP-{i:04d}" for i in range(BATCH - known)]
            for known in MIXES
        }
        requester = store.snapshot().requester("B01")
        service: dict[int, list[float]] = {k: [] for k in MIXES}
        reference: dict[int, list[float]] = {k: [] for k in MIXES}
        with TestClient(app) as client:
            for round_ in range(args.rounds + 2):
                for known, ids in batches.items():
                    started = time.perf_counter()
                    r = client.post("/v1/decide/batch", json={"doc_ids": ids}, headers=headers)
                    took = (time.perf_counter() - started) * 1000
                    assert r.status_code == 200, r.text
                    started = time.perf_counter()
                    labels = store.read_labels(ids)
                    gate = store.snapshot().gate
                    for d in ids:
                        decide_label(gate, requester, labels.get(d), d)
                    ref = (time.perf_counter() - started) * 1000
                    if round_ >= 2:  # two warm-up rounds
                        service[known].append(took)
                        reference[known].append(ref)
        store.close()
    result: dict[str, Any] = {"batch": BATCH, "documents": 1050, "rounds": args.rounds}
    for name, times in (("service", service), ("label_path_reference", reference)):
        medians = {k: round(statistics.median(v), 2) for k, v in times.items()}
        result[name] = {
            "median_ms_by_existing": medians,
            "slowest_over_fastest": round(max(medians.values()) / min(medians.values()), 2),
        }
        print(
            f"{name:>22}: "
            + ", ".join(f"{k} exist {v:.1f} ms" for k, v in medians.items())
            + f"; slowest/fastest {result[name]['slowest_over_fastest']}"
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
