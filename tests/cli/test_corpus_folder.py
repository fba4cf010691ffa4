"""`privacy-ci corpus init`, `conductor validate` and `store load`: a folder of one's own
becomes a store, and a document without an approved label is never admitted (issue 16)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import load_corpus
from privacy_ci.store import DocumentStore, retrieve_for
from tests.conductor.test_corpus_folder import uncomment_example_labels

runner = CliRunner()


def ok(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def init(tmp_path: Path) -> Path:
    folder = tmp_path / "mycorpus"
    ok("corpus", "init", str(folder))
    return folder


def admitted(db: Path, agent: str, query: str) -> list[str]:
    with DocumentStore(f"sqlite:///{db}") as store:
        requester = store.snapshot().requester(agent)
        return retrieve_for(store, requester, query, k=10).admitted_ids


def state_of(db: Path) -> tuple[int, dict[str, int]]:
    with DocumentStore(f"sqlite:///{db}") as store:
        return store.version(), store.counts()


# ------------------------------------------------------------------------ init


def test_init_writes_a_starter_that_validates_and_loads(tmp_path: Path) -> None:
    folder = init(tmp_path)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "agents.yaml",
        "assignments.yaml",
        "documents/EX-HANDBOOK.txt",
        "documents/EX-REVIEW-E01.txt",
        "labels.yaml",
        "policy.yaml",
    ]
    assert yaml.safe_load((folder / "labels.yaml").read_text()) == {"documents": []}
    assert "# " in (folder / "policy.yaml").read_text()  # commented for the reader
    agents = yaml.safe_load((folder / "agents.yaml").read_text())
    assert len(agents["policy_authority"]) == 1

    summary = json.loads(ok("conductor", "validate", str(folder), "--json"))
    assert summary["valid"] and summary["documents"] == 0 and summary["unlabelled"] == 2
    assert "2 without a label" in " ".join(ok("conductor", "validate", str(folder)).split())

    db = tmp_path / "store.db"
    text = " ".join(ok("store", "load", str(folder), "--db", str(db)).split())
    assert "loaded 2 documents (0 with approved labels, 2 without a label)" in text
    assert "EX-HANDBOOK, EX-REVIEW-E01" in text
    # stored, yet granted to nobody: no label at all
    for agent in ("E01", "E02", "H01"):
        assert admitted(db, agent, "handbook review holiday rating") == []
    with DocumentStore(f"sqlite:///{db}") as store:
        assert set(store.fetch_content(["EX-HANDBOOK", "EX-REVIEW-E01"])) == {
            "EX-HANDBOOK",
            "EX-REVIEW-E01",
        }


@pytest.mark.parametrize("existing", ["file", "non-empty folder"])
def test_init_refuses_what_exists(tmp_path: Path, existing: str) -> None:
    target = tmp_path / "taken"
    if existing == "file":
        target.write_text("mine")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    res = runner.invoke(app, ["corpus", "init", str(target)])
    assert res.exit_code == 2
    message = " ".join(res.output.split())
    assert message.startswith("error:") and str(target) in message
    assert "not empty" in message or "not a folder" in message
    assert (target.read_text() if existing == "file" else (target / "notes.txt").read_text()) == (
        "mine"
    )
    if existing != "file":
        assert [p.name for p in target.iterdir()] == ["notes.txt"]  # nothing added


def test_init_into_an_empty_folder_and_json(tmp_path: Path) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    data = json.loads(ok("corpus", "init", str(target), "--json"))
    assert data["folder"] == str(target) and "documents/EX-HANDBOOK.txt" in data["files"]


# ------------------------------------------------------------------------ load


def test_an_approved_label_admits_and_an_unlabelled_document_never(tmp_path: Path) -> None:
    folder = init(tmp_path)
    uncomment_example_labels(folder / "labels.yaml")
    # a third document, about the same things, that no label names
    (folder / "documents" / "EX-NOTES.md").write_text(
        "# Handbook notes\n\nHoliday requests and the annual review rating of E01.\n"
    )
    db = tmp_path / "store.db"
    report = json.loads(ok("store", "load", str(folder), "--db", str(db), "--json"))
    assert report["labels"] == {"approved": 2, "proposed": 0, "revoked": 0}
    assert report["unlabelled_ids"] == ["EX-NOTES"] and report["documents"] == 3

    query = "handbook holiday requests annual review rating"
    assert admitted(db, "E01", query) == ["EX-HANDBOOK"]  # internal, every employee
    assert admitted(db, "E02", query) == ["EX-HANDBOOK"]
    assert sorted(admitted(db, "H01", query)) == ["EX-HANDBOOK", "EX-REVIEW-E01"]  # assigned
    with DocumentStore(f"sqlite:///{db}") as store:
        result = retrieve_for(store, store.snapshot().requester("H01"), query, k=10)
        assert "EX-NOTES" not in result.admitted_ids
        assert result.withheld_count == 0  # not even a candidate: it has no label
        assert store.fetch_content(["EX-NOTES"])  # yet its text is stored


def test_proposed_labels_grant_nothing(tmp_path: Path) -> None:
    folder = init(tmp_path)
    uncomment_example_labels(folder / "labels.yaml")
    db = tmp_path / "store.db"
    report = json.loads(
        ok("store", "load", str(folder), "--db", str(db), "--state", "proposed", "--json")
    )
    assert report["labels"] == {"approved": 0, "proposed": 2, "revoked": 0}
    assert admitted(db, "H01", "handbook review") == []


def test_store_load_json_shape(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    report: dict[str, Any] = json.loads(
        ok("store", "load", str(init(tmp_path)), "--db", str(db), "--json")
    )
    assert set(report) == {
        "corpus",
        "store",
        "policy",
        "agents",
        "policy_authority",
        "assignments",
        "labels",
        "loaded",
        "documents",
        "unlabelled",
        "unlabelled_ids",
        "unlabelled_in_force",
        "seconds",
    }
    assert report["store"]["engine"] == "sqlite" and report["store"]["name"] == str(db)
    assert report["policy"]["name"] == "example"
    assert report["policy"]["version"].startswith("sha256:")
    assert (report["agents"], report["policy_authority"], report["assignments"]) == (3, 1, 2)
    assert report["labels"] == {"approved": 0, "proposed": 0, "revoked": 0}
    assert report["loaded"] == {"labels": 0, "state": "approved", "new": 0, "replaced": 0}
    assert (report["documents"], report["unlabelled"]) == (2, 2)
    assert set(report["seconds"]) == {"validate", "store", "total"}


def test_load_riverside_is_the_same_code_path(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    report = json.loads(ok("store", "load-riverside", "--db", str(db), "--json"))
    assert report["labels"]["approved"] == 105 and report["unlabelled"] == 0
    assert report["policy_authority"] == 2
    assert "loaded 105 documents (proposed labels)" in " ".join(
        ok("store", "load-riverside", "--db", str(db), "--state", "proposed").split()
    )


# ------------------------------------------------------ malformed: nothing loaded


def _break_label_role(folder: Path) -> str:
    uncomment_example_labels(folder / "labels.yaml")
    path = folder / "labels.yaml"
    path.write_text(path.read_text().replace("[Employee, HR Manager]", "[Employee, CEO]"))
    return "field permitted_receiver_roles"


def _break_agent_role(folder: Path) -> str:
    path = folder / "agents.yaml"
    path.write_text(path.read_text().replace("role: HR Manager", "role: Boss"))
    return "field role"


def _break_assignment(folder: Path) -> str:
    (folder / "assignments.yaml").write_text("assignments:\n  H09: [E01]\n")
    return "requester 'H09'"


def _break_file_name(folder: Path) -> str:
    (folder / "documents" / "Q3 report.txt").write_text("numbers")
    return "file name"


def _break_duplicate_files(folder: Path) -> str:
    (folder / "documents" / "EX-HANDBOOK.md").write_text("# again")
    return "two files"


def _break_duplicate_labels(folder: Path) -> str:
    uncomment_example_labels(folder / "labels.yaml")
    path = folder / "labels.yaml"
    path.write_text(path.read_text().replace("doc_id: EX-REVIEW-E01", "doc_id: EX-HANDBOOK"))
    return "doc_id is used by an earlier document"


def _break_missing_file(folder: Path) -> str:
    uncomment_example_labels(folder / "labels.yaml")
    (folder / "documents" / "EX-REVIEW-E01.txt").unlink()
    return "field doc_id"


BREAKS = {
    "label role": (_break_label_role, "labels.yaml"),
    "agent role": (_break_agent_role, "agents.yaml"),
    "assignment": (_break_assignment, "assignments.yaml"),
    "file name": (_break_file_name, "Q3 report.txt"),
    "duplicate files": (_break_duplicate_files, "EX-HANDBOOK.md"),
    "duplicate labels": (_break_duplicate_labels, "labels.yaml"),
    "missing file": (_break_missing_file, "labels.yaml"),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_a_malformed_folder_is_reported_and_loads_nothing(tmp_path: Path, case: str) -> None:
    db = tmp_path / "store.db"
    ok("store", "load-riverside", "--db", str(db))  # a store with something in it
    before = state_of(db)
    folder = init(tmp_path)
    breaker, file_named = BREAKS[case]
    field_named = breaker(folder)
    for command in (
        ["conductor", "validate", str(folder)],
        ["store", "load", str(folder), "--db", str(db)],
    ):
        res = runner.invoke(app, command)
        assert res.exit_code == 2, res.output
        message = " ".join(res.output.split())
        assert message.startswith("error:") and "Traceback" not in message
        assert file_named in message and field_named in message
    assert state_of(db) == before  # the store is unchanged


def test_an_unreadable_document_loads_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    ok("store", "load-riverside", "--db", str(db))
    before = state_of(db)
    folder = init(tmp_path)
    (folder / "documents" / "EX-LATIN1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "documents" / "EX-BROKEN.docx").write_bytes(b"not a zip")
    res = runner.invoke(app, ["store", "load", str(folder), "--db", str(db)])
    assert res.exit_code == 2
    message = " ".join(res.output.split())
    assert "2 problem(s)" in message and "EX-LATIN1.txt: not UTF-8" in message
    assert "EX-BROKEN.docx: not a readable DOCX" in message
    assert state_of(db) == before


# ------------------------------------------------------------------ PDF and DOCX


def _pdf(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica (built by hand: no PDF writer needed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def test_pdf_and_docx_documents_are_read_and_stored(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    docx = pytest.importorskip("docx")
    folder = init(tmp_path)
    (folder / "documents" / "EX-POLICY.pdf").write_bytes(_pdf("Travel policy: book economy fares"))
    document = docx.Document()
    document.add_paragraph("Onboarding checklist")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "laptop"
    table.rows[0].cells[1].text = "badge"
    document.save(str(folder / "documents" / "EX-ONBOARDING.docx"))

    corpus = load_corpus(folder)
    assert corpus.unlabelled == ("EX-HANDBOOK", "EX-ONBOARDING", "EX-POLICY", "EX-REVIEW-E01")
    assert corpus.document_text("EX-POLICY") == "Travel policy: book economy fares"
    assert corpus.document_text("EX-ONBOARDING") == "Onboarding checklist\nlaptop | badge"

    db = tmp_path / "store.db"
    report = json.loads(ok("store", "load", str(folder), "--db", str(db), "--json"))
    assert report["documents"] == 4
    with DocumentStore(f"sqlite:///{db}") as store:
        stored = store.fetch_content(["EX-POLICY", "EX-ONBOARDING"])
    assert stored["EX-POLICY"] == "Travel policy: book economy fares"


# ------------------------------------------------------------------- 1,000 documents


def _generated_folder(tmp_path: Path, n: int, unlabelled: int) -> Path:
    """The starter with `n` documents: the first n - unlabelled labelled (internal for
    every employee, or an employee's review for HR), the rest without a label."""
    folder = init(tmp_path)
    documents = folder / "documents"
    labels = []
    for i in range(n):
        doc_id = f"GEN-{i:05d}"
        subject = ("E01", "E02")[i % 2]
        (documents / f"{doc_id}.txt").write_text(
            f"Document {i} about project {i % 37} for {subject}: status, budget and risks.\n"
        )
        if i >= n - unlabelled:
            continue
        review = i % 3 == 0
        labels.append(
            {
                "doc_id": doc_id,
                "title": f"Generated {i}",
                "document_type": "performance review" if review else "project note",
                "sensitivity_tier": "employment" if review else "internal",
                "permitted_receiver_roles": ["HR Manager"]
                if review
                else ["Employee", "HR Manager"],
                "subject": subject if review else None,
                "subject_type": "employee" if review else "organization",
                "extra_sensitive": False,
                "extra_sensitive_reason": None,
                "governing_principle": "generated for the load test",
                "originating_context": "HR" if review else "Internal",
                "assignment_required": review,
            }
        )
    (folder / "labels.yaml").write_text(yaml.safe_dump({"documents": labels}, sort_keys=False))
    return folder


def test_a_thousand_document_folder_loads(tmp_path: Path) -> None:
    folder = _generated_folder(tmp_path, 1000, unlabelled=100)
    db = tmp_path / "store.db"
    started = time.perf_counter()
    report = json.loads(ok("store", "load", str(folder), "--db", str(db), "--json"))
    elapsed = time.perf_counter() - started
    print(  # the measured time, for the record; only correctness is asserted
        f"\n1,000-document folder (900 labelled, 100 without; +2 starter documents):"
        f" {elapsed:.2f} s end to end, report {report['seconds']}"
    )
    assert report["documents"] == 1002 and report["unlabelled"] == 102
    assert report["labels"] == {"approved": 900, "proposed": 0, "revoked": 0}
    _, counts = state_of(db)
    assert counts["labels"] == 900 and counts["documents"] == 1002
    # E02 sees internal documents only; never a review, never an unlabelled one
    seen = admitted(db, "E02", "project 5 status budget risks")
    assert seen and all(int(d[4:]) < 900 and int(d[4:]) % 3 for d in seen)
