"""Resume after SIGKILL: an eval killed mid-way and resumed scores like an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privacy_ci.evaluation import RECORDS_FILE, read_records, run_eval_sync

from . import HashMethod, server_dp, toy_dataset

REPO = Path(__file__).resolve().parents[2]


def _start(code: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_after(proc: subprocess.Popen[bytes], records: Path, at_least: int, total: int) -> int:
    """SIGKILL the child once `records` holds at least `at_least` lines; return the count."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the child ended before it was killed: {err.decode()[-2000:]}")
        if records.exists() and records.read_bytes().count(b"\n") >= at_least:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    done = len(read_records(records).records)
    assert at_least <= done < total, f"killed too late: {done}/{total} finished"
    return done


def _same_outcome(resumed: Path, full: Path, n: int) -> None:
    recs = [json.loads(x) for x in (resumed / RECORDS_FILE).read_text().splitlines()]
    ids = [r["case_id"] for r in recs]
    assert len(ids) == n and len(set(ids)) == n  # nothing lost, nothing twice
    ref = {
        json.loads(x)["case_id"]: json.loads(x)["verdict"]
        for x in (full / RECORDS_FILE).read_text().splitlines()
    }
    assert {r["case_id"]: r["verdict"] for r in recs} == ref
    got = json.loads((resumed / "metrics.json").read_text())
    want = json.loads((full / "metrics.json").read_text())
    for key in ("scores", "baselines", "cases", "judged", "errors", "unparsed", "complete"):
        assert got[key] == want[key], key
    manifest = json.loads((resumed / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["sessions"]) == 2
    assert manifest["sessions"][1]["resumed"] + manifest["sessions"][1]["judged"] == n


def test_sigkill_then_resume_with_a_fake_method(tmp_path: Path) -> None:
    n = 60
    out = tmp_path / "killed"
    code = (
        "from tests.evaluation import child_hash_run; "
        f"child_hash_run({str(out)!r}, {n}, delay=0.04, concurrency=4)"
    )
    proc = _start(code)
    done = _kill_after(proc, out / RECORDS_FILE, at_least=8, total=n)
    # simulate a record torn by the kill as well: it must be discarded and redone
    with open(out / RECORDS_FILE, "ab") as fh:
        fh.write(b'{"case_id": "toy-00')
    method = HashMethod()
    result = run_eval_sync(
        method, toy_dataset(n), out, concurrency=8, progress=False, bootstrap=200
    )
    assert result.resumed == done and result.judged == n - done
    assert result.discarded_bytes == len(b'{"case_id": "toy-00')
    assert max(method.calls.values()) == 1
    run_eval_sync(
        HashMethod(),
        toy_dataset(n),
        tmp_path / "full",
        concurrency=4,
        progress=False,
        bootstrap=200,
    )
    _same_outcome(out, tmp_path / "full", n)


def test_sigkill_then_resume_against_a_fake_server(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("uvicorn")
    from tests.llm.fake_openai_server import FakeLLMServer, running_server

    from . import fake_answer

    n = 40
    fake = FakeLLMServer(delay=0.05, answer=fake_answer)
    with running_server(fake.app) as url:
        out = tmp_path / "killed"
        code = (
            "from tests.evaluation import child_server_run; "
            f"child_server_run({str(out)!r}, {url + '/v1'!r}, {n}, concurrency=4)"
        )
        proc = _start(code)
        done = _kill_after(proc, out / RECORDS_FILE, at_least=6, total=n)
        before = len(fake.requests)
        method, client = server_dp(url + "/v1", 4)
        result = run_eval_sync(
            method,
            toy_dataset(n),
            out,
            concurrency=4,
            progress=False,
            client=client,
            bootstrap=200,
        )
        assert result.resumed == done and result.judged == n - done
        assert len(fake.requests) - before == n - done  # one DP call per remaining case
        assert result.metrics["backend"] == "openai-compatible:fake-model"
        assert not result.metrics["test_double"]
        method, client = server_dp(url + "/v1", 4)
        run_eval_sync(
            method,
            toy_dataset(n),
            tmp_path / "full",
            concurrency=4,
            progress=False,
            client=client,
            bootstrap=200,
        )
    _same_outcome(out, tmp_path / "full", n)
