"""The review page over HTTP (TestClient): identity and CSRF, bad input, escaping,
and each verdict recorded in the history and the audit log. The real browser runs
in `test_review_browser.py`."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.store import DocumentStore, LabelState
from tests.service._review import (
    WIDER,
    authority_token,
    expired_authority_token,
    forged,
    propose,
)

KEY = b"review-page-test-key-0123456789abcdef-0123"
BASE = "http://127.0.0.1:8000"
DOC = "RMC-LAB-003"  # Doctor, Nurse; subject P03 (D01, N03 and B01 are assigned)


def _token(agent: str, role: str, context: str, **kw: Any) -> str:
    return issue_token(KEY, agent, role, context, **kw)


AUTHORITY = authority_token(KEY)


def _propose(store: DocumentStore, doc_id: str = DOC, **fields: Any) -> int:
    return propose(store, doc_id, **fields)


@pytest.fixture
def client(sqlite_riverside: DocumentStore) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY)), BASE) as c:
        yield c


def _sign_in(client: TestClient, token: str = AUTHORITY) -> str:
    """Sign in through the form; returns the CSRF token of the session's pages."""
    r = client.post("/review/login", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/review"
    page = client.get("/review")
    assert page.status_code == 200
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text)
    assert found
    return found.group(1)


def test_sign_in_sets_a_strict_http_only_cookie(client: TestClient) -> None:
    assert client.get("/review", follow_redirects=False).headers["location"] == "/review/login"
    r = client.post("/review/login", data={"token": AUTHORITY}, follow_redirects=False)
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/review" in cookie
    assert "secure" not in cookie  # loopback over http; ServiceSettings.cookie_secure sets it
    page = client.get("/review")
    assert page.status_code == 200 and "signed in as <strong>PA1</strong>" in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script" not in csp
    assert page.headers["cache-control"] == "no-store"
    assert client.get("/review/static/review.css").headers["content-type"].startswith("text/css")


def test_secure_cookie_when_configured(sqlite_riverside: DocumentStore) -> None:
    settings = ServiceSettings(jwt_key=KEY, cookie_secure=True)
    with TestClient(create_app(sqlite_riverside, settings), BASE) as c:
        r = c.post("/review/login", data={"token": AUTHORITY}, follow_redirects=False)
        assert "secure" in r.headers["set-cookie"].lower()


@pytest.mark.parametrize(
    ("token", "status", "says"),
    [
        (_token("D01", "Doctor", "Medical"), 403, "for the Policy Authority"),
        (_token("D01", "Doctor", "Medical", authority=True), 403, "acts as"),
        (_token("PA1", "Policy Authority", "Administrative"), 403, "authority: true"),
        (_token("D01", "Policy Authority", "Administrative", authority=True), 403, "does not hold"),
        (_token("PA1", "Policy Authority", "Medical", authority=True), 403, "not in"),
        (forged(AUTHORITY, 3), 401, "signature"),
        (authority_token(b"another-key-0123456789abcdef-0123456789"), 401, "signature"),
        (expired_authority_token(KEY, 3600), 401, "expired"),
        ("not-a-jwt", 401, "well-formed"),
        ("", 401, "paste a token"),
    ],
    ids=[
        "doctor",
        "doctor-claiming",
        "no-claim",
        "role-not-held",
        "wrong-context",
        "forged",
        "other-key",
        "expired",
        "garbage",
        "empty",
    ],
)
def test_sign_in_refuses(client: TestClient, token: str, status: int, says: str) -> None:
    r = client.post("/review/login", data={"token": token}, follow_redirects=False)
    assert r.status_code == status and says in r.text
    assert "set-cookie" not in r.headers
    # the same token as a bearer header, on the queue
    r = client.get("/review", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == (status if token else 401)


def test_a_cookie_with_a_forged_or_expired_token_is_401(client: TestClient) -> None:
    for bad in (expired_authority_token(KEY, 600), AUTHORITY[:-2] + "xx"):
        client.cookies.set("privacy_ci_review", bad, path="/review")
        r = client.get("/review", follow_redirects=False)
        assert r.status_code == 401 and "Sign in" in r.text
        assert 'privacy_ci_review=""' in r.headers["set-cookie"]  # the bad cookie is cleared
        client.cookies.clear()


def test_bearer_works_without_csrf_and_the_api_is_unchanged(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    bearer = {"Authorization": f"Bearer {AUTHORITY}"}
    r = client.get("/review", headers=bearer)
    assert r.status_code == 200 and DOC in r.text and 'name="csrf"' not in r.text
    r = client.post(
        "/review/approve",
        data={"doc_id": DOC, "version": str(seen)},
        headers=bearer,
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert sqlite_riverside.label(DOC).state is LabelState.APPROVED
    r = client.get("/v1/labels", params={"state": "approved"}, headers=bearer)
    assert r.status_code == 200 and r.json()["count"] == 105
    assert client.get("/v1/labels").status_code == 401  # a cookie is no credential for /v1
    assert "/review" not in client.get("/openapi.json").json()["paths"]


def test_csrf_and_origin_are_checked(client: TestClient, sqlite_riverside: DocumentStore) -> None:
    seen = _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    csrf = _sign_in(client)
    form = {"doc_id": DOC, "version": str(seen)}
    for bad in ({}, {"csrf": ""}, {"csrf": "0" * 64}, {"csrf": [csrf, csrf]}):
        r = client.post("/review/approve", data={**form, **bad}, follow_redirects=False)
        assert r.status_code == 403 and "CSRF" in r.text
    r = client.post(
        "/review/approve",
        data={**form, "csrf": csrf},
        headers={"Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "another origin" in r.text
    assert sqlite_riverside.label(DOC).state is LabelState.PROPOSED  # nothing happened
    r = client.post(
        "/review/approve",
        data={**form, "csrf": csrf},
        headers={"Origin": BASE},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"/review/label?doc_id={DOC}"
    # another session's CSRF token is no good either
    other = authority_token(KEY, "PA2")
    _sign_in(client, other)
    seen = _propose(sqlite_riverside, permitted_receiver_roles=["Doctor"])
    r = client.post("/review/reject", data={"doc_id": DOC, "version": str(seen), "csrf": csrf})
    assert r.status_code == 403
    # sign-out needs the token too, and clears the cookie
    empty = {"Content-Type": "application/x-www-form-urlencoded"}
    assert client.post("/review/logout", content=b"", headers=empty).status_code == 403
    page = client.get("/review").text
    csrf2 = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert csrf2 and csrf2.group(1) != csrf
    r = client.post("/review/logout", data={"csrf": csrf2.group(1)}, follow_redirects=False)
    assert r.status_code == 303 and 'privacy_ci_review=""' in r.headers["set-cookie"]


@pytest.mark.parametrize(
    ("path", "form", "status", "says"),
    [
        ("/review/approve", {"version": "3"}, 422, "'doc_id' is missing"),
        ("/review/approve", {"doc_id": DOC}, 422, "'version' is missing"),
        ("/review/approve", {"doc_id": DOC, "version": "three"}, 422, "label version"),
        ("/review/approve", {"doc_id": DOC, "version": "-3"}, 422, "label version"),
        ("/review/approve", {"doc_id": DOC, "version": ["3", "4"]}, 422, "given 2 times"),
        ("/review/approve", {"doc_id": "NOPE-404", "version": "1"}, 404, "unknown document"),
        ("/review/reject", {"doc_id": DOC, "version": "2"}, 409, "changed since version 2"),
        ("/review/approve-edited", {"doc_id": DOC, "version": "3", "label": "{"}, 422, "JSON"),
        (
            "/review/approve-edited",
            {"doc_id": DOC, "version": "3", "label": '{"doc_id": "X"}'},
            422,
            "not a label of",
        ),
        (
            "/review/approve-edited",
            {"doc_id": DOC, "version": "3", "label": '{"doc_id": "' + DOC + '"}'},
            422,
            "field is missing",
        ),
        ("/review/bulk-approve", {}, 422, "select at least one"),
        ("/review/bulk-approve", {"item": "RMC-LAB-003"}, 422, "DOC@VERSION"),
        ("/review/bulk-approve", {"item": f"{DOC}@3"}, 409, "widens access"),
        ("/review/edit", {"doc_id": DOC, "version": "3", "bogus": "1"}, 422, "unknown form fields"),
    ],
)
def test_bad_input(
    client: TestClient,
    sqlite_riverside: DocumentStore,
    path: str,
    form: dict[str, Any],
    status: int,
    says: str,
) -> None:
    assert _propose(sqlite_riverside, permitted_receiver_roles=WIDER) == 3
    csrf = _sign_in(client)
    r = client.post(path, data={**form, "csrf": csrf}, follow_redirects=False)
    assert r.status_code == status, r.text
    assert says in r.text.replace("&#39;", "'")
    assert sqlite_riverside.label(DOC).state is LabelState.PROPOSED


def test_bodies_that_are_not_forms(client: TestClient, sqlite_riverside: DocumentStore) -> None:
    _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    csrf = _sign_in(client)
    r = client.post("/review/approve", json={"doc_id": DOC, "version": 3, "csrf": csrf})
    assert r.status_code == 415
    r = client.post(
        "/review/approve",
        content=b"doc_id=\xff\xfe&version=3&csrf=" + csrf.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 422 and "UTF-8" in r.text
    r = client.post(
        "/review/approve",
        content=b"x=" + b"a" * (600 * 1024),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 413  # the guard bounds the body before it is parsed
    assert client.get("/review/label").status_code == 422
    assert client.get("/review/label", params={"doc_id": "NOPE"}).status_code == 404


def test_double_approval_is_a_conflict(client: TestClient, sqlite_riverside: DocumentStore) -> None:
    seen = _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    csrf = _sign_in(client)
    form = {"doc_id": DOC, "version": str(seen), "csrf": csrf}
    assert client.post("/review/approve", data=form, follow_redirects=False).status_code == 303
    again = client.post("/review/approve", data=form, follow_redirects=False)
    assert again.status_code == 409 and "not awaiting review" in again.text
    assert client.post("/review/reject", data=form).status_code == 409
    reviews = [r for r in sqlite_riverside.audit.records() if r.action == "review"]
    assert [r.decision for r in reviews] == ["approve"]  # one verdict, recorded once


def test_edit_then_approve_shows_the_consequence_first(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    csrf = _sign_in(client)
    page = client.get("/review/label", params={"doc_id": DOC}).text
    assert "Widens access" in page and "B01" in page and "Rachel Stein" in page
    body = sqlite_riverside.label(DOC).body
    fields: dict[str, Any] = {
        "csrf": csrf,
        "doc_id": DOC,
        "version": str(seen),
        "title": body["title"],
        "sensitivity_tier": body["sensitivity_tier"],
        "acl": ["Doctor"],  # the authority narrows the ACL instead
        "subject": body["subject"],
        "subject_type": body["subject_type"],
        "document_type": body["document_type"],
        "governing_principle": body["governing_principle"],
        "originating_context": body["originating_context"],
        "pii_attributes": ", ".join(body["pii_attributes"]),
        "implied_attributes": ", ".join(body["implied_attributes"]),
        "assignment_required": "on",
    }
    bad = client.post("/review/edit", data={**fields, "acl": ["Doctor", "Janitor"]})
    assert bad.status_code == 422 and "roles not in the policy: Janitor" in bad.text
    assert 'value="Janitor"' not in bad.text  # only the policy's roles are offered
    bad = client.post("/review/edit", data={**fields, "sensitivity_tier": "secret"})
    assert bad.status_code == 422 and "sensitivity_tier" in bad.text
    bad = client.post("/review/edit", data={**fields, "extra_sensitive": "maybe"})
    assert bad.status_code == 422 and "checkbox" in bad.text
    preview = client.post("/review/edit", data=fields)
    assert preview.status_code == 200 and "Narrows access" in preview.text
    assert "N03" in preview.text and "Approve your edit" in preview.text
    assert sqlite_riverside.label(DOC).version == seen  # a preview writes nothing
    label_json = re.search(r'name="label" value="([^"]+)"', preview.text)
    assert label_json
    r = client.post(
        "/review/approve-edited",
        data={
            "csrf": csrf,
            "doc_id": DOC,
            "version": str(seen),
            "label": html.unescape(label_json.group(1)),
            "note": "doctors only",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303
    record = sqlite_riverside.label(DOC)
    assert record.state is LabelState.APPROVED and record.body["permitted_receiver_roles"] == [
        "Doctor"
    ]
    history = sqlite_riverside.history(DOC, "label")[-2:]
    assert [(h.action, h.actor, h.detail["note"]) for h in history] == [
        ("edit", "PA1", "doctors only"),
        ("approve", "PA1", "doctors only"),
    ]
    (audit,) = [r for r in sqlite_riverside.audit.records() if r.action == "review"]
    assert audit.decision == "approve" and '"edited":true' in audit.detail
    assert '"lost":["N03:Nurse"]' in audit.detail
    done = client.get("/review/label", params={"doc_id": DOC}).text
    assert "not awaiting review" in done and "doctors only" in done


def test_user_text_is_escaped(client: TestClient, sqlite_riverside: DocumentStore) -> None:
    script = "<script>alert('x')</script>"
    sqlite_riverside.put_document("XSS-1", f"{script}<img src=x onerror=alert(1)>", "test")
    body = {**sqlite_riverside.label(DOC).body, "doc_id": "XSS-1", "title": f"<b>t</b>{script}"}
    body["document_type"] = '"><svg onload=alert(2)>'
    sqlite_riverside.propose_label(body, 'model:"><script>alert(3)</script>', script)
    _sign_in(client)
    for page in (
        client.get("/review").text,
        client.get("/review/label", params={"doc_id": "XSS-1"}).text,
    ):
        assert "<script>" not in page and "<svg" not in page and "<img" not in page
        assert "&lt;script&gt;" in page
    page = client.get("/review/label", params={"doc_id": "XSS-1"}).text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the document text, shown as text
    assert 'value="&#34;&gt;&lt;svg onload=alert(2)&gt;"' in page  # and inside attributes


def test_a_proposal_that_does_not_validate_can_only_be_rejected_or_edited(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    # a stored body that does not validate (e.g. written by an older version)
    sqlite_riverside.db.execute(
        "UPDATE labels SET body = ? WHERE doc_id = ?", ('{"doc_id": "RMC-LAB-003"}', DOC)
    )
    csrf = _sign_in(client)
    queue = client.get("/review").text
    assert "does not validate" in queue and f'value="{DOC}@{seen}"' not in queue
    page = client.get("/review/label", params={"doc_id": DOC}).text
    assert "Approve as proposed" not in page and "Reject" in page
    r = client.post("/review/approve", data={"doc_id": DOC, "version": str(seen), "csrf": csrf})
    assert r.status_code == 422 and "cannot be approved" in r.text
    r = client.post(
        "/review/reject",
        data={"doc_id": DOC, "version": str(seen), "csrf": csrf},
        follow_redirects=False,
    )
    assert r.status_code == 303 and sqlite_riverside.label(DOC).state is LabelState.APPROVED


def test_bulk_approval_is_offered_only_for_labels_that_do_not_widen(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    wide = _propose(sqlite_riverside, permitted_receiver_roles=WIDER)
    narrow = _propose(sqlite_riverside, "RMC-LAB-004", permitted_receiver_roles=["Doctor"])
    csrf = _sign_in(client)
    queue = client.get("/review").text
    assert f'value="RMC-LAB-004@{narrow}"' in queue and f'value="{DOC}@{wide}"' not in queue
    r = client.post(
        "/review/bulk-approve",
        data={"csrf": csrf, "item": [f"RMC-LAB-004@{narrow}", f"{DOC}@{wide}"]},
    )
    assert r.status_code == 409 and "nothing was approved" in r.text
    assert sqlite_riverside.label("RMC-LAB-004").state is LabelState.PROPOSED
    r = client.post(
        "/review/bulk-approve",
        data={"csrf": csrf, "item": f"RMC-LAB-004@{narrow}", "note": "narrower"},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert sqlite_riverside.label("RMC-LAB-004").state is LabelState.APPROVED
    assert sqlite_riverside.label(DOC).state is LabelState.PROPOSED


def test_the_store_being_unavailable_is_a_503_page(sqlite_riverside: DocumentStore) -> None:
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))
    sqlite_riverside.db.execute("DELETE FROM policy")
    with TestClient(app, BASE) as c:
        r = c.get("/review", headers={"Authorization": f"Bearer {AUTHORITY}"})
        assert r.status_code == 503 and "cannot be read" in r.text
        assert str(sqlite_riverside.url) not in r.text
