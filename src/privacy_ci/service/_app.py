"""The HTTP service: `create_app(store, settings)` builds the FastAPI application.

Identity. Every endpoint but ``/v1/health`` needs ``Authorization: Bearer <JWT>``,
verified by `RequestGuard` before any body is read. The token names the agent
(``sub``), the role and the context; at every request the store must hold that
agent, with that role, in that context, or the request is refused (403). Label
administration also needs the agent to hold the ``Policy Authority`` role in the
store (and the token's ``authority`` claim). Request text (a query, a question)
ranks documents and reaches the model, never the gate.

What a requester learns. By default only whether a document is available to it:
a denied id and an unknown id get the same answer (200, ``decision: deny``,
``rule: not_available``), retrievals carry no count of withheld documents, and
the health check says only that the service is up. The rules, label errors and
counts go to the audit log and to the Policy Authority (``/v1/status``,
``/v1/labels``). ``ServiceSettings.explain_denials`` (``serve --explain-denials``)
shows them to requesters: for demonstrations and debugging, never in production.

Bounded work. Per requester, a token bucket on audited decisions (429); per model
endpoint (``/v1/judge``, ``/v1/ask``), a few jobs at a time, a short queue (503
when full) served round robin across requesters, a per-requester share of it and
rate (429), an input size limit, a deadline (504), and cancellation when the
client disconnects (the slot frees once the model has stopped). Decide and
retrieve never wait on the model. Bodies are bounded before parsing (413).

Errors are JSON ``{"error": ..., "status": ..., "fields": [...]}``: 401 for a
missing or failing token, 403 for a valid token that does not allow the call,
404 for an unknown label in the authority's endpoints, 413 for a body or input
too large, 422 for a malformed body (naming each field), 429/503 with
``Retry-After``, 504 for a model past its deadline, 400 for other user errors.
A 5xx names no server path or internal detail (those go to the server log).

The Policy Authority's review page (``/review``, HTML) is `privacy_ci.service._review`:
the same token identity and authority checks, with a cookie for browsers. The API
documentation (``/docs``, ``/redoc``) and ``/favicon.ico`` name no other host
(`privacy_ci.service._docs`).

The gate endpoints are coroutines that call the store directly: a store call is
short and the store serialises its connection anyway (the model work runs in
tasks and worker threads, off the event loop).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from privacy_ci import __version__
from privacy_ci.assistant import Answer, Assistant, DenialMode
from privacy_ci.errors import DataMissingError, PrivacyCIError
from privacy_ci.llm import ContextOverflowError, GenerationSettings, LLMClient
from privacy_ci.service._auth import (
    MAX_TOKEN_LIFETIME_S,
    AuthError,
    Caller,
    TokenCache,
    TokenClaims,
    refuse_revoked,
    requester_from_claims,
    require_authority,
)
from privacy_ci.service._docs import add_docs
from privacy_ci.service._guard import RequestGuard
from privacy_ci.service._limits import (
    Busy,
    ClientGone,
    Rate,
    RateLimited,
    RateLimiter,
    TimedOut,
    WorkPool,
    retry_after_header,
    run_bounded,
)
from privacy_ci.service._models import (
    AskRequest,
    AskResponse,
    DecideBatchRequest,
    DecideBatchResponse,
    DecideRequest,
    DecideResponse,
    ErrorResponse,
    HealthResponse,
    JudgeRequest,
    JudgeResponse,
    LabelActionRequest,
    LabelOut,
    LabelsResponse,
    MethodsResponse,
    RetrieveRequest,
    RetrieveResponse,
    ReviewOut,
    StatusResponse,
    VerdictRequest,
)
from privacy_ci.service._review import review_router
from privacy_ci.service._status import StatusRule, http_status
from privacy_ci.store import (
    DocumentStore,
    FlowDecision,
    ReviewVerdict,
    Snapshot,
    StoreError,
    decide_batch_for,
    decide_for,
    retrieve_for,
)

if TYPE_CHECKING:
    from privacy_ci.judging import Judgment
    from privacy_ci.store import GatedRetrieval

T = TypeVar("T")
log = logging.getLogger("privacy_ci.service")

PUBLIC_PATHS = frozenset({"/v1/health"})
NOT_AVAILABLE = "not_available"
NOT_AVAILABLE_TEXT = "this document is not available to you"


@dataclass
class ServiceSettings:
    """How the service authenticates, what it reveals, and how much work it takes on.

    Args:
        jwt_key: the HS256 signing key (at least 32 bytes).
        denial_mode: what the assistant's model is told about withheld documents
            (``explain`` tells it counts and rules, so it needs `explain_denials`).
        llm_client: the model client of the assistant and the judge (default:
            `make_client()` on first use).
        generation: the assistant's generation settings.
        max_doc_chars: each admitted document is cut to this many characters in prompts.
        max_context_chars: all admitted documents together, in the assistant's prompt.
        leeway_s: clock skew tolerated on token times.
        max_token_lifetime_s: tokens living longer (``exp - iat``) are refused.
        explain_denials: show requesters the deciding rule of a denial, label errors,
            unknown ids as such and withheld counts (off: "not available" only).
        max_body_bytes: the largest request body read (413 above).
        decision_rate: per requester, audited decisions per second (a batch costs
            one per distinct id, a retrieval one per candidate plus one).
        model_rate: per requester, model requests (judge, ask) per second.
        model_slots / model_queue: per model endpoint, jobs at once and jobs waiting.
        model_share: per model endpoint, jobs one requester may hold, running and
            waiting (429 beyond; None: half of slots + queue, at least 1).
        model_timeout_s: a model job's deadline.
        max_event_chars: the longest event ``/v1/judge`` accepts (it must fit the
            model's context with the method's prompt and retrieved text).
        cookie_secure: mark the review page's session cookie ``Secure`` (sent over
            HTTPS only): on whenever the service is reached over TLS.
    """

    jwt_key: bytes
    denial_mode: DenialMode = DenialMode.WITHHOLD
    llm_client: LLMClient | None = None
    generation: GenerationSettings | None = None
    max_doc_chars: int = 2000
    max_context_chars: int = 12_000
    leeway_s: int = 0
    max_token_lifetime_s: int = MAX_TOKEN_LIFETIME_S
    explain_denials: bool = False
    max_body_bytes: int = 512 * 1024
    decision_rate: Rate = field(default_factory=lambda: Rate(per_s=1000.0, burst=2000.0))
    model_rate: Rate = field(default_factory=lambda: Rate(per_s=0.5, burst=5.0))
    model_slots: int = 2
    model_queue: int = 8
    model_share: int | None = None
    model_timeout_s: float = 120.0
    max_event_chars: int = 8000
    cookie_secure: bool = False

    def __post_init__(self) -> None:
        if DenialMode(self.denial_mode) is DenialMode.EXPLAIN and not self.explain_denials:
            raise PrivacyCIError(
                "denial mode 'explain' tells the model how many documents were withheld and"
                " why, which it may repeat to the requester: it needs explain_denials"
                " (serve --explain-denials)"
            )


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing, expired, forged or malformed token."},
    403: {"model": ErrorResponse, "description": "The token does not allow this."},
    413: {"model": ErrorResponse, "description": "Body or input too large."},
    422: {"model": ErrorResponse, "description": "Malformed request body or parameters."},
    429: {"model": ErrorResponse, "description": "Rate limit; see Retry-After."},
}
_MODEL_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    503: {"model": ErrorResponse, "description": "Busy or model unavailable; see Retry-After."},
    504: {"model": ErrorResponse, "description": "The model did not answer in time."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "Unknown document id (authority endpoints)."}
}
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorResponse,
        "description": "The label changed since the version named, is not in a state this"
        " verdict applies to, or the approval widens access without accept_widening.",
    }
}


def _error(
    status: int,
    message: str,
    fields: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": message, "status": status, "fields": fields or []}
    return JSONResponse(body, status_code=status, headers=headers)


class Unavailable(PrivacyCIError):
    """A part of the service is not available (HTTP 503), e.g. the assistant's model.

    The message is shown to the client: it must name no server path.
    """


class TooLarge(PrivacyCIError):
    """An input is larger than the service accepts (HTTP 413)."""


_STATUS: tuple[StatusRule, ...] = (
    (TooLarge, 413),
    (RateLimited, 429),
    (TimedOut, 504),
    ((Unavailable, Busy), 503),
)


def _unavailable(what: str, exc: Exception) -> Unavailable:
    """A path-free 503 for the client; the full reason goes to the server log."""
    log.warning("%s is unavailable: %s", what, exc)
    if isinstance(exc, DataMissingError):
        reason = "the regulation data is not installed on the server"
    elif isinstance(exc, StoreError):
        reason = "the document store cannot be read"
    else:
        reason = "its model is not available on the server"
    return Unavailable(f"{what} is unavailable: {reason} (details in the server log)")


def _judge_facts(raw: Mapping[str, str]) -> dict[str, Any]:
    """A ``/v1/judge`` request's facts as `Event.facts`, checked against the fact model of
    the regulation the methods judge (a 422 naming each unknown fact or value)."""
    from privacy_ci.judging import JudgeConfig
    from privacy_ci.reasoning import FactError, load_fact_schema

    schema = load_fact_schema(JudgeConfig().regulation)
    problems = []
    for key, value in raw.items():
        try:
            schema.check(key, value)
        except FactError as exc:
            problems.append({"loc": ("body", "facts", key), "msg": str(exc), "type": "value_error"})
    if problems:
        raise RequestValidationError(problems)
    return dict(raw)


_bearer = HTTPBearer(auto_error=False, description="JWT (HS256): sub, role, context, iat, exp")


async def _claims(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TokenClaims:
    """The claims `RequestGuard` verified (the `_bearer` dependency documents the scheme).

    Their token may have been signed out since: `_caller`, which every endpoint
    depends on, reads the store's revocation list at every request.
    """
    claims = request.scope.get("state", {}).get("claims")
    if isinstance(claims, TokenClaims):
        return claims
    if credentials is None:  # not reached behind the guard; kept for direct mounts
        raise AuthError("missing bearer token: send 'Authorization: Bearer <JWT>'")
    tokens: TokenCache = request.app.state.tokens
    return tokens.verify(credentials.credentials)


async def _caller(request: Request, claims: Annotated[TokenClaims, Depends(_claims)]) -> Caller:
    """Resolve the token against the store: not revoked (401), agent, role and context
    (403 otherwise). A token signed out by any process sharing the store is refused
    from its next request on."""
    store: DocumentStore = request.app.state.store

    def current() -> Snapshot:
        refuse_revoked(store, claims)  # one primary-key read, never cached
        return store.snapshot()

    try:
        # off the event loop, in one trip: bringing the index up to date reads the store
        snapshot = await asyncio.to_thread(current)
    except StoreError as exc:
        raise _unavailable("the document store", exc) from None
    return Caller(claims, requester_from_claims(snapshot, claims))


async def _authority(caller: Annotated[Caller, Depends(_caller)]) -> Caller:
    """The caller, only when the store makes it the Policy Authority (403 otherwise)."""
    return require_authority(caller)


Who = Annotated[Caller, Depends(_caller)]
Authority = Annotated[Caller, Depends(_authority)]


def _public_flow(flow: FlowDecision, explain: bool) -> dict[str, Any]:
    """A decision as the requester may see it: a denial says only "not available"."""
    if explain or flow.permitted:
        return flow.as_dict()
    out: dict[str, Any] = {
        "doc_id": flow.doc_id,
        "decision": "deny",
        "rule": NOT_AVAILABLE,
        "explanation": NOT_AVAILABLE_TEXT,
        "policy_version": flow.decision.policy_version,
        "label_version": None,
        "label_state": None,
        "errors": [],
    }
    if flow.score is not None:
        out["score"] = flow.score
    return out


async def _until_disconnect(request: Request) -> None:
    """Return when the client goes away (the body was read already, by the guard)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def create_app(store: DocumentStore, settings: ServiceSettings) -> FastAPI:
    """Build the service over one store.

    Args:
        store: the document store (SQLite or PostgreSQL).
        settings: key, disclosure, limits and the models.

    Returns:
        The FastAPI application (serve it with uvicorn).
    """
    tokens = TokenCache(  # refuses a weak key now
        settings.jwt_key, leeway=settings.leeway_s, max_lifetime=settings.max_token_lifetime_s
    )
    assistant = Assistant(
        settings.llm_client,
        denial_mode=settings.denial_mode,
        settings=settings.generation,
        max_doc_chars=settings.max_doc_chars,
        max_context_chars=settings.max_context_chars,
    )
    explain = settings.explain_denials
    decisions_limit = RateLimiter(settings.decision_rate, "audited decisions")
    model_limit = RateLimiter(settings.model_rate, "model requests")
    pools = {
        name: WorkPool(name, settings.model_slots, settings.model_queue, settings.model_share)
        for name in ("/v1/judge", "/v1/ask")
    }
    app = FastAPI(
        title="privacy-ci Privacy Conductor service",
        version=__version__,
        description=(
            "Gated document retrieval (Privacy Conductor): decide flows, retrieve the"
            " documents a requester may receive, ask an assistant that sees only those,"
            " and manage label approval. Identity comes only from a signed JWT (HS256),"
            " checked against the store at every request."
        ),
        # /docs and /redoc from this service's own assets (`add_docs`), not a CDN
        docs_url=None,
        redoc_url=None,
    )
    add_docs(app)
    app.state.store = store
    app.state.settings = settings
    app.state.tokens = tokens
    app.state.assistant = assistant
    app.state.pools = pools
    app.add_middleware(
        RequestGuard,
        tokens=tokens,
        max_body_bytes=settings.max_body_bytes,
        public_paths=PUBLIC_PATHS,
    )
    app.include_router(review_router(store, tokens, cookie_secure=settings.cookie_secure))

    @app.exception_handler(PrivacyCIError)
    async def _user_error(request: Request, exc: PrivacyCIError) -> JSONResponse:
        status = http_status(exc, _STATUS)
        headers: dict[str, str] | None = None
        message = str(exc)
        if status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        elif isinstance(exc, (RateLimited, Busy)):
            headers = retry_after_header(exc.retry_after)
        if isinstance(exc, StoreError):
            message = str(_unavailable("the document store", exc))
        return _error(status, message, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            fields.append(
                {"field": loc, "message": str(err.get("msg", "")), "type": str(err.get("type", ""))}
            )
        summary = "; ".join(f"{f['field']}: {f['message']}" for f in fields[:5])
        return _error(422, f"invalid request: {summary}", fields)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s", request.url.path)
        return _error(500, "internal error (details in the server log)")

    def decisions_cost(who: Caller, cost: int) -> None:
        decisions_limit.take(who.id, cost)

    async def model_job(
        who: Caller, endpoint: str, request: Request, job: Callable[[], Awaitable[T]]
    ) -> T:
        model_limit.take(who.id)
        # run_bounded returns once the model has stopped, so the slot is held until then
        return await pools[endpoint].run(
            lambda: run_bounded(
                job,
                timeout_s=settings.model_timeout_s,
                disconnected=lambda: _until_disconnect(request),
            ),
            who.id,
        )

    @app.get("/v1/health", response_model=HealthResponse, tags=["service"])
    async def health() -> dict[str, Any]:
        """Liveness (no token needed; it reveals nothing about the store)."""
        return {"status": "ok"}

    @app.get("/v1/status", response_model=StatusResponse, tags=["service"], responses=_ERRORS)
    async def status(who: Authority) -> dict[str, Any]:
        """The store's versions and counts (Policy Authority only)."""
        counts = await asyncio.to_thread(store.counts)
        policy = await asyncio.to_thread(store.policy)
        return {
            "status": "ok",
            "engine": store.engine,
            "store_version": await asyncio.to_thread(store.version),
            "policy_version": policy.version if policy else None,
            "documents": counts["documents"],
            "labels": counts["labels"],
            "agents": counts["agents"],
            "audit_records": counts["audit"],
            "explain_denials": explain,
        }

    @app.post("/v1/decide", response_model=DecideResponse, tags=["gate"], responses=_ERRORS)
    async def decide(body: DecideRequest, who: Who) -> dict[str, Any]:
        """Decide one flow (document -> the token's requester); audited.

        A document the requester may not receive and an id the store does not hold
        get the same answer (``rule: not_available``) unless the service explains
        denials.
        """
        decisions_cost(who, 1)
        rid = uuid.uuid4().hex
        flow = await asyncio.to_thread(
            decide_for,
            store,
            who.requester,
            body.doc_id,
            request_id=rid,
            unknown="raise" if explain else "deny",
        )
        return {"request_id": rid, "requester": who.id, **_public_flow(flow, explain)}

    @app.post(
        "/v1/decide/batch", response_model=DecideBatchResponse, tags=["gate"], responses=_ERRORS
    )
    async def decide_batch(body: DecideBatchRequest, who: Who) -> dict[str, Any]:
        """Decide candidate documents for the requester: one decision per distinct id
        (repeats are decided once), recorded as one audit record holding them all."""
        doc_ids = list(dict.fromkeys(body.doc_ids))
        decisions_cost(who, len(doc_ids))
        rid = uuid.uuid4().hex
        flows = await asyncio.to_thread(
            decide_batch_for,
            store,
            who.requester,
            doc_ids,
            request_id=rid,
            unknown="raise" if explain else "deny",
            compact=True,
        )
        return {
            "request_id": rid,
            "requester": who.id,
            "permitted": [f.doc_id for f in flows if f.permitted],
            "decisions": [_public_flow(f, explain) for f in flows],
        }

    @app.post(
        "/v1/retrieve", response_model=RetrieveResponse, tags=["retrieval"], responses=_ERRORS
    )
    async def retrieve(body: RetrieveRequest, who: Who) -> dict[str, Any]:
        """The gated retrieval path: authorized set, ranking within it, re-decision, fetch."""
        decisions_cost(who, body.k + 1)
        # off the event loop: a slow retrieval (a large store, a snapshot rebuilt after a
        # write) must not stall every other request
        result = await asyncio.to_thread(retrieve_for, store, who.requester, body.query, body.k)
        out = result.as_dict()
        # the store version counts writes to documents this requester may not see
        out.pop("store_version", None)
        out["decisions"] = [_public_flow(f, explain) for f in result.decisions]
        if not explain:
            out["withheld"] = None
        return out

    @app.post("/v1/ask", response_model=AskResponse, tags=["assistant"], responses=_MODEL_ERRORS)
    async def ask(body: AskRequest, who: Who, request: Request) -> dict[str, Any]:
        """Ask the assistant: it answers from the documents admitted for the requester only."""
        decisions_cost(who, body.k + 1)

        async def job() -> tuple[GatedRetrieval, Answer]:
            result = await asyncio.to_thread(
                retrieve_for, store, who.requester, body.question, body.k, action="ask"
            )
            return result, await assistant.answer(body.question, result)

        try:
            result, answer = await model_job(who, "/v1/ask", request, job)
        except (RateLimited, Busy, TimedOut, ClientGone):
            raise
        except ContextOverflowError as exc:
            raise TooLarge(f"the question does not fit the model: {exc}") from None
        except PrivacyCIError as exc:  # e.g. the configured model is not installed
            raise _unavailable("the assistant", exc) from None
        out = answer.as_dict()
        out["documents"] = [
            {"doc_id": d.doc_id, "title": d.title, "score": d.score} for d in result.admitted
        ]
        if not explain:
            out["withheld"] = None
        return out

    judges: dict[str, Any] = {}
    judges_lock = asyncio.Lock()

    async def judge_method(name: str) -> Any:
        async with judges_lock:  # one build per method, off the event loop
            method = judges.get(name)
            if method is None:
                from privacy_ci.judging import METHODS, build_method
                from privacy_ci.llm import make_client

                client = None
                if METHODS[name].needs_model:  # a model-free method never loads a model
                    client = settings.llm_client or make_client()
                method = await asyncio.to_thread(build_method, name, client)
                judges[name] = method
            return method

    @app.post(
        "/v1/judge", response_model=JudgeResponse, tags=["checklist"], responses=_MODEL_ERRORS
    )
    async def judge(body: JudgeRequest, who: Who, request: Request) -> dict[str, Any]:
        """Judge a flow with a Privacy Checklist pipeline (any agent of the store).

        The verdict is advice about a regulation; it never grants access to a document.
        """
        from privacy_ci.judging import METHODS, Event

        if body.method not in METHODS:
            raise RequestValidationError(
                [
                    {
                        "loc": ("body", "method"),
                        "msg": f"unknown method; expected one of {', '.join(METHODS)}",
                        "type": "value_error",
                    }
                ]
            )
        if len(body.event) > settings.max_event_chars:
            raise TooLarge(
                f"the event is {len(body.event):,} characters; this service judges at most"
                f" {settings.max_event_chars:,} (the model's context must also hold the"
                " method's prompt and the regulation text it retrieves)"
            )
        facts: dict[str, Any] = {}
        if body.facts:
            facts = _judge_facts(body.facts)
        event = Event(text=body.event, flow=body.flow(), facts=facts)

        async def job() -> Judgment:
            method = await judge_method(body.method)
            judgment: Judgment = await method.judge(event)
            return judgment

        try:
            judgment = await model_job(who, "/v1/judge", request, job)
        except (RateLimited, Busy, TimedOut, ClientGone):
            raise
        except ContextOverflowError as exc:
            raise TooLarge(f"the event does not fit the model: {exc}") from None
        except PrivacyCIError as exc:  # e.g. the model or the data is not installed
            raise _unavailable("the judging pipeline", exc) from None
        out: dict[str, Any] = judgment.as_dict()
        return out

    @app.get("/v1/methods", response_model=MethodsResponse, tags=["checklist"], responses=_ERRORS)
    async def methods(who: Who) -> dict[str, Any]:
        """The judging methods ``/v1/judge`` accepts (the method registry)."""
        from privacy_ci.judging import METHODS

        return {
            "methods": [
                {
                    "name": m.name,
                    "title": m.title,
                    "steps": list(m.steps),
                    "needs_kb": m.needs_kb,
                    "needs_model": m.needs_model,
                }
                for m in METHODS.values()
            ]
        }

    @app.get("/v1/labels", response_model=LabelsResponse, tags=["labels"], responses=_ERRORS)
    async def labels(
        who: Authority,
        state: Literal["proposed", "approved", "revoked"] | None = None,
    ) -> dict[str, Any]:
        """List labels, optionally in one lifecycle state (Policy Authority only)."""
        records = await asyncio.to_thread(store.labels, state)
        return {"count": len(records), "labels": [r.as_dict() for r in records]}

    @app.get(
        "/v1/labels/{doc_id}/review",
        response_model=ReviewOut,
        tags=["labels"],
        responses={**_ERRORS, **_NOT_FOUND, **_CONFLICT},
    )
    async def review(doc_id: str, who: Authority) -> dict[str, Any]:
        """A proposal awaiting review and its consequence: who gains and loses access,
        who would gain if assigned to its subject, which roles gain (Policy Authority
        only). Approve or reject it naming this `version`."""
        pending = await asyncio.to_thread(store.pending_review, doc_id)
        return pending.as_dict()

    @app.post(
        "/v1/labels/{doc_id}/approve",
        response_model=LabelOut,
        tags=["labels"],
        responses={**_ERRORS, **_NOT_FOUND, **_CONFLICT},
    )
    async def approve(doc_id: str, who: Authority, body: VerdictRequest) -> dict[str, Any]:
        """Approve the proposal at `version` (or reinstate a revoked label): from the next
        request on it is in force. An approval that widens access is refused (409)
        unless `accept_widening` is set; every verdict is in the history and the audit
        log (Policy Authority only)."""
        outcome = await asyncio.to_thread(
            store.review_label,
            doc_id,
            ReviewVerdict.APPROVE,
            who.requester,
            version=body.version,
            note=body.note,
            accept_widening=body.accept_widening,
        )
        return outcome.record.as_dict()

    @app.post(
        "/v1/labels/{doc_id}/reject",
        response_model=LabelOut,
        tags=["labels"],
        responses={**_ERRORS, **_NOT_FOUND, **_CONFLICT},
    )
    async def reject(doc_id: str, who: Authority, body: VerdictRequest) -> dict[str, Any]:
        """Reject the proposal at `version`: the label in force stays as it is (a label
        never approved is revoked). Audited (Policy Authority only)."""
        outcome = await asyncio.to_thread(
            store.review_label,
            doc_id,
            ReviewVerdict.REJECT,
            who.requester,
            version=body.version,
            note=body.note,
        )
        return outcome.record.as_dict()

    @app.post(
        "/v1/labels/{doc_id}/revoke",
        response_model=LabelOut,
        tags=["labels"],
        responses={**_ERRORS, **_NOT_FOUND, **_CONFLICT},
    )
    async def revoke(
        doc_id: str, who: Authority, body: LabelActionRequest | None = None
    ) -> dict[str, Any]:
        """Revoke a label: the document is denied from the next request on. Audited."""
        body = body or LabelActionRequest()
        outcome = await asyncio.to_thread(
            store.review_label,
            doc_id,
            ReviewVerdict.REVOKE,
            who.requester,
            version=body.version,
            note=body.note,
        )
        return outcome.record.as_dict()

    return app
