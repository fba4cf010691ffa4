"""The Policy Authority's review in the store (SQLite and PostgreSQL): approving what
was seen (versions), editing then approving, rejecting (which restores the label in
force before), the consequence computed by the gate, bulk approval that refuses
widening, and the audit record of each verdict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Gate, Label, Requester
from privacy_ci.errors import ValidationFailed
from privacy_ci.store import (
    BulkApprovalRefused,
    DocumentStore,
    LabelConflict,
    LabelState,
    ReviewVerdict,
    UnknownDocument,
    access_diff,
    decide_for,
)

DOC = "RMC-LAB-003"  # Doctor, Nurse; subject P03: D01 and N03 are assigned
WIDER = ["Billing Specialist", "Doctor", "Nurse"]  # B01 is assigned to P03


def _authority(store: DocumentStore) -> Requester:
    return store.snapshot().requester("PA1")


def _propose(store: DocumentStore, doc_id: str = DOC, **fields: Any) -> int:
    body = {**store.label(doc_id).body, **fields}
    return store.propose_label(body, "model:test", "drafted").version


def _permitted(store: DocumentStore, agent: str, doc_id: str = DOC) -> bool:
    return decide_for(store, store.snapshot().requester(agent), doc_id).permitted


def test_approve_only_the_version_seen(riverside: DocumentStore) -> None:
    seen = _propose(riverside, permitted_receiver_roles=WIDER)
    with pytest.raises(LabelConflict, match="changed since version"):
        riverside.approve_label(DOC, "PA1", version=seen - 1)
    _propose(riverside, permitted_receiver_roles=["Doctor"])  # edited again after it was seen
    with pytest.raises(LabelConflict, match=f"changed since version {seen}"):
        riverside.approve_label(DOC, "PA1", version=seen)
    record = riverside.approve_label(DOC, "PA1", version=seen + 1)
    assert record.state is LabelState.APPROVED and record.version == seen + 2
    with pytest.raises(LabelConflict, match="not awaiting review: it is approved"):
        riverside.approve_label(DOC, "PA1", version=seen + 1)  # a double approval
    assert riverside.approve_label(DOC, "PA1").version == seen + 2  # unversioned: idempotent
    with pytest.raises(UnknownDocument):
        riverside.approve_label("NOPE-1", "PA1", version=1)


def test_reject_restores_the_label_in_force_before(riverside: DocumentStore) -> None:
    before = riverside.label(DOC)
    seen = _propose(riverside, permitted_receiver_roles=WIDER)
    _propose(riverside, permitted_receiver_roles=WIDER, title="again")  # a run of two edits
    prior = riverside.prior_label(DOC)
    assert prior is not None and prior.state is LabelState.APPROVED
    assert prior.version == before.version and prior.body == before.body
    # a proposal changes no access: the approved label stays in force while it waits
    assert _permitted(riverside, "D01") and not _permitted(riverside, "B01")
    with pytest.raises(LabelConflict):
        riverside.reject_label(DOC, "PA1", version=seen)  # not the latest edit
    record = riverside.reject_label(DOC, "PA1", "billing has no need", version=seen + 1)
    assert record.state is LabelState.APPROVED and record.body == before.body
    assert _permitted(riverside, "D01") and not _permitted(riverside, "B01")
    last = riverside.history(DOC, "label")[-1]
    assert (last.action, last.actor) == ("reject", "PA1")
    assert last.detail["restored_version"] == before.version
    assert last.detail["rejected"]["title"] == "again"  # the history keeps what was refused
    assert riverside.prior_label(DOC) is None  # nothing awaits review
    with pytest.raises(LabelConflict, match="not awaiting review"):
        riverside.reject_label(DOC, "PA1")


def test_reject_a_new_label_revokes_it(riverside: DocumentStore, corpus: Corpus) -> None:
    body = {**corpus.label(DOC).model_dump(mode="json"), "doc_id": "NEW-1"}
    body["sensitivity_tier"], body["subject"] = "internal", None
    body["subject_type"], body["assignment_required"] = "organization", False
    proposal = riverside.propose_label(body, "model:test")
    assert riverside.prior_label("NEW-1") is None
    record = riverside.reject_label("NEW-1", "PA1", version=proposal.version)
    assert record.state is LabelState.REVOKED and not _permitted(riverside, "D01", "NEW-1")
    # proposed again after the rejection: the label before it is the revoked one
    again = riverside.propose_label(body, "model:test")
    prior = riverside.prior_label("NEW-1")
    assert prior is not None and prior.state is LabelState.REVOKED and prior.in_force is None
    assert riverside.reject_label("NEW-1", "PA1", version=again.version).state is LabelState.REVOKED


def test_edit_then_approve(riverside: DocumentStore, corpus: Corpus) -> None:
    seen = _propose(riverside, permitted_receiver_roles=WIDER)
    edited = corpus.label(DOC).model_copy(update={"title": "Lipid panel (reviewed)"})
    record = riverside.approve_edited_label(edited, "PA1", "kept the ACL", version=seen)
    assert record.state is LabelState.APPROVED and record.body["title"] == "Lipid panel (reviewed)"
    assert record.version == seen + 2
    tail = riverside.history(DOC, "label")[-2:]
    assert [(h.action, h.actor) for h in tail] == [("edit", "PA1"), ("approve", "PA1")]
    assert not _permitted(riverside, "B01") and _permitted(riverside, "D01")
    # an edit that changes nothing is an approval only
    seen = _propose(riverside, title="x")
    same = Label.model_validate(riverside.label(DOC).body)
    assert riverside.approve_edited_label(same, "PA1", version=seen).version == seen + 1
    with pytest.raises(ValidationFailed):
        riverside.approve_edited_label({"doc_id": DOC}, "PA1", version=seen + 1)


def test_access_diff_is_the_gate_over_every_agent_and_role(
    riverside: DocumentStore, gate: Gate
) -> None:
    snap = riverside.snapshot()
    before = Label.model_validate(riverside.label(DOC).body)
    after = before.model_copy(update={"permitted_receiver_roles": frozenset(WIDER) - {"Nurse"}})
    diff = access_diff(snap, DOC, before, after)
    expected: dict[str, set[str]] = {"gained": set(), "lost": set(), "kept": set()}
    for agent in snap.agents.values():
        for role in agent.roles:
            requester = snap.requester(agent.agent_id, role)
            was, now = (
                gate.decide(requester, before).permitted,
                gate.decide(requester, after).permitted,
            )
            kind = {(False, True): "gained", (True, False): "lost", (True, True): "kept"}
            if (was, now) in kind:
                expected[kind[(was, now)]].add(f"{agent.agent_id}:{role}")
    assert (
        {c.principal.key for c in diff.gained} == expected["gained"] == {"B01:Billing Specialist"}
    )
    assert {c.principal.key for c in diff.lost} == expected["lost"] == {"N03:Nurse"}
    assert {c.principal.key for c in diff.kept} == expected["kept"] == {"D01:Doctor"}
    assert diff.widens and diff.lost[0].rule_after == "role_not_permitted"
    assert diff.denied == sum(len(a.roles) for a in snap.agents.values()) - 3
    nothing = access_diff(snap, DOC, None, None)
    assert not nothing.changes and not nothing.widens


def test_review_is_audited_and_pending_reviews_list_the_consequence(
    riverside: DocumentStore,
) -> None:
    seen = _propose(riverside, permitted_receiver_roles=WIDER)
    (pending,) = riverside.pending_reviews()
    assert pending.doc_id == DOC and pending.is_change and pending.widens
    assert pending.in_force is not None and pending.in_force.permitted_receiver_roles == {
        "Doctor",
        "Nurse",
    }
    outcome = riverside.review_label(
        DOC, ReviewVerdict.APPROVE, _authority(riverside), version=seen, note="billing needs it"
    )
    assert outcome.record.state is LabelState.APPROVED and not outcome.edited
    assert _permitted(riverside, "B01")
    (record,) = [r for r in riverside.audit.records() if r.action == "review"]
    assert record.seq == outcome.audit_seq and record.decision == "approve"
    assert (record.requester, record.role, record.context) == (
        "PA1",
        "Policy Authority",
        "Administrative",
    )
    assert record.doc_id == DOC and record.label_version == outcome.record.version
    detail = json.loads(record.detail)
    assert detail["gained"] == ["B01:Billing Specialist"] and detail["lost_count"] == 0
    assert "Lipid" not in record.detail  # never titles or content
    assert riverside.audit.verify().ok
    assert riverside.pending_reviews() == []

    seen = _propose(riverside, permitted_receiver_roles=["Doctor", "Nurse"])
    out = riverside.review_label(DOC, "reject", _authority(riverside), version=seen)
    assert out.record.state is LabelState.APPROVED and _permitted(riverside, "B01")
    last = [r for r in riverside.audit.records() if r.action == "review"][-1]
    assert last.decision == "reject" and json.loads(last.detail)["refused"]["lost"] == [
        "B01:Billing Specialist"
    ]
    with pytest.raises(ValidationFailed, match="only be approved"):
        seen = _propose(riverside, title="y")
        edited = Label.model_validate(riverside.label(DOC).body)
        riverside.review_label(DOC, "reject", _authority(riverside), version=seen, edited=edited)
    with pytest.raises(ValidationFailed, match="names 'RMC-LAB-004'"):
        other = Label.model_validate(riverside.label("RMC-LAB-004").body)
        riverside.review_label(DOC, "approve", _authority(riverside), version=seen, edited=other)


def test_bulk_approval_refuses_any_label_that_widens(riverside: DocumentStore) -> None:
    narrow = _propose(riverside, "RMC-LAB-004", permitted_receiver_roles=["Doctor"])
    wide = _propose(riverside, permitted_receiver_roles=WIDER)
    pa = _authority(riverside)
    with pytest.raises(BulkApprovalRefused, match="widens access"):
        riverside.approve_labels([("RMC-LAB-004", narrow), (DOC, wide)], pa)
    # all or nothing: the narrowing label was not approved either, nothing was audited
    assert riverside.label("RMC-LAB-004").state is LabelState.PROPOSED
    assert not [r for r in riverside.audit.records() if r.action == "review"]
    with pytest.raises(ValidationFailed, match="named twice"):
        riverside.approve_labels([("RMC-LAB-004", narrow), ("RMC-LAB-004", narrow)], pa)
    (outcome,) = riverside.approve_labels([("RMC-LAB-004", narrow)], pa, note="narrower")
    assert outcome.record.state is LabelState.APPROVED and outcome.diff.lost
    assert json.loads(riverside.audit.records()[-1].detail)["bulk"] is True
