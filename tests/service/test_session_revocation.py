"""Signing out revokes the token (issue 24): a copied cookie, the same token on
``/v1``, and every other service process over the store refuse it until it expires.

The outside tester's finding: ``POST /review/logout`` only deleted the cookie, so a
copy of it kept working for the token's 24 hours.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from privacy_ci.adapters import LocalGatedSource
from privacy_ci.service import AuthError, ServiceSettings, create_app, issue_token, verify_token
from privacy_ci.service._auth import TokenCache
from privacy_ci.store import DocumentStore
from privacy_ci.store._sessions import GRACE_S
from tests.service._review import authority_token
from tests.service._serving import serve_process

KEY = b"session-revocation-test-key-0123456789abcdef"
BASE = "http://127.0.0.1:8000"
COOKIE = "privacy_ci_review"
DOCTOR = issue_token(KEY, "D01", "Doctor", "Medical")


def _client(store: DocumentStore) -> TestClient:
    return TestClient(create_app(store, ServiceSettings(jwt_key=KEY)), BASE)


def _sign_in(client: TestClient, token: str) -> str:
    """Sign in through the form; returns the session's CSRF token."""
    r = client.post("/review/login", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303, r.text
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', client.get("/review").text)
    assert found
    return found.group(1)


def _sign_out(client: TestClient, csrf: str) -> None:
    r = client.post("/review/logout", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and f'{COOKIE}=""' in r.headers["set-cookie"]


def _with_cookie(client: TestClient, token: str) -> Any:
    """GET /review with only `token` as the session cookie (a copied cookie)."""
    client.cookies.clear()
    client.cookies.set(COOKIE, token)
    try:
        return client.get("/review", follow_redirects=False)
    finally:
        client.cookies.clear()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _refused_everywhere(client: TestClient, token: str) -> None:
    """The token is 401 as a cookie, a bearer header, a sign-in and on /v1."""
    page = _with_cookie(client, token)
    assert page.status_code == 401 and "revoked" in page.text
    assert f'{COOKIE}=""' in page.headers.get("set-cookie", "")  # the stale cookie is dropped
    bearer_page = client.get("/review", headers=_bearer(token), follow_redirects=False)
    assert bearer_page.status_code == 401
    again = client.post("/review/login", data={"token": token}, follow_redirects=False)
    assert again.status_code == 401 and "revoked" in again.text
    api = client.get("/v1/labels", headers=_bearer(token))
    assert api.status_code == 401 and "revoked" in api.json()["error"]
    assert api.headers["www-authenticate"] == "Bearer"


def test_a_copied_cookie_is_refused_after_sign_out(riverside: DocumentStore) -> None:
    token = authority_token(KEY)
    with _client(riverside) as browser, _client(riverside) as thief:
        csrf = _sign_in(browser, token)
        copied = browser.cookies.get(COOKIE)
        assert copied == token
        # before the sign-out the copy works, here and on /v1
        assert _with_cookie(thief, copied).status_code == 200
        assert thief.get("/v1/labels", headers=_bearer(token)).status_code == 200
        _sign_out(browser, csrf)
        _refused_everywhere(thief, copied)
        _refused_everywhere(browser, token)
        # other tokens, even the same agent's next one, are not affected
        fresh = authority_token(KEY, ttl=600)
        assert _sign_in(browser, fresh)
        assert thief.get("/v1/labels", headers=_bearer(fresh)).status_code == 200
        doctor = thief.post("/v1/decide", json={"doc_id": "RMC-LAB-003"}, headers=_bearer(DOCTOR))
        assert doctor.status_code == 200


def test_a_second_service_over_the_store_refuses_it_on_its_next_request(
    riverside: DocumentStore,
) -> None:
    """Two services, each with its own store connection and token cache; the second
    verified (and cached) the token before the first signed it out."""
    token = authority_token(KEY)
    with DocumentStore(riverside.url) as other_store:
        with _client(riverside) as first, _client(other_store) as second:
            csrf = _sign_in(first, token)
            assert second.get("/v1/labels", headers=_bearer(token)).status_code == 200
            assert _with_cookie(second, token).status_code == 200  # now in its TokenCache
            _sign_out(first, csrf)
            _refused_everywhere(second, token)
        # a service started afterwards refuses it too
        with _client(other_store) as third:
            _refused_everywhere(third, token)


def test_the_in_process_adapters_refuse_a_revoked_token(riverside: DocumentStore) -> None:
    source = LocalGatedSource(riverside, KEY, DOCTOR)
    assert source.decide("RMC-LAB-003")["decision"] == "permit"
    claims = verify_token(DOCTOR, KEY)
    riverside.revoke_token(claims.token_id, claims.expires_at, "D01")
    with pytest.raises(AuthError, match="revoked"):
        source.decide("RMC-LAB-003")
    with pytest.raises(AuthError, match="revoked"):
        LocalGatedSource(riverside, KEY, DOCTOR)
    # a cache that verified the token before answers from memory, but the store decides
    cache = TokenCache(KEY)
    assert cache.verify(DOCTOR).token_id == claims.token_id
    assert riverside.token_revoked(cache.verify(DOCTOR).token_id)


def test_expired_revocations_are_pruned_on_the_next_revocation(riverside: DocumentStore) -> None:
    now = int(time.time())
    riverside.revoke_token("a" * 64, now - GRACE_S - 10, "PA1")  # expired long ago
    assert riverside.token_revoked("a" * 64)
    riverside.revoke_token("b" * 64, now - 10, "PA1")  # expired, within the grace: kept
    riverside.revoke_token("c" * 64, now + 600, "PA1")
    riverside.revoke_token("c" * 64, now + 600, "PA2")  # twice is once (the first stays)
    assert [riverside.token_revoked(c * 64) for c in "abc"] == [False, True, True]
    rows = riverside.db.query("SELECT token_hash, revoked_by FROM revoked_tokens ORDER BY 1")
    assert rows == [("b" * 64, "PA1"), ("c" * 64, "PA1")]


def test_a_store_made_before_the_revocation_list_gains_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with DocumentStore(path) as store:
        store.db.execute("DROP TABLE revoked_tokens")  # as a store made before issue 24
    with DocumentStore(path, readonly=True) as reader:
        assert not reader.db.query("SELECT name FROM sqlite_master WHERE name = 'revoked_tokens'")
    with DocumentStore(path) as store:  # opened for writing: the table is added
        assert not store.token_revoked("e" * 64)
        store.revoke_token("e" * 64, int(time.time()) + 60, "PA1")
        assert store.token_revoked("e" * 64)


def test_another_service_process_refuses_it(
    sqlite_riverside: DocumentStore, tmp_path: Path
) -> None:
    key_file = tmp_path / "jwt.key"
    key_file.write_bytes(KEY + b"\n")
    token = authority_token(KEY)
    db = Path(str(sqlite_riverside.url))
    with (
        serve_process(db, key_file, tmp_path / "serve.log") as base,
        httpx.Client(base_url=base, timeout=30) as other,
        _client(sqlite_riverside) as first,
    ):
        assert other.get("/v1/labels", headers=_bearer(token)).status_code == 200
        other.cookies.set(COOKIE, token)
        assert other.get("/review", follow_redirects=False).status_code == 200
        _sign_out(first, _sign_in(first, token))
        page = other.get("/review", follow_redirects=False)
        assert page.status_code == 401 and "revoked" in page.text
        api = other.get("/v1/labels", headers=_bearer(token))
        assert api.status_code == 401 and "revoked" in api.json()["error"]
