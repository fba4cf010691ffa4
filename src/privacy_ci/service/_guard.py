"""`RequestGuard`: the first thing every request meets, before any body is read.

1. Authentication. For every path under ``/v1/`` except the public ones, the
   bearer token is verified from the headers alone; a request without a valid
   token is answered 401 and its body is never read. The verified claims are
   left in ``scope["state"]["claims"]`` for the endpoints.
2. Body size. A ``Content-Length`` over the limit is answered 413 at once; a body
   sent without one (chunked) is read only up to the limit, then answered 413.
   So neither an anonymous nor an authenticated client can make the service hold
   more than the limit in memory, and nothing is parsed until it fits.

A pure ASGI middleware (not Starlette's ``BaseHTTPMiddleware``), so the body is
read once, here, and handed on unchanged; later ``receive`` calls still report the
client's disconnect, which the model endpoints watch.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from privacy_ci.service._auth import AuthError, TokenCache

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MISSING_TOKEN = (
    "missing bearer token: send 'Authorization: Bearer <JWT>' (mint one with privacy-ci token mint)"
)


async def send_error(
    send: Send, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    """Send the service's JSON error body (``error``, ``status``, ``fields``)."""
    body = json.dumps({"error": message, "status": status, "fields": []}).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    # the body may be unread: tell the client the connection will not be reused
    raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


def bearer_token(scope: Scope) -> str:
    """The token of an ``Authorization: Bearer`` header.

    Raises:
        AuthError: no such header, another scheme, or an empty token.
    """
    raw = _header(scope, b"authorization")
    if raw is None:
        raise AuthError(MISSING_TOKEN)
    scheme, _, token = raw.decode("latin-1").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(MISSING_TOKEN)
    return token.strip()


class RequestGuard:
    """Authenticate, then bound the body, before the application sees the request.

    Args:
        app: the wrapped ASGI application.
        tokens: the token verifier (shared with the endpoints).
        max_body_bytes: the largest body accepted.
        public_paths: paths under ``/v1/`` served without a token.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenCache,
        max_body_bytes: int,
        public_paths: frozenset[str],
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.public_paths = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if path.startswith("/v1/") and path not in self.public_paths:
            try:
                claims = self.tokens.verify(bearer_token(scope))
            except AuthError as exc:
                await send_error(send, 401, str(exc), {"WWW-Authenticate": "Bearer"})
                return
            scope.setdefault("state", {})["claims"] = claims

        limit = self.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await send_error(send, 400, "malformed Content-Length header")
                return
            if size > limit:
                await send_error(send, 413, _too_large(limit))
                return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE") and declared is None:
            await self.app(scope, receive, send)
            return

        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = bytes(message.get("body", b""))
            received += len(chunk)
            if received > limit:
                await send_error(send, 413, _too_large(limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)


def _too_large(limit: int) -> str:
    return f"request body too large: at most {limit:,} bytes are accepted"
