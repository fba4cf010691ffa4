"""The document store and the retrieval path on SQLite and PostgreSQL: schema, loading,
identity from the store, the order of the retrieval path, and agreement with the gate."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Gate, Requester, Rule
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.store import (
    DocumentStore,
    HashingEmbedder,
    LabelState,
    RoleNotHeld,
    StoreError,
    UnknownAgent,
    UnknownDocument,
    decide_batch_for,
    decide_for,
    parse_url,
    retrieve_for,
    tokenize,
)


def test_parse_url_spellings(tmp_path: Path) -> None:
    assert parse_url("sqlite:///:memory:")[1] == ":memory:"
    assert parse_url("sqlite:///rel/x.db")[1] == "rel/x.db"
    assert parse_url("sqlite:////abs/x.db")[1] == "/abs/x.db"
    assert parse_url(tmp_path / "x.db")[1] == str(tmp_path / "x.db")
    dialect, target = parse_url("postgres://u@127.0.0.1:5/db")
    assert dialect.engine == "postgresql" and target == "postgresql://u@127.0.0.1:5/db"
    assert parse_url("postgresql+psycopg://h/db")[0].engine == "postgresql"
    with pytest.raises(StoreError, match="unsupported store URL scheme 'mysql'"):
        parse_url("mysql://h/db")
    with pytest.raises(StoreError, match="empty store URL"):
        parse_url(" ")


def test_sqlite_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        DocumentStore(tmp_path / "nope" / "x.db")


def test_schema_is_idempotent_and_empty_store_says_what_to_do(empty_store: DocumentStore) -> None:
    empty_store.init_schema()
    empty_store.init_schema()
    assert empty_store.version() == 0
    assert empty_store.counts()["labels"] == 0
    with pytest.raises(StoreError, match="has no policy"):
        empty_store.snapshot()


def test_load_riverside(riverside: DocumentStore, corpus: Corpus) -> None:
    counts = riverside.counts()
    assert counts["labels"] == counts["documents"] == 105
    # the 24 requesters plus the Policy Authority's members, who request no documents
    assert counts["agents"] == 24 + len(corpus.directory.policy_authority) == 26
    assert counts["assignments"] == sum(len(s) for s in corpus.assignments.values())
    assert len(riverside.labels(LabelState.APPROVED)) == 105
    assert riverside.labels("proposed") == []
    policy = riverside.policy()
    assert policy is not None and policy.version == corpus.policy.version
    record = riverside.label("RMC-LAB-001")
    assert record.label == corpus.label("RMC-LAB-001")
    assert record.version == 2 and record.updated_by == corpus.policy.authority
    actions = [e.action for e in riverside.history("RMC-LAB-001")]
    assert actions == ["propose", "approve", "put_document"]
    assert riverside.agents()["D01"].roles == {"Doctor": "Medical"}
    assert riverside.agents()["PA1"].roles == {"Policy Authority": "Administrative"}
    assert riverside.assignments()["D01"] == corpus.assignments["D01"]
    with pytest.raises(UnknownDocument, match="'NOPE-1'"):
        riverside.label("NOPE-1")


def test_requester_comes_from_the_store(riverside: DocumentStore, corpus: Corpus) -> None:
    snap = riverside.snapshot()
    assert snap.requester("D01") == corpus.requester("D01")
    assert snap.requester("D01", "Doctor", "Medical") == corpus.requester("D01")
    # the context is the store's: a token minted for another one is refused
    with pytest.raises(RoleNotHeld, match="holds role 'Doctor' in context 'Medical'"):
        snap.requester("D01", "Doctor", "Administrative")
    with pytest.raises(RoleNotHeld, match="does not hold role 'Nurse'"):
        snap.requester("D01", "Nurse", "Medical")
    with pytest.raises(UnknownAgent, match="'X99'"):
        snap.requester("X99")


def test_decisions_match_the_gate_on_all_2520_flows(
    riverside: DocumentStore, corpus: Corpus, gate: Gate
) -> None:
    ids = corpus.labels.ids
    permits = 0
    for agent in corpus.agents:
        requester = riverside.snapshot().requester(agent.id)
        flows = decide_batch_for(riverside, requester, ids)
        for flow in flows:
            expected = gate.decide(corpus.requester(agent.id), corpus.label(flow.doc_id))
            assert flow.decision == expected, (agent.id, flow.doc_id)
            permits += flow.permitted
    assert permits == 259  # paper, section VI-A
    assert riverside.audit.verify().records == 2520


def test_authorized_set_is_the_gates_permit_set(
    riverside: DocumentStore, corpus: Corpus, gate: Gate
) -> None:
    for agent in corpus.agents:
        requester = corpus.requester(agent.id)
        result = retrieve_for(riverside, requester, "patient record", k=100)
        expected = {lab.doc_id for lab in corpus.labels if gate.decide(requester, lab).permitted}
        withheld = {w.doc_id: w.rule for w in result.withheld}
        assert result.authorized_count == len(expected)
        assert set(corpus.labels.ids) - set(withheld) == expected
        assert {d.doc_id for d in result.admitted} <= expected
        for doc_id, rule in withheld.items():
            assert gate.decide(requester, corpus.label(doc_id)).rule is rule


def test_retrieval_reads_content_only_for_permitted_candidates(
    riverside: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table II: ranking reads index terms; content is read only in the authorized fetch."""
    statements: list[tuple[str, list[Any]]] = []
    real_query = riverside.db.query

    def spy(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        statements.append((sql, list(params)))
        return real_query(sql, params)

    monkeypatch.setattr(riverside.db, "query", spy)
    requester = riverside.snapshot().requester("N01")
    result = retrieve_for(riverside, requester, "lab report blood count results", k=5)
    content_reads = [(s, p) for s, p in statements if re.search(r"\bFROM documents\b", s)]
    assert len(content_reads) == 1
    assert set(content_reads[0][1]) == set(result.admitted_ids)
    assert result.admitted_ids and all(d.content for d in result.admitted)


def test_candidates_are_decided_again_on_the_current_label(
    riverside: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A label revoked after the scope was computed is denied at step (c), not fetched."""
    requester = riverside.snapshot().requester("D01")
    first = retrieve_for(riverside, requester, "lipid panel cholesterol", k=3)
    top = first.admitted_ids[0]
    stale = riverside.snapshot()
    riverside.revoke_label(top, "privacy-office")
    monkeypatch.setattr(riverside, "snapshot", lambda: stale)  # a scope from before the revocation
    result = retrieve_for(riverside, requester, "lipid panel cholesterol", k=3)
    flow = next(f for f in result.decisions if f.doc_id == top)
    assert not flow.permitted and flow.decision.rule is Rule.INVALID_LABEL
    assert "revoked" in flow.decision.errors[0]
    assert top not in result.admitted_ids
    assert any(w.doc_id == top and w.stage == "candidate" for w in result.withheld)


def test_retrieval_result_shape(riverside: DocumentStore) -> None:
    requester = riverside.snapshot().requester("D01")
    result = retrieve_for(riverside, requester, "lipid panel cholesterol", k=3)
    assert result.admitted_ids[0] == "RMC-LAB-003"
    scores = [d.score for d in result.admitted]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    data = result.as_dict()
    assert "withheld" not in vars(result)  # counted without building one object per document
    assert data["withheld"]["count"] == result.withheld_count == len(result.withheld)
    listed = Counter(w.rule.key for w in result.withheld)
    assert data["withheld"]["rules"] == dict(sorted(listed.items(), key=lambda kv: (-kv[1], kv[0])))
    assert "documents" not in data["withheld"]  # ids of withheld documents are not returned
    assert result.as_dict(withheld_ids=True)["withheld"]["documents"]
    assert data["policy_version"] == riverside.policy().version  # type: ignore[union-attr]
    nothing = retrieve_for(riverside, requester, "zzzz qqqq", k=3)
    assert nothing.admitted == () and nothing.decisions == ()
    with pytest.raises(PrivacyCIError, match="k must be between 1 and 100"):
        retrieve_for(riverside, requester, "x", k=0)


def test_unknown_documents_are_named(riverside: DocumentStore) -> None:
    requester = riverside.snapshot().requester("D01")
    with pytest.raises(UnknownDocument, match="'NOPE-1', 'NOPE-2'"):
        decide_batch_for(riverside, requester, ["RMC-LAB-001", "NOPE-1", "NOPE-2"])
    with pytest.raises(UnknownDocument, match="unknown document 'NOPE-3'"):
        decide_for(riverside, requester, "NOPE-3")


def test_requester_with_foreign_role_is_denied_by_the_gate(riverside: DocumentStore) -> None:
    """A library caller can build any Requester; the gate still denies a role not held."""
    forged = Requester(
        id="P01",
        roles=frozenset({"Patient"}),
        active_role="Doctor",
        active_context="Medical",
        assignments=frozenset({"P01"}),
    )
    flow = decide_for(riverside, forged, "RMC-LAB-001")
    assert flow.decision.rule is Rule.NO_ACTIVE_ROLE
    assert retrieve_for(riverside, forged, "lab", k=5).authorized_count == 0


def test_embedding_ranking_stays_within_the_authorized_set(riverside: DocumentStore) -> None:
    embedder = HashingEmbedder(128)
    assert riverside.embed_documents(embedder) == 105
    requester = riverside.snapshot().requester("N01")
    result = retrieve_for(riverside, requester, "complete blood count", k=5, embedder=embedder)
    authorized = 105 - sum(w.stage == "scope" for w in result.withheld)
    assert 0 < len(result.admitted) <= 5 and authorized == result.authorized_count
    assert all(f.permitted for f in result.decisions)


def test_tokenize_is_stable() -> None:
    assert tokenize("The Doctors' records, running!") == ["doctor", "record", "run"]
    assert tokenize("") == []


def test_propose_rejects_invalid_labels(empty_store: DocumentStore) -> None:
    with pytest.raises(ValidationFailed, match="sensitivity_tier"):
        empty_store.propose_label({"doc_id": "X"}, "model:test")
    with pytest.raises(ValidationFailed, match="name who makes it"):
        empty_store.assign("D01", "P01", " ")


def test_reopening_keeps_data_and_checks_the_schema_version(riverside: DocumentStore) -> None:
    again = DocumentStore(riverside.url)
    try:
        assert again.counts()["labels"] == 105 and again.version() == riverside.version()
    finally:
        again.close()
    riverside.db.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version '0'"):
        DocumentStore(riverside.url)


def test_database_errors_are_store_errors(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path / "bare.db", create=False)
    try:
        with pytest.raises(StoreError, match="sqlite error: no such table"):
            store.version()
    finally:
        store.close()


def test_the_version_moves_once_per_write_transaction(riverside: DocumentStore) -> None:
    """A bulk write bumps the store version once (linear loads on PostgreSQL), readers
    see it change after the commit, and a rolled-back write leaves it where it was."""
    before = riverside.version()
    with riverside.db.write():
        for subject in ("P001", "P002", "P003"):
            riverside.assign("N01", subject, "privacy-office")
        riverside.revoke_label("RMC-LAB-001", "privacy-office")
    assert riverside.version() == before + 1
    assert len(riverside.history()) >= 4  # every change still has its history row
    riverside.unassign("N01", "P001", "privacy-office")  # a write of its own: one more
    assert riverside.version() == before + 2
    with pytest.raises(RuntimeError), riverside.db.write():
        riverside.assign("N01", "P004", "privacy-office")
        raise RuntimeError("abandon the transaction")
    assert riverside.version() == before + 2
    snapshot = riverside.snapshot()
    assert snapshot.version == before + 2 and "P004" not in snapshot.requester("N01").assignments
