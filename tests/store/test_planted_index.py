"""The access index against bugs a planted-bug check found the other tests missing.

* an agent's last assignment revoked: the next request, in this handle and in
  another one on the same database (refreshed from the history), sees none;
* from `MERGE_FROM` assigned subjects on, a requester's subject partitions are
  merged: the merged set still holds only documents whose ACL names the active
  role (the billing documents of a doctor's many patients are never ranked for
  the doctor, nor counted in BM25's statistics).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from privacy_ci.conductor import Corpus, Gate, Requester, Rule
from privacy_ci.store import (
    BM25Ranker,
    DocumentStore,
    decide_batch_for,
    decide_for,
    retrieve_for,
    tokenize,
)
from privacy_ci.store._index import MERGE_FROM

LAB = "RMC-LAB-001"  # clinical_standard, ACL {Doctor, Nurse}, subject P01
PATIENTS = [f"P{i:02d}" for i in range(1, 11)]


@pytest.fixture
def other(riverside: DocumentStore) -> Iterator[DocumentStore]:
    """Another handle on the same database: another process's view of it."""
    store = DocumentStore(riverside.url)
    try:
        store.snapshot()  # holds a snapshot, so later ones are refreshed, not rebuilt
        yield store
    finally:
        store.close()


def _nurse(store: DocumentStore) -> Requester:
    return store.snapshot().requester("N01")


def test_an_agents_last_unassignment_takes_effect_at_the_next_request(
    riverside: DocumentStore, other: DocumentStore, corpus: Corpus
) -> None:
    # N01 (a nurse) is assigned to one patient only: P01, the subject of LAB
    assert corpus.assignments["N01"] == frozenset({"P01"})
    assert corpus.label(LAB).subject == "P01"
    for store in (riverside, other):
        assert decide_for(store, _nurse(store), LAB).permitted
        found = retrieve_for(store, _nurse(store), "complete blood count hemoglobin", k=20)
        assert LAB in found.admitted_ids

    riverside.unassign("N01", "P01", "test", "the last one")

    for store in (riverside, other):
        snap = store.snapshot()
        assert snap.assignments.get("N01", frozenset()) == frozenset()
        assert snap.assignments == store.assignments()  # as the table holds it now
        nurse = snap.requester("N01")
        assert nurse.assignments == frozenset()
        flow = decide_for(store, nurse, LAB)
        assert not flow.permitted and flow.decision.rule is Rule.ASSIGNMENT_REQUIRED
        found = retrieve_for(store, nurse, "complete blood count hemoglobin", k=20)
        assert LAB not in found.admitted_ids
        assert found.withheld_rules().get(Rule.ASSIGNMENT_REQUIRED.key, 0) >= 1

    # assigned again: visible again (the refresh adds as well as removes)
    riverside.assign("N01", "P01", "test")
    for store in (riverside, other):
        nurse = _nurse(store)
        assert nurse.assignments == frozenset({"P01"})
        assert decide_for(store, nurse, LAB).permitted


def test_an_agent_with_no_assignment_left_is_dropped_not_kept(
    riverside: DocumentStore, other: DocumentStore, corpus: Corpus
) -> None:
    """Several agents lose their last assignment in one refresh; another keeps some."""
    for agent in ("N01", "N02", "N03"):
        (subject,) = corpus.assignments[agent]
        riverside.unassign(agent, subject, "test")
    riverside.unassign("D01", "P01", "test")  # D01 keeps P02 and P03
    for store in (riverside, other):
        snap = store.snapshot()
        assert snap.assignments == store.assignments()
        assert not {"N01", "N02", "N03"} & set(snap.assignments)
        assert snap.assignments["D01"] == frozenset({"P02", "P03"})


def _reference(
    corpus: Corpus, gate: Gate, requester: Requester, terms: dict[str, tuple[str, ...]]
) -> tuple[list[str], BM25Ranker]:
    """The gate's authorized set over every label, and BM25 built over it alone."""
    authorized = sorted(
        label.doc_id for label in corpus.labels if gate.decide(requester, label).permitted
    )
    return authorized, BM25Ranker(authorized, terms)


QUERIES = [
    "billing statement balance insurance",
    "claim for office visit",
    "eligibility verification prior authorization",
    "lipid panel cholesterol",
    "patient record lab results",
]


def test_merged_partitions_keep_only_the_active_roles_documents(
    riverside: DocumentStore, corpus: Corpus, gate: Gate
) -> None:
    """A doctor assigned to every patient: their billing documents (ACL: billing
    specialists only) sit in the same subject partitions as the doctor's clinical
    ones; merged, they must still be neither ranked, nor admitted, nor counted."""
    terms = {label.doc_id: tuple(tokenize(corpus.content(label.doc_id))) for label in corpus.labels}
    doctor_only = [
        label.doc_id
        for label in corpus.labels
        if label.subject in PATIENTS
        and gate.tier_requires[label.sensitivity_tier]
        and "Doctor" not in label.permitted_receiver_roles
    ]
    assert len(doctor_only) >= 10  # the partitions hold documents the role may not receive

    held = set(corpus.assignments["D01"])
    steps: list[list[str]] = [[p for p in PATIENTS[:8] if p not in held], PATIENTS[8:]]
    for step in steps:
        for patient in step:
            riverside.assign("D01", patient, "test")
        doctor = riverside.snapshot().requester("D01")
        assert len(doctor.assignments) >= MERGE_FROM  # the merged path
        authorized, reference = _reference(corpus, gate, doctor, terms)
        assert not set(doctor_only) & set(authorized)
        for query in QUERIES:
            result = retrieve_for(riverside, doctor, query, k=20)
            # nothing outside the scope may even become a candidate
            denied = [flow.doc_id for flow in result.decisions if not flow.permitted]
            assert not denied, (query, denied)
            assert not set(doctor_only) & set(result.admitted_ids)
            got = [(d.doc_id, d.score) for d in result.admitted]
            assert got == reference.top_k(query, 20), query
            assert result.authorized_count == len(authorized)


def test_a_second_role_held_grants_nothing_while_acting_in_the_first(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    """N01, a nurse, also made a billing specialist and assigned to P01: acting as a
    nurse she receives P01's lab report and none of P01's billing documents (their ACL
    names billing specialists only); acting as a billing specialist, the reverse. The
    same through every path: one decision, a batch (read from the access index), the
    retrieval path and its withheld listing."""
    riverside.put_agent(
        "N01", "N01", {"Nurse": "Medical", "Billing Specialist": "Administrative"}, "test"
    )
    billing = sorted(
        label.doc_id
        for label in corpus.labels
        if label.subject == "P01" and label.permitted_receiver_roles == {"Billing Specialist"}
    )
    assert billing  # RMC-BIL-004 and others
    snap = riverside.snapshot()
    for role, mine, theirs in (("Nurse", [LAB], billing), ("Billing Specialist", billing, [LAB])):
        requester = snap.requester("N01", role)
        assert requester.roles == {"Nurse", "Billing Specialist"}
        assert requester.assignments == {"P01"}
        ids = [*mine, *theirs]
        flows = decide_batch_for(riverside, requester, ids)
        from_index = decide_batch_for(riverside, requester, ids, unknown="deny")
        for flow, indexed in zip(flows, from_index, strict=True):
            want = Rule.PERMIT if flow.doc_id in mine else Rule.ROLE_NOT_PERMITTED
            assert flow.decision.rule is want, (role, flow.doc_id)
            assert indexed.decision.rule is want, (role, flow.doc_id)
        for doc_id in theirs:
            title = corpus.label(doc_id).title
            result = retrieve_for(riverside, requester, title, k=20)
            assert doc_id not in result.admitted_ids, (role, doc_id)
            withheld = {w.doc_id: w.rule for w in result.withheld}
            assert withheld[doc_id] is Rule.ROLE_NOT_PERMITTED, (role, doc_id)
