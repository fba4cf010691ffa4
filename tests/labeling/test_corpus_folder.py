"""`privacy-ci label run --corpus DIR` on a user's own folder (issue 16): documents
without a label are drafted, reported as "drafted, no authored label", exported as
a label file that `conductor validate` and `store propose` accept, and the drafts
grant nothing until the Policy Authority approves them.

The model is the scripted test double (`make_client` is patched, as in test_cli)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import load_corpus
from privacy_ci.labeling import ProposedLabel
from privacy_ci.labeling._labeler import UNKNOWN
from privacy_ci.llm import GenerationSettings, LLMClient, LLMConfig, Message
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.store import DocumentStore, LabelState, retrieve_for

runner = CliRunner()

HANDBOOK, REVIEW, NOTES = "EX-HANDBOOK", "EX-REVIEW-E01", "EX-NOTES"
HANDBOOK_LABEL = {
    "doc_id": HANDBOOK,
    "title": "Staff handbook",
    "document_type": "policy document",
    "sensitivity_tier": "internal",
    "permitted_receiver_roles": ["Employee", "HR Manager"],
    "subject": None,
    "subject_type": "organization",
    "extra_sensitive": False,
    "extra_sensitive_reason": None,
    "governing_principle": "operations: every member of staff follows the handbook",
    "originating_context": "Internal",
    "pii_attributes": [],
    "implied_attributes": [],
    "assignment_required": False,
}
REVIEW_DRAFT = {
    "sensitivity_tier": "employment",
    "permitted_receiver_roles": ["HR Manager"],
    "extra_sensitive": False,
    "governing_principle": "employment: HR reviews its staff",
}
_TITLE = re.compile(r"^Title : (.*)$", re.MULTILINE)
_TITLES = {"Staff handbook": HANDBOOK, HANDBOOK: HANDBOOK, REVIEW: REVIEW, NOTES: NOTES}
QUERY = "handbook holiday requests annual review rating notes"


def document_of(messages: Sequence[Message]) -> str:
    """The document a labeler prompt is about, by its title line (a document without a
    label is titled by its id)."""
    found = _TITLE.search(messages[-1].content)
    assert found is not None, messages[-1].content
    return _TITLES[found.group(1)]


def handbook_answer() -> str:
    return json.dumps({k: HANDBOOK_LABEL[k] for k in ProposedLabel.__slots__})


def default_answer(doc_id: str) -> str:
    """Valid label JSON for the handbook and the review; a malformed answer for the notes."""
    if doc_id == HANDBOOK:
        return handbook_answer()
    if doc_id == REVIEW:
        return json.dumps(REVIEW_DRAFT)
    return "I think these are some notes."


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVACY_CI_CONFIG", raising=False)
    for name in ("PROVIDER", "MODEL", "BASE_URL", "CACHE_PATH"):
        monkeypatch.delenv(f"PRIVACY_CI_LLM_{name}", raising=False)
    # resolved: the manifest records an absolute path, and a relative one is read from
    # the working directory (which the OS reports resolved)
    monkeypatch.chdir(tmp_path.resolve())
    return tmp_path.resolve()


@pytest.fixture
def model(env: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """`privacy_ci.llm.make_client` patched to the scripted test double."""
    state: dict[str, Any] = {"backends": [], "answer": default_answer}

    def script(messages: Sequence[Message], settings: GenerationSettings) -> str:
        answer: Callable[[str], str] = state["answer"]
        return answer(document_of(messages))

    def make_client(config: LLMConfig | None = None, **_: Any) -> LLMClient:
        backend = ScriptedTestBackend(script)
        state["backends"].append(backend)
        return LLMClient(backend, cache=None)

    monkeypatch.setattr("privacy_ci.llm.make_client", make_client)
    return state


@pytest.fixture
def folder(env: Path) -> Path:
    """`corpus init`, the handbook labelled, the review and a third document not."""
    path = env / "mycorpus"
    ok("corpus", "init", str(path))
    (path / "labels.yaml").write_text(
        yaml.safe_dump({"documents": [HANDBOOK_LABEL]}, sort_keys=False), encoding="utf-8"
    )
    (path / "documents" / f"{NOTES}.md").write_text(
        "# Handbook notes\n\nHoliday requests and the annual review rating of E01.\n"
    )
    corpus = load_corpus(path)
    assert corpus.labels.ids == [HANDBOOK] and corpus.unlabelled == (NOTES, REVIEW)
    return path


def ok(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def ok_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json"))


def error_line(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stderr.startswith("error: "), res.output
    return " ".join(res.stderr.split())


def admitted(db: Path, agent: str) -> list[str]:
    with DocumentStore(f"sqlite:///{db}") as store:
        return sorted(
            retrieve_for(store, store.snapshot().requester(agent), QUERY, k=10).admitted_ids
        )


def test_prompt_of_a_document_without_a_label(folder: Path) -> None:
    data = ok_json("label", "prompt", REVIEW, "--corpus", str(folder))
    text = (folder / "documents" / f"{REVIEW}.txt").read_text()
    assert f"Title : {REVIEW}\nDocument type : {UNKNOWN}\nSubject : {UNKNOWN}\n" in data["user"]
    assert text in data["user"]
    line = error_line("label", "prompt", "EX-NOPE", "--corpus", str(folder))
    assert "unknown document 'EX-NOPE'" in line and "2 without a label" in line


def test_run_report_export_propose_approve(folder: Path, model: dict[str, Any]) -> None:
    run_dir = folder.parent / "drafts-run"
    report = ok_json("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    # one draw by default for a user's folder; the malformed answer was asked three times
    assert report["draws"] == 1
    calls = [document_of(m) for m, _ in model["backends"][0].calls]
    assert sorted(calls) == sorted([HANDBOOK, REVIEW, NOTES, NOTES, NOTES])
    # compared: the one authored document; the others listed, not counted
    t7 = report["table_vii"]
    assert (t7["documents"], t7["failures"], t7["tier_conforming"], t7["acl_conforming"]) == (
        1,
        0,
        1,
        1,
    )
    assert (t7["privacy_violations"], t7["over_blocks"]) == (0, 0)
    assert report["no_authored_label"] == [
        {"doc_id": NOTES, "status": "label failed, no authored label", "labels": [None]},
        {"doc_id": REVIEW, "status": "drafted, no authored label", "labels": [REVIEW_DRAFT]},
    ]
    (failure,) = report["failures"]
    assert (failure["doc_id"], failure["draw"]) == (NOTES, 1)
    assert failure["failure"].startswith("output does not fit the label schema")
    # the manifest names the folder and hashes its documents
    identity = json.loads((run_dir / "manifest.json").read_text())["identity"]
    assert identity["corpus"]["source"] == str(folder)
    assert identity["corpus"]["unlabelled"] == [NOTES, REVIEW]
    assert identity["documents"] == [HANDBOOK, NOTES, REVIEW] and identity["draws"] == 1
    assert len(identity["corpus"]["content_sha256"]) == 64

    # report reads the run's own folder; as text the drafts have their own table
    (again,) = ok_json("label", "report", str(run_dir))["configurations"]
    assert again["no_authored_label"] == report["no_authored_label"]
    text = " ".join(ok("label", "report", str(run_dir)).split())
    assert "Documents without an authored label: nothing to compare" in text
    assert REVIEW in text and NOTES in text  # (the status column wraps at 80 columns)
    assert "2 document(s) have no authored label" in text

    # export: the authored document's label; the failed draft and the review left out,
    # each named with its reason (a drafted tier that needs an assignment has no subject:
    # approved as it is, it would grant without one, so it is written by hand)
    drafts = folder.parent / "drafts.yaml"
    summary = ok_json("label", "export", str(run_dir), "--out", str(drafts))
    assert summary["labels"] == 1 and summary["failed"] == [NOTES]
    assert summary["without_authored_label"] == []
    (refused,) = summary["invalid"]
    assert refused["doc_id"] == REVIEW and "requires an assignment" in refused["reason"]
    (left_out,) = summary["failures"]
    assert left_out["doc_id"] == NOTES
    assert "draw 1: output does not fit the label schema" in left_out["reason"]
    written = drafts.read_text(encoding="utf-8")
    assert written.startswith("# Labels written by scripted-test-double:scripted")
    assert f"# Left out {NOTES}: draw 1: output does not fit the label schema" in written
    entries = {e["doc_id"]: e for e in yaml.safe_load(written)}
    assert set(entries) == {HANDBOOK}
    assert entries[HANDBOOK] == HANDBOOK_LABEL | {
        "governing_principle": entries[HANDBOOK]["governing_principle"]
    }
    text = " ".join(ok("label", "export", str(run_dir), "--out", str(drafts)).split())
    assert f"1 document(s) had no label and are left out: {NOTES}: draw 1:" in text

    # copied in as labels.yaml, the folder validates
    copy = folder.parent / "copy"
    shutil.copytree(folder, copy)
    shutil.copy(drafts, copy / "labels.yaml")
    check = ok_json("conductor", "validate", str(copy))
    assert check["valid"] and check["unlabelled"] == 2

    # the store: the folder loaded, the drafts proposed; a proposal changes no access
    db = folder.parent / "store.db"
    ok("store", "load", str(folder), "--db", str(db))
    before = {agent: admitted(db, agent) for agent in ("E01", "E02", "H01")}
    assert before["E01"] == [HANDBOOK]  # the authored, approved label
    assert before["H01"] == [HANDBOOK]
    proposed = ok("store", "propose", str(drafts), "--db", str(db), "--by", "model:scripted")
    assert "proposed 1 label" in proposed
    with DocumentStore(f"sqlite:///{db}") as store:
        (record,) = store.labels()
        assert (record.doc_id, record.state) == (HANDBOOK, LabelState.PROPOSED)
        assert record.in_force_version is not None  # the authored label stays in force
        version = record.version
    for agent in ("E01", "E02", "H01"):
        assert admitted(db, agent) == before[agent], agent  # drafts are not policy
    ok("store", "approve", HANDBOOK, "--db", str(db), "--by", "PA1", "--version", str(version))
    assert admitted(db, "H01") == [HANDBOOK] and admitted(db, "E01") == [HANDBOOK]
    # the review, never labelled, is granted to nobody
    assert all(REVIEW not in admitted(db, a) for a in ("E01", "E02", "H01"))


def test_resume_refuses_a_changed_folder(folder: Path, model: dict[str, Any]) -> None:
    run_dir = folder.parent / "r"
    args = ("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    ok_json(*args)
    ok_json(*args)  # unchanged: resumed, nothing asked again
    assert model["backends"][1].calls == []
    # from another directory, with a relative path: the same folder, the same run
    ok_json("label", "run", "--corpus", "mycorpus", "--out", str(run_dir))
    assert model["backends"][2].calls == []

    notes = folder / "documents" / f"{NOTES}.md"
    original = notes.read_text()
    notes.write_text(original + "\nAnd one more line.\n")
    line = error_line(*args)
    assert "holds another labeling run" in line
    assert f"the documents of {folder} changed since it began" in line
    assert "corpus.content_sha256" in line
    notes.write_text(original)
    (folder / "documents" / "EX-NEW.txt").write_text("A new document.\n")
    line = error_line(*args)
    assert "holds another labeling run" in line and "changed since it began" in line
    assert all(b.calls == [] for b in model["backends"][1:])


def test_an_invalid_draft_is_listed_and_left_out(folder: Path, model: dict[str, Any]) -> None:
    """A tier the folder's policy lacks (the schema offers all seven): no crash, the
    report denies it, the export names it with the reason."""
    policy = yaml.safe_load((folder / "policy.yaml").read_text())
    del policy["tiers"]["clinical_sensitive"]
    (folder / "policy.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    sensitive = {"sensitivity_tier": "clinical_sensitive", "extra_sensitive": True}
    model["answer"] = lambda d: (
        json.dumps(json.loads(handbook_answer()) | sensitive)
        if d == HANDBOOK
        else json.dumps(REVIEW_DRAFT | sensitive)
        if d == REVIEW
        else json.dumps(REVIEW_DRAFT)
    )
    run_dir = folder.parent / "r"
    report = ok_json("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    assert report["table_vii"]["permits"] == 0  # the gate would deny an invalid label
    assert report["table_vii"]["tier_conforming"] == 0
    assert [e["status"] for e in report["no_authored_label"]] == ["drafted, no authored label"] * 2
    # nothing usable: export writes no file and exits 2, naming why (issue 26)
    line = error_line("label", "export", str(run_dir), "--out", str(folder.parent / "d.yaml"))
    assert "no usable label to export" in line and "3 not valid labels" in line
    assert "'clinical_sensitive' is not a tier of the policy" in line
    assert "requires an assignment" in line  # REVIEW_DRAFT's employment tier
    assert not (folder.parent / "d.yaml").exists()


def test_export_warns_when_the_documents_changed(folder: Path, model: dict[str, Any]) -> None:
    run_dir = folder.parent / "r"
    ok_json("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    (folder / "documents" / f"{REVIEW}.txt").write_text("Rewritten since.\n")
    summary = ok_json("label", "export", str(run_dir), "--out", str(folder.parent / "d.yaml"))
    (warning,) = summary["warnings"]
    assert "documents changed since the run" in warning


def test_export_of_a_run_whose_folder_is_gone(folder: Path, model: dict[str, Any]) -> None:
    run_dir = folder.parent / "r"
    ok_json("label", "run", "--corpus", str(folder), "--out", str(run_dir))
    moved = folder.parent / "moved"
    folder.rename(moved)
    line = error_line("label", "export", str(run_dir), "--out", str(folder.parent / "d.yaml"))
    assert "does not exist; pass --corpus DIR" in line
    summary = ok_json(
        "label",
        "export",
        str(run_dir),
        "--out",
        str(folder.parent / "d.yaml"),
        "--corpus",
        str(moved),
    )
    assert summary["labels"] == 1 and [i["doc_id"] for i in summary["invalid"]] == [REVIEW]


def test_a_folder_with_no_authored_label_at_all(env: Path, model: dict[str, Any]) -> None:
    """The starter as `corpus init` writes it: nothing to compare, every draft listed."""
    path = env / "starter"
    ok("corpus", "init", str(path))
    run_dir = env / "r"
    report = ok_json("label", "run", "--corpus", str(path), "--out", str(run_dir), "--draws", "2")
    assert report["flows"] == 0 and report["table_vii"]["documents"] == 0
    assert [(e["doc_id"], e["status"]) for e in report["no_authored_label"]] == [
        ("EX-HANDBOOK", "drafted, no authored label"),
        (REVIEW, "drafted, no authored label"),
    ]
    assert report["no_authored_label"][1]["labels"] == [REVIEW_DRAFT, REVIEW_DRAFT]
    text = " ".join(ok("label", "report", str(run_dir)).split())
    assert "│ — │ — │" in text  # no tier or ACL rate of nothing
    summary = ok_json("label", "export", str(run_dir), "--out", str(env / "d.yaml"), "--majority")
    assert summary["without_authored_label"] == ["EX-HANDBOOK"]
    assert summary["labels"] == 1 and summary["failed"] == []
    assert [i["doc_id"] for i in summary["invalid"]] == [REVIEW]
