"""`privacy-ci judge`: against a local OpenAI-compatible test server, and the embedded model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cli.judge import judge
from tests.llm.fake_openai_server import FakeLLMServer, Fault, running_server

EVENT_TEXT = "A nurse at a hospital faxed a patient's HIV test result to the patient's employer."


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test entry point."""

    app.command("judge")(judge)
    return app


@pytest.fixture()
def env(tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The real data, an isolated cache, no config file or LLM environment."""
    monkeypatch.chdir(tmp_path)
    for name in list(__import__("os").environ):
        if name.startswith("PRIVACY_CI_LLM_") or name == "PRIVACY_CI_CONFIG":
            monkeypatch.delenv(name)
    return {
        "PRIVACY_CI_DATA": str(shared_data),
        "PRIVACY_CI_CACHE": str(tmp_path / "cache"),
    }


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeLLMServer, str]]:
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        yield fake, url + "/v1"


@pytest.fixture()
def fake(server: tuple[FakeLLMServer, str]) -> Iterator[tuple[FakeLLMServer, str]]:
    server[0].reset()
    yield server
    server[0].reset()


def invoke(args: list[str], env: dict[str, str]) -> Any:
    return CliRunner().invoke(cli(), ["judge", *args], env=env)


def remote(url: str) -> list[str]:
    return ["--provider", "openai-compatible", "--model", "fake", "--base-url", url, "--no-cache"]


def answer_by_prompt(prompt: str) -> str:
    if prompt.startswith("Given a regulation"):  # the law filter
        return "yes" if "164.5" in prompt.split("HIPAA Regulation: ")[1][:12] else "no"
    if prompt.startswith("I will provide you with an event"):  # the explanation
        return "The covered entity disclosed protected health information to an employer."
    return "Execution: 1. - the nurse disclosed PHI\nChoice: A. Prohibited"


def test_json_bm25_content_against_a_server(
    fake: tuple[FakeLLMServer, str], env: dict[str, str]
) -> None:
    server, url = fake
    server.answer = answer_by_prompt
    result = invoke([EVENT_TEXT, *remote(url), "--json", "--k", "3"], env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["method"] == "bm25-content" and payload["verdict"] == "prohibit"
    assert payload["backend"] == "openai-compatible:fake" and payload["error"] is None
    assert [s["name"] for s in payload["steps"]][:2] == ["explain", "retrieve"]
    assert [s["name"] for s in payload["steps"]][-1] == "decide"
    assert payload["steps"][1]["parsed"]["retriever"] == "bm25-paper"
    assert payload["config"] == {
        "k": 3,
        "retriever": "bm25-paper",
        "constrained": False,
        "reference_chars": 1500,
    }
    filters = [s for s in payload["steps"] if s["name"] == "filter"]
    assert len(filters) == len(payload["steps"][1]["retrieved_ids"]) <= 3
    kept = [s["retrieved_ids"][0] for s in filters if s["parsed"]["relevant"]]
    assert payload["cited_ids"] == kept
    assert [r["id"] for r in payload["regulations"]] == kept
    assert all(r["text"] for r in payload["regulations"])
    # 1 explanation + filters + 1 decision reached the server, unconstrained
    assert len(server.requests) == 2 + len(filters)
    assert all("grammar" not in r.body for r in server.requests)
    assert payload["usage"]["calls"] == len(server.requests)
    decision_prompt = server.requests[-1].body["messages"][-1]["content"]
    assert f"Event: {EVENT_TEXT}" in decision_prompt


def test_unparseable_answer_is_a_parse_failure(
    fake: tuple[FakeLLMServer, str], env: dict[str, str]
) -> None:
    server, url = fake
    server.answer = lambda prompt: "It is hard to say without more facts."
    result = invoke([EVENT_TEXT, *remote(url), "--method", "dp", "--json"], env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] is None and payload["error"] is None
    assert payload["steps"][0]["parsed"]["method"] == "unparsed"
    assert "parse failure" in payload["steps"][0]["error"]


def test_server_failure_exits_1_with_steps(
    fake: tuple[FakeLLMServer, str], env: dict[str, str]
) -> None:
    server, url = fake
    server.answer = answer_by_prompt
    server.fail_matching("Given a regulation", Fault.http(400, "context length exceeded"))
    result = invoke([EVENT_TEXT, *remote(url), "--json", "--k", "2"], env)
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["verdict"] is None and "context length" in payload["error"]
    assert [s["name"] for s in payload["steps"]][:3] == ["explain", "retrieve", "filter"]
    assert "decide" not in [s["name"] for s in payload["steps"]]


def test_human_output(fake: tuple[FakeLLMServer, str], env: dict[str, str]) -> None:
    server, url = fake
    server.answer = answer_by_prompt
    result = invoke([EVENT_TEXT, *remote(url), "--k", "2"], env)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "verdict  prohibit" in out
    assert "rationale" in out and "steps" in out
    for name in ("explain", "retrieve", "decide"):
        assert name in out


def test_case_file(fake: tuple[FakeLLMServer, str], env: dict[str, str], tmp_path: Path) -> None:
    server, url = fake
    server.answer = lambda prompt: "Choice: B. Permitted"
    case = tmp_path / "case.json"
    case.write_text(
        json.dumps(
            {
                "id": "c-1",
                "text": EVENT_TEXT,
                "sender_role": ["Nurse", "Hospital"],
                "recipient_role": "Employer",
                "purpose": None,
                "label": "prohibit",
            }
        )
    )
    result = invoke(["--case", str(case), *remote(url), "--method", "cot-manual", "--json"], env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "permit"
    assert (payload["event"]["id"], payload["event"]["text"]) == ("c-1", EVENT_TEXT)
    # the argument wins over the file's text
    result = invoke(["Other text.", "--case", str(case), *remote(url), "-m", "dp", "--json"], env)
    assert json.loads(result.stdout)["event"]["text"] == "Other text."


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "item [0]: expected a JSON object"),
        ("", "empty file"),
        ('{"text": "x", "purpose": 3}', "field 'purpose': expected a string"),
        ('{"text": "x", "norm_type": "maybe"}', "field 'norm_type': 'maybe' is not a label"),
        ('[{"text": "x"}, {"text": "y"}]', "holds 2 cases; pick one with --index 0..1"),
        ('{"sender_role": "a"}', "no event text"),
    ],
)
def test_bad_case_file_is_one_clear_error(
    content: str, message: str, env: dict[str, str], tmp_path: Path
) -> None:
    case = tmp_path / "bad.json"
    case.write_text(content)
    result = invoke(["--case", str(case), "--method", "dp", "--json"], env)
    assert result.exit_code == 2
    stderr = " ".join(result.stderr.split())  # rich wraps long lines at 80 columns
    assert stderr.startswith("error: --case ") and stderr.count("error:") == 1
    assert message in stderr and "Traceback" not in result.output


def test_missing_case_file_and_other_user_errors(env: dict[str, str], tmp_path: Path) -> None:
    for args, message in [
        (["--case", str(tmp_path / "nope.json")], "cannot read the file"),
        (["text", "--method", "rag"], "unknown method 'rag'"),
        ([], "give the EVENT TEXT"),
        (["text", "--retriever", "tfidf"], "unknown retriever"),
        (["text", "--k", "0"], "k must be a positive integer"),
    ]:
        result = invoke(args, env)
        assert result.exit_code == 2, args
        assert message in " ".join(result.stderr.split()), args


def test_embedded_model(env: dict[str, str]) -> None:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.llm._embedded import default_model_path, llama_cpp_available

    if not llama_cpp_available():
        pytest.skip("llama_cpp is not installed")
    try:
        default_model_path()
    except PrivacyCIError:
        pytest.skip("the SmolLM2 GGUF is not installed")
    short = "A doctor told the patient's wife about his diagnosis at the hospital."
    result = invoke([short, "--method", "dp", "--json", "--no-cache"], env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["backend"] == "embedded:smollm2-135m-instruct"
    assert payload["config"]["constrained"] is True
    assert payload["verdict"] in ("permit", "prohibit", "not_applicable")
    assert payload["rationale"].startswith("Choice: ")
    result = invoke([short, "--method", "dp", "--no-cache"], env)
    assert result.exit_code == 0 and "verdict  " in result.stdout


def test_missing_data_fails_before_any_model_call(
    fake: tuple[FakeLLMServer, str], env: dict[str, str], tmp_path: Path
) -> None:
    server, url = fake
    empty = {**env, "PRIVACY_CI_DATA": str(tmp_path / "no-data")}
    result = invoke([EVENT_TEXT, *remote(url)], empty)
    assert result.exit_code == 2 and "missing" in " ".join(result.stderr.split())
    assert server.requests == []
    # a method without the knowledge base does not need the data
    server.answer = lambda prompt: "Choice: C"
    result = invoke([EVENT_TEXT, *remote(url), "-m", "cot-auto", "--json"], empty)
    assert result.exit_code == 0 and json.loads(result.stdout)["verdict"] == "not_applicable"
