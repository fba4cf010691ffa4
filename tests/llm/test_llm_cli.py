"""`privacy-ci llm ask` against a local OpenAI-compatible server (with retries shown)
and against the embedded model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeLLMServer, str]]:
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        yield fake, url


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def test_ask_openai_compatible_with_retries(server: tuple[FakeLLMServer, str]) -> None:
    fake, url = server
    fake.reset()
    fake.push(Fault.rate_limit("0"), Fault.http(503))
    args = [
        "llm",
        "ask",
        "hello there",
        "--provider",
        "openai-compatible",
        "--base-url",
        url + "/v1",
        "--model",
        "fake",
        "--json",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    start = res.output.index("{")
    data = json.loads(res.output[start:])
    assert data["text"] == "echo: hello there" and data["retries"] == 2
    assert "retry 1" in res.output and "retry 2" in res.output  # progress shows retries
    assert data["usage"]["calls"] == 1
    body = fake.requests[-1].body
    assert body["temperature"] == 0.0 and body["seed"] == 0 and body["top_p"] == 1.0
    again = runner.invoke(app, args)
    assert json.loads(again.output[again.output.index("{") :])["cached"] is True


def test_ask_reports_an_explicit_failure(server: tuple[FakeLLMServer, str]) -> None:
    fake, url = server
    fake.reset()
    fake.push(Fault.http(401))
    res = runner.invoke(
        app,
        [
            "llm",
            "ask",
            "x",
            "--provider",
            "openai-compatible",
            "--base-url",
            url + "/v1",
            "--model",
            "fake",
        ],
    )
    assert res.exit_code == 1
    assert "failed" in res.output and "401" in res.output and "Traceback" not in res.output


def test_ask_embedded_default() -> None:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    # only a missing llama_cpp or GGUF skips; any other error fails the test
    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    res = runner.invoke(app, ["llm", "ask", "Say OK.", "--max-tokens", "8", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["provider"] == "embedded" and data["completion_tokens"] > 0
