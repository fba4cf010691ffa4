"""`privacy-ci retrieval eval` and `privacy-ci retrieve` (BM25 retrievers: fast, no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cli.retrieval import app, retrieve_command

runner = CliRunner()
root = typer.Typer()
root.add_typer(app, name="retrieval")
root.command("retrieve")(retrieve_command)


@pytest.fixture(autouse=True)
def _env(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))


def test_eval_json_rows_keyed_by_retriever() -> None:
    res = runner.invoke(
        root, ["retrieval", "eval", "-d", "real", "-r", "bm25-plus", "--limit", "40", "--json"]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert list(rows) == ["bm25-paper", "bm25-plus"]  # the paper baseline always comes first
    # the first 40 of real's 107 applicable cases with gold ids
    assert rows["bm25-paper"]["cases"] == rows["bm25-plus"]["cases"] == 40
    assert {"recall@1", "recall@5", "recall@10", "recall@20", "mrr", "ndcg@10"} <= set(
        rows["bm25-plus"]
    )
    # the difference to bm25-paper, with a paired bootstrap interval around it
    diff = rows["bm25-plus"]["vs_bm25-paper"]["recall@10"]
    assert diff["value"] == pytest.approx(
        rows["bm25-plus"]["recall@10"] - rows["bm25-paper"]["recall@10"], abs=2e-4
    )
    assert diff["low"] <= diff["value"] <= diff["high"] and diff["cases"] == 40
    assert "vs_bm25-paper" not in rows["bm25-paper"]
    assert set(rows["bm25-plus"]["vs_bm25-paper"]) == {"recall@10", "any_hit@10"}


def test_eval_table_and_errors() -> None:
    res = runner.invoke(
        root, ["retrieval", "eval", "-d", "privaci-ai_act", "-r", "bm25-plus", "--limit", "30"]
    )
    assert res.exit_code == 0, res.output
    assert "bm25-paper" in res.output and "R@10" in res.output and "nDCG@10" in res.output
    bad = runner.invoke(root, ["retrieval", "eval", "-d", "nope", "-r", "bm25-plus"])
    assert bad.exit_code == 2 and "unknown dataset" in bad.output
    bad = runner.invoke(root, ["retrieval", "eval", "-r", "bm25-plus", "-q", "llm"])
    assert bad.exit_code == 2
    bad = runner.invoke(root, ["retrieval", "eval", "-r", "tfidf", "--limit", "1"])
    assert bad.exit_code == 2 and "unknown retriever" in bad.output


def test_eval_splits_partition_the_cases() -> None:
    from privacy_ci.retrieval import dev_split, gold_of, is_applicable, load_eval_cases

    counts = {}
    args = ["retrieval", "eval", "-d", "privaci-gdpr", "-r", "bm25-plus", "--json"]
    for split in ("all", "dev", "held-out"):
        res = runner.invoke(root, [*args, "--split", split])
        assert res.exit_code == 0, res.output
        rows = json.loads(res.output)
        counts[split] = rows["bm25-plus"]["cases"]
        assert rows["bm25-plus"]["dataset"] == (
            "privaci-gdpr" if split == "all" else f"privaci-gdpr ({split})"
        )
    assert counts["dev"] + counts["held-out"] == counts["all"] == 3124
    dev = [
        c
        for c in load_eval_cases("privaci-gdpr")
        if dev_split(str(c.id)) and gold_of(c) and is_applicable(c)
    ]
    assert counts["dev"] == len(dev)
    bad = runner.invoke(root, ["retrieval", "eval", "-r", "bm25-plus", "--split", "train"])
    assert bad.exit_code == 2 and "--split must be" in bad.output


def test_a_regulation_without_training_cases_names_it_when_asked() -> None:
    res = runner.invoke(
        root, ["retrieval", "eval", "-d", "privaci-gdpr", "-r", "cases", "--limit", "3"]
    )
    assert res.exit_code == 2 and "no labelled training cases" in res.output


def test_retrieve_command() -> None:
    query = "a surgeon sends the operative report to the patient's employer"
    res = runner.invoke(root, ["retrieve", query, "-r", "bm25-plus", "-k", "5", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["retriever"] == "bm25-plus" and len(data["hits"]) == 5
    assert all({"id", "score", "first_line", "section"} <= set(h) for h in data["hits"])
    table = runner.invoke(
        root,
        ["retrieve", "Article 9 special categories", "--regulation", "gdpr", "-r", "bm25-paper"],
    )
    assert table.exit_code == 0 and "Article" in table.output
    empty = runner.invoke(root, ["retrieve", "  ", "-r", "bm25-plus"])
    assert empty.exit_code == 2 and "empty" in empty.output
    assert runner.invoke(root, ["retrieve", "x", "-k", "0", "-r", "bm25-plus"]).exit_code == 2
