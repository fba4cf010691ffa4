"""`privacy-ci judge` (and `llm ask`) with an input longer than the model's context:
exit 2 and one `error:` line stating the limit and the prompt's size, never exit 1
with a failed step. The embedded model is replaced by a stand-in, then (when it is
installed) the packaged one is used."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from tests.llm.test_context_overflow import N_CTX, fake, words

__all__ = ["fake"]  # the fixture, shared with the backend tests

runner = CliRunner()
LONG_EVENT = "A nurse faxed a patient's chart to the patient's employer. " * 120


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("PRIVACY_CI_CONFIG", "PRIVACY_CI_LLM_PROVIDER", "PRIVACY_CI_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PRIVACY_CI_LLM_MODEL_PATH", raising=False)
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PRIVACY_CI_LLM_N_CTX", str(N_CTX))


def overflow_line(res: Any) -> str:
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and "Traceback" not in res.output, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: input too long for model "), lines
    assert f"its context window holds {N_CTX} tokens" in lines[0]
    return str(lines[0])


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_judge_exits_2_with_one_line(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    monkeypatch.setenv("PRIVACY_CI_LLM_MODEL_PATH", str(fake["path"]))
    res = runner.invoke(app, ["judge", words(1000), "--method", "dp", "--no-cache", *extra])
    line = overflow_line(res)
    # the event's 1,000 words and the DP prompt's own text
    assert re.search(r"the prompt is at least 1,0\d\d tokens,", line), line
    assert [m.generations for m in fake["models"]] == [[]]  # refused before generating


def test_judge_case_file_too_long(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIVACY_CI_LLM_MODEL_PATH", str(fake["path"]))
    case = tmp_path / "case.json"
    case.write_text(f'{{"text": "{words(500)}", "purpose": "treatment"}}', encoding="utf-8")
    res = runner.invoke(app, ["judge", "--case", str(case), "--method", "cot-auto", "--no-cache"])
    overflow_line(res)


def test_llm_ask_exits_2(fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_LLM_MODEL_PATH", str(fake["path"]))
    res = runner.invoke(app, ["llm", "ask", words(300), "--no-cache"])
    assert "the prompt is at least 300 tokens" in overflow_line(res)


def test_judge_with_the_packaged_model() -> None:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    res = runner.invoke(app, ["judge", LONG_EVENT, "--method", "dp", "--no-cache"])
    line = overflow_line(res)
    assert "input too long for model smollm2-135m-instruct: the prompt is at least" in line
