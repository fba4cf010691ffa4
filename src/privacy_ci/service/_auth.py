"""Identity from signed tokens only: JWT HS256 with one configured key (PyJWT).

A token carries ``sub`` (the agent id), ``role`` and ``context`` (the capacity the
agent acts in), ``iat`` and ``exp``, and optionally ``authority: true`` for the
Policy Authority. Verification accepts HS256 only (so ``alg: none`` and any other
algorithm are refused), checks the signature, requires every claim and checks
expiry. The roles an agent holds and its assignments are then read from the
store, never from the token: a validly signed token claiming a role the store
does not give that agent is refused (403), and so is an unknown agent.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt

from privacy_ci.conductor import POLICY_AUTHORITY_ROLE, Requester
from privacy_ci.errors import PrivacyCIError
from privacy_ci.store import RoleNotHeld, Snapshot, UnknownAgent

if TYPE_CHECKING:
    from privacy_ci.store import DocumentStore

log = logging.getLogger("privacy_ci.service")

ALGORITHM = "HS256"
MIN_KEY_BYTES = 32
REQUIRED_CLAIMS = ("sub", "role", "context", "exp", "iat")
MAX_TOKEN_LIFETIME_S = 24 * 3600
"""The longest a token may live (exp - iat) by default: a stolen token is useful for
at most a day, and revoking a role takes effect when its tokens run out anyway."""


class AuthError(PrivacyCIError):
    """The request is not authenticated (HTTP 401): no token, or a token that fails."""

    status = 401


class Forbidden(PrivacyCIError):
    """The token is valid but does not allow this (HTTP 403)."""

    status = 403


@dataclass(frozen=True)
class TokenClaims:
    """The verified claims of a token.

    Args:
        sub: the agent id.
        role: the role the agent acts in.
        context: the context the agent acts in.
        issued_at / expires_at: Unix times.
        authority: whether the bearer acts as the Policy Authority.
        token_id: the token's name in the revocation list (`token_id`).
    """

    sub: str
    role: str
    context: str
    issued_at: int
    expires_at: int
    authority: bool = False
    token_id: str = ""


def generate_key() -> str:
    """A fresh random signing key (64 hex characters, 256 bits)."""
    return secrets.token_hex(32)


def check_key(key: str | bytes) -> bytes:
    """The key as bytes, refused when shorter than 32 bytes (RFC 7518 for HS256).

    Surrounding whitespace is stripped, as `load_key` strips a key file's: a key
    read with its file's trailing newline is the same key wherever it is used
    (minting, the service, the in-process adapters), not one that makes every
    token look forged.
    """
    raw = (key.encode("utf-8") if isinstance(key, str) else bytes(key)).strip()
    if len(raw) < MIN_KEY_BYTES:
        raise PrivacyCIError(
            f"the JWT signing key is {len(raw)} bytes; HS256 needs at least {MIN_KEY_BYTES}"
            " (make one with: privacy-ci token keygen)"
        )
    return raw


def load_key(path: Path | str) -> bytes:
    """Read a signing key from a file (surrounding whitespace stripped).

    Raises:
        PrivacyCIError: the file is missing, unreadable or the key too short.
    """
    p = Path(path)
    try:
        text = p.read_bytes().strip()
    except FileNotFoundError:
        raise PrivacyCIError(
            f"JWT key file {p} not found (make one: privacy-ci token keygen)"
        ) from None
    except OSError as exc:
        raise PrivacyCIError(f"cannot read JWT key file {p}: {exc.strerror}") from None
    try:
        return check_key(text)
    except PrivacyCIError as exc:
        raise PrivacyCIError(f"{p}: {exc}") from None


def issue_token(
    key: str | bytes,
    agent_id: str,
    role: str,
    context: str,
    ttl: int = 3600,
    *,
    authority: bool = False,
    now: int | None = None,
    max_lifetime: int = MAX_TOKEN_LIFETIME_S,
) -> str:
    """Mint a signed token (HS256) for an agent acting in a role and context.

    Args:
        key: the signing key (at least 32 bytes).
        agent_id: the ``sub`` claim.
        role: the role acted in.
        context: the context acted in.
        ttl: seconds until it expires.
        authority: add ``authority: true`` (label approval and revocation).
        now: the issue time (Unix seconds; default now).
        max_lifetime: the longest `ttl` allowed (services refuse longer-lived tokens).

    Returns:
        The compact JWT.

    Raises:
        PrivacyCIError: `ttl` is not positive or exceeds `max_lifetime`.
    """
    if not 0 < int(ttl) <= max_lifetime:
        raise PrivacyCIError(
            f"token lifetime must be between 1 and {max_lifetime} seconds, got {ttl}"
        )
    issued = int(time.time()) if now is None else int(now)
    claims: dict[str, Any] = {
        "sub": agent_id,
        "role": role,
        "context": context,
        "iat": issued,
        "exp": issued + int(ttl),
    }
    if authority:
        claims["authority"] = True
    return jwt.encode(claims, check_key(key), algorithm=ALGORITHM)


def token_id(token: str) -> str:
    """The name of a token in the revocation list: SHA-256 of its signed part.

    Only ``header.claims`` is hashed, not the signature: HS256 gives one signature
    per signed part and key, but that signature can be spelled more than one way
    and still verify (PyJWT accepts it with base64 padding; other decoders ignore
    the unused low bits of its last character). So a revoked token cannot come
    back re-spelled, while any other header or claims is another token.
    """
    signed = token.strip().rpartition(".")[0]
    return hashlib.sha256(signed.encode("utf-8", "surrogatepass")).hexdigest()


# What parsing a hostile token can raise besides PyJWT's own errors (PyJWT wraps
# most of them, not all): such a token is malformed, never a 500.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError)
_SHOWN_CHARS = 80


def _shown(value: object, *, quoted: bool = False) -> str:
    """A token-supplied value (its repr) or message (as it is, unless `quoted`) for a
    reply or a log line: one line, short, never an exception of its own."""
    try:
        text = value if isinstance(value, str) and not quoted else repr(value)
    except ValueError:  # e.g. an integer with more digits than Python prints
        text = f"<{type(value).__name__}>"
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def verify_token(
    token: str,
    key: str | bytes,
    *,
    leeway: int = 0,
    max_lifetime: int = MAX_TOKEN_LIFETIME_S,
) -> TokenClaims:
    """Verify a token's signature, algorithm, claims, expiry and lifetime.

    Total over its input: any token (any header, any claims, any bytes) verifies or
    raises `AuthError`.

    Args:
        token: the compact JWT.
        key: the signing key.
        leeway: seconds of clock skew tolerated on ``exp`` and ``iat``.
        max_lifetime: the longest lifetime (``exp - iat``) accepted, in seconds.

    Returns:
        The verified claims.

    Raises:
        AuthError: with the reason (expired, bad signature, wrong algorithm, missing
            or malformed claims, not a JWT).
        PrivacyCIError: the key itself is too short (a configuration error).
    """
    raw_key = check_key(key)
    try:
        return _verify(token, raw_key, leeway, max_lifetime)
    except AuthError:
        raise
    except _MALFORMED as exc:
        # not PyJWT's own refusal: one line (no traceback), so a parser that starts
        # failing in a new way shows up in the log without flooding it
        log.warning("refused a malformed token: %s: %s", type(exc).__name__, _shown(str(exc)))
        raise AuthError("the bearer token is malformed") from None


def _verify(token: str, key: bytes, leeway: int, max_lifetime: int) -> TokenClaims:
    if not isinstance(token, str):
        raise AuthError("the bearer token is not a well-formed JWT")
    try:
        header = jwt.get_unverified_header(token)
        alg = header.get("alg")
        if alg != ALGORITHM:
            raise AuthError(
                f"token algorithm {_shown(alg, quoted=True)} is not accepted (only {ALGORITHM})"
            )
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            options={"require": list(REQUIRED_CLAIMS)},
            leeway=leeway,
        )
    except jwt.ExpiredSignatureError:
        raise AuthError("the token has expired") from None
    except jwt.InvalidSignatureError:
        raise AuthError(
            "the token's signature does not verify (forged, altered, or signed with another key)"
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        raise AuthError(f"the token lacks the {_shown(exc.claim, quoted=True)} claim") from None
    except jwt.ImmatureSignatureError:
        raise AuthError("the token is not valid yet (iat in the future)") from None
    except jwt.DecodeError as exc:  # not base64 or JSON, or a claim of the wrong type
        raise AuthError(f"the bearer token is not a well-formed JWT: {_shown(str(exc))}") from None
    except jwt.PyJWTError as exc:  # e.g. a crit extension or a kid PyJWT refuses
        raise AuthError(f"invalid token: {_shown(str(exc))}") from None
    # PyJWT accepts some claims only when present (e.g. a null exp passes `require`):
    # every claim is checked here again, so nothing below can fail with a KeyError.
    for name in ("sub", "role", "context"):
        value = claims.get(name)
        if not isinstance(value, str) or not value.strip():
            raise AuthError(f"the token's {name!r} claim must be a non-empty string")
    times = {}
    for name in ("iat", "exp"):
        value = claims.get(name)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise AuthError(f"the token's {name!r} claim must be a number (Unix seconds)")
        times[name] = int(value)
    lifetime = times["exp"] - times["iat"]
    if lifetime > max_lifetime:
        shown = f"{lifetime} s" if lifetime < 10**12 else "for ever"
        raise AuthError(
            f"the token lives {shown} (exp - iat); this service accepts at most"
            f" {max_lifetime} s: mint a shorter-lived one"
        )
    authority = claims.get("authority", False)
    if not isinstance(authority, bool):
        raise AuthError("the token's 'authority' claim must be true or false")
    return TokenClaims(
        sub=claims["sub"],
        role=claims["role"],
        context=claims["context"],
        issued_at=times["iat"],
        expires_at=times["exp"],
        authority=authority,
        token_id=token_id(token),
    )


class TokenCache:
    """Verified tokens, so a token's signature is checked once, not on every request.

    A hit still re-checks the times (``exp``, ``iat``) against the clock, so an
    expired token is refused exactly as `verify_token` would refuse it. Keyed by
    the token string and bound to one key; failures are never cached.

    Args:
        key: the signing key.
        leeway: seconds of clock skew tolerated.
        size: how many tokens to remember (least recently used are dropped).
        max_lifetime: the longest token lifetime accepted (see `verify_token`).
    """

    def __init__(
        self,
        key: str | bytes,
        *,
        leeway: int = 0,
        size: int = 4096,
        max_lifetime: int = MAX_TOKEN_LIFETIME_S,
    ) -> None:
        self.key = check_key(key)
        self.leeway = leeway
        self.size = size
        self.max_lifetime = max_lifetime
        self._hits: OrderedDict[str, TokenClaims] = OrderedDict()
        self._lock = threading.Lock()

    def verify(self, token: str) -> TokenClaims:
        """`verify_token`, answered from the cache when this token verified before."""
        with self._lock:
            claims = self._hits.get(token)
            if claims is not None:
                self._hits.move_to_end(token)
        if claims is None:
            claims = verify_token(
                token, self.key, leeway=self.leeway, max_lifetime=self.max_lifetime
            )
            with self._lock:
                self._hits[token] = claims
                while len(self._hits) > self.size:
                    self._hits.popitem(last=False)
            return claims
        now = time.time()
        if claims.expires_at <= now - self.leeway:
            with self._lock:
                self._hits.pop(token, None)
            raise AuthError("the token has expired")
        if claims.issued_at > now + self.leeway:
            raise AuthError("the token is not valid yet (iat in the future)")
        return claims


def requester_from_claims(snapshot: Snapshot, claims: TokenClaims) -> Requester:
    """The requester a verified token stands for: role, context and assignments
    checked against (and read from) the store.

    Raises:
        Forbidden: the agent is unknown to the store, or does not hold the role in
            the token's context.
    """
    try:
        return snapshot.requester(claims.sub, claims.role, claims.context)
    except (UnknownAgent, RoleNotHeld) as exc:
        raise Forbidden(str(exc)) from None


def refuse_revoked(store: DocumentStore, claims: TokenClaims) -> TokenClaims:
    """The claims, unless the store's revocation list holds their token.

    Read from the store at every request (one primary-key lookup), never cached:
    a token signed out in one process is refused by every process sharing the
    store from its next request on, whatever a `TokenCache` remembers.

    Raises:
        AuthError: the token was revoked (its bearer signed out).
        StoreError: the store cannot be read.
    """
    if claims.token_id and store.token_revoked(claims.token_id):
        raise AuthError("this token was revoked (its session was signed out): use a new token")
    return claims


@dataclass(frozen=True)
class Caller:
    """A verified token and the requester the store says it stands for."""

    claims: TokenClaims
    requester: Requester

    @property
    def id(self) -> str:
        return self.requester.id


def require_authority(caller: Caller) -> Caller:
    """The caller, only when the store makes it the Policy Authority (403 otherwise):
    it acts in the role ``Policy Authority`` (which `requester_from_claims` checked the
    store records for it) and its token carries ``authority: true``.

    Raises:
        Forbidden: either is missing.
    """
    if caller.requester.active_role != POLICY_AUTHORITY_ROLE:
        raise Forbidden(
            f"this endpoint is for the Policy Authority: agent {caller.id!r} acts as"
            f" {caller.requester.active_role!r}; it needs a token acting in the role"
            f" {POLICY_AUTHORITY_ROLE!r}, which the store must record for the agent"
        )
    if not caller.claims.authority:
        raise Forbidden(
            "this endpoint is for the Policy Authority: the token needs the claim"
            " 'authority: true' (privacy-ci token mint --authority)"
        )
    return caller
