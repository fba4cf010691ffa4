"""The gated retrieval path for one requester token, in-process or over HTTP.

Every framework adapter calls a `GatedSource`, which stands for exactly one
requester: the one its signed token names. Two implementations answer alike:

- `LocalGatedSource`: in-process, over a `DocumentStore`. The token is verified
  with the service's key and resolved against the store at every call (agent,
  role, context; assignments from the store), then the store's gated retrieval
  path (`retrieve_for`) or `decide_for` runs, audited as in the service.
- `HttpGatedSource`: the same two calls against the HTTP service
  (``/v1/retrieve``, ``/v1/decide``) with httpx and the bearer token.

Both apply the service's default disclosure: only admitted documents come back,
a denial says only "not available" (a denied id and an unknown id read the same),
and no count of withheld documents is given. Query text ranks documents only.
Both apply the service's per-requester limit on audited decisions (a decision
costs 1, a retrieval k + 1): the service's own bucket over HTTP, and in-process
a bucket per requester with the service's default rate (`LocalGatedSource`'s
`rate`), shared by every source over the same store in the process.
Bad input fails with the same error classes in both modes: `AuthError` (401: the
token fails, or was revoked by signing out), `Forbidden` (403: the store does not
hold the token's agent in that role and context), `ValidationFailed` (422: a
malformed argument), `RateLimitExceeded` (429: over the decision rate) and
`ServiceError` for any other refusal of the service.
"""

from __future__ import annotations

import logging
import threading
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, runtime_checkable

import httpx
from pydantic import BaseModel, ValidationError

from privacy_ci.conductor import Requester
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.service import AuthError, Forbidden, requester_from_claims
from privacy_ci.service._app import ServiceSettings, _public_flow  # one disclosure rule
from privacy_ci.service._auth import MAX_TOKEN_LIFETIME_S, TokenCache, refuse_revoked
from privacy_ci.service._limits import Rate, RateLimited, RateLimiter
from privacy_ci.service._models import (
    DecideRequest,
    DecideResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from privacy_ci.store import DocumentStore, decide_for, retrieve_for

# Request-level fields every document's metadata carries (the request it came from).
# (no store version: it counts writes to documents the requester may not see)
_REQUEST_FIELDS = ("request_id", "requester", "role", "context")
# Decision fields of a document's metadata (its `decisions` entry in the service's body).
_DECISION_FIELDS = ("decision", "rule", "explanation", "policy_version", "label_state")

log = logging.getLogger("privacy_ci.adapters")

UNLIMITED: Final = "unlimited"
"""`LocalGatedSource(rate=UNLIMITED)`: no decision rate, for a trusted batch job."""


class ServiceError(PrivacyCIError):
    """The service refused a request for a reason other than identity or input.

    Args:
        status: the HTTP status (429 rate limit, 503 unavailable, ...).
        message: the service's error message.
    """

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"the service answered {status}: {message}")


class RateLimitExceeded(ServiceError, RateLimited):
    """The requester is over its rate of audited decisions (HTTP 429), in either mode.

    A `ServiceError` (status 429) and the service's `RateLimited`, so either
    ``except`` catches it.

    Args:
        message: what the limit is and when to retry.
        retry_after: seconds until the request would be allowed.
    """

    def __init__(self, message: str, retry_after: float) -> None:
        PrivacyCIError.__init__(self, message)
        self.status = 429
        self.retry_after = retry_after


@dataclass(frozen=True)
class GatedDocument:
    """A document the gate admitted for the requester.

    Args:
        doc_id: the document's id.
        title: its title.
        content: its text (fetched only after the gate permitted it).
        score: its ranking score within the requester's authorized set.
        metadata: JSON-ready: ``doc_id``, ``title``, ``score``, ``label_version``,
            the decision (``decision``, ``rule``, ``explanation``, ``policy_version``,
            ``label_state``) and the request (``request_id``, ``requester``,
            ``role``, ``context``).
    """

    doc_id: str
    title: str
    content: str
    score: float
    metadata: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {**self.metadata, "content": self.content}


@dataclass(frozen=True)
class GatedResult:
    """What one gated retrieval returned: the admitted documents, best first.

    Args:
        body: the service's public ``/v1/retrieve`` body (no withheld count).
        documents: the admitted documents with their decision metadata.
    """

    body: dict[str, Any] = field(repr=False)
    documents: tuple[GatedDocument, ...]

    @property
    def request_id(self) -> str:
        return str(self.body["request_id"])

    @property
    def requester(self) -> str:
        return str(self.body["requester"])

    @property
    def policy_version(self) -> str:
        return str(self.body["policy_version"])

    @property
    def doc_ids(self) -> list[str]:
        return [d.doc_id for d in self.documents]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the request's fields and each document (metadata and content)."""
        out = {k: self.body.get(k) for k in (*_REQUEST_FIELDS, "policy_version", "k")}
        out["documents"] = [d.as_dict() for d in self.documents]
        return out

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> GatedResult:
        """Read the service's ``/v1/retrieve`` body (in-process: the same body)."""
        try:
            decisions = {d["doc_id"]: d for d in body["decisions"]}
            request = {k: body[k] for k in _REQUEST_FIELDS}
            docs = []
            for d in body["documents"]:
                decision = decisions[d["doc_id"]]
                metadata = {
                    "doc_id": d["doc_id"],
                    "title": d["title"],
                    "score": d["score"],
                    "label_version": d["label_version"],
                    **{k: decision.get(k) for k in _DECISION_FIELDS},
                    **request,
                }
                docs.append(
                    GatedDocument(
                        d["doc_id"], d["title"], d["content"], float(d["score"]), metadata
                    )
                )
        except (KeyError, TypeError, ValueError) as exc:
            # the detail is for the log, not for an agent reading the error
            log.warning("not a /v1/retrieve response body: %s: %s", type(exc).__name__, exc)
            raise PrivacyCIError(
                "the service's answer is not a /v1/retrieve response body (details in the log)"
            ) from None
        return cls(dict(body), tuple(docs))


@runtime_checkable
class GatedSource(Protocol):
    """The gated retrieval path for one requester (fixed when the source is made)."""

    def retrieve(self, query: str, k: int = 5) -> GatedResult:
        """The admitted documents for `query` (1 <= k <= 100 candidates ranked)."""
        ...

    def decide(self, doc_id: str) -> dict[str, Any]:
        """May this document reach the requester? (A denial says only "not available".)"""
        ...

    def close(self) -> None: ...


def _validated(model: type[BaseModel], values: Mapping[str, Any]) -> Any:
    """`values` checked by the service's own request model (same limits, same fields).

    A mapping, not keyword arguments: any name (``model``, ``self``) is a field to
    check, never a clash with this function's own parameters.
    """
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise ValidationFailed(
            [
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            ]
        ) from None


def service_decision_rate() -> Rate:
    """The service's default per-requester rate of audited decisions
    (`ServiceSettings.decision_rate`, what ``privacy-ci serve`` applies)."""
    return ServiceSettings(jwt_key=b"").decision_rate


# One bucket per requester per rate for each store, as the service keeps one per
# requester for its store: a second source for the same token shares the first's.
_LIMITERS: weakref.WeakKeyDictionary[DocumentStore, dict[Rate, RateLimiter]] = (
    weakref.WeakKeyDictionary()
)
_LIMITERS_LOCK = threading.Lock()


def _limiter(store: DocumentStore, rate: Rate) -> RateLimiter:
    with _LIMITERS_LOCK:
        limiters = _LIMITERS.setdefault(store, {})
        limiter = limiters.get(rate)
        if limiter is None:
            limiter = limiters[rate] = RateLimiter(rate, "audited decisions")
        return limiter


class LocalGatedSource:
    """The gated retrieval path in-process, for the requester a signed token names.

    Args:
        store: the document store (decisions are appended to its audit log).
        key: the service's HS256 signing key (at least 32 bytes; surrounding
            whitespace, such as a key file's trailing newline, is no part of it).
        token: the requester's JWT (``sub``, ``role``, ``context``).
        leeway: seconds of clock skew tolerated on the token's times.
        max_token_lifetime_s: tokens living longer are refused (as the service does).
        rate: the requester's rate of audited decisions (a decision costs 1, a
            retrieval k + 1): None for the service's default
            (`service_decision_rate`), a `Rate`, or `UNLIMITED` for a trusted batch
            job. Buckets are per requester and shared by every source over `store`.

    Raises:
        AuthError: the token fails (forged, expired, malformed, too long-lived, revoked).
        Forbidden: the store does not hold the token's agent in that role and context.
    """

    def __init__(
        self,
        store: DocumentStore,
        key: str | bytes,
        token: str,
        *,
        leeway: int = 0,
        max_token_lifetime_s: int = MAX_TOKEN_LIFETIME_S,
        rate: Rate | Literal["unlimited"] | None = None,
    ) -> None:
        self.store = store
        self._tokens = TokenCache(key, leeway=leeway, max_lifetime=max_token_lifetime_s)
        self._token = token.strip()
        self._lock = threading.Lock()
        if rate == UNLIMITED:
            self._limit: RateLimiter | None = None
        elif rate is None or isinstance(rate, Rate):
            self._limit = _limiter(store, rate or service_decision_rate())
        else:
            raise PrivacyCIError(
                f"rate must be a Rate, None (the service's) or {UNLIMITED!r}, got {rate!r}"
            )
        self.requester()  # a bad token or an unknown agent fails here, not at first use

    @property
    def rate(self) -> Rate | None:
        """The decision rate applied (None: unlimited)."""
        return None if self._limit is None else self._limit.rate

    def requester(self) -> Requester:
        """The token's requester, checked against the store now (every call does this):
        the token verified and not revoked, its agent, role and context the store's."""
        claims = refuse_revoked(self.store, self._tokens.verify(self._token))
        return requester_from_claims(self.store.snapshot(), claims)

    def _spend(self, requester: Requester, cost: int) -> None:
        """Charge the requester's bucket as the service does (429 over it)."""
        if self._limit is None:
            return
        try:
            self._limit.take(requester.id, cost)
        except RateLimited as exc:
            raise RateLimitExceeded(str(exc), exc.retry_after) from None

    def retrieve(self, query: str, k: int = 5) -> GatedResult:
        body = _validated(RetrieveRequest, {"query": query, "k": k})
        with self._lock:  # one store connection: calls from worker threads take turns
            requester = self.requester()
            self._spend(requester, body.k + 1)
            result = retrieve_for(self.store, requester, body.query, body.k)
        out = result.as_dict()
        out["decisions"] = [_public_flow(f, False) for f in result.decisions]
        out["withheld"] = None
        # the service's response model shapes the body, so both modes return the same one
        return GatedResult.from_body(RetrieveResponse.model_validate(out).model_dump(mode="json"))

    def decide(self, doc_id: str) -> dict[str, Any]:
        body = _validated(DecideRequest, {"doc_id": doc_id})
        rid = uuid.uuid4().hex
        with self._lock:
            requester = self.requester()
            self._spend(requester, 1)
            flow = decide_for(self.store, requester, body.doc_id, request_id=rid, unknown="deny")
        out = {"request_id": rid, "requester": requester.id, **_public_flow(flow, False)}
        return DecideResponse.model_validate(out).model_dump(mode="json")

    def close(self) -> None:
        """Nothing to release (the store belongs to the caller)."""


class HttpGatedSource:
    """The gated retrieval path of a running service, for the bearer of `token`.

    Args:
        base_url: the service, e.g. ``http://127.0.0.1:8000``.
        token: the requester's JWT, sent as ``Authorization: Bearer`` (surrounding
            whitespace, such as a token file's trailing newline, is no part of it).
        timeout: seconds per request.
        transport: an httpx transport (tests; default: the network).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise PrivacyCIError(
                f"the service URL must start with http:// or https://: {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            # a token read from a file keeps its trailing newline, which no header may hold
            headers={"Authorization": f"Bearer {token.strip()}"},
            timeout=timeout,
            transport=transport,
        )

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", path, body)

    def _call(
        self, method: str, path: str, body: dict[str, Any] | None, *, identity_only: bool = False
    ) -> dict[str, Any]:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise PrivacyCIError(f"cannot reach the service at {self.base_url}: {exc}") from None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code == 200 and isinstance(data, dict):
            return data
        if identity_only and response.status_code not in (401, 403):
            return {}  # past the token and store checks: the endpoint's own answer is moot
        message = data.get("error") if isinstance(data, dict) else None
        message = str(message or response.reason_phrase or "no error message")
        if response.status_code == 401:
            raise AuthError(message)
        if response.status_code == 403:
            raise Forbidden(message)
        if response.status_code == 429:
            try:
                retry_after = float(response.headers.get("retry-after", "1"))
            except ValueError:
                retry_after = 1.0
            raise RateLimitExceeded(f"the service answered 429: {message}", retry_after)
        if response.status_code == 422 and isinstance(data, dict):
            fields = data.get("fields") or []
            raise ValidationFailed(
                [
                    f"{str(f.get('field', '')).removeprefix('body.')}: {f.get('message')}"
                    for f in fields
                ]
                or [message]
            )
        raise ServiceError(response.status_code, message)

    def check(self) -> None:
        """Check the token with the service now, deciding and auditing nothing: the
        service verifies it and resolves its agent, role and context in the store
        before any endpoint runs (here ``GET /v1/methods``, whose answer is ignored).

        Raises:
            AuthError: the service refuses the token (401).
            Forbidden: the store does not hold its agent in that role and context (403).
            PrivacyCIError: the service cannot be reached.
        """
        self._call("GET", "/v1/methods", None, identity_only=True)

    def retrieve(self, query: str, k: int = 5) -> GatedResult:
        return GatedResult.from_body(self._post("/v1/retrieve", {"query": query, "k": k}))

    def decide(self, doc_id: str) -> dict[str, Any]:
        return self._post("/v1/decide", {"doc_id": doc_id})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpGatedSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
