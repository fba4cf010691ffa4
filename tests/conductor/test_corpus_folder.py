"""A corpus is a folder: every malformed folder is one error listing each problem, each
naming the file and the field, and nothing of it is loaded (issue 16)."""

from __future__ import annotations

import copy
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import DocumentFolder, load_corpus
from privacy_ci.conductor._corpus import starter_dir
from privacy_ci.errors import PrivacyCIError, ValidationFailed

runner = CliRunner()


def labelled_starter(tmp_path: Path) -> Path:
    """The starter corpus with its two example labels un-commented."""
    folder = tmp_path / "corpus"
    shutil.copytree(starter_dir(), folder)
    uncomment_example_labels(folder / "labels.yaml")
    return folder


def uncomment_example_labels(path: Path) -> None:
    """Follow labels.yaml's own instructions: the commented block replaces `documents: []`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index("documents: []")
    kept = lines[:start] + [line.removeprefix("# ") for line in lines[start + 1 :]]
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def edit_yaml(path: Path, fn: Callable[[dict[str, object]], None]) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def problems_of(folder: Path) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        load_corpus(folder)
    return caught.value.problems


def the_problem(folder: Path, *parts: str) -> str:
    """The one problem that holds every part (file, field, what is wrong)."""
    found = [p for p in problems_of(folder) if all(part in p for part in parts)]
    assert found, (parts, problems_of(folder))
    return found[0]


def test_the_starter_and_its_example_labels_are_valid(tmp_path: Path) -> None:
    starter = load_corpus(starter_dir())
    assert len(starter.labels) == 0 and starter.unlabelled == ("EX-HANDBOOK", "EX-REVIEW-E01")
    assert [m.id for m in starter.directory.policy_authority] == ["PA1"]
    labelled = load_corpus(labelled_starter(tmp_path))
    assert labelled.labels.ids == ["EX-HANDBOOK", "EX-REVIEW-E01"] and labelled.unlabelled == ()
    assert labelled.content("EX-HANDBOOK").startswith("Example Ltd staff handbook")


def test_an_empty_corpus_names_no_documents_in_its_errors() -> None:
    starter = load_corpus(starter_dir())
    with pytest.raises(PrivacyCIError, match="unknown document 'X'; the corpus has 0 labelled"):
        starter.label("X")
    assert starter.document_text("EX-HANDBOOK").startswith("Example Ltd")


def test_a_label_with_a_role_unknown_to_the_policy(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    edit_yaml(
        folder / "labels.yaml",
        lambda d: d["documents"][0].update(permitted_receiver_roles=["Employee", "CEO"]),  # type: ignore[index]
    )
    assert the_problem(
        folder, "labels.yaml", "'EX-HANDBOOK'", "field permitted_receiver_roles", "'CEO'"
    )


def test_an_agent_with_a_role_unknown_to_the_policy(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    edit_yaml(folder / "agents.yaml", lambda d: d["agents"][1].update(role="Designer"))  # type: ignore[index]
    assert the_problem(folder, "agents.yaml", "agent E02", "field role", "'Designer'")


def test_an_assignment_naming_an_unknown_agent(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "assignments.yaml").write_text("assignments:\n  H09: [E01]\n", encoding="utf-8")
    assert the_problem(folder, "assignments.yaml", "requester 'H09'", "is not an agent")


@pytest.mark.parametrize(
    "name", ["my report.txt", "-dash.txt", "ümlaut.md", "a+b.txt", "x" * 129 + ".txt"]
)
def test_a_document_file_whose_name_is_not_a_doc_id(tmp_path: Path, name: str) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "documents" / name).write_text("text", encoding="utf-8")
    problem = the_problem(folder, str(folder / "documents" / name), "file name")
    assert "is not a valid document id" in problem


@pytest.mark.parametrize(
    ("name", "expected"),
    [("notes.csv", "suffix '.csv'"), ("README", "no suffix"), ("X.TXT", "suffix '.TXT'")],
)
def test_a_file_that_is_no_document_type(tmp_path: Path, name: str, expected: str) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "documents" / name).write_text("text", encoding="utf-8")
    assert the_problem(folder, str(folder / "documents" / name), "file name", expected)


def test_hidden_files_are_skipped_and_folders_refused(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "documents" / ".DS_Store").write_bytes(b"\0\1")
    assert load_corpus(folder).unlabelled == ()
    (folder / "documents" / "drafts").mkdir()
    assert the_problem(folder, str(folder / "documents" / "drafts"), "a folder")


def test_duplicate_doc_ids_across_files(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "documents" / "EX-HANDBOOK.md").write_text("# Handbook\n", encoding="utf-8")
    problem = the_problem(folder, "'EX-HANDBOOK'", "two files", "EX-HANDBOOK.txt")
    assert "EX-HANDBOOK.md" in problem and "keep one" in problem


def test_duplicate_doc_ids_in_the_label_file(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    edit_yaml(
        folder / "labels.yaml",
        # a deep copy: PyYAML dumps an object used twice as an alias, which is refused
        lambda d: d["documents"].append(copy.deepcopy(d["documents"][0])),  # type: ignore[index,attr-defined]
    )
    assert the_problem(
        folder, "labels.yaml", "'EX-HANDBOOK'", "doc_id is used by an earlier document"
    )


def test_a_label_whose_document_file_is_missing(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "documents" / "EX-REVIEW-E01.txt").unlink()
    problem = the_problem(folder, "labels.yaml", "'EX-REVIEW-E01'", "field doc_id")
    assert str(folder / "documents" / "EX-REVIEW-E01.txt") in problem
    # without a documents/ folder the labels alone load (a corpus of labels only)
    shutil.rmtree(folder / "documents")
    assert len(load_corpus(folder).labels) == 2


def test_content_and_documents_folders_together(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "content").mkdir()
    assert the_problem(folder, "both content/", "and documents/")


def test_every_problem_of_every_file_in_one_error(tmp_path: Path) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "policy.yaml").write_text("name: x\n", encoding="utf-8")  # broken policy
    edit_yaml(folder / "agents.yaml", lambda d: d["agents"][0].pop("name"))  # type: ignore[index]
    (folder / "documents" / "bad name.txt").write_text("x", encoding="utf-8")
    (folder / "documents" / "EX-HANDBOOK.txt").unlink()
    problems = problems_of(folder)
    assert any("policy.yaml" in p and "field roles" in p for p in problems)
    assert any("agents.yaml" in p and "name" in p for p in problems)
    assert any("bad name.txt" in p for p in problems)
    assert any("'EX-HANDBOOK'" in p and "field doc_id" in p for p in problems)
    res = runner.invoke(app, ["conductor", "validate", str(folder)])
    assert res.exit_code == 2 and f"{len(problems)} problem(s):" in res.output
    assert "Traceback" not in res.output


def test_a_missing_pdf_reader_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = labelled_starter(tmp_path)
    (folder / "documents" / "EX-SCAN-1.pdf").write_bytes(b"%PDF-1.4\n")
    (folder / "documents" / "EX-SCAN-2.pdf").write_bytes(b"%PDF-1.4\n")
    monkeypatch.setitem(sys.modules, "pypdf", None)  # as if pypdf were not installed
    [problem] = [p for p in problems_of(folder) if "pypdf" in p]  # once, not once per file
    assert "pip install 'privacy-ci[documents]'" in problem
    with pytest.raises(PrivacyCIError, match=r"needs pypdf.*privacy-ci\[documents\]"):
        DocumentFolder(folder / "documents").content("EX-SCAN-1")
