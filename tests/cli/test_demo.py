"""`privacy-ci demo` without the assistant: the Conductor part and the model-free
Checklist part (one narrative judged and explained by the ci-reasoner)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from tests._shared import data_dir, require_files

runner = CliRunner()


def _need_data_and_nlp() -> None:
    require_files(data_dir(), ["SOURCES.md"], "the shared data")
    pytest.importorskip("negspacy")


def test_demo_json_has_the_checklist_judgment() -> None:
    _need_data_and_nlp()
    res = runner.invoke(app, ["demo", "--no-assistant", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["flows"] and len(data["examples"]) == 4
    part = data["checklist"]
    assert part["method"] == "ci-reasoner (model-free)" and "error" not in part
    # the psychiatric record sent to an employer with no authorization signed
    assert part["verdict"] == "prohibit"
    assert part["deciding"]["id"] == "164.508(a)(1)-authorization"
    [condition] = part["deciding"]["conditions"]
    assert condition["status"] == "contradicted"
    evidence = condition["evidence"][0]
    assert part["narrative"][evidence["start"] : evidence["end"]] == evidence["quote"]


def test_demo_text_explains_the_verdict() -> None:
    _need_data_and_nlp()
    res = runner.invoke(app, ["demo", "--no-assistant"])
    assert res.exit_code == 0, res.output
    assert "model-free ci-reasoner" in res.stdout and "contradicted" in res.stdout
    assert "164.508(a)(1)" in res.stdout


def test_demo_without_data_still_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path))
    res = runner.invoke(app, ["demo", "--no-assistant", "--json"])
    assert res.exit_code == 0, res.output
    part = json.loads(res.stdout)["checklist"]
    assert "error" in part and "verdict" not in part
