"""The review page under hostile input (issue 24): an edited label nested thousands of
levels deep, or with an integer of 5,000 digits, is the page's usual error page (422,
"Not accepted"), never a 500; a body over the guard's bound is a 413. Nothing changes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from privacy_ci.service import ServiceSettings, create_app
from privacy_ci.store import DocumentStore, LabelState
from tests.service._review import WIDER, authority_token, propose

KEY = b"review-bounds-test-key-0123456789abcdef-012"
BASE = "http://127.0.0.1:8000"
DOC = "RMC-LAB-003"
HUGE = "1" * 5000
DEEP = 50_000  # as a form field: 300 KB, inside the guard's 512 KiB


@pytest.fixture
def client(sqlite_riverside: DocumentStore) -> Iterator[TestClient]:
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))
    # raise_server_exceptions=False: a 500 is answered as a server would, not raised here
    with TestClient(app, BASE, raise_server_exceptions=False) as c:
        yield c


def sign_in(client: TestClient) -> str:
    r = client.post("/review/login", data={"token": authority_token(KEY)}, follow_redirects=False)
    assert r.status_code == 303
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', client.get("/review").text)
    assert found
    return found.group(1)


def problems(page: str) -> list[str]:
    return [re.sub(r"\s+", " ", p).strip() for p in re.findall(r"<li>(.*?)</li>", page, re.S)]


@pytest.mark.parametrize(
    ("label", "says"),
    [
        ("[" * DEEP + "]" * DEEP, "values nested more than 64 levels deep"),
        (f'{{"doc_id": "{DOC}", "x": {"[" * DEEP}{"]" * DEEP}}}', "nested more than"),
        (f'{{"doc_id": "{DOC}", "title": {HUGE}}}', "an integer of 5,000 digits"),
        (f'{{"doc_id": "{DOC}", "version": -{HUGE}}}', "an integer of 5,000 digits"),
        (f'{{"doc_id": "{DOC}", "title": "a", "title": "b"}}', "is not a JSON label"),
    ],
    ids=["deep-array", "deep-field", "huge-int", "huge-negative-int", "duplicate-key"],
)
def test_approve_edited_with_hostile_json(
    client: TestClient, sqlite_riverside: DocumentStore, label: str, says: str
) -> None:
    seen = propose(sqlite_riverside, DOC, permitted_receiver_roles=WIDER)
    csrf = sign_in(client)
    form = {"doc_id": DOC, "version": str(seen), "label": label, "csrf": csrf}
    r = client.post("/review/approve-edited", data=form, follow_redirects=False)
    assert r.status_code == 422, r.text[-500:]
    assert "Not accepted" in r.text and r.headers["content-type"].startswith("text/html")
    (problem,) = problems(r.text)
    assert problem.startswith("form field &#39;label&#39;") and says in problem
    record = sqlite_riverside.label(DOC)
    assert record.state is LabelState.PROPOSED and record.version == seen


def test_edit_with_huge_and_deep_field_values(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = propose(sqlite_riverside, DOC, permitted_receiver_roles=WIDER)
    csrf = sign_in(client)
    body = sqlite_riverside.label(DOC).body
    fields: dict[str, Any] = {
        "csrf": csrf,
        "doc_id": DOC,
        "version": str(seen),
        "title": HUGE,  # a text field: any text, even digits
        "sensitivity_tier": HUGE,
        "acl": ["[" * 1000],
        "subject": body["subject"],
        "subject_type": body["subject_type"],
        "document_type": "[" * DEEP,
        "governing_principle": body["governing_principle"],
        "originating_context": body["originating_context"],
        "pii_attributes": "{" * DEEP,
    }
    r = client.post("/review/edit", data=fields, follow_redirects=False)
    assert r.status_code == 422 and "sensitivity_tier" in r.text
    assert sqlite_riverside.label(DOC).version == seen


def test_a_body_over_the_bound_is_413_not_500(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    seen = propose(sqlite_riverside, DOC, permitted_receiver_roles=WIDER)
    csrf = sign_in(client)
    deep = "[" * 200_000 + "]" * 200_000  # 1.2 MB once form-encoded
    form = {"doc_id": DOC, "version": str(seen), "label": deep, "csrf": csrf}
    for path in ("/review/approve-edited", "/review/edit"):
        r = client.post(path, data=form, follow_redirects=False)
        assert r.status_code == 413, (path, r.status_code)
    assert sqlite_riverside.label(DOC).version == seen


def test_a_huge_version_number_is_not_a_500(
    client: TestClient, sqlite_riverside: DocumentStore
) -> None:
    propose(sqlite_riverside, DOC, permitted_receiver_roles=WIDER)
    csrf = sign_in(client)
    for path in ("/review/approve", "/review/edit", "/review/approve-edited"):
        form = {"doc_id": DOC, "version": HUGE, "label": "{}", "csrf": csrf}
        r = client.post(path, data=form, follow_redirects=False)
        assert r.status_code == 422, (path, r.status_code)
