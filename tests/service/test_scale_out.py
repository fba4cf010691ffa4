"""Several service processes over one PostgreSQL store (issue 15): a change made
through one process, or in the database directly, holds at the next request to each.

Two real ``privacy-ci serve`` processes on 127.0.0.1 share one store; each keeps
only caches rebuilt from the database (the snapshot, keyed by the store version).
Skipped without PostgreSQL (``eval "$(scripts/ci_postgres.sh start)"``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from privacy_ci.conductor import Corpus
from privacy_ci.service import generate_key, issue_token
from privacy_ci.store import DocumentStore, load_corpus_into
from tests.service._serving import free_port, wait_until_answering
from tests.store.backends import PG_ENV, PG_URL, store_url

pytestmark = pytest.mark.skipif(
    not PG_URL, reason=f"{PG_ENV} is not set (scripts/ci_postgres.sh start)"
)

QUERY = {"query": "lipid panel cholesterol blood pressure", "k": 20}


@contextmanager
def _serve(url: str, key_file: Path, log: Path) -> Iterator[str]:
    """One ``privacy-ci serve`` process over `url`; yields its base URL."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "privacy_ci.cli.main",
                "serve",
                "--db",
                url,
                "--jwt-key-file",
                str(key_file),
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(proc, f"{base}/v1/health", "serve", log.read_text)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            proc.kill()
            proc.wait()


def _retrieved(base: str, headers: dict[str, str]) -> set[str]:
    response = httpx.post(f"{base}/v1/retrieve", json=QUERY, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return {d["doc_id"] for d in body["documents"]}


def _permitted(base: str, headers: dict[str, str], doc_id: str) -> bool:
    response = httpx.post(f"{base}/v1/decide", json={"doc_id": doc_id}, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["decision"] == "permit"


def test_two_processes_see_a_revocation_on_the_next_request(tmp_path: Path, corpus: Corpus) -> None:
    key = generate_key()
    key_file = tmp_path / "jwt.key"
    key_file.write_text(key)
    doctor = {"Authorization": f"Bearer {issue_token(key, 'D01', 'Doctor', 'Medical')}"}
    authority = {
        "Authorization": "Bearer "
        + issue_token(key, "PA1", "Policy Authority", "Administrative", authority=True)
    }
    with store_url("postgresql", tmp_path) as url, ExitStack() as stack:
        with DocumentStore(url) as store:
            load_corpus_into(store, corpus)
        first = stack.enter_context(_serve(url, key_file, tmp_path / "first.log"))
        second = stack.enter_context(_serve(url, key_file, tmp_path / "second.log"))

        # both serve the same documents (and have built their snapshots)
        seen = _retrieved(first, doctor)
        assert seen and _retrieved(second, doctor) == seen
        revoked = sorted(seen)[0]
        assert _permitted(first, doctor, revoked) and _permitted(second, doctor, revoked)

        # a revocation through the first process holds at the next request to each
        answer = httpx.post(f"{first}/v1/labels/{revoked}/revoke", headers=authority, timeout=30)
        assert answer.status_code == 200 and answer.json()["state"] == "revoked"
        for base in (second, first):
            assert revoked not in _retrieved(base, doctor)
            assert not _permitted(base, doctor, revoked)

        # an assignment revoked from a third connection (the database directly)
        with DocumentStore(url) as third:
            subject_of = {r.doc_id: r.label.subject if r.label else None for r in third.labels()}
            subjects = {subject_of[d] for d in seen - {revoked}} & third.assignments()["D01"]
            dropped = sorted(s for s in subjects if s)[0]
            third.unassign("D01", dropped, "test", "scale-out check")
        for base in (first, second):
            left = _retrieved(base, doctor)
            assert left and all(subject_of[d] != dropped for d in left), left

        # both processes appended their decisions to the one hash chain
        with DocumentStore(url) as third:
            report = third.audit.verify()
            assert report.ok and report.records >= 10, report
