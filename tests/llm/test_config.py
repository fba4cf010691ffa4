"""LLM configuration: file, environment and flags, in that order."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import load_llm_config


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("PRIVACY_CI_LLM_") or key == "PRIVACY_CI_CONFIG":
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def test_defaults_are_the_embedded_model_at_temperature_zero() -> None:
    cfg = load_llm_config()
    assert cfg.provider == "embedded" and cfg.temperature == 0.0 and cfg.seed == 0


def test_precedence_file_env_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "privacy-ci.toml").write_text(
        '[llm]\nprovider = "openai-compatible"\nmodel = "qwen"\nbase_url = "http://127.0.0.1:8000/v1"\n'
        "concurrency = 8\n"
    )
    cfg = load_llm_config()
    assert (cfg.provider, cfg.model, cfg.concurrency) == ("openai-compatible", "qwen", 8)
    monkeypatch.setenv("PRIVACY_CI_LLM_MODEL", "llama")
    assert load_llm_config().model == "llama"
    assert load_llm_config({"model": "mistral", "base_url": None}).model == "mistral"


def test_api_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    cfg = load_llm_config({"provider": "openai", "api_key_env": "MY_KEY"})
    assert cfg.api_key() == "sk-test"
    monkeypatch.delenv("MY_KEY")
    assert cfg.api_key() is None


def test_bad_config_names_the_source_and_field(tmp_path: Path) -> None:
    (tmp_path / "privacy-ci.toml").write_text('[llm]\ntemperature = -1\nprovider = "gpt"\n')
    with pytest.raises(PrivacyCIError, match=r"privacy-ci.toml.*(temperature|provider)"):
        load_llm_config()
    (tmp_path / "privacy-ci.toml").write_text("[llm\n")
    with pytest.raises(PrivacyCIError, match="invalid TOML"):
        load_llm_config()


def test_cli_config_and_cache_commands(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from privacy_ci.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["llm", "config", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["provider"] == "embedded"
    db = tmp_path / "c.sqlite"
    res = runner.invoke(app, ["cache", "stats", "--path", str(db), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["entries"] == 0
    res = runner.invoke(app, ["cache", "clear", "--path", str(db), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["removed"] == 0
