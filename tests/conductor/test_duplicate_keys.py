"""A key given twice in a corpus file is a validation error, never "last one wins".

Plain PyYAML keeps the second ``permitted_receiver_roles`` of a label without a word,
which widened a document's ACL while `conductor validate` said "valid".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import (
    load_assignments,
    load_corpus,
    load_directory,
    load_labels,
    load_policy,
    riverside_dir,
)
from privacy_ci.errors import ValidationFailed

runner = CliRunner()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the Riverside corpus to edit."""
    return Path(shutil.copytree(riverside_dir(), tmp_path / "corpus"))


def repeat_key(path: Path, after: str, line: str, new: str) -> tuple[int, int]:
    """Insert `new` right after the first `line` that follows the line `after`.

    Returns:
        The line numbers (from 1) of `line` and of the inserted `new`.
    """
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index(after + "\n")
    at = lines.index(line + "\n", start)
    lines.insert(at + 1, new + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return at + 1, at + 2


def problems(exc: pytest.ExceptionInfo[ValidationFailed]) -> list[str]:
    return exc.value.problems


def test_label_with_the_acl_twice(folder: Path) -> None:
    labels = folder / "labels.yaml"
    first, dup = repeat_key(
        labels,
        "- doc_id: RMC-LAB-001",
        "  permitted_receiver_roles: [Doctor, Nurse]",
        "  permitted_receiver_roles: [Doctor, Nurse, HR Manager]",
    )
    # without the check the second ACL would silently win (and HR would read a lab report)
    raw = yaml.safe_load(labels.read_text(encoding="utf-8"))["documents"][0]
    assert raw["permitted_receiver_roles"] == ["Doctor", "Nurse", "HR Manager"]
    with pytest.raises(ValidationFailed) as info:
        load_labels(labels)
    assert problems(info) == [
        f"{labels}: document 'RMC-LAB-001': duplicate key 'permitted_receiver_roles'"
        f" at line {dup} (first at line {first})"
    ]
    with pytest.raises(ValidationFailed):
        load_corpus(folder)


def test_validate_cli_exits_2_naming_file_document_key_and_line(folder: Path) -> None:
    labels = folder / "labels.yaml"
    first, dup = repeat_key(
        labels,
        "- doc_id: RMC-LAB-002",
        "  sensitivity_tier: clinical_standard",
        "  sensitivity_tier: public",
    )
    for extra in ([], ["--json"]):
        res = runner.invoke(app, ["conductor", "validate", str(folder), *extra])
        assert res.exit_code == 2, res.output
        assert res.stdout == "" and "valid" not in res.stdout
        assert res.stderr.count("error:") == 1 and "Traceback" not in res.output
        assert res.stderr.strip() == (
            f"error: {labels}: document 'RMC-LAB-002': duplicate key 'sensitivity_tier'"
            f" at line {dup} (first at line {first})"
        )


def test_labels_option_refuses_a_duplicate(folder: Path) -> None:
    labels = folder / "labels.yaml"
    repeat_key(labels, "- doc_id: RMC-LAB-001", "  subject: P01", "  subject: P02")
    res = runner.invoke(app, ["conductor", "flows", "--labels", str(labels)])
    assert res.exit_code == 2 and "duplicate key 'subject'" in res.stderr, res.output


def test_policy_nested_duplicate(folder: Path) -> None:
    policy = folder / "policy.yaml"
    first, dup = repeat_key(
        policy, "  financial:", "    assignment_required: true", "    assignment_required: false"
    )
    with pytest.raises(ValidationFailed) as info:
        load_policy(policy)
    assert problems(info) == [
        f"{policy}: tiers.financial: duplicate key 'assignment_required'"
        f" at line {dup} (first at line {first})"
    ]
    res = runner.invoke(app, ["conductor", "validate", str(folder)])
    assert res.exit_code == 2 and "tiers.financial" in res.stderr, res.output


def test_policy_role_mapped_twice(folder: Path) -> None:
    policy = folder / "policy.yaml"
    first, dup = repeat_key(
        policy, "authoritative_context:", "  Doctor: Medical", "  Doctor: Administrative"
    )
    with pytest.raises(ValidationFailed) as info:
        load_policy(policy)
    assert problems(info) == [
        f"{policy}: authoritative_context: duplicate key 'Doctor'"
        f" at line {dup} (first at line {first})"
    ]


def test_agent_with_two_roles(folder: Path) -> None:
    agents = folder / "agents.yaml"
    first, dup = repeat_key(agents, "- id: D01", "  role: Doctor", "  role: HR Manager")
    with pytest.raises(ValidationFailed) as info:
        load_directory(agents)
    assert problems(info) == [
        f"{agents}: agents[0] (id 'D01'): duplicate key 'role'"
        f" at line {dup} (first at line {first})"
    ]


def test_requester_listed_twice_in_assignments(folder: Path) -> None:
    assignments = folder / "assignments.yaml"
    first, dup = repeat_key(
        assignments, "assignments:", "  D01: [P01, P02, P03]", "  D01: [P04, P05]"
    )
    with pytest.raises(ValidationFailed) as info:
        load_assignments(assignments)
    assert problems(info) == [
        f"{assignments}: assignments: duplicate key 'D01' at line {dup} (first at line {first})"
    ]


def test_json_label_file_with_a_duplicate(folder: Path, tmp_path: Path) -> None:
    entries = yaml.safe_load((folder / "labels.yaml").read_text(encoding="utf-8"))["documents"]
    text = json.dumps(entries, indent=2)
    lines = text.splitlines()
    first = lines.index('    "extra_sensitive": false,') + 1  # the first document's
    lines.insert(first, '    "extra_sensitive": true,')
    path = tmp_path / "labels.json"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValidationFailed) as info:
        load_labels(path)
    assert problems(info) == [
        f"{path}: document 'RMC-LAB-001': duplicate key 'extra_sensitive'"
        f" at line {first + 1} (first at line {first})"
    ]
    path.write_text(text, encoding="utf-8")  # the same file without the duplicate loads
    assert len(load_labels(path)) == len(entries)


def test_the_packaged_corpus_still_loads() -> None:
    corpus = load_corpus()
    assert len(corpus.labels) == 105
