"""The Policy Authority's review page: ``/review``, server-rendered HTML.

A queue of proposals (new labels and changes to approved or revoked ones); for
each, the document's text beside the proposed label and the label in force,
field by field; the consequence of approving it (who gains and who loses access,
decided by the store's gate over the store's agents and assignments,
`privacy_ci.store.access_diff`); and the verdict: approve, edit then approve, or
reject, each recorded in the label history and the audit log by the store
(`DocumentStore.review_label`). Proposals that widen access are never offered for
bulk approval, and the store refuses them in a bulk request anyway.

Identity is the service's: a signed token, resolved against the store at every
request (`requester_from_claims`) and required to act as the Policy Authority
(`require_authority`), exactly as ``/v1/labels``. A browser carries the token in
a cookie set by the sign-in form (HttpOnly, SameSite=Strict, Path=/review, Secure
when `ServiceSettings.cookie_secure`; it expires with the token); an API client
may send ``Authorization: Bearer`` instead. Signing out revokes the token in the
store (`DocumentStore.revoke_token`): a copy of the cookie, or the same token on
``/v1``, is refused by every process sharing the store until the token expires.
Every form that changes something carries a CSRF token (an HMAC of the session's
token under a key derived from the signing key), and a cross-origin ``Origin`` is
refused. Nothing is loaded from elsewhere: no script at all, one stylesheet served
here, and a Content Security Policy that allows nothing else. Templates autoescape
every value (document text, label fields, notes).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from privacy_ci.conductor import Label, Policy, SubjectType
from privacy_ci.conductor._labels import format_validation_error
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.service._auth import (
    AuthError,
    Caller,
    Forbidden,
    TokenCache,
    refuse_revoked,
    requester_from_claims,
    require_authority,
)
from privacy_ci.service._guard import bearer_token
from privacy_ci.service._status import StatusRule, http_status
from privacy_ci.store import (
    DocumentStore,
    LabelConflict,
    LabelRecord,
    LabelState,
    PendingReview,
    ReviewVerdict,
    StoreError,
)

log = logging.getLogger("privacy_ci.service")

PREFIX = "/review"
COOKIE = "privacy_ci_review"
MAX_DOC_CHARS = 200_000
"""The document text shown is cut here (the page says so)."""
MAX_FORM_FIELDS = 1000

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
        " frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes Chromium send "Origin: null"
    "Cache-Control": "no-store",
}

# The label's fields in the order the page lists them, with their role in the gate
# (Table IV of the Conductor paper).
FIELDS: tuple[tuple[str, str], ...] = (
    ("title", "records"),
    ("sensitivity_tier", "decides"),
    ("permitted_receiver_roles", "decides"),
    ("subject", "decides"),
    ("assignment_required", "records"),
    ("subject_type", "records"),
    ("document_type", "explains"),
    ("extra_sensitive", "explains"),
    ("extra_sensitive_reason", "records"),
    ("governing_principle", "explains"),
    ("originating_context", "records"),
    ("pii_attributes", "records"),
    ("implied_attributes", "records"),
)
LIST_FIELDS = ("permitted_receiver_roles", "pii_attributes", "implied_attributes")
BOOL_FIELDS = ("extra_sensitive", "assignment_required")
TEXT_FIELDS = (
    "title",
    "subject",
    "document_type",
    "extra_sensitive_reason",
    "governing_principle",
    "originating_context",
)
EDIT_FORM = frozenset(
    {"csrf", "doc_id", "version", "title", "sensitivity_tier", "acl", "subject", "subject_type"}
    | {"document_type", "extra_sensitive", "extra_sensitive_reason", "governing_principle"}
    | {"originating_context", "pii_attributes", "implied_attributes", "assignment_required"}
)


class NotSignedIn(PrivacyCIError):
    """No token at all: a page is answered with the sign-in form."""


class UnsupportedForm(PrivacyCIError):
    """A POST whose body is not an URL-encoded form (HTTP 415)."""


_STATUS: tuple[StatusRule, ...] = ((NotSignedIn, 401), (UnsupportedForm, 415))


# -- forms ----------------------------------------------------------------------------
Form = dict[str, list[str]]


async def read_form(request: Request) -> Form:
    """The URL-encoded form of a POST (the guard has bounded the body already).

    Raises:
        UnsupportedForm: another content type.
        ValidationFailed: not UTF-8, or too many fields.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise UnsupportedForm(
            "this page takes HTML forms (application/x-www-form-urlencoded),"
            f" not {kind or 'a body without a content type'}"
        )
    body = await request.body()
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(
            text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS, errors="strict"
        )
    except UnicodeDecodeError:
        raise ValidationFailed(["the form is not UTF-8"]) from None
    except ValueError:
        raise ValidationFailed([f"the form has more than {MAX_FORM_FIELDS} fields"]) from None
    form: Form = {}
    for name, value in pairs:
        form.setdefault(name, []).append(value)
    return form


def one(form: Form, name: str, default: str | None = None) -> str:
    """The single value of field `name` (`default` when absent, if given).

    Raises:
        ValidationFailed: absent without a default, or given more than once.
    """
    values = form.get(name)
    if not values:
        if default is None:
            raise ValidationFailed([f"form field {name!r} is missing"])
        return default
    if len(values) > 1:
        raise ValidationFailed([f"form field {name!r} is given {len(values)} times"])
    return values[0]


def version_field(form: Form) -> int:
    raw = one(form, "version").strip()
    # no label has a version of more than 18 digits: refuse before int() reads a huge one
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18 or int(raw) < 1:
        raise ValidationFailed([f"form field 'version' must be a label version, got {raw!r}"])
    return int(raw)


def checkbox(form: Form, name: str) -> bool:
    value = one(form, name, "")
    if value not in ("", "on", "true", "1"):
        raise ValidationFailed([f"form field {name!r} is a checkbox, got {value!r}"])
    return value != ""


def split_list(text: str) -> list[str]:
    """A comma- or newline-separated list, items stripped, empty items dropped."""
    return [item.strip() for item in text.replace("\n", ",").split(",") if item.strip()]


def check_label(raw: Mapping[str, Any], policy: Policy, what: str) -> Label:
    """Validate an edited label against the label schema and the store's policy.

    Raises:
        ValidationFailed: one message per problem.
    """
    try:
        label = Label.model_validate(raw)
    except ValidationError as exc:
        raise ValidationFailed(format_validation_error("review", what, exc)) from None
    problems = []
    unknown = sorted(r for r in label.permitted_receiver_roles if r not in policy.roles)
    if unknown:
        problems.append(f"{what}: roles not in the policy: {', '.join(unknown)}")
    if label.sensitivity_tier not in policy.tiers:
        problems.append(f"{what}: tier {label.sensitivity_tier.value!r} is not in the policy")
    if problems:
        raise ValidationFailed(problems)
    return label


def label_from_form(form: Form, doc_id: str, policy: Policy) -> Label:
    """The label the edit form describes (field by field), checked.

    Raises:
        ValidationFailed: an unknown or repeated field, or a label that does not validate.
    """
    unknown = sorted(set(form) - EDIT_FORM)
    if unknown:
        raise ValidationFailed([f"unknown form fields: {', '.join(unknown)}"])
    raw: dict[str, Any] = {"doc_id": doc_id}
    for name in TEXT_FIELDS:
        raw[name] = one(form, name, "").strip()
    for name in ("subject", "extra_sensitive_reason"):
        raw[name] = raw[name] or None
    raw["sensitivity_tier"] = one(form, "sensitivity_tier")
    raw["subject_type"] = one(form, "subject_type")
    raw["permitted_receiver_roles"] = form.get("acl", [])
    for name in BOOL_FIELDS:
        raw[name] = checkbox(form, name)
    for name in ("pii_attributes", "implied_attributes"):
        raw[name] = split_list(one(form, name, ""))
    return check_label(raw, policy, "edited label")


# -- what the pages show --------------------------------------------------------------
@dataclass(frozen=True)
class FieldRow:
    """One label field, in force and proposed, and what changed."""

    name: str
    role: str
    current: str
    proposed: str
    changed: bool
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def _show(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(sorted(str(v) for v in value)) or "(none)"
    return str(value)


def field_rows(current: Mapping[str, Any] | None, proposed: Mapping[str, Any]) -> list[FieldRow]:
    """The field-by-field comparison (`current` None: a new label)."""
    rows = []
    for name, role in FIELDS:
        new = proposed.get(name)
        old = None if current is None else current.get(name)
        added: tuple[str, ...] = ()
        removed: tuple[str, ...] = ()
        if name in LIST_FIELDS and isinstance(new, list) and current is not None:
            old_set = set(old) if isinstance(old, list) else set()
            added = tuple(sorted(str(v) for v in set(new) - old_set))
            removed = tuple(sorted(str(v) for v in old_set - set(new)))
            changed = bool(added or removed)
        else:
            changed = current is None or old != new
        rows.append(
            FieldRow(
                name,
                role,
                "" if current is None else _show(old),
                _show(new),
                changed,
                added,
                removed,
            )
        )
    return rows


def form_values(body: Mapping[str, Any]) -> dict[str, Any]:
    """The edit form's initial values from a label body (which may not validate)."""
    out: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = body.get(name)
        out[name] = "" if value is None else str(value)
    for name in ("sensitivity_tier", "subject_type"):
        out[name] = str(body.get(name) or "")
    acl = body.get("permitted_receiver_roles")
    out["acl"] = {str(r) for r in acl} if isinstance(acl, list) else set()
    for name in BOOL_FIELDS:
        out[name] = body.get(name) is True
    for name in ("pii_attributes", "implied_attributes"):
        value = body.get(name)
        out[name] = ", ".join(str(v) for v in value) if isinstance(value, list) else ""
    return out


def _values_from_form(form: Form) -> dict[str, Any]:
    """The edit form's values as submitted (to show them again beside the errors)."""
    first = {name: (values[0] if values else "") for name, values in form.items()}
    out: dict[str, Any] = {name: first.get(name, "") for name in TEXT_FIELDS}
    out["sensitivity_tier"] = first.get("sensitivity_tier", "")
    out["subject_type"] = first.get("subject_type", "")
    out["acl"] = set(form.get("acl", []))
    for name in BOOL_FIELDS:
        out[name] = bool(first.get(name))
    for name in ("pii_attributes", "implied_attributes"):
        out[name] = first.get(name, "")
    return out


# -- identity ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    """The Policy Authority behind a request, and how its token came."""

    caller: Caller
    token: str
    via_cookie: bool
    csrf: str

    @property
    def agent(self) -> str:
        return self.caller.id


class ReviewPages:
    """The routes, templates and identity checks of ``/review``, over one store."""

    def __init__(
        self, store: DocumentStore, tokens: TokenCache, *, cookie_secure: bool = False
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.cookie_secure = cookie_secure
        self._csrf_key = hmac.new(tokens.key, b"privacy-ci review csrf v1", hashlib.sha256).digest()
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("privacy_ci.service", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.globals["prefix"] = PREFIX
        self._css = (
            resources.files("privacy_ci.service").joinpath("static", "review.css").read_bytes()
        )

    # identity -------------------------------------------------------------------------
    def csrf_token(self, token: str) -> str:
        """The session's CSRF token: an HMAC of its token (a forger knows neither)."""
        return hmac.new(self._csrf_key, token.encode("utf-8"), hashlib.sha256).hexdigest()

    def authority(self, token: str) -> Caller:
        """Verify a token and resolve it against the store as the Policy Authority.

        The service's own checks: `TokenCache.verify` and the store's revocation list
        (`refuse_revoked`: a signed-out token) (401), `requester_from_claims` (the
        store must hold the agent, role and context: 403) and `require_authority`
        (the role ``Policy Authority`` and the claim: 403).
        """
        claims = refuse_revoked(self.store, self.tokens.verify(token))
        snapshot = self.store.snapshot()
        return require_authority(Caller(claims, requester_from_claims(snapshot, claims)))

    def session(self, request: Request) -> Session:
        """The signed-in authority: a bearer header, else the session cookie.

        Raises:
            NotSignedIn: neither. AuthError, Forbidden: as `authority`.
        """
        if any(k == b"authorization" for k, _ in request.scope.get("headers", ())):
            token, via_cookie = bearer_token(request.scope), False
        else:
            token, via_cookie = request.cookies.get(COOKIE, ""), True
            if not token:
                raise NotSignedIn("sign in with a Policy Authority token")
        caller = self.authority(token)
        return Session(caller, token, via_cookie, self.csrf_token(token) if via_cookie else "")

    def check_post(self, request: Request, session: Session | None, form: Form) -> None:
        """Refuse a cross-origin POST, and a cookie session's POST without its CSRF token.

        Raises:
            Forbidden: either.
        """
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
            raise Forbidden(f"a form posted from another origin ({origin}) is refused")
        if session is None or not session.via_cookie:
            return  # a bearer header is never sent by a browser on its own
        sent = form.get("csrf", [])
        if len(sent) != 1 or not sent[0]:
            raise Forbidden("the form lacks its CSRF token: reload the page and try again")
        if not hmac.compare_digest(sent[0].encode("utf-8"), session.csrf.encode("utf-8")):
            raise Forbidden("the form's CSRF token does not match this session: reload the page")

    # rendering ------------------------------------------------------------------------
    def html(self, template: str, code: int = 200, **context: Any) -> HTMLResponse:
        text = self.templates.get_template(template).render(**context)
        return HTMLResponse(text, status_code=code, headers=SECURITY_HEADERS)

    def redirect(self, url: str) -> RedirectResponse:
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)

    def error_page(
        self, request: Request, exc: PrivacyCIError, session: Session | None
    ) -> Response:
        status = http_status(exc, _STATUS)
        if isinstance(exc, NotSignedIn) and request.method in ("GET", "HEAD"):
            return self.redirect(f"{PREFIX}/login")
        if isinstance(exc, (AuthError, NotSignedIn)):
            response = self.html("login.html", status, session=None, error=str(exc))
            response.headers["WWW-Authenticate"] = "Bearer"
            if request.cookies.get(COOKIE):
                response.delete_cookie(COOKIE, path=PREFIX)
            return response
        problems = exc.problems if isinstance(exc, ValidationFailed) else [str(exc)]
        if isinstance(exc, StoreError):  # its message may name a server path: keep it in the log
            log.warning("the document store is unavailable: %s", exc)
            problems = ["the document store cannot be read (details in the server log)"]
        return self.html("error.html", status, session=session, status=status, problems=problems)

    def set_session_cookie(self, response: Response, token: str, expires_at: int) -> None:
        response.set_cookie(
            COOKIE,
            token,
            max_age=max(1, expires_at - int(time.time())),
            path=PREFIX,
            secure=self.cookie_secure,
            httponly=True,
            samesite="strict",
        )

    # page data ------------------------------------------------------------------------
    def label_page(
        self,
        session: Session,
        doc_id: str,
        *,
        edited: Label | None = None,
        edit_values: dict[str, Any] | None = None,
        errors: Sequence[str] = (),
        status: int = 200,
    ) -> HTMLResponse:
        record = self.store.label(doc_id)  # UnknownDocument: 404
        policy = self.store.snapshot().policy
        review: PendingReview | None = None
        if record.state is LabelState.PROPOSED:
            review = self.store.pending_review(doc_id, edited)
        prior = review.prior if review is not None else None
        proposed_body = edited.model_dump(mode="json") if edited is not None else record.body
        current_body = record.in_force_body
        # the authority receives a document's text only while its label is under
        # review, and every such view is an audit record
        text = (
            None
            if review is None
            else self.store.view_under_review(doc_id, session.caller.requester)
        )
        history = self.store.history(doc_id, "label")
        return self.html(
            "label.html",
            status,
            session=session,
            record=record,
            review=review,
            prior=prior,
            rows=field_rows(current_body, proposed_body)
            if review is not None
            else field_rows(None, record.body),
            edited=edited,
            edited_json=json.dumps(proposed_body, sort_keys=True) if edited else "",
            text=None if text is None else text[:MAX_DOC_CHARS],
            cut=text is not None and len(text) > MAX_DOC_CHARS,
            history=history[-12:],
            values=edit_values if edit_values is not None else form_values(record.body),
            errors=list(errors),
            roles=policy.roles,
            tiers=[t.value for t in policy.tiers],
            subject_types=[t.value for t in SubjectType],
            contexts=policy.contexts,
        )


def _in_force_text(record: LabelRecord) -> str:
    if record.in_force_version is None:
        return "none: no one has access"
    return f"approved, version {record.in_force_version}"


def review_router(store: DocumentStore, tokens: TokenCache, *, cookie_secure: bool) -> APIRouter:
    """The ``/review`` pages over `store` (mounted by `create_app`)."""
    pages = ReviewPages(store, tokens, cookie_secure=cookie_secure)
    pages.templates.globals["in_force_text"] = _in_force_text
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    Handler = Callable[[Request, Session], Awaitable[Response]]

    def signed_in(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Run `handler` for the signed-in authority; errors become pages."""

        async def page(request: Request) -> Response:
            session: Session | None = None
            try:
                # every store read and write of these pages runs off the event loop
                session = await asyncio.to_thread(pages.session, request)
                return await handler(request, session)
            except PrivacyCIError as exc:
                return pages.error_page(request, exc, session)

        # not functools.wraps: FastAPI would read the handler's signature through it
        page.__name__ = handler.__name__
        page.__doc__ = handler.__doc__
        return page

    async def posted(request: Request, session: Session) -> Form:
        form = await read_form(request)
        pages.check_post(request, session, form)
        return form

    @router.get("/static/review.css")
    async def stylesheet() -> Response:
        headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=3600"}
        return Response(pages._css, media_type="text/css", headers=headers)

    @router.get("/login")
    async def login_form(request: Request) -> Response:
        return pages.html("login.html", session=None, error="")

    @router.post("/login")
    async def login(request: Request) -> Response:
        try:
            form = await read_form(request)
            pages.check_post(request, None, form)
            token = one(form, "token").strip()
            if not token:
                raise AuthError("paste a token to sign in")
            caller = await asyncio.to_thread(pages.authority, token)
        except PrivacyCIError as exc:
            return pages.error_page(request, exc, None)
        response = pages.redirect(PREFIX)
        pages.set_session_cookie(response, token, caller.claims.expires_at)
        return response

    @router.post("/logout")
    @signed_in
    async def logout(request: Request, session: Session) -> Response:
        """Sign out: the token is revoked in the store (refused everywhere, /v1 too, by
        every process sharing the store, until it expires), then the cookie dropped."""
        await posted(request, session)
        claims = session.caller.claims
        await asyncio.to_thread(
            store.revoke_token, claims.token_id, claims.expires_at, session.agent
        )
        response = pages.redirect(f"{PREFIX}/login")
        response.delete_cookie(COOKIE, path=PREFIX)
        return response

    @router.get("")
    @signed_in
    async def queue(request: Request, session: Session) -> Response:
        reviews = await asyncio.to_thread(store.pending_reviews)
        return pages.html("queue.html", session=session, reviews=reviews)

    @router.get("/label")
    @signed_in
    async def label(request: Request, session: Session) -> Response:
        doc_id = request.query_params.get("doc_id", "")
        if not doc_id:
            raise ValidationFailed(["name a label: /review/label?doc_id=DOC"])
        return await asyncio.to_thread(pages.label_page, session, doc_id)

    async def verdict(request: Request, session: Session, verdict: ReviewVerdict) -> Response:
        form = await posted(request, session)
        doc_id = one(form, "doc_id")
        version = version_field(form)
        note = one(form, "note", "").strip()
        await asyncio.to_thread(
            store.review_label,
            doc_id,
            verdict,
            session.caller.requester,
            version=version,
            note=note,
        )
        return pages.redirect(f"{PREFIX}/label?{_query(doc_id)}")

    @router.post("/approve")
    @signed_in
    async def approve(request: Request, session: Session) -> Response:
        return await verdict(request, session, ReviewVerdict.APPROVE)

    @router.post("/reject")
    @signed_in
    async def reject(request: Request, session: Session) -> Response:
        return await verdict(request, session, ReviewVerdict.REJECT)

    @router.post("/edit")
    @signed_in
    async def edit(request: Request, session: Session) -> Response:
        """Show the consequence of the authority's edit; nothing is written yet."""
        form = await posted(request, session)
        doc_id = one(form, "doc_id")
        version = version_field(form)
        record = await asyncio.to_thread(store.label, doc_id)
        if record.state is not LabelState.PROPOSED or record.version != version:
            raise LabelConflict(
                f"label {doc_id!r} changed since version {version} (it is now"
                f" {record.state.value}, version {record.version}); review it again"
            )
        try:
            policy = (await asyncio.to_thread(store.snapshot)).policy
            edited = label_from_form(form, doc_id, policy)
        except ValidationFailed as exc:
            return await asyncio.to_thread(
                pages.label_page,
                session,
                doc_id,
                edit_values=_values_from_form(form),
                errors=exc.problems,
                status=422,
            )
        return await asyncio.to_thread(pages.label_page, session, doc_id, edited=edited)

    @router.post("/approve-edited")
    @signed_in
    async def approve_edited(request: Request, session: Session) -> Response:
        form = await posted(request, session)
        doc_id = one(form, "doc_id")
        version = version_field(form)
        note = one(form, "note", "").strip()
        from privacy_ci._structured import DuplicateKeyError, InputLimitError, load_json

        try:
            # bounded: deep nesting or a 5,000-digit integer is the form's error, not a 500
            raw = load_json(one(form, "label"))
        except InputLimitError as exc:
            raise ValidationFailed([f"form field 'label': {exc.problem}"]) from None
        except (json.JSONDecodeError, DuplicateKeyError):
            raise ValidationFailed(["form field 'label' is not a JSON label"]) from None
        if not isinstance(raw, dict) or raw.get("doc_id") != doc_id:
            raise ValidationFailed([f"form field 'label' is not a label of {doc_id!r}"])
        policy = (await asyncio.to_thread(store.snapshot)).policy
        edited = check_label(raw, policy, "edited label")
        await asyncio.to_thread(
            store.review_label,
            doc_id,
            ReviewVerdict.APPROVE,
            session.caller.requester,
            version=version,
            edited=edited,
            note=note,
        )
        return pages.redirect(f"{PREFIX}/label?{_query(doc_id)}")

    @router.post("/bulk-approve")
    @signed_in
    async def bulk_approve(request: Request, session: Session) -> Response:
        form = await posted(request, session)
        items = []
        for raw in form.get("item", []):
            doc_id, sep, version = raw.rpartition("@")
            if not sep or not doc_id or not version.isascii() or not version.isdigit():
                raise ValidationFailed([f"form field 'item' must be DOC@VERSION, got {raw!r}"])
            items.append((doc_id, int(version)))
        if not items:
            raise ValidationFailed(["select at least one label to approve"])
        note = one(form, "note", "").strip()
        await asyncio.to_thread(store.approve_labels, items, session.caller.requester, note=note)
        return pages.redirect(PREFIX)

    return router


def _query(doc_id: str) -> str:
    return urlencode({"doc_id": doc_id})
