"""Transport helpers shared by the SDK-backed backends (no SDK imported here).

Retry classification of HTTP statuses, `Retry-After` parsing, the server's error
text, and one SDK client per running event loop.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar

from privacy_ci.llm._types import LLMError


def is_retryable_status(status: int) -> bool:
    """408, 409, 429 and every 5xx may succeed later; other 4xx will not."""
    return status in (408, 409, 429) or status >= 500


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_text(body: object, fallback: str) -> str:
    """The server's own error message from an OpenAI/Anthropic/FastAPI-shaped body."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            if message:
                return str(message)[:500]
        elif isinstance(error, str) and error:
            return error[:500]
        if "detail" in body:
            return str(body["detail"])[:500]
        return json.dumps(body)[:500]
    if isinstance(body, str) and body:
        return body[:500]
    return fallback


class _Closeable(Protocol):
    async def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closeable)


class LoopClients(Generic[_C]):
    """One SDK client per running event loop, closed when that loop shuts down.

    A loop run by ``asyncio.run`` finalises its pending async generators before it
    closes (``loop.shutdown_asyncgens``); each client is guarded by such a generator
    whose ``finally`` closes it. Entries of loops closed some other way are dropped.
    """

    def __init__(self, factory: Callable[[], _C]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, tuple[_C, AsyncGenerator[None, None]]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._clients)

    async def get(self) -> _C:
        """The running loop's client (created on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.get(loop)
            if entry is not None:
                return entry[0]
            for stale in [other for other in self._clients if other.is_closed()]:
                del self._clients[stale]
            client = self._factory()
            guard = self._guard(loop, client)
            self._clients[loop] = (client, guard)
        await anext(guard)  # first iteration registers it with the loop's finaliser
        return client

    async def _guard(
        self, loop: asyncio.AbstractEventLoop, client: _C
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                entry = self._clients.get(loop)
                if entry is not None and entry[0] is client:
                    del self._clients[loop]
            await client.close()

    async def aclose(self) -> None:
        """Close the running loop's client now."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.get(loop)
        if entry is not None:
            await entry[1].aclose()


def map_sdk_error(exc: Any, sdk: ModuleType, where: str, timeout: float) -> LLMError:
    """An official SDK's error (``openai`` and ``anthropic`` share the hierarchy) as an
    `LLMError`: timeouts, dropped connections, 429 and 5xx retryable (with the
    server's Retry-After), other 4xx not; an unusable body retryable.

    Args:
        exc: the SDK's ``APIError``.
        sdk: the SDK module (``openai`` or ``anthropic``).
        where: ``provider (base URL)`` for the message.
        timeout: the request timeout, for the message.
    """
    if isinstance(exc, sdk.APITimeoutError):
        return LLMError(f"{where}: request timed out after {timeout:g}s", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
        return LLMError(f"{where}: connection failed: {detail}", retryable=True)
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        message = getattr(exc, "api_message", None) or error_text(exc.body, exc.message)
        return LLMError(
            f"{where}: HTTP {status}: {message}",
            retryable=is_retryable_status(status),
            retry_after=retry_after_seconds(exc.response.headers),
            status=status,
        )
    # a response the SDK could not validate, or any other body it could not use
    return LLMError(f"{where}: malformed response: {exc.message}", retryable=True)
