"""Malformed label, policy, agent and assignment files give precise errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import load_corpus, load_labels, load_policy, parse_labels, riverside_dir
from privacy_ci.errors import ValidationFailed

runner = CliRunner()


@pytest.fixture()
def corpus_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "corpus"
    shutil.copytree(riverside_dir(), dest)
    return dest


def edit_labels(folder: Path, fn: object) -> None:
    path = folder / "labels.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data["documents"])  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def problems_of(folder: Path) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        load_corpus(folder)
    return info.value.problems


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d[0].pop("sensitivity_tier"),
            "document 'RMC-LAB-001': field sensitivity_tier: field is missing",
        ),
        (
            lambda d: d[0].update(sensitivity_tier="secret"),
            "field sensitivity_tier: got 'secret', expected one of",
        ),
        (
            lambda d: d[0].update(permitted_receiver_roles="Doctor, Nurse"),
            "expected a list of role names, got the string 'Doctor, Nurse'",
        ),
        (lambda d: d[0].update(permitted_receiver_roles=["*"]), "is a wildcard"),
        (
            lambda d: d[0].update(permitted_receiver_roles=[" Doctor"]),
            "leading or trailing whitespace",
        ),
        (lambda d: d[0].update(permitted_receiver_roles=["Doctor", "Doctor"]), "listed twice"),
        (
            lambda d: d[0].update(permitted_receiver_roles=["D\u043ector"]),
            "unknown role(s) ['D\u043ector']",
        ),
        (lambda d: d[0].update(colour="red"), "field colour: unknown field"),
        (lambda d: d[0].pop("subject"), "field subject: field is missing"),
        (lambda d: d[0].update(subject="P99"), "field subject: 'P99' is not a known person"),
        (
            lambda d: d[0].update(originating_context="Cafeteria"),
            "'Cafeteria' is not a context of the policy",
        ),
        (
            lambda d: d[0].update(assignment_required=False),
            "field assignment_required: False disagrees",
        ),
        (
            lambda d: d[0].update(extra_sensitive_reason=None, extra_sensitive=True),
            "extra_sensitive_reason is empty",
        ),
        (lambda d: d[1].update(doc_id="RMC-LAB-001"), "doc_id is used by an earlier document"),
        (lambda d: d[0].update(subject=None), "subject and subject_type disagree"),
    ],
)
def test_label_problems_name_file_document_field(
    corpus_copy: Path, mutate: object, expected: str
) -> None:
    edit_labels(corpus_copy, mutate)
    problems = problems_of(corpus_copy)
    assert any(expected in p for p in problems), problems
    assert all("labels.yaml" in p for p in problems)


def test_every_problem_is_reported_at_once(corpus_copy: Path) -> None:
    def two(d: list[dict[str, object]]) -> None:
        d[0]["sensitivity_tier"] = "secret"
        d[5]["extra_sensitive"] = "maybe"

    edit_labels(corpus_copy, two)
    problems = problems_of(corpus_copy)
    assert len(problems) == 2


def test_bad_yaml_and_json(tmp_path: Path) -> None:
    bad = tmp_path / "labels.yaml"
    bad.write_text("documents:\n  - doc_id: [unclosed\n")
    with pytest.raises(ValidationFailed, match=r"labels.yaml: invalid YAML at line"):
        load_labels(bad)
    badj = tmp_path / "labels.json"
    badj.write_text('{"documents": [}')
    with pytest.raises(ValidationFailed, match="invalid JSON at line 1"):
        load_labels(badj)
    with pytest.raises(ValidationFailed, match="file not found"):
        load_labels(tmp_path / "missing.yaml")
    with pytest.raises(ValidationFailed, match="expected a list of labels"):
        parse_labels({"documents": "none"}, "x.yaml")


def test_json_corpus_files_work(corpus_copy: Path) -> None:
    import json

    data = yaml.safe_load((corpus_copy / "labels.yaml").read_text())
    (corpus_copy / "labels.yaml").unlink()
    (corpus_copy / "labels.json").write_text(json.dumps(data))
    assert len(load_corpus(corpus_copy).labels) == 105


def test_policy_problems(corpus_copy: Path) -> None:
    path = corpus_copy / "policy.yaml"
    original = yaml.safe_load(path.read_text())
    data = {**original, "tiers": {**original["tiers"], "secret": {"assignment_required": True}}}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ValidationFailed, match=r"policy.yaml: policy: field tiers.secret.*expected one of"
    ):
        load_policy(path)
    data = {
        **original,
        "authoritative_context": {**original["authoritative_context"], "Doctor": "Surgery"},
    }
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ValidationFailed, match="role 'Doctor' is authoritative in unknown context 'Surgery'"
    ):
        load_policy(path)
    data = {**original, "roles": [*original["roles"], "Doctor"]}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationFailed, match="a role is listed twice"):
        load_policy(path)


def test_agent_acting_outside_its_context_is_rejected(corpus_copy: Path) -> None:
    path = corpus_copy / "agents.yaml"
    data = yaml.safe_load(path.read_text())
    data["agents"][0]["context"] = "HR"
    path.write_text(yaml.safe_dump(data))
    assert any(
        "agent D01: context 'HR' is not where 'Doctor' is authoritative" in p
        for p in problems_of(corpus_copy)
    )


def test_policy_authority_members_are_checked(corpus_copy: Path) -> None:
    path = corpus_copy / "agents.yaml"
    data = yaml.safe_load(path.read_text())
    assert [m["id"] for m in data["policy_authority"]] == ["PA1", "PA2"]
    data["policy_authority"][0]["context"] = "Boardroom"
    data["policy_authority"][1]["id"] = "D01"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationFailed, match="person id\\(s\\) used twice: D01"):
        load_corpus(corpus_copy)
    data["policy_authority"][1]["id"] = "PA2"
    path.write_text(yaml.safe_dump(data))
    assert any(
        "policy_authority PA1: context 'Boardroom' is not a context of the policy" in p
        for p in problems_of(corpus_copy)
    )


def test_the_authority_role_is_not_a_requester_role(corpus_copy: Path) -> None:
    path = corpus_copy / "policy.yaml"
    data = yaml.safe_load(path.read_text())
    data["roles"].append("Policy Authority")
    data["authoritative_context"]["Policy Authority"] = "Administrative"
    path.write_text(yaml.safe_dump(data))
    assert any("'Policy Authority' is reserved" in p for p in problems_of(corpus_copy))


def test_assignment_problems(corpus_copy: Path) -> None:
    path = corpus_copy / "assignments.yaml"
    path.write_text("assignments:\n  D01: P01\n")
    assert any("D01: expected a list of subject ids" in p for p in problems_of(corpus_copy))
    path.write_text("assignments:\n  D01: [P77]\n  ZZ: []\n")
    problems = problems_of(corpus_copy)
    assert any("'P77' is not a known person" in p for p in problems)
    assert any("'ZZ' is not an agent" in p for p in problems)


def test_cli_reports_problems_in_one_block(corpus_copy: Path) -> None:
    edit_labels(corpus_copy, lambda d: d[0].update(sensitivity_tier="secret"))
    res = runner.invoke(app, ["conductor", "flows", "--corpus", str(corpus_copy)])
    assert res.exit_code == 2
    assert "RMC-LAB-001" in res.output and "sensitivity_tier" in res.output
    assert "Traceback" not in res.output
