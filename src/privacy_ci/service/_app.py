"""The HTTP service: `create_app(store, settings)` builds the FastAPI application.

Every endpoint but ``/v1/health`` needs ``Authorization: Bearer <JWT>``. The token
is the only source of the requester's identity, role and context; the roles an
agent holds and its assignments come from the store. Request text (a query, a
question) ranks documents and reaches the model, never the gate.

Errors are JSON ``{"error": ..., "status": ..., "fields": [...]}``: 401 for a
missing or failing token, 403 for a valid token that does not allow the call,
404 for an unknown document (naming it), 422 for a malformed body (naming each
field), 400 for other user errors.

The endpoints are coroutines that call the store directly: a store call is short
(a decision about 0.1 ms, a retrieval under 1 ms on SQLite) and the store
serialises its connection anyway, so a thread hop per call (FastAPI runs sync
endpoints, and their response validation, in a threadpool) would only add
latency. The assistant's model call is awaited; the embedded model generates in
a worker thread of its own.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from privacy_ci import __version__
from privacy_ci.assistant import Assistant, DenialMode
from privacy_ci.conductor import Requester
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.llm import GenerationSettings, LLMClient
from privacy_ci.service._auth import (
    AuthError,
    Forbidden,
    TokenCache,
    TokenClaims,
    requester_from_claims,
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
    RetrieveRequest,
    RetrieveResponse,
)
from privacy_ci.store import (
    DocumentStore,
    StoreError,
    UnknownDocument,
    decide_batch_for,
    decide_for,
    retrieve_for,
)


@dataclass
class ServiceSettings:
    """How the service authenticates and answers.

    Args:
        jwt_key: the HS256 signing key (at least 32 bytes).
        denial_mode: what the assistant's model is told about withheld documents.
        llm_client: the assistant's model client (default: `make_client()` on first ask).
        generation: the assistant's generation settings.
        max_doc_chars: each admitted document is cut to this many characters in prompts.
        leeway_s: clock skew tolerated on token times.
    """

    jwt_key: bytes
    denial_mode: DenialMode = DenialMode.WITHHOLD
    llm_client: LLMClient | None = None
    generation: GenerationSettings | None = None
    max_doc_chars: int = 2000
    leeway_s: int = 0


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing, expired, forged or malformed token."},
    403: {"model": ErrorResponse, "description": "The token does not allow this."},
    422: {"model": ErrorResponse, "description": "Malformed request body or parameters."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "Unknown document id."}
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
    """A part of the service is not available (HTTP 503), e.g. the assistant's model."""


def _status_of(exc: PrivacyCIError) -> int:
    if isinstance(exc, AuthError):
        return 401
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, UnknownDocument):
        return 404
    if isinstance(exc, ValidationFailed):
        return 422
    if isinstance(exc, (StoreError, Unavailable)):
        return 503
    return 400


_bearer = HTTPBearer(auto_error=False, description="JWT (HS256): sub, role, context, iat, exp")


async def _claims(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TokenClaims:
    """The verified claims of the request's bearer token (401 otherwise)."""
    if credentials is None:
        raise AuthError(
            "missing bearer token: send 'Authorization: Bearer <JWT>'"
            " (mint one with privacy-ci token mint)"
        )
    tokens: TokenCache = request.app.state.tokens
    return tokens.verify(credentials.credentials)


async def _authority(claims: Annotated[TokenClaims, Depends(_claims)]) -> TokenClaims:
    """The claims, only when they carry the policy-authority claim (403 otherwise)."""
    if not claims.authority:
        raise Forbidden(
            "this endpoint is for the Policy Authority: the token needs the claim 'authority: true'"
        )
    return claims


Claims = Annotated[TokenClaims, Depends(_claims)]
Authority = Annotated[TokenClaims, Depends(_authority)]


def create_app(store: DocumentStore, settings: ServiceSettings) -> FastAPI:
    """Build the service over one store.

    Args:
        store: the document store (SQLite or PostgreSQL).
        settings: key, denial mode and the assistant's model.

    Returns:
        The FastAPI application (serve it with uvicorn).
    """
    tokens = TokenCache(settings.jwt_key, leeway=settings.leeway_s)  # refuses a weak key now
    assistant = Assistant(
        settings.llm_client,
        denial_mode=settings.denial_mode,
        settings=settings.generation,
        max_doc_chars=settings.max_doc_chars,
    )
    app = FastAPI(
        title="privacy-ci Privacy Conductor service",
        version=__version__,
        description=(
            "Gated document retrieval (Privacy Conductor): decide flows, retrieve the"
            " documents a requester may receive, ask an assistant that sees only those,"
            " and manage label approval. Identity comes only from a signed JWT (HS256)."
        ),
    )
    app.state.store = store
    app.state.settings = settings
    app.state.tokens = tokens
    app.state.assistant = assistant

    @app.exception_handler(PrivacyCIError)
    async def _user_error(request: Request, exc: PrivacyCIError) -> JSONResponse:
        status = _status_of(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return _error(status, str(exc), headers=headers)

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

    def requester(claims: TokenClaims) -> Requester:
        return requester_from_claims(store.snapshot(), claims)

    @app.get("/v1/health", response_model=HealthResponse, tags=["service"])
    async def health() -> dict[str, Any]:
        """Liveness and the store's version (no token needed)."""
        counts = store.counts()
        policy = store.policy()
        return {
            "status": "ok",
            "engine": store.engine,
            "store_version": store.version(),
            "policy_version": policy.version if policy else None,
            "documents": counts["documents"],
            "labels": counts["labels"],
        }

    @app.post(
        "/v1/decide",
        response_model=DecideResponse,
        tags=["gate"],
        responses={**_ERRORS, **_NOT_FOUND},
    )
    async def decide(body: DecideRequest, c: Claims) -> dict[str, Any]:
        """Decide one flow (document -> the token's requester); audited."""
        who = requester(c)
        rid = uuid.uuid4().hex
        flow = decide_for(store, who, body.doc_id, request_id=rid)
        return {"request_id": rid, "requester": who.id, **flow.as_dict()}

    @app.post(
        "/v1/decide/batch",
        response_model=DecideBatchResponse,
        tags=["gate"],
        responses={**_ERRORS, **_NOT_FOUND},
    )
    async def decide_batch(body: DecideBatchRequest, c: Claims) -> dict[str, Any]:
        """Decide a batch of candidate documents for the requester; each decision audited."""
        who = requester(c)
        rid = uuid.uuid4().hex
        flows = decide_batch_for(store, who, body.doc_ids, request_id=rid)
        return {
            "request_id": rid,
            "requester": who.id,
            "permitted": [f.doc_id for f in flows if f.permitted],
            "decisions": [f.as_dict() for f in flows],
        }

    @app.post(
        "/v1/retrieve", response_model=RetrieveResponse, tags=["retrieval"], responses=_ERRORS
    )
    async def retrieve(body: RetrieveRequest, c: Claims) -> dict[str, Any]:
        """The gated retrieval path: authorized set, ranking within it, re-decision, fetch."""
        result = retrieve_for(store, requester(c), body.query, body.k)
        return result.as_dict()

    @app.post("/v1/ask", response_model=AskResponse, tags=["assistant"], responses=_ERRORS)
    async def ask(body: AskRequest, c: Claims) -> dict[str, Any]:
        """Ask the assistant: it answers from the documents admitted for the requester only."""
        result = retrieve_for(store, requester(c), body.question, body.k, action="ask")
        try:
            answer = await assistant.answer(body.question, result)
        except PrivacyCIError as exc:  # e.g. the configured model is not installed
            raise Unavailable(f"the assistant's model is unavailable: {exc}") from None
        out = answer.as_dict()
        out["documents"] = [
            {"doc_id": d.doc_id, "title": d.title, "score": d.score} for d in result.admitted
        ]
        return out

    judges: dict[str, Any] = {}

    @app.post("/v1/judge", response_model=JudgeResponse, tags=["checklist"], responses=_ERRORS)
    async def judge(body: JudgeRequest, c: Claims) -> dict[str, Any]:
        """Judge a flow with a Privacy Checklist pipeline (any verified requester).

        The verdict is advice about a regulation; it never grants access to a document.
        """
        from privacy_ci.judging import METHODS, Event, build_method

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
        try:
            method = judges.get(body.method)
            if method is None:
                from privacy_ci.llm import make_client

                client = settings.llm_client or make_client()
                method = judges[body.method] = build_method(body.method, client)
            event = Event(
                text=body.event,
                sender_role=body.sender_role,
                recipient_role=body.recipient_role,
                subject_role=body.subject_role,
                information_type=body.information_type,
                purpose=body.purpose,
                consent_form=body.consent_form,
            )
            judgment = await method.judge(event)
        except PrivacyCIError as exc:  # e.g. the model or the data is not installed
            raise Unavailable(f"the judging pipeline is unavailable: {exc}") from None
        out: dict[str, Any] = judgment.as_dict()
        return out

    @app.get("/v1/labels", response_model=LabelsResponse, tags=["labels"], responses=_ERRORS)
    async def labels(
        c: Authority,
        state: Literal["proposed", "approved", "revoked"] | None = None,
    ) -> dict[str, Any]:
        """List labels, optionally in one lifecycle state (Policy Authority only)."""
        records = store.labels(state)
        return {"count": len(records), "labels": [r.as_dict() for r in records]}

    @app.post(
        "/v1/labels/{doc_id}/approve",
        response_model=LabelOut,
        tags=["labels"],
        responses={**_ERRORS, **_NOT_FOUND},
    )
    async def approve(
        doc_id: str, c: Authority, body: LabelActionRequest | None = None
    ) -> dict[str, Any]:
        """Approve a label: it grants access from the next request on (Policy Authority only)."""
        note = body.note if body else ""
        return store.approve_label(doc_id, c.sub, note).as_dict()

    @app.post(
        "/v1/labels/{doc_id}/revoke",
        response_model=LabelOut,
        tags=["labels"],
        responses={**_ERRORS, **_NOT_FOUND},
    )
    async def revoke(
        doc_id: str, c: Authority, body: LabelActionRequest | None = None
    ) -> dict[str, Any]:
        """Revoke a label: the document is denied from the next request on."""
        note = body.note if body else ""
        return store.revoke_label(doc_id, c.sub, note).as_dict()

    return app
