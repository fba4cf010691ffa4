"""The label lifecycle's one guarded path as the service offers it (issue 24): the
``/v1`` verdicts (review, approve, reject, revoke) check the version, the widening rule
and write an audit record; the review page shows who would gain if assigned and
reads a document only while it is under review; requesters never see the store
version."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.store import DocumentStore, LabelState
from tests.service._review import authority_token, propose

KEY = b"review-lifecycle-test-key-0123456789abcdef"
BASE = "http://127.0.0.1:8000"
DOC = "RMC-LAB-003"  # Doctor, Nurse; subject P03 (D01, N03, B01 assigned; H01, H02 not)
AUTHORITY = {"Authorization": f"Bearer {authority_token(KEY)}"}
DOCTOR = {"Authorization": f"Bearer {issue_token(KEY, 'D01', 'Doctor', 'Medical')}"}
HR_ACL = ["Doctor", "HR Manager", "Nurse"]


@pytest.fixture
def client(sqlite_riverside: DocumentStore) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY)), BASE) as c:
        yield c


def _reviews(store: DocumentStore) -> list[tuple[str, str | None, str]]:
    return [
        (r.doc_id or "", r.decision, r.requester)
        for r in store.audit.records()
        if r.action == "review"
    ]


def test_v1_review_then_approve_the_version_seen(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = propose(sqlite_riverside, DOC, permitted_receiver_roles=HR_ACL)
    review = client.get(f"/v1/labels/{DOC}/review", headers=AUTHORITY)
    assert review.status_code == 200
    body = review.json()
    assert body["version"] == seen and body["in_force_version"] == 2 and body["widens"]
    assert body["gained"] == [] and body["latent_roles"] == ["HR Manager"]
    assert {p["agent_id"] for p in body["if_assigned"]} == {"H01", "H02"}
    assert client.get(f"/v1/labels/{DOC}/review", headers=DOCTOR).status_code == 403
    # the latent widening is refused without accepting it, and nothing is written
    approve = f"/v1/labels/{DOC}/approve"
    refused = client.post(approve, json={"version": seen}, headers=AUTHORITY)
    assert refused.status_code == 409 and "would gain it if assigned" in refused.json()["error"]
    assert sqlite_riverside.label(DOC).state is LabelState.PROPOSED and not _reviews(
        sqlite_riverside
    )
    ok = client.post(approve, json={"version": seen, "accept_widening": True}, headers=AUTHORITY)
    assert ok.status_code == 200 and ok.json()["state"] == "approved"
    assert _reviews(sqlite_riverside) == [(DOC, "approve", "PA1")]
    # a second approval of the same version is a conflict, not a silent approval
    again = client.post(approve, json={"version": seen, "accept_widening": True}, headers=AUTHORITY)
    assert again.status_code == 409
    # not awaiting review any more
    assert client.get(f"/v1/labels/{DOC}/review", headers=AUTHORITY).status_code == 409


def test_v1_reject_keeps_the_label_in_force(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = propose(sqlite_riverside, DOC, permitted_receiver_roles=["Doctor"])
    decide = {"doc_id": DOC}
    nurse = {"Authorization": f"Bearer {issue_token(KEY, 'N03', 'Nurse', 'Medical')}"}
    assert client.post("/v1/decide", json=decide, headers=nurse).json()["decision"] == "permit"
    reject = f"/v1/labels/{DOC}/reject"
    assert client.post(reject, json={}, headers=AUTHORITY).status_code == 422
    assert client.post(reject, json={"version": seen - 1}, headers=AUTHORITY).status_code == 409
    r = client.post(reject, json={"version": seen, "note": "nurses need it"}, headers=AUTHORITY)
    assert r.status_code == 200 and r.json()["state"] == "approved"
    assert r.json()["label"] == r.json()["in_force"]
    assert client.post("/v1/decide", json=decide, headers=nurse).json()["decision"] == "permit"
    assert _reviews(sqlite_riverside) == [(DOC, "reject", "PA1")]
    revoke = client.post(f"/v1/labels/{DOC}/revoke", json={"version": 1}, headers=AUTHORITY)
    assert revoke.status_code == 409  # a stale version is refused on revocation too


def test_retrieve_says_nothing_about_the_store_version(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    r = client.post("/v1/retrieve", json={"query": "lipid panel", "k": 3}, headers=DOCTOR)
    assert r.status_code == 200 and "store_version" not in r.json()
    first = r.json()
    # a write to a document the doctor may not see changes nothing in the answer
    sqlite_riverside.revoke_label("RMC-SAL-001", "t")
    again = client.post("/v1/retrieve", json={"query": "lipid panel", "k": 3}, headers=DOCTOR)
    strip = lambda d: {k: v for k, v in d.items() if k != "request_id"}  # noqa: E731
    assert strip(again.json()) == strip(first)


def _sign_in(client: TestClient) -> str:
    r = client.post("/review/login", data={"token": authority_token(KEY)}, follow_redirects=False)
    assert r.status_code == 303
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', client.get("/review").text)
    assert found
    return found.group(1)


def test_the_page_shows_who_would_gain_if_assigned(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = propose(sqlite_riverside, DOC, permitted_receiver_roles=HR_ACL)
    _sign_in(client)
    queue = client.get("/review").text
    assert f'value="{DOC}@{seen}"' not in queue  # not offered for bulk approval
    assert "2 would gain if assigned" in queue and "v2 stays in force until reviewed" in queue
    page = client.get("/review/label", params={"doc_id": DOC}).text
    assert "Would gain access if assigned (2)" in page
    assert "H01" in page and "HR Manager" in page
    assert "Roles that gain access (1)" in page


def test_the_authority_reads_documents_under_review_only(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    """The finding: the page showed the full text of an approved document not under
    review, and recorded nothing."""
    _sign_in(client)
    secret = sqlite_riverside.fetch_content([DOC])[DOC][:40]
    page = client.get("/review/label", params={"doc_id": DOC})
    assert page.status_code == 200 and secret not in page.text
    assert "shown only while its label awaits your review" in page.text
    assert not [r for r in sqlite_riverside.audit.records() if r.action == "review_view"]
    propose(sqlite_riverside, DOC, title="x")
    page = client.get("/review/label", params={"doc_id": DOC})
    assert secret in page.text
    (view,) = [r for r in sqlite_riverside.audit.records() if r.action == "review_view"]
    assert (view.requester, view.doc_id) == ("PA1", DOC)
    assert json.loads(view.detail) == {"has_text": True}
