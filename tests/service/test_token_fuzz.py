"""Malformed tokens (issue 24): whatever a token's header and claims hold, verifying it
returns claims or raises `AuthError`, and every surface that reads a token answers
401 with at most one log line and no traceback, never 500.

The outside tester's finding: a header with ``crit`` or a numeric ``kid`` (no key
needed to craft one) made PyJWT raise errors `verify_token` did not catch: HTTP 500
and a traceback per request on ``/v1/*``, ``/review/login`` and ``/review``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privacy_ci.service import AuthError, ServiceSettings, TokenClaims, create_app, verify_token
from privacy_ci.service._auth import MAX_TOKEN_LIFETIME_S, TokenCache, token_id
from privacy_ci.store import DocumentStore
from tests.service._serving import serve_process

KEY = b"token-fuzz-test-key-0123456789abcdef-0123456789"
NOW = int(time.time())
GOOD_CLAIMS: dict[str, Any] = {
    "sub": "D01",
    "role": "Doctor",
    "context": "Medical",
    "iat": NOW,
    # valid for hours: the module is imported at collection, minutes before a slow run
    # of the whole suite reaches its last test
    "exp": NOW + 6 * 3600,
}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def craft(header: Any, claims: Any, *, key: bytes | None = KEY, raw: bool = False) -> str:
    """A compact JWT with any header and claims (JSON values, or raw bytes), signed
    with `key` over exactly those segments (None: a signature that is garbage)."""

    def segment(value: Any) -> str:
        if raw or isinstance(value, bytes):
            return b64(value if isinstance(value, bytes) else str(value).encode())
        return b64(json.dumps(value).encode())

    signed = f"{segment(header)}.{segment(claims)}"
    if key is None:
        return f"{signed}.c2lnbmF0dXJl"
    return f"{signed}.{b64(hmac.new(key, signed.encode(), hashlib.sha256).digest())}"


def outcome(token: str) -> TokenClaims | AuthError:
    """`verify_token`'s answer: claims or an AuthError; any other exception fails the test."""
    try:
        return verify_token(token, KEY)
    except AuthError as exc:
        return exc


def assert_total(token: str) -> None:
    result = outcome(token)
    if isinstance(result, AuthError):
        message = str(result)
        assert "\n" not in message and len(message) < 300, message
        return
    # what verifies is a well-typed, short-lived token
    assert all(isinstance(v, str) and v.strip() for v in (result.sub, result.role, result.context))
    assert isinstance(result.issued_at, int) and isinstance(result.expires_at, int)
    assert result.expires_at - result.issued_at <= MAX_TOKEN_LIFETIME_S
    assert isinstance(result.authority, bool) and result.token_id == token_id(token)


# -- what a hostile token may hold ------------------------------------------------------
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_crit = st.one_of(
    st.lists(st.sampled_from(["x", "b64", "exp", "kid", "alg", "", "crit"]), max_size=3),
    st.text(max_size=10),
    st.integers(),
    st.floats(),
    st.none(),
    st.lists(st.integers(), min_size=1, max_size=3),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
_kid = st.one_of(
    st.integers(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.none(),
    st.text(max_size=20),
    st.booleans(),
)
_alg = st.one_of(
    st.sampled_from(["HS256", "hs256", "HS384", "HS512", "RS256", "none", "None", "", " HS256"]),
    _scalars,
    st.lists(st.just("HS256"), max_size=2),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
_header = st.fixed_dictionaries(
    {"alg": _alg},
    optional={
        "crit": _crit,
        "kid": _kid,
        "typ": st.one_of(st.sampled_from(["JWT", "jwt", ""]), _scalars, st.lists(_scalars)),
        "b64": st.booleans() | _scalars,
        "jku": _json,
        "x5c": _json,
        "zip": st.sampled_from(["DEF", ""]) | _scalars,
        "cty": _json,
    },
).flatmap(
    lambda fixed: st.dictionaries(st.text(max_size=6), _json, max_size=3).map(
        lambda extra: {**extra, **fixed}
    )
)
_time = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([NOW, NOW + 600, NOW - 10**9, NOW + 10**9, 10**400, -(10**400), 2**63, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, NOW + 0.5]),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
_identity = st.one_of(
    st.sampled_from(["D01", "Doctor", "Medical", "", " ", "\n"]),
    st.text(max_size=12),
    st.lists(st.text(max_size=4), max_size=2),
    _scalars,
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)
_claims = st.fixed_dictionaries(
    {},
    optional={
        "sub": _identity,
        "role": _identity,
        "context": _identity,
        "iat": _time,
        "exp": _time,
        "nbf": _time,
        "authority": st.one_of(st.booleans(), st.sampled_from(["true", "yes", 1, 0]), _scalars),
        "aud": _json,
        "iss": _json,
        "jti": _json,
    },
).map(lambda optional: {**GOOD_CLAIMS, **optional})
_drop = st.lists(st.sampled_from(sorted(GOOD_CLAIMS)), max_size=2, unique=True)
_not_an_object = st.one_of(
    st.lists(_scalars, max_size=3), _scalars, st.just("HS256"), st.just([{"alg": "HS256"}])
)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(header=_header, claims=_claims, drop=_drop, signed=st.booleans())
def test_any_header_and_claims_verify_or_are_an_auth_error(
    header: dict[str, Any], claims: dict[str, Any], drop: list[str], signed: bool
) -> None:
    for name in drop:
        claims.pop(name, None)
    assert_total(craft(header, claims, key=KEY if signed else None))


@FUZZ
@given(header=st.one_of(_not_an_object, _header), claims=st.one_of(_not_an_object, _claims))
def test_headers_and_claims_that_are_not_objects(header: Any, claims: Any) -> None:
    assert_total(craft(header, claims))


@FUZZ
@given(
    segments=st.lists(
        st.one_of(
            st.text(max_size=40),
            st.binary(max_size=40).map(b64),
            st.sampled_from(["", "=", "==", "e30", "bnVsbA", "!!!", "\x00", "é", "eyJ"]),
        ),
        max_size=5,
    ),
    joiner=st.sampled_from([".", "..", " ", ".\n"]),
)
def test_any_text_verifies_or_is_an_auth_error(segments: list[str], joiner: str) -> None:
    assert_total(joiner.join(segments))


@FUZZ
@given(header=st.binary(max_size=64), claims=st.binary(max_size=64))
def test_segments_that_are_not_json(header: bytes, claims: bytes) -> None:
    assert_total(craft(header, claims))


# The tester's cases, and the edges the strategies reach only by luck.
HOSTILE: dict[str, tuple[Any, Any]] = {
    "crit-list": ({"alg": "HS256", "crit": ["x"]}, GOOD_CLAIMS),
    "crit-str": ({"alg": "HS256", "crit": "x"}, GOOD_CLAIMS),
    "crit-number": ({"alg": "HS256", "crit": 7}, GOOD_CLAIMS),
    "crit-b64": ({"alg": "HS256", "crit": ["b64"], "b64": False}, GOOD_CLAIMS),
    "crit-empty": ({"alg": "HS256", "crit": []}, GOOD_CLAIMS),
    "kid-int": ({"alg": "HS256", "kid": 7}, GOOD_CLAIMS),
    "kid-list": ({"alg": "HS256", "kid": [1, 2]}, GOOD_CLAIMS),
    "kid-dict": ({"alg": "HS256", "kid": {"a": 1}}, GOOD_CLAIMS),
    "kid-null": ({"alg": "HS256", "kid": None}, GOOD_CLAIMS),
    "no-alg": ({"typ": "JWT"}, GOOD_CLAIMS),
    "alg-none": ({"alg": "none"}, GOOD_CLAIMS),
    "alg-list": ({"alg": ["HS256"]}, GOOD_CLAIMS),
    "alg-huge": ({"alg": "H" * 100_000}, GOOD_CLAIMS),
    "huge-header": ({"alg": "HS256", "pad": "x" * 200_000}, GOOD_CLAIMS),
    "deep-header": (b"[" * 50_000, GOOD_CLAIMS),
    "header-null": (None, GOOD_CLAIMS),
    "header-list": ([{"alg": "HS256"}], GOOD_CLAIMS),
    "header-not-json": (b"{alg: HS256}", GOOD_CLAIMS),
    "sub-list": ({"alg": "HS256"}, {**GOOD_CLAIMS, "sub": ["D01"]}),
    "exp-text": ({"alg": "HS256"}, {**GOOD_CLAIMS, "exp": "tomorrow"}),
    "exp-huge": ({"alg": "HS256"}, {**GOOD_CLAIMS, "exp": 10**400}),
    "exp-too-many-digits": ({"alg": "HS256"}, b'{"exp": ' + b"9" * 5000 + b"}"),
    "exp-nan": ({"alg": "HS256"}, {**GOOD_CLAIMS, "exp": math.nan}),
    "exp-inf": ({"alg": "HS256"}, {**GOOD_CLAIMS, "exp": math.inf}),
    "exp-float": ({"alg": "HS256"}, {**GOOD_CLAIMS, "exp": NOW + 60.5}),
    "iat-future": ({"alg": "HS256"}, {**GOOD_CLAIMS, "iat": NOW + 10**9, "exp": NOW + 10**9 + 60}),
    "iat-nan": ({"alg": "HS256"}, {**GOOD_CLAIMS, "iat": math.nan}),
    "authority-str": ({"alg": "HS256"}, {**GOOD_CLAIMS, "authority": "true"}),
    "claims-list": ({"alg": "HS256"}, [GOOD_CLAIMS]),
    "deep-claims": ({"alg": "HS256"}, b"[" * 50_000),
}


VALID_WHEN_SIGNED = {"exp-float", "huge-header"}  # odd, but what the key's holder signed


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tokens_are_auth_errors_with_short_one_line_reasons(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    header, claims = HOSTILE[case]
    for key in (KEY, None):
        token = craft(header, claims, key=key)
        with caplog.at_level(logging.DEBUG):
            caplog.clear()
            result = outcome(token)
        assert isinstance(result, AuthError) or (key and case in VALID_WHEN_SIGNED), result
        assert len([r for r in caplog.records if r.name.startswith("privacy_ci")]) <= 1
        assert not any(r.exc_info for r in caplog.records)
        if isinstance(result, AuthError):
            assert "\n" not in str(result) and len(str(result)) < 300, str(result)
        # the cache answers alike (failures are never cached)
        cached = TokenCache(KEY)
        for _ in range(2):
            with suppress(AuthError):
                cached.verify(token)


def test_the_token_id_ignores_how_the_signature_is_spelled() -> None:
    """PyJWT accepts a signature with base64 padding (some issuers send it): a second
    spelling of one token, which must be the same token to the revocation list."""
    token = craft({"alg": "HS256", "typ": "JWT"}, GOOD_CLAIMS)
    padded = token + "="
    assert len(token.rpartition(".")[2]) % 4 == 3  # a 32-byte signature: 43 characters
    assert verify_token(padded, KEY).token_id == verify_token(token, KEY).token_id
    assert token_id(padded) == token_id(token) == token_id(f" {token}\n")
    # the signed part is what names it: another header or claims is another token
    assert token_id(craft({"alg": "HS256"}, GOOD_CLAIMS)) != token_id(token)


# -- the whole HTTP path -------------------------------------------------------------------
SURFACES = ["/v1/decide", "/v1/retrieve", "/review/login", "/review cookie", "/review bearer"]
MALFORMED = {
    name: craft(*HOSTILE[name], key=None)
    for name in ("crit-list", "crit-str", "kid-int", "kid-list", "kid-null", "header-not-json")
} | {"kid-int-signed": craft(*HOSTILE["kid-int"]), "crit-signed": craft(*HOSTILE["crit-list"])}


def _ask(client: httpx.Client | TestClient, surface: str, token: str) -> Any:
    if surface == "/v1/decide":
        return client.post(surface, json={"doc_id": "RMC-LAB-001"}, headers=_bearer(token))
    if surface == "/v1/retrieve":
        return client.post(surface, json={"query": "lipid", "k": 3}, headers=_bearer(token))
    if surface == "/review/login":
        return client.post(surface, data={"token": token}, follow_redirects=False)
    if surface == "/review cookie":
        client.cookies.set("privacy_ci_review", token)
        try:
            return client.get("/review", follow_redirects=False)
        finally:
            client.cookies.clear()
    return client.get("/review", headers=_bearer(token), follow_redirects=False)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_answers_401_with_at_most_one_log_line(
    sqlite_riverside: DocumentStore, surface: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))
    with TestClient(app, "http://127.0.0.1:8000", raise_server_exceptions=False) as client:
        for name, token in MALFORMED.items():
            with caplog.at_level(logging.DEBUG):
                caplog.clear()
                response = _ask(client, surface, token)
            assert response.status_code == 401, (name, response.status_code, response.text[:300])
            assert response.headers.get("www-authenticate") == "Bearer"
            ours = [r for r in caplog.records if r.name.startswith("privacy_ci")]
            assert len(ours) <= 1 and not any(r.exc_info for r in caplog.records), [
                r.getMessage() for r in ours
            ]


def test_a_real_server_logs_one_line_per_malformed_token(
    sqlite_riverside: DocumentStore, tmp_path: Path
) -> None:
    key_file, log = tmp_path / "jwt.key", tmp_path / "serve.log"
    key_file.write_bytes(KEY + b"\n")
    sqlite_riverside.close()
    db = tmp_path / "riverside.db"
    with (
        serve_process(db, key_file, log) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        asked = 0
        for surface in SURFACES:
            for token in (MALFORMED["crit-list"], MALFORMED["kid-int"]):
                assert _ask(client, surface, token).status_code == 401
                asked += 1
    text = log.read_text()
    assert "Traceback" not in text and "Internal Server Error" not in text, text
    requests = [line for line in text.splitlines() if '" 401 ' in line]
    assert len(requests) == asked, text
    # every other line is uvicorn starting, serving health checks or stopping (after
    # the CLI's banner, which the console may wrap)
    started = text.index("INFO:     Started server process")
    others = [line for line in text[started:].splitlines() if line not in requests]
    assert all(line.startswith(("INFO:", "serving ")) and " 500 " not in line for line in others), (
        others
    )
