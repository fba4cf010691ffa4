# ruff: noqa: F811 (the fixtures of test_corpus_folder, imported, are the parameters)
"""Issue 26: drafts for a user's corpus that `label export` can use. The drafting prompt
asks for the subject among the known ones, a repeated role is dropped with a note, and
a run with nothing usable says so (summary 0 usable, export exit 2).

The model is the scripted test double (fixtures of test_corpus_folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from tests.labeling.test_corpus_folder import (  # noqa: F401 (fixtures)
    HANDBOOK,
    NOTES,
    REVIEW,
    REVIEW_DRAFT,
    env,
    error_line,
    folder,
    handbook_answer,
    model,
    ok,
    ok_json,
)


def answers(review: dict[str, Any]) -> Any:
    return lambda d: (
        handbook_answer() if d == HANDBOOK else json.dumps(review if d == REVIEW else {"x": 1})
    )


def test_a_draft_naming_a_subject_is_usable_and_exported(
    folder: Path, model: dict[str, Any]
) -> None:
    model["answer"] = answers(REVIEW_DRAFT | {"subject": "E01"})
    run_dir = folder.parent / "r"
    report = ok_json("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    assert report["usable_drafts"] == {"drafted": 1, "usable": 1}
    # the drafting prompt lists the known subjects and the schema constrains the subject
    (messages, settings) = next(
        c for c in model["backends"][0].calls if f"Title : {REVIEW}" in c[0][-1].content
    )
    assert "- E01 (" in messages[-1].content and '"subject"' in messages[-1].content
    assert settings.json_schema["properties"]["subject"]["enum"] == ["E01", "E02", None]
    summary = ok_json("label", "export", str(run_dir), "--out", str(folder.parent / "d.yaml"))
    assert REVIEW in summary["without_authored_label"]
    entries = {e["doc_id"]: e for e in yaml.safe_load((folder.parent / "d.yaml").read_text())}
    assert entries[REVIEW]["subject"] == "E01" and entries[REVIEW]["assignment_required"]


def test_a_repeated_role_is_removed_with_a_note(folder: Path, model: dict[str, Any]) -> None:
    twice = REVIEW_DRAFT | {"subject": "E01", "permitted_receiver_roles": ["HR Manager"] * 2}
    model["answer"] = answers(twice)
    run_dir = folder.parent / "r"
    report = ok_json("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    assert report["usable_drafts"]["usable"] == 1
    records = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    (review,) = [r for r in records if r["doc_id"] == REVIEW]
    assert review["label"]["permitted_receiver_roles"] == ["HR Manager"]
    assert review["notes"] == ["permitted_receiver_roles: 1 repeated entry removed"]
    summary = ok_json("label", "export", str(run_dir), "--out", str(folder.parent / "d.yaml"))
    assert REVIEW in summary["without_authored_label"]


def test_nothing_usable_export_exits_2(env: Path, model: dict[str, Any]) -> None:
    path = env / "starter"
    assert CliRunner().invoke(app, ["corpus", "init", str(path)]).exit_code == 0
    model["answer"] = answers(REVIEW_DRAFT)  # employment, no subject: refused
    run_dir = env / "r"
    report = ok_json("label", "run", "--corpus", str(path), "--out", str(run_dir))
    assert report["usable_drafts"] == {"drafted": 2, "usable": 1}
    model["answer"] = lambda d: json.dumps(REVIEW_DRAFT)
    run2 = env / "r2"
    report = ok_json("label", "run", "--corpus", str(path), "--out", str(run2))
    assert report["usable_drafts"] == {"drafted": 2, "usable": 0}
    text = " ".join(ok("label", "run", "--corpus", str(path), "--out", str(run2)).split())
    assert "0 usable draft(s) of 2 drafted" in text  # resumed: the same summary as text
    line = error_line("label", "export", str(run2), "--out", str(env / "d.yaml"))
    assert "no usable label to export" in line and not (env / "d.yaml").exists()
    assert NOTES not in line


def test_the_prompt_command_shows_the_drafting_prompt_and_schema(folder: Path) -> None:
    data = ok_json("label", "prompt", REVIEW, "--corpus", str(folder))
    assert "- E01 (" in data["user"] and "- E02 (" in data["user"]
    assert data["schema"]["properties"]["subject"] == {"enum": ["E01", "E02", None]}
    authored = ok_json("label", "prompt", HANDBOOK, "--corpus", str(folder))
    assert "subject" not in authored["schema"]["properties"]


def test_parse_draft_refuses_an_unknown_subject(folder: Path) -> None:
    from privacy_ci.conductor import load_corpus
    from privacy_ci.labeling import LabelOutputError, parse_draft

    policy = load_corpus(folder).policy
    with pytest.raises(LabelOutputError, match="subject: got 'E99'"):
        parse_draft(REVIEW_DRAFT | {"subject": "E99"}, policy, ["E01", "E02"])
    with pytest.raises(LabelOutputError, match="'Nobody' is not a role"):
        parse_draft(
            REVIEW_DRAFT | {"permitted_receiver_roles": ["Nobody", "Nobody"]},
            policy,
            ["E01"],
        )
    got = parse_draft(REVIEW_DRAFT, policy, ["E01"])  # no subject: organization-level
    assert got.subject is None and got.notes == ()
