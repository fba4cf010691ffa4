"""(c) Identity only from verified tokens: forged, expired, wrong-key, alg none and
role-escalation tokens are refused (library and HTTP), with clear messages."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from fastapi.testclient import TestClient

from privacy_ci.errors import PrivacyCIError
from privacy_ci.service import (
    AuthError,
    ServiceSettings,
    check_key,
    create_app,
    generate_key,
    issue_token,
    load_key,
    verify_token,
)
from privacy_ci.store import DocumentStore

KEY = "k" * 40
OTHER_KEY = "o" * 40


def _b64(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _edit_payload(token: str, **changes: object) -> str:
    """Change claims without re-signing (keeps the original signature)."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(changes)
    return f"{header}.{_b64(claims)}.{signature}"


def _alg_none(claims: dict[str, object]) -> str:
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."


def _claims(**extra: object) -> dict[str, object]:
    now = int(time.time())
    return {
        "sub": "P01",
        "role": "Patient",
        "context": "Patient",
        "iat": now,
        "exp": now + 600,
        **extra,
    }


def test_round_trip() -> None:
    token = issue_token(KEY, "D01", "Doctor", "Medical", ttl=60, authority=True)
    claims = verify_token(token, KEY)
    assert (claims.sub, claims.role, claims.context, claims.authority) == (
        "D01",
        "Doctor",
        "Medical",
        True,
    )
    assert claims.expires_at - claims.issued_at == 60
    assert verify_token(issue_token(KEY, "D01", "Doctor", "Medical"), KEY).authority is False


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: issue_token(OTHER_KEY, "P01", "Patient", "Patient"), "signature does not verify"),
        (
            lambda: _edit_payload(
                issue_token(KEY, "P01", "Patient", "Patient"), role="Doctor", context="Medical"
            ),
            "signature does not verify",
        ),
        (
            lambda: _edit_payload(issue_token(KEY, "P01", "Patient", "Patient"), authority=True),
            "signature does not verify",
        ),
        (
            lambda: issue_token(
                KEY, "P01", "Patient", "Patient", ttl=10, now=int(time.time()) - 60
            ),
            "expired",
        ),
        (lambda: _alg_none(_claims()), "algorithm 'none' is not accepted"),
        (lambda: jwt.encode(_claims(), KEY * 2, algorithm="HS512"), "algorithm 'HS512'"),
        (
            lambda: jwt.encode(
                {"sub": "P01", "role": "Patient", "iat": 1, "exp": 2**40}, KEY, algorithm="HS256"
            ),
            "lacks the 'context' claim",
        ),
        (lambda: jwt.encode(_claims(role=""), KEY, algorithm="HS256"), "'role' claim"),
        (lambda: jwt.encode(_claims(authority="yes"), KEY, algorithm="HS256"), "'authority'"),
        (
            lambda: jwt.encode(_claims(iat=int(time.time()) + 3600), KEY, algorithm="HS256"),
            "not valid yet",
        ),
        (lambda: "not-a-jwt", "not a well-formed JWT"),
    ],
    ids=[
        "wrong-key",
        "role-edited",
        "authority-edited",
        "expired",
        "alg-none",
        "alg-hs512",
        "missing-claim",
        "empty-role",
        "authority-not-bool",
        "issued-in-future",
        "garbage",
    ],
)
def test_bad_tokens_are_refused(make: object, message: str) -> None:
    with pytest.raises(AuthError, match=message):
        verify_token(make(), KEY)  # type: ignore[operator]


def test_keys(tmp_path: Path) -> None:
    assert len(generate_key()) == 64
    with pytest.raises(PrivacyCIError, match="at least 32"):
        check_key("short")
    with pytest.raises(PrivacyCIError, match="at least 32"):
        issue_token("short", "D01", "Doctor", "Medical")
    path = tmp_path / "key"
    path.write_text(KEY + "\n")
    assert load_key(path) == KEY.encode()
    with pytest.raises(PrivacyCIError, match="not found"):
        load_key(tmp_path / "missing")
    (tmp_path / "weak").write_text("abc")
    with pytest.raises(PrivacyCIError, match="weak: the JWT signing key is 3 bytes"):
        load_key(tmp_path / "weak")


@pytest.fixture
def client(riverside: DocumentStore) -> Iterator[TestClient]:
    with TestClient(create_app(riverside, ServiceSettings(jwt_key=KEY.encode()))) as c:
        yield c


def _post(client: TestClient, token: str | None, doc_id: str = "RMC-LAB-001") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    r = client.post("/v1/decide", json={"doc_id": doc_id}, headers=headers)
    return r.status_code, r.json()["error"] if r.status_code >= 400 else ""


def test_http_refuses_bad_tokens(client: TestClient) -> None:
    patient = issue_token(KEY, "P01", "Patient", "Patient")
    cases = {
        "missing": (None, 401, "missing bearer token"),
        "forged": (_edit_payload(patient, role="Doctor", context="Medical"), 401, "signature"),
        "wrong key": (issue_token(OTHER_KEY, "D01", "Doctor", "Medical"), 401, "signature"),
        "expired": (issue_token(KEY, "D01", "Doctor", "Medical", ttl=1, now=1000), 401, "expired"),
        "alg none": (
            _alg_none(_claims(sub="D01", role="Doctor", context="Medical")),
            401,
            "'none'",
        ),
        # validly signed, but the store says P01 holds only Patient: role escalation
        "role not held": (
            issue_token(KEY, "P01", "Doctor", "Medical"),
            403,
            "does not hold role 'Doctor'",
        ),
        "unknown agent": (issue_token(KEY, "X99", "Doctor", "Medical"), 403, "unknown agent"),
    }
    for name, (token, status, message) in cases.items():
        got_status, error = _post(client, token)
        assert got_status == status, name
        assert message in error, (name, error)
    r = client.post(
        "/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers={"Authorization": "Basic abc"}
    )
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    # the honest patient token works and is decided by the gate
    status, _ = _post(client, patient)
    assert status == 200


def test_assignments_never_come_from_the_token(client: TestClient) -> None:
    """Extra claims (assignments, roles) in a signed token are ignored: the store decides."""
    now = int(time.time())
    token = jwt.encode(
        {
            "sub": "D02",
            "role": "Doctor",
            "context": "Medical",
            "iat": now,
            "exp": now + 60,
            "assignments": ["P01"],
            "roles": ["Doctor", "HR Manager"],
        },
        KEY,
        algorithm="HS256",
    )
    r = client.post(
        "/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200 and r.json()["decision"] == "deny"
    assert client.app.state.store.audit.records()[-1].rule == "assignment_required"
