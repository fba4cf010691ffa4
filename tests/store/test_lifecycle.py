"""(e) The label lifecycle and freshness: a proposed label grants nothing, approval
grants, and revoking a label or an assignment takes effect on the next request,
also through another connection to the same database (another process)."""

from __future__ import annotations

import pytest

from privacy_ci.conductor import Corpus, Rule
from privacy_ci.errors import PrivacyCIError
from privacy_ci.store import (
    DocumentStore,
    LabelState,
    decide_for,
    load_corpus_into,
    retrieve_for,
)

QUERY = "lipid panel cholesterol Aiko Tanaka"


def test_proposed_labels_grant_nothing(empty_store: DocumentStore, corpus: Corpus) -> None:
    load_corpus_into(empty_store, corpus, state="proposed")
    assert len(empty_store.labels(LabelState.PROPOSED)) == 105
    requester = empty_store.snapshot().requester("D01")
    result = retrieve_for(empty_store, requester, QUERY, k=5)
    assert result.authorized_count == 0 and result.admitted == ()
    assert {w.rule for w in result.withheld} == {Rule.INVALID_LABEL}
    flow = decide_for(empty_store, requester, "RMC-LAB-003")
    assert not flow.permitted and flow.decision.rule is Rule.INVALID_LABEL
    assert "'proposed'" in flow.decision.errors[0]

    # approval grants, from the very next request
    empty_store.approve_label("RMC-LAB-003", "privacy-officer", "checked the ACL")
    assert decide_for(empty_store, requester, "RMC-LAB-003").permitted
    result = retrieve_for(empty_store, requester, QUERY, k=5)
    assert result.admitted_ids == ["RMC-LAB-003"] and result.authorized_count == 1


def test_revoking_a_label_takes_effect_on_the_next_request(riverside: DocumentStore) -> None:
    requester = riverside.snapshot().requester("D01")
    assert "RMC-LAB-003" in retrieve_for(riverside, requester, QUERY, k=5).admitted_ids
    record = riverside.revoke_label("RMC-LAB-003", "privacy-officer", "mislabelled ACL")
    assert record.state is LabelState.REVOKED and record.version == 3
    assert "RMC-LAB-003" not in retrieve_for(riverside, requester, QUERY, k=5).admitted_ids
    flow = decide_for(riverside, requester, "RMC-LAB-003")
    assert not flow.permitted and "'revoked'" in flow.decision.errors[0]
    assert flow.label_version == 3
    riverside.approve_label("RMC-LAB-003", "privacy-officer")
    assert decide_for(riverside, requester, "RMC-LAB-003").permitted


def test_revoking_an_assignment_takes_effect_on_the_next_request(riverside: DocumentStore) -> None:
    requester = riverside.snapshot().requester("D01")
    assert "P03" in requester.assignments
    riverside.unassign("D01", "P03", "medical-director", "patient transferred to D02")
    requester = riverside.snapshot().requester("D01")
    assert "P03" not in requester.assignments
    flow = decide_for(riverside, requester, "RMC-LAB-003")
    assert flow.decision.rule is Rule.ASSIGNMENT_REQUIRED
    assert "RMC-LAB-003" not in retrieve_for(riverside, requester, QUERY, k=5).admitted_ids
    with pytest.raises(PrivacyCIError, match="not assigned"):
        riverside.unassign("D01", "P03", "medical-director")
    riverside.assign("D01", "P03", "medical-director")
    assert decide_for(riverside, riverside.snapshot().requester("D01"), "RMC-LAB-003").permitted


def test_a_proposal_changes_no_access_until_approved(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    requester = riverside.snapshot().requester("N03")  # assigned to P03
    assert decide_for(riverside, requester, "RMC-LAB-003").permitted
    narrowed = corpus.label("RMC-LAB-003").model_copy(
        update={"permitted_receiver_roles": frozenset({"Doctor"}), "title": "a new title"}
    )
    record = riverside.propose_label(narrowed, "model:smollm2", "drafted narrower ACL")
    assert record.state is LabelState.PROPOSED and record.version == 3
    assert record.in_force_version == 2 and record.in_force == corpus.label("RMC-LAB-003")
    # the approved label stays in force, in the index and on the re-check alike
    flow = decide_for(riverside, requester, "RMC-LAB-003")
    assert flow.permitted and flow.label_version == 2
    result = retrieve_for(riverside, requester, QUERY, k=5)
    assert "RMC-LAB-003" in result.admitted_ids
    (doc,) = [d for d in result.admitted if d.doc_id == "RMC-LAB-003"]
    assert doc.title == corpus.label("RMC-LAB-003").title and doc.label_version == 2
    riverside.approve_label("RMC-LAB-003", "privacy-officer")
    assert decide_for(riverside, requester, "RMC-LAB-003").decision.rule is Rule.ROLE_NOT_PERMITTED


def test_history_records_who_and_when(riverside: DocumentStore) -> None:
    riverside.revoke_label("RMC-LAB-003", "alice", "wrong subject")
    riverside.approve_label("RMC-LAB-003", "bob", "fixed")
    riverside.unassign("N01", "P01", "carol")
    entries = riverside.history("RMC-LAB-003")
    assert [(e.action, e.actor) for e in entries][-2:] == [("revoke", "alice"), ("approve", "bob")]
    assert entries[-2].detail["note"] == "wrong subject" and entries[-2].detail["version"] == 3
    assert entries[-1].at >= entries[-2].at and entries[-1].at.endswith("+00:00")
    assignment = riverside.history("N01->P01", kind="assignment")
    assert [(e.action, e.actor) for e in assignment][-1] == ("revoke", "carol")


def test_writes_through_another_connection_are_seen_on_the_next_request(
    riverside: DocumentStore,
) -> None:
    """Two store objects on one database, as two service processes would be."""
    other = DocumentStore(riverside.url)
    try:
        requester = riverside.snapshot().requester("D01")
        assert decide_for(riverside, requester, "RMC-LAB-003").permitted
        before = riverside.version()
        other.revoke_label("RMC-LAB-003", "privacy-officer")
        assert riverside.version() > before
        assert not decide_for(riverside, requester, "RMC-LAB-003").permitted
        other.unassign("D01", "P01", "medical-director")
        assert "P01" not in riverside.snapshot().requester("D01").assignments
        assert riverside.audit.verify().ok and other.audit.verify().ok
    finally:
        other.close()


def test_snapshot_is_reused_until_a_write(riverside: DocumentStore) -> None:
    first = riverside.snapshot()
    assert riverside.snapshot() is first
    retrieve_for(riverside, first.requester("D01"), QUERY, k=3)  # audit appends are not writes
    assert riverside.snapshot() is first
    riverside.assign("D01", "P09", "medical-director")
    assert riverside.snapshot() is not first
