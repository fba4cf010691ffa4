"""`run_eval`: records, manifest, metrics, resume, refusal, failures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.ci import Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.evaluation import (
    MANIFEST_FILE,
    METRICS_FILE,
    RECORDS_FILE,
    RunMismatch,
    compute_metrics,
    read_records,
    run_eval,
    run_eval_sync,
)
from privacy_ci.judging import Event, Judgment, MethodIdentity
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, RetryPolicy
from privacy_ci.llm.testing import ScriptedTestBackend

from . import HashMethod, hashed_verdict, toy_dataset


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (path / RECORDS_FILE).read_text().splitlines()]


def test_writes_records_manifest_and_metrics(tmp_path: Path) -> None:
    ds = toy_dataset(20)
    method = HashMethod(delay=0.001)
    result = run_eval_sync(method, ds, tmp_path, concurrency=4, progress=False, bootstrap=100)
    recs = lines(tmp_path)
    assert len(recs) == 20 and len({r["case_id"] for r in recs}) == 20
    rec = next(r for r in recs if r["case_id"] == "toy-0000")
    verdict = hashed_verdict("toy-0000")
    assert rec["gold"] == "permit"
    assert rec["verdict"] == (None if verdict is None else verdict.value)
    assert rec["parsed"] is (verdict is not None)
    assert rec["backend"] == "scripted-test-double:hash" and rec["method"] == "dp"
    assert rec["cited_ids"] == ["164.502"]
    step = rec["steps"][0]
    for key in ("prompt", "raw_output", "parsed", "retrieved_ids", "prompt_tokens", "latency_s"):
        assert key in step
    manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
    ident = manifest["identity"]
    assert ident["dataset"]["sha256"] == ds.sha256 and ident["dataset"]["task"] == "three_way"
    assert ident["method"] == "dp" and ident["cases"]["count"] == 20
    assert set(ident["prompts"]) == {"dp"} and len(ident["prompts"]["dp"]) == 64
    assert manifest["code"]["privacy_ci"] and "git_commit" in manifest["code"]
    assert manifest["status"] == "complete" and manifest["ended_at"]
    assert len(manifest["sessions"]) == 1 and manifest["sessions"][0]["judged"] == 20
    assert manifest["usage"]["records"]["prompt_tokens"] == 12 * 20
    metrics = json.loads((tmp_path / METRICS_FILE).read_text())
    assert metrics["complete"] and metrics["judged"] == 20
    assert metrics["test_double"] is True and metrics["backend"] == "scripted-test-double:hash"
    assert set(metrics["baselines"]) == {"majority", "health-rule"}
    assert metrics["scores"]["main"]["n"] == 20
    right = sum(
        1 for c in ds if (v := hashed_verdict(c.id)) is not None and v is c.label
    )  # by hand
    assert metrics["scores"]["main"]["correct"] == right
    again = compute_metrics(recs, ds, ds.cases, bootstrap=100)
    assert again["scores"] == metrics["scores"]
    assert result.judged == 20 and result.resumed == 0 and result.metrics == metrics


def test_resume_skips_finished_cases(tmp_path: Path) -> None:
    ds = toy_dataset(12)
    first = HashMethod()
    run_eval_sync(first, ds, tmp_path, concurrency=3, progress=False, bootstrap=50)
    second = HashMethod()
    result = run_eval_sync(second, ds, tmp_path, concurrency=3, progress=False, bootstrap=50)
    assert not second.calls and result.resumed == 12 and result.judged == 0
    assert len(lines(tmp_path)) == 12
    assert len(json.loads((tmp_path / MANIFEST_FILE).read_text())["sessions"]) == 2


def test_truncated_last_line_is_redone_not_duplicated(tmp_path: Path) -> None:
    ds = toy_dataset(10)
    full = run_eval_sync(HashMethod(), ds, tmp_path / "full", progress=False, bootstrap=50)
    run_eval_sync(HashMethod(), ds, tmp_path / "cut", progress=False, bootstrap=50)
    path = tmp_path / "cut" / RECORDS_FILE
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    lost = json.loads(data[last_start:])["case_id"]
    path.write_bytes(data[: last_start + 25])  # a record cut short by a kill
    read = read_records(path)
    assert len(read.records) == 9 and read.discarded == 25
    method = HashMethod()
    result = run_eval_sync(method, ds, tmp_path / "cut", progress=False, bootstrap=50)
    assert dict(method.calls) == {lost: 1}
    assert result.discarded_bytes == 25 and result.judged == 1
    recs = lines(tmp_path / "cut")
    assert sorted(r["case_id"] for r in recs) == sorted(c.id for c in ds)
    assert result.metrics["scores"] == full.metrics["scores"]


def test_last_line_without_its_newline_is_redone(tmp_path: Path) -> None:
    ds = toy_dataset(5)
    run_eval_sync(HashMethod(), ds, tmp_path, progress=False, bootstrap=0)
    path = tmp_path / RECORDS_FILE
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # complete JSON, newline lost
    method = HashMethod()
    run_eval_sync(method, ds, tmp_path, progress=False, bootstrap=0)
    assert sum(method.calls.values()) == 1 and len(lines(tmp_path)) == 5


def test_damaged_middle_line_is_an_error(tmp_path: Path) -> None:
    ds = toy_dataset(5)
    run_eval_sync(HashMethod(), ds, tmp_path, progress=False, bootstrap=0)
    path = tmp_path / RECORDS_FILE
    rows = path.read_text().splitlines()
    rows[1] = rows[1][:10]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(PrivacyCIError, match="line 2 is not a run record"):
        run_eval_sync(HashMethod(), ds, tmp_path, progress=False)


def test_refuses_to_resume_a_different_run(tmp_path: Path) -> None:
    ds = toy_dataset(6)
    run_eval_sync(HashMethod(), ds, tmp_path, progress=False, bootstrap=0)
    with pytest.raises(RunMismatch, match=r"method: 'dp' there, 'cot-auto' now"):
        run_eval_sync(HashMethod(name="cot-auto"), ds, tmp_path, progress=False)
    with pytest.raises(RunMismatch, match="settings"):
        run_eval_sync(
            HashMethod(), ds, tmp_path, progress=False, settings=GenerationSettings(temperature=0.7)
        )
    with pytest.raises(RunMismatch, match=r"dataset\.sha256"):
        run_eval_sync(HashMethod(), toy_dataset(6, name="other"), tmp_path, progress=False)
    with pytest.raises(RunMismatch, match=r"cases\.count"):
        run_eval_sync(HashMethod(), ds, tmp_path, progress=False, limit=3)
    with pytest.raises(RunMismatch, match="prompts"):
        run_eval_sync(HashMethod(), ds, tmp_path, progress=False, prompts={"dp": "0" * 64})
    assert len(lines(tmp_path)) == 6  # nothing was touched


def test_refuses_records_without_a_manifest(tmp_path: Path) -> None:
    (tmp_path / RECORDS_FILE).write_text('{"case_id": "x"}\n')
    with pytest.raises(RunMismatch, match=r"no manifest\.json"):
        run_eval_sync(HashMethod(), toy_dataset(3), tmp_path, progress=False)


def test_a_raising_method_loses_no_other_case(tmp_path: Path) -> None:
    ds = toy_dataset(8)
    method = HashMethod(raise_for={"toy-0003"})
    result = run_eval_sync(method, ds, tmp_path, concurrency=8, progress=False, bootstrap=0)
    recs = {r["case_id"]: r for r in lines(tmp_path)}
    assert len(recs) == 8
    bad = recs["toy-0003"]
    assert bad["verdict"] is None and "RuntimeError: boom" in str(bad["error"])
    assert result.metrics["errors"] == 1 and result.metrics["complete"]


def test_retry_errors_rejudges_failed_cases(tmp_path: Path) -> None:
    ds = toy_dataset(6)
    run_eval_sync(HashMethod(error_for={"toy-0001", "toy-0004"}), ds, tmp_path, progress=False)
    plain = HashMethod()
    run_eval_sync(plain, ds, tmp_path, progress=False)
    assert not plain.calls  # errors are final unless asked
    retry = HashMethod()
    result = run_eval_sync(retry, ds, tmp_path, progress=False, retry_errors=True)
    assert set(retry.calls) == {"toy-0001", "toy-0004"}
    recs = lines(tmp_path)
    assert len(recs) == 6 and not any(r["error"] for r in recs)
    assert result.metrics["errors"] == 0


def test_limit_takes_a_stratified_sample(tmp_path: Path) -> None:
    ds = toy_dataset(30)
    result = run_eval_sync(HashMethod(), ds, tmp_path, limit=10, progress=False, bootstrap=0)
    assert result.metrics["cases"] == 10
    assert result.manifest["identity"]["dataset"]["subset"] == "stratified sample n=10 seed=0"
    gold = [r["gold"] for r in result.records]
    assert gold.count("permit") == 4 and gold.count("prohibit") == 2


@dataclass
class Gauge:
    """A method that records how many cases are judged at once."""

    name: str = "dp"
    now: int = 0
    peak: int = 0

    def identity(self) -> MethodIdentity:
        return MethodIdentity(self.name)

    async def judge(self, event: Event) -> Judgment:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        return Judgment(self.name, Verdict.PERMIT, backend="scripted-test-double:gauge")


def test_concurrency_is_the_limit(tmp_path: Path) -> None:
    gauge = Gauge()
    run_eval_sync(gauge, toy_dataset(24), tmp_path, concurrency=6, progress=False, bootstrap=0)
    assert gauge.peak == 6


def test_progress_bar_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_eval_sync(HashMethod(), toy_dataset(4), tmp_path, progress=True, bootstrap=0)
    err = capsys.readouterr().err
    assert "dp on toy" in err and "retries" in err


def test_real_dp_over_the_scripted_backend_counts_retries(tmp_path: Path) -> None:
    from privacy_ci.judging import build_method

    answers: list[str | LLMError] = [LLMError("overloaded", retryable=True)]
    answers += ["Choice: B. Permitted", "Choice: A. Prohibited", "no idea"] * 3
    backend = ScriptedTestBackend(answers)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    client = LLMClient(backend, retry=RetryPolicy(max_retries=2), sleep=sleep, concurrency=1)
    method = build_method("dp", client)
    result = asyncio.run(
        run_eval(method, toy_dataset(9), tmp_path, concurrency=1, progress=False, bootstrap=0)
    )
    assert result.retries == 1 and len(slept) == 1
    assert result.metrics["test_double"] is True
    assert result.metrics["backend"] == "scripted-test-double:scripted"
    assert result.manifest["identity"]["model"]["provider"] == "scripted-test-double"
    assert result.manifest["sessions"][0]["usage"]["calls"] == 9
    verdicts: Sequence[object] = [r["verdict"] for r in result.records]
    assert verdicts.count(None) == 3 and verdicts.count("permit") == 3
    assert client.on_retry is None  # the hook is restored


def test_sync_wrapper_and_dataset_by_name_errors(tmp_path: Path) -> None:
    with pytest.raises(PrivacyCIError, match="concurrency must be at least 1"):
        run_eval_sync(HashMethod(), toy_dataset(3), tmp_path, concurrency=0)
    with pytest.raises(PrivacyCIError):
        run_eval_sync(HashMethod(), "no-such-dataset", tmp_path)
