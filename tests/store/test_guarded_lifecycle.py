"""One guarded path for every verdict (issue 24): a proposal changes no access until it
is approved, widening covers the assignments that could follow, every verdict (the
store's own verbs included) is an audit record, the authority reads a document only
while it is under review, and a version-1 store is upgraded in place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Requester, Rule
from privacy_ci.store import (
    BulkApprovalRefused,
    DocumentStore,
    LabelConflict,
    LabelState,
    ReviewVerdict,
    StoreError,
    WideningNotAccepted,
    decide_for,
    retrieve_for,
)

DOC = "RMC-LAB-003"  # Doctor, Nurse; subject P03 (D01, N03, B01 assigned; H01 is not)


def _propose(store: DocumentStore, doc_id: str = DOC, **fields: Any) -> int:
    body = {**store.label(doc_id).body, **fields}
    return store.propose_label(body, "model:test", "drafted").version


def _authority(store: DocumentStore) -> Requester:
    return store.snapshot().requester("PA1")


def _permitted(store: DocumentStore, agent: str, doc_id: str = DOC) -> bool:
    return decide_for(store, store.snapshot().requester(agent), doc_id).permitted


def test_a_title_only_proposal_keeps_the_doctors_access(riverside: DocumentStore) -> None:
    """The finding: a title-only proposal turned a permitted doctor's request into a deny."""
    assert _permitted(riverside, "D01")
    seen = _propose(riverside, title="Lipid panel, corrected title")
    assert _permitted(riverside, "D01")
    result = retrieve_for(riverside, riverside.snapshot().requester("D01"), "lipid panel", k=10)
    assert DOC in result.admitted_ids
    # and a rejection leaves it exactly as it was
    riverside.reject_label(DOC, _authority(riverside), version=seen)
    assert _permitted(riverside, "D01") and riverside.label(DOC).state is LabelState.APPROVED


def test_a_proposal_that_narrows_takes_effect_only_when_approved(riverside: DocumentStore) -> None:
    seen = _propose(riverside, permitted_receiver_roles=["Doctor"])
    assert _permitted(riverside, "N03")  # still in force
    riverside.review_label(DOC, "approve", _authority(riverside), version=seen)
    assert not _permitted(riverside, "N03") and _permitted(riverside, "D01")


def test_latent_widening_is_widening(riverside: DocumentStore) -> None:
    """Adding a role to the ACL when nobody holding it is assigned to the subject yet:
    no one gains now, but an assignment (which needs no review) would grant it."""
    seen = _propose(riverside, permitted_receiver_roles=["Doctor", "HR Manager", "Nurse"])
    (pending,) = riverside.pending_reviews()
    diff = pending.diff
    assert diff.gained == () and diff.lost == ()
    assert {c.principal.key for c in diff.if_assigned} == {"H01:HR Manager", "H02:HR Manager"}
    assert diff.latent_roles == ("HR Manager",)
    assert diff.widens and pending.widens
    assert "2 would gain it if assigned: H01:HR Manager, H02:HR Manager" in diff.describe_gains()
    pa = _authority(riverside)
    with pytest.raises(BulkApprovalRefused, match="widens access"):
        riverside.approve_labels([(DOC, seen)], pa)
    with pytest.raises(WideningNotAccepted, match="H01:HR Manager"):
        riverside.review_label(DOC, "approve", pa, version=seen, accept_widening=False)
    assert riverside.label(DOC).state is LabelState.PROPOSED  # nothing was approved
    outcome = riverside.review_label(DOC, "approve", pa, version=seen)
    detail = json.loads(riverside.audit.records()[-1].detail)
    assert detail["if_assigned_count"] == 2 and detail["latent_roles"] == ["HR Manager"]
    assert outcome.record.in_force_version == outcome.record.version
    assert not _permitted(riverside, "H01")
    riverside.assign("H01", "P03", "medical-director")
    assert _permitted(riverside, "H01")  # what the reviewer was shown and accepted


def test_a_role_nobody_holds_yet_is_a_latent_gain(riverside: DocumentStore) -> None:
    # an open (no assignment) document granted to a role: every agent of the store who
    # holds it gains now; the role itself gains whoever holds it later
    doc = "RMC-LAB-001"
    label = riverside.label(doc).body
    roles = sorted({*label["permitted_receiver_roles"], "IT Contractor"})
    _propose(riverside, doc, permitted_receiver_roles=roles)
    diff = riverside.pending_review(doc).diff
    assert "IT Contractor" in diff.latent_roles and diff.widens


def test_tier_change_that_drops_the_assignment_is_widening(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    label = corpus.label(DOC)
    open_tiers = [t for t, rule in corpus.policy.tiers.items() if not rule.assignment_required]
    _propose(riverside, sensitivity_tier=open_tiers[0].value, assignment_required=False)
    diff = riverside.pending_review(DOC).diff
    # every doctor and nurse now, assigned to P03 or not
    assert {"D02:Doctor", "N01:Nurse"} <= {c.principal.key for c in diff.gained}
    assert set(diff.latent_roles) == set(label.permitted_receiver_roles) and diff.widens


def test_narrowing_is_not_widening_and_approves_in_bulk(riverside: DocumentStore) -> None:
    seen = _propose(riverside, permitted_receiver_roles=["Doctor"])
    diff = riverside.pending_review(DOC).diff
    assert not diff.widens and diff.if_assigned == () and diff.latent_roles == ()
    (outcome,) = riverside.approve_labels([(DOC, seen)], _authority(riverside))
    assert outcome.record.state is LabelState.APPROVED


def test_every_verdict_of_the_store_api_is_audited(riverside: DocumentStore) -> None:
    riverside.revoke_label(DOC, "privacy-officer", "wrong ACL")
    riverside.approve_label(DOC, "privacy-officer")  # reinstated
    seen = _propose(riverside, title="x")
    riverside.reject_label(DOC, "privacy-officer", version=seen)
    reviews = [r for r in riverside.audit.records() if r.action == "review"]
    assert [(r.decision, r.requester, r.role, r.context) for r in reviews] == [
        ("revoke", "privacy-officer", None, None),
        ("approve", "privacy-officer", None, None),
        ("reject", "privacy-officer", None, None),
    ]
    assert json.loads(reviews[0].detail)["lost_count"] > 0  # who lost access on the revocation
    assert riverside.audit.verify().ok


def test_verdicts_check_the_state_they_apply_to(riverside: DocumentStore) -> None:
    pa = _authority(riverside)
    with pytest.raises(LabelConflict, match="not awaiting review: it is approved"):
        riverside.review_label(DOC, "approve", pa, version=2)
    with pytest.raises(LabelConflict, match="not awaiting review"):
        riverside.review_label(DOC, "reject", pa, version=2)
    with pytest.raises(LabelConflict, match="changed since version 1"):
        riverside.review_label(DOC, "revoke", pa, version=1)
    riverside.review_label(DOC, ReviewVerdict.REVOKE, pa, version=2)
    with pytest.raises(LabelConflict, match="revoked already"):
        riverside.review_label(DOC, "revoke", pa, version=3)


def test_revoking_drops_a_pending_proposal(riverside: DocumentStore) -> None:
    _propose(riverside, permitted_receiver_roles=["Doctor"])
    record = riverside.revoke_label(DOC, _authority(riverside))
    assert record.state is LabelState.REVOKED and record.in_force is None
    assert not _permitted(riverside, "D01")
    assert riverside.pending_reviews() == []


def test_the_authority_reads_only_documents_under_review(riverside: DocumentStore) -> None:
    pa = _authority(riverside)
    with pytest.raises(LabelConflict, match="not awaiting review"):
        riverside.view_under_review(DOC, pa)
    assert not [r for r in riverside.audit.records() if r.action == "review_view"]
    _propose(riverside, title="x")
    text = riverside.view_under_review(DOC, pa)
    assert text is not None and "Tanaka" in text
    (view,) = [r for r in riverside.audit.records() if r.action == "review_view"]
    assert (view.requester, view.role, view.doc_id, view.decision) == (
        "PA1",
        "Policy Authority",
        DOC,
        "view",
    )
    assert "Tanaka" not in view.detail  # never content
    assert riverside.audit.verify().ok


def test_a_version_1_store_is_upgraded_in_place(riverside: DocumentStore) -> None:
    if riverside.engine != "sqlite":
        pytest.skip("the upgrade is the same SQL on both engines; shown on SQLite")
    _propose(riverside, title="pending when the store was written by version 1")
    url = riverside.url
    with riverside.db.write() as db:  # the version-1 table: no label in force column
        db.execute("ALTER TABLE labels DROP COLUMN in_force")
        db.execute("ALTER TABLE labels DROP COLUMN in_force_version")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    riverside.close()
    with pytest.raises(StoreError, match="open it once for writing to upgrade it"):
        DocumentStore(url, readonly=True)
    with DocumentStore(url) as upgraded:
        # approved labels are in force; the one proposed under version 1 grants nothing,
        # as it did then
        assert upgraded.label("RMC-LAB-001").in_force_version == 2
        assert upgraded.label(DOC).in_force is None
        assert _permitted(upgraded, "D01", "RMC-LAB-001") and not _permitted(upgraded, "D01")
        assert upgraded.audit.verify().ok
    with DocumentStore(url, readonly=True) as reopened:
        assert reopened.label("RMC-LAB-001").approved


def test_batch_decisions_equal_the_label_path(riverside: DocumentStore, corpus: Corpus) -> None:
    """The index's equal-work batch decisions against the label-reading path (the
    operator's explained view) over every agent and document of Riverside, with a
    pending proposal, a revocation and unknown ids mixed in."""
    from privacy_ci.store import decide_batch_for

    _propose(riverside, "RMC-LAB-002", permitted_receiver_roles=["Doctor"])
    riverside.revoke_label("RMC-LAB-004", "t")
    ids = [*corpus.labels.ids, "NOPE-1", "RMC-LAB-003"]
    snap = riverside.snapshot()
    for agent in snap.agents.values():
        for role in agent.roles:
            requester = snap.requester(agent.agent_id, role)
            fast = decide_batch_for(riverside, requester, ids, unknown="deny")
            slow = decide_batch_for(riverside, requester, ids[:-2] + ids[-1:], unknown="raise")
            known = [f for f in fast if f.doc_id != "NOPE-1"]
            assert [(f.doc_id, f.decision.rule, f.label_version) for f in known] == [
                (f.doc_id, f.decision.rule, f.label_version) for f in slow
            ]
            (nope,) = [f for f in fast if f.doc_id == "NOPE-1"]
            assert nope.decision.rule is Rule.INVALID_LABEL and nope.label_version is None


def test_a_batch_does_the_same_work_whichever_ids_exist(riverside: DocumentStore) -> None:
    from privacy_ci.store import decide_batch_for

    requester = riverside.snapshot().requester("D01")
    existing = list(riverside.snapshot().index.ids)[:60]
    works = []
    for known in (0, 20, 60):
        ids = existing[:known] + [f"NOPE-{i:03d}" for i in range(60 - known)]
        index = riverside.snapshot().index
        before = index.work
        decide_batch_for(riverside, requester, ids, unknown="deny")
        works.append(index.work - before)
    assert len(set(works)) == 1
