"""(d) The audit log: append-only, hash-chained, content-free; tampering is found
at the right record (edit, delete, reorder, insert, truncated tail)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from privacy_ci.conductor import Corpus
from privacy_ci.store import AuditRecord, DocumentStore, decide_batch_for, retrieve_for
from tests.store.backends import drop_audit_guards


def _fill(store: DocumentStore, n_requests: int = 4) -> list[AuditRecord]:
    requester = store.snapshot().requester("N01")
    for i in range(n_requests):
        retrieve_for(store, requester, f"lab report blood {i}", k=2)
    decide_batch_for(store, requester, ["RMC-LAB-001", "RMC-MHA-001", "RMC-SAL-001"])
    return store.audit.records()


def test_every_decision_is_logged_without_content(riverside: DocumentStore, corpus: Corpus) -> None:
    records = _fill(riverside)
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    decided = [r for r in records if r.doc_id is not None]
    assert {r.decision for r in decided} == {"permit", "deny"}
    scope = [r for r in records if r.decision == "scope"]
    assert len(scope) == 4 and json.loads(scope[0].detail)["k"] == 2
    for r in decided:
        assert r.requester == "N01" and r.role == "Nurse" and r.context == "Medical"
        assert r.policy_version == corpus.policy.version and r.label_version == 2
        assert r.rule in {"permit", "role_not_permitted", "assignment_required"}
    # no title, no content: nothing from any document's text appears in any record
    titles = [label.title for label in corpus.labels]
    blob = json.dumps([r.as_dict() for r in records])
    assert not any(t in blob for t in titles)
    content = riverside.fetch_content(["RMC-LAB-001"])["RMC-LAB-001"]
    assert not any(line in blob for line in content.splitlines() if len(line) > 12)
    report = riverside.audit.verify()
    assert report.ok and report.records == len(records) and report.head_hash == records[-1].hash


def test_the_log_is_append_only(riverside: DocumentStore) -> None:
    _fill(riverside, 1)
    with pytest.raises(Exception, match="append-only"):
        riverside.db.execute("UPDATE audit SET decision = 'permit' WHERE seq = 1")
    with pytest.raises(Exception, match="append-only"):
        riverside.db.execute("DELETE FROM audit WHERE seq = 1")
    assert riverside.audit.verify().ok


def test_edited_record_is_found(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    victim = next(r for r in records if r.decision == "deny")
    drop_audit_guards(riverside)
    riverside.db.execute("UPDATE audit SET decision = 'permit' WHERE seq = ?", (victim.seq,))
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == victim.seq
    assert "changed" in (report.problem or "")


def test_deleted_record_is_found(riverside: DocumentStore) -> None:
    _fill(riverside)
    drop_audit_guards(riverside)
    riverside.db.execute("DELETE FROM audit WHERE seq = 5")
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 5
    assert "record 5 is missing" in (report.problem or "")


def test_deleted_tail_is_found(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    last = records[-1].seq
    drop_audit_guards(riverside)
    riverside.db.execute("DELETE FROM audit WHERE seq >= ?", (last - 1,))
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == last - 1
    assert "deleted" in (report.problem or "")


def test_reordered_records_are_found(riverside: DocumentStore) -> None:
    _fill(riverside)
    drop_audit_guards(riverside)
    db = riverside.db
    db.execute("UPDATE audit SET seq = -1 WHERE seq = 3")
    db.execute("UPDATE audit SET seq = 3 WHERE seq = 6")
    db.execute("UPDATE audit SET seq = 6 WHERE seq = -1")
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 3


def test_inserted_records_are_found(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    drop_audit_guards(riverside)
    db = riverside.db
    # make room at seq 4, then insert a forged record there
    db.execute("UPDATE audit SET seq = -(seq + 1) WHERE seq >= 4")
    db.execute("UPDATE audit SET seq = -seq WHERE seq < 0")
    forged = records[3]
    row = list(forged.row())
    row[0], row[8] = 4, "permit"  # a permit that never happened, with copied hashes
    db.execute(f"INSERT INTO audit VALUES ({', '.join('?' * len(row))})", row)
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 4


def test_well_forged_insertion_is_found_at_the_next_record(riverside: DocumentStore) -> None:
    """A forger who re-hashes the inserted record is caught at the record it displaced."""
    records = _fill(riverside)
    drop_audit_guards(riverside)
    db = riverside.db
    db.execute("UPDATE audit SET seq = -(seq + 1) WHERE seq >= 4")
    db.execute("UPDATE audit SET seq = -seq WHERE seq < 0")
    entry = records[3]
    from privacy_ci.store import AuditEntry

    forged = AuditRecord.seal(
        4,
        entry.at,
        AuditEntry(
            entry.request_id,
            entry.requester,
            entry.role,
            entry.context,
            entry.action,
            "RMC-MHA-001",
            "permit",
            "permit",
            entry.policy_version,
            2,
            entry.store_version,
        ),
        records[2].hash,
    )
    db.execute(f"INSERT INTO audit VALUES ({', '.join('?' * 17)})", list(forged.row()))
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 5


def test_expected_head_anchors_the_tail(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    assert riverside.audit.verify(expect_head=records[-1].hash).ok
    report = riverside.audit.verify(expect_head=records[-2].hash)
    assert not report.ok and report.first_bad_seq == records[-1].seq


def test_audit_cli(riverside: DocumentStore) -> None:
    import typer

    from privacy_ci.cli.serve import audit_app

    _fill(riverside, 2)
    app = typer.Typer()
    app.add_typer(audit_app, name="audit")
    runner = CliRunner()
    ok = runner.invoke(app, ["audit", "verify", "--db", riverside.url, "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    tail = runner.invoke(app, ["audit", "tail", "--db", riverside.url, "-n", "3"])
    assert tail.exit_code == 0 and len(tail.output.strip().splitlines()) == 3
    drop_audit_guards(riverside)
    riverside.db.execute("UPDATE audit SET requester = 'D01' WHERE seq = 2")
    bad = runner.invoke(app, ["audit", "verify", "--db", riverside.url, "--json"])
    assert bad.exit_code == 1
    data = json.loads(bad.output)
    assert data["ok"] is False and data["first_bad_seq"] == 2
    text = runner.invoke(app, ["audit", "verify", "--db", riverside.url])
    assert text.exit_code == 1 and "BROKEN at record 2" in text.output
