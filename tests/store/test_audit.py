"""(d) The audit log: append-only, hash-chained, content-free; tampering is found
at the right record (edit, delete, reorder, insert, truncated tail)."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from privacy_ci.conductor import Corpus
from privacy_ci.store import (
    AuditEntry,
    AuditRecord,
    DocumentStore,
    StoreError,
    decide_batch_for,
    retrieve_for,
)
from privacy_ci.store._audit import COLUMNS, ENTRY_COLUMNS, HASHED, chain_hash, content_hash
from tests.store.backends import drop_audit_guards


def _fill(store: DocumentStore, n_requests: int = 4) -> list[AuditRecord]:
    requester = store.snapshot().requester("N01")
    for i in range(n_requests):
        retrieve_for(store, requester, f"lab report blood {i}", k=2)
    decide_batch_for(store, requester, ["RMC-LAB-001", "RMC-MHA-001", "RMC-SAL-001"])
    return store.audit.records()


def test_record_holds_its_entry_and_reads_flat(riverside: DocumentStore) -> None:
    records = _fill(riverside, 1)
    record = records[1]
    assert isinstance(record.entry, AuditEntry)
    for name in ENTRY_COLUMNS:
        assert getattr(record, name) == getattr(record.entry, name)
    flat = record.as_dict()
    assert tuple(flat) == COLUMNS and tuple(flat.values()) == record.row()
    assert AuditRecord.from_row(record.row()) == record
    assert AuditRecord.seal(record.seq, record.at, record.entry, record.prev_hash) == record


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

    from privacy_ci.cli.audit import app as audit_app

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


# -- re-sealed records and edited chain hashes --------------------------------------------
def _reseal(store: DocumentStore, record: AuditRecord, decision: str) -> str:
    """Rewrite a record in place with its content hash and hash recomputed (a forger's
    "re-seal"), leaving its prev_hash as it was; returns the new hash."""
    fields = {name: getattr(record, name) for name in HASHED} | {"decision": decision}
    content = content_hash(fields)
    digest = chain_hash(record.prev_hash, content)
    store.db.execute(
        "UPDATE audit SET decision = ?, content_hash = ?, hash = ? WHERE seq = ?",
        (decision, content, digest, record.seq),
    )
    return digest


def test_resealed_middle_record_is_named(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    victim = next(r for r in records[1:-1] if r.decision == "deny")
    drop_audit_guards(riverside)
    _reseal(riverside, victim, "permit")
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == victim.seq
    problem = report.problem or ""
    assert f"between record {victim.seq} and record {victim.seq + 1}" in problem
    assert "re-sealed" in problem and "cannot be told apart" in problem


def test_resealed_last_record_is_caught_by_the_recorded_head(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    last = records[-1]
    drop_audit_guards(riverside)
    _reseal(riverside, last, "deny" if last.decision == "permit" else "permit")
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == last.seq
    assert "not the head the store recorded" in (report.problem or "")


def test_edited_hash_is_blamed_on_its_own_record(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    victim = records[len(records) // 2]
    drop_audit_guards(riverside)
    forged = hashlib.sha256(b"forged").hexdigest()
    riverside.db.execute("UPDATE audit SET hash = ? WHERE seq = ?", (forged, victim.seq))
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == victim.seq
    assert f"record {victim.seq} has a wrong chain hash" in (report.problem or "")


def test_relinked_first_record_is_named(riverside: DocumentStore) -> None:
    records = _fill(riverside)
    drop_audit_guards(riverside)
    first = records[0]
    fields = {name: getattr(first, name) for name in HASHED} | {"prev_hash": "1" * 64}
    content = content_hash(fields)
    riverside.db.execute(
        "UPDATE audit SET prev_hash = ?, content_hash = ?, hash = ? WHERE seq = 1",
        ("1" * 64, content, chain_hash("1" * 64, content)),
    )
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 1
    assert "genesis" in (report.problem or "")


# -- values retyped in the database ----------------------------------------------------
def _retype(store: DocumentStore, seq: int, column: str, value: str | float) -> None:
    """Store `value` (of the wrong type) in an audit column of record `seq`."""
    drop_audit_guards(store)
    if store.engine == "sqlite":  # SQLite keeps text and reals in an INTEGER column
        store.db.execute(f"UPDATE audit SET {column} = ? WHERE seq = ?", (value, seq))
        return
    # PostgreSQL enforces column types: an attacker with database rights retypes the
    # column first (jsonb keeps the other rows' integers as integers).
    store.db.execute(f"ALTER TABLE audit ALTER COLUMN {column} TYPE jsonb USING to_jsonb({column})")
    where = "seq = to_jsonb(CAST(? AS bigint))" if column == "seq" else "seq = ?"
    store.db.execute(
        f"UPDATE audit SET {column} = CAST(? AS jsonb) WHERE {where}",
        (json.dumps(value), seq),
    )


@pytest.mark.parametrize(
    ("column", "value", "type_name"),
    [
        ("label_version", "abc", "str"),
        ("label_version", 2.9, "float"),  # once cast to 2 before hashing: verified OK
        ("store_version", "abc", "str"),
        ("store_version", 2.9, "float"),
    ],
)
def test_retyped_field_is_reported(
    riverside: DocumentStore, column: str, value: str | float, type_name: str
) -> None:
    records = _fill(riverside)
    victim = next(r for r in records if r.label_version == 2 and 1 < r.seq < len(records))
    _retype(riverside, victim.seq, column, value)
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == victim.seq
    assert f"its {column} is {value!r} (a {type_name})" in (report.problem or "")
    with pytest.raises(StoreError, match=f"audit record {victim.seq} is malformed: its {column}"):
        list(riverside.audit.iter_records())


@pytest.mark.parametrize(
    ("value", "type_name"),
    [("abc", "str"), (2.9, "float"), (4.5, "float")],
    ids=["text-sorts-last", "real-sorts-early", "real-in-place"],
)
def test_retyped_seq_is_reported_at_its_position(
    riverside: DocumentStore, value: str | float, type_name: str
) -> None:
    _fill(riverside)
    _retype(riverside, 5, "seq", value)
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 5
    assert f"record 5's seq was changed to a non-integer: it is {value!r} (a {type_name})" in (
        report.problem or ""
    )
    # the typed reader refuses the row (PostgreSQL already refuses to page a jsonb seq)
    refusal = "is malformed: its seq" if riverside.engine == "sqlite" else "operator does not exist"
    with pytest.raises(StoreError, match=refusal):
        list(riverside.audit.iter_records(batch=3))


def test_retyped_hash_is_reported(riverside: DocumentStore) -> None:
    _fill(riverside)
    drop_audit_guards(riverside)
    riverside.db.execute("UPDATE audit SET prev_hash = 'é' WHERE seq = 3")
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 3
    assert "its prev_hash is 'é' (a str), not a SHA-256 hex digest" in (report.problem or "")


def test_undecodable_text_is_reported(sqlite_riverside: DocumentStore) -> None:
    # SQLite only: PostgreSQL stores only valid UTF-8 in a UTF8 database
    riverside = sqlite_riverside
    _fill(riverside)
    drop_audit_guards(riverside)
    riverside.db.execute("UPDATE audit SET decision = CAST(x'ff41' AS TEXT) WHERE seq = 4")
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 4
    assert "its decision is b'\\xffA' (a bytes), not text" in (report.problem or "")
    assert riverside.audit.records(limit=1)  # the connection reads text as before


@pytest.mark.parametrize(
    "head", ["garbage", "", "7", f"x:{'a' * 64}", "7:xyz", f"-1:{'a' * 64}", f" 7:{'a' * 64}"]
)
def test_garbled_recorded_head_is_reported(riverside: DocumentStore, head: str) -> None:
    _fill(riverside)
    riverside.db.execute("UPDATE meta SET value = ? WHERE key = 'audit_head'", (head,))
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq is None
    assert f"the recorded head (meta 'audit_head') is {head!r}" in (report.problem or "")
    with pytest.raises(StoreError, match="recorded head"):
        riverside.audit.recorded_head()


def test_deleted_recorded_head_is_reported(riverside: DocumentStore) -> None:
    _fill(riverside)
    riverside.db.execute("DELETE FROM meta WHERE key = 'audit_head'")
    report = riverside.audit.verify()
    assert not report.ok and "no head" in (report.problem or "")


def test_empty_log_without_head_verifies(empty_store: DocumentStore) -> None:
    report = empty_store.audit.verify()
    assert report.ok and report.records == 0


def test_audit_cli_reports_tampering_without_a_traceback(riverside: DocumentStore) -> None:
    import typer

    from privacy_ci.cli.audit import app as audit_app

    _fill(riverside, 2)
    app = typer.Typer()
    app.add_typer(audit_app, name="audit")
    runner = CliRunner()
    # a garbled head (markup in it prints as written)
    riverside.db.execute("UPDATE meta SET value = '[bold]x' WHERE key = 'audit_head'")
    head = runner.invoke(app, ["audit", "verify", "--db", riverside.url])
    assert head.exit_code == 1 and isinstance(head.exception, SystemExit), head.output
    flat = " ".join(head.output.split())
    assert "audit log BROKEN: the recorded head (meta 'audit_head') is '[bold]x'" in flat
    tail = runner.invoke(app, ["audit", "tail", "--db", riverside.url])
    assert tail.exit_code == 2 and "error:" in tail.stderr and "'[bold]x'" in tail.stderr
    # a retyped record
    _retype(riverside, 3, "label_version", "[/x]")
    text = runner.invoke(app, ["audit", "verify", "--db", riverside.url])
    assert text.exit_code == 1 and isinstance(text.exception, SystemExit), text.output
    flat = " ".join(text.output.split())
    assert "BROKEN at record 3" in flat and "its label_version is '[/x]' (a str)" in flat
    as_json = runner.invoke(app, ["audit", "verify", "--db", riverside.url, "--json"])
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["first_bad_seq"] == 3
