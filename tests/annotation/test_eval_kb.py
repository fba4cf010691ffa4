"""`privacy-ci eval --kb`: a method judged over a built knowledge base is another run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.knowledge import KnowledgeBase

from . import build


@pytest.fixture(scope="module")
def built(published: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("built-kb")
    build(published, folder)
    return folder


def test_eval_over_a_built_kb_records_it_in_the_run_identity(
    built: Path, shared_data: Path, tmp_path: Path
) -> None:
    env = {"PRIVACY_CI_DATA": str(shared_data)}
    runner = CliRunner()
    args = ["eval", "--method", "ci-reasoner", "--dataset", "real", "--limit", "3", "--no-progress"]
    over_built = runner.invoke(
        app, [*args, "--kb", str(built), "--out", str(tmp_path / "b"), "--json"], env=env
    )
    assert over_built.exit_code == 0, over_built.output
    assert json.loads(over_built.stdout)["complete"] is True
    published = runner.invoke(app, [*args, "--out", str(tmp_path / "p"), "--json"], env=env)
    assert published.exit_code == 0, published.output
    manifests = [json.loads((tmp_path / r / "manifest.json").read_text()) for r in ("b", "p")]
    kb_ids = [m["identity"]["knowledge_base"] for m in manifests]
    assert kb_ids[0].startswith("built:") and kb_ids[0] != kb_ids[1]
    # resuming the published run's folder over the built KB is refused (identity)
    mixed = runner.invoke(app, [*args, "--kb", str(built), "--out", str(tmp_path / "p")], env=env)
    assert mixed.exit_code != 0


def test_eval_refuses_a_kb_of_another_regulation(built: Path, shared_data: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["eval", "--method", "ci-reasoner", "--dataset", "privaci-gdpr", "--kb", str(built)],
        env={"PRIVACY_CI_DATA": str(shared_data)},
    )
    assert result.exit_code != 0
    assert "hipaa knowledge base" in result.output and "gdpr" in result.output
