"""`privacy-ci eval` and `privacy-ci report` end to end (fake server; embedded model if installed)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cli.evaluate import eval_command, report_command

from . import fake_answer

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from tests.llm.fake_openai_server import FakeLLMServer, running_server

app = typer.Typer()
app.command("eval")(eval_command)
app.command("report")(report_command)


@pytest.fixture
def env(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVACY_CI_CONFIG", raising=False)
    for name in ("PROVIDER", "MODEL", "BASE_URL", "CACHE_PATH"):
        monkeypatch.delenv(f"PRIVACY_CI_LLM_{name}", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeLLMServer, str]]:
    fake = FakeLLMServer(delay=0.01, answer=fake_answer)
    with running_server(fake.app) as url:
        yield fake, url + "/v1"


def _eval(url: str, out: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "--method",
        "dp",
        "--dataset",
        "real",
        "--provider",
        "openai-compatible",
        "--base-url",
        url,
        "--model",
        "fake-model",
        "--limit",
        "6",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def test_eval_json_then_resume_then_report(env: Path, server: tuple[FakeLLMServer, str]) -> None:
    fake, url = server
    before = len(fake.requests)
    runner = CliRunner()
    result = runner.invoke(app, _eval(url, env / "run", "--json"))
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["judged"] == 6 and metrics["complete"]
    assert metrics["backend"] == "openai-compatible:fake-model" and not metrics["test_double"]
    assert metrics["dataset"]["subset"] == "stratified sample n=6 seed=0"
    assert set(metrics["baselines"]) == {"majority", "health-rule"}
    assert len(fake.requests) - before == 6  # DP: one call per case
    assert len((env / "run" / "records.jsonl").read_text().splitlines()) == 6
    manifest = json.loads((env / "run" / "manifest.json").read_text())
    assert manifest["model"]["base_url"] == url
    assert manifest["extra"]["llm_config"]["concurrency"] == 16

    again = runner.invoke(app, _eval(url, env / "run"))
    assert again.exit_code == 0, again.output
    assert "resumed: 6 case(s)" in again.output
    assert "openai-compatible:fake-model" in again.output
    assert "baseline: health-rule" in again.output and "baseline: majority" in again.output

    report = runner.invoke(app, ["report", str(env / "run"), "--out", str(env / "rep")])
    assert report.exit_code == 0, report.output
    assert (env / "rep" / "report.md").exists()
    page = (env / "rep" / "report.html").read_text()
    assert "openai-compatible:fake-model" in page
    if importlib.util.find_spec("matplotlib") is not None:
        assert '<img src="data:image/png;base64,' in page


def test_eval_refuses_a_different_run_in_the_folder(
    env: Path, server: tuple[FakeLLMServer, str]
) -> None:
    _, url = server
    runner = CliRunner()
    assert runner.invoke(app, _eval(url, env / "run")).exit_code == 0
    other = _eval(url, env / "run", "--temperature", "0.5")
    result = runner.invoke(app, other)
    assert result.exit_code == 2
    assert "refusing to resume" in result.output and "temperature" in result.output


def test_eval_rejects_unknown_method(env: Path) -> None:
    result = CliRunner().invoke(app, ["eval", "--method", "magic", "--no-progress"])
    assert result.exit_code == 2 and "unknown method" in result.output


@pytest.mark.slow
def test_eval_with_the_embedded_model(env: Path) -> None:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    # only a missing llama_cpp or GGUF skips; any other error fails the test
    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--method",
            "dp",
            "--dataset",
            "synthetic",  # shorter narratives than the court cases: faster on a CPU
            "--limit",
            "2",
            "--out",
            str(env / "emb"),
            "--no-progress",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["judged"] == 2
    assert metrics["backend"].startswith("embedded:") and not metrics["test_double"]
