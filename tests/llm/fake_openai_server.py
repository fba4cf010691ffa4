"""A fake OpenAI / Anthropic HTTP server for tests and benchmarks (127.0.0.1 only).

    fake = FakeLLMServer()                     # answers "echo: <last user message>"
    with running_server(fake.app) as url:      # uvicorn in a background thread
        backend = OpenAICompatibleBackend(model="m", base_url=url + "/v1")
        fake.push(Fault.rate_limit("1"), Fault.http(500))   # the next two requests fail
        ...
        fake.requests[-1].body["temperature"]  # every request body is recorded

Endpoints: ``POST /v1/chat/completions`` (OpenAI-shaped answers with ``usage``) and
``POST /v1/messages`` (Anthropic-shaped). A structured request (``response_format``
json_schema, vLLM ``guided_json``, llama.cpp ``json_schema``, a forced tool) is answered
with a JSON instance of the schema built from the prompt (`schema_instance`).

Faults, consumed one per request in arrival order (`push`), or applied to every
request whose prompt contains a marker (`fail_matching`): an HTTP status with a
provider-shaped error body and optional headers (429 with ``Retry-After`` or
``retry-after-ms``, 500, 503, 529, 400, 401), a slow answer, a dropped connection
(the TCP connection is aborted without a response byte), a 200 whose body is not
JSON or is any given JSON, and a 200 whose answer text is given (e.g. malformed
JSON for a schema, with a chosen finish reason).

For benchmarks: ``FakeLLMServer(delay=0.2)`` answers every request after a fixed
delay (requests are served concurrently), and `expected_answer` gives the
deterministic answer for a prompt. ``max_in_flight`` records the peak concurrency.
Standalone: ``python -m tests.llm.fake_openai_server --port 8000 --delay 0.2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

__all__ = [
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "expected_answer",
    "running_server",
    "schema_instance",
]

_TRANSPORT_KEY = "fake_llm.transport"


def expected_answer(prompt: str) -> str:
    """The default deterministic answer to a prompt (the last user message)."""
    return f"echo: {prompt}"


def schema_instance(schema: dict[str, Any], text: str) -> Any:
    """A small JSON value matching common JSON schemas, derived from `text`.

    Handles object/properties, array/items, string, integer, number, boolean,
    null, enum and const; strings become `text`.
    """
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        return {name: schema_instance(sub, text) for name, sub in props.items()}
    if kind == "array":
        return [schema_instance(schema.get("items", {"type": "string"}), text)]
    if kind == "integer":
        return len(text)
    if kind == "number":
        return len(text) / 2
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return text


@dataclass
class Fault:
    """What the server does with one request instead of answering normally.

    Use the constructors: `http`, `rate_limit`, `rate_limit_ms`, `overloaded`,
    `slow`, `drop`, `malformed_body`, `body`, `content`.
    """

    kind: str
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    text: str | None = None
    finish: str | None = None

    @classmethod
    def http(cls, status: int, message: str = "", headers: dict[str, str] | None = None) -> Fault:
        """An error status with a provider-shaped JSON error body."""
        return cls(
            "status",
            status=status,
            message=message or f"fake error {status}",
            headers=dict(headers or {}),
        )

    @classmethod
    def rate_limit(cls, retry_after: str = "1") -> Fault:
        """429 with ``Retry-After: <retry_after>`` (seconds or an HTTP date)."""
        return cls.http(429, "rate limited", {"retry-after": retry_after})

    @classmethod
    def rate_limit_ms(cls, ms: int) -> Fault:
        """429 with only the ``retry-after-ms`` header."""
        return cls.http(429, "rate limited", {"retry-after-ms": str(ms)})

    @classmethod
    def overloaded(cls) -> Fault:
        """Anthropic's 529 ``overloaded_error``."""
        return cls.http(529, "Overloaded")

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        """Answer normally after `seconds` (stops early when the client hangs up)."""
        return cls("slow", seconds=seconds)

    @classmethod
    def drop(cls) -> Fault:
        """Abort the TCP connection without sending a response byte."""
        return cls("drop")

    @classmethod
    def malformed_body(cls) -> Fault:
        """200 with ``content-type: application/json`` and a truncated JSON body."""
        return cls("malformed_body")

    @classmethod
    def body(cls, payload: Any) -> Fault:
        """200 with this JSON payload as the whole body (e.g. one lacking ``choices``)."""
        return cls("body", text=json.dumps(payload))

    @classmethod
    def content(cls, text: str, finish: str | None = None) -> Fault:
        """200 whose answer text is `text` (as plain text even for structured
        requests); `finish` overrides finish_reason / stop_reason verbatim."""
        return cls("content", text=text, finish=finish)


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class FakeLLMServer:
    """State and ASGI app of the fake server.

    Args:
        delay: seconds to wait before every answer (benchmarks).
        answer: computes the answer text from the last user message
            (default `expected_answer`).
    """

    def __init__(
        self, *, delay: float = 0.0, answer: Callable[[str], str] = expected_answer
    ) -> None:
        self.delay = delay
        self.answer = answer
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: deque[Fault] = deque()
        self._rules: list[tuple[str, Fault]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.app = _ExposeTransport(self._build_app())

    # -- scripting -------------------------------------------------------------------
    def push(self, *faults: Fault) -> None:
        """Queue faults for the next requests, one each, in arrival order."""
        with self._lock:
            self._script.extend(faults)

    def fail_matching(self, marker: str, fault: Fault) -> None:
        """Apply `fault` to every request whose prompt contains `marker`."""
        with self._lock:
            self._rules.append((marker, fault))

    def reset(self) -> None:
        """Back to a fresh server: no requests, faults, rules, delay; default answers."""
        with self._lock:
            self.requests.clear()
            self._script.clear()
            self._rules.clear()
            self.max_in_flight = 0
            self.delay = 0.0
            self.answer = expected_answer

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies received so far."""
        with self._lock:
            return [r.body for r in self.requests]

    def _take(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Fault | None:
        prompt = _last_user(body)
        with self._lock:
            self.requests.append(RecordedRequest(path, body, headers))
            for marker, fault in self._rules:
                if marker in prompt:
                    return fault
            return self._script.popleft() if self._script else None

    # -- the app ---------------------------------------------------------------------
    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fake LLM server")

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            return await self._handle(request, anthropic=False)

        @app.post("/v1/messages")
        async def messages(request: Request) -> Response:
            return await self._handle(request, anthropic=True)

        return app

    async def _handle(self, request: Request, *, anthropic: bool) -> Response:
        raw = await request.body()
        try:
            body: dict[str, Any] = json.loads(raw)
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        fault = self._take(request.url.path, body, dict(request.headers))
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._respond(request, body, fault, anthropic=anthropic)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _respond(
        self, request: Request, body: dict[str, Any], fault: Fault | None, *, anthropic: bool
    ) -> Response:
        wait = self.delay + (fault.seconds if fault is not None and fault.kind == "slow" else 0)
        if wait > 0 and not await _sleep_unless_disconnected(request, wait):
            return Response(status_code=499)
        if fault is not None and fault.kind == "drop":
            return await _drop(request)
        if fault is not None and fault.kind == "status":
            return _error(fault, anthropic=anthropic)
        if fault is not None and fault.kind == "malformed_body":
            return Response(
                b'{"id": "broken", "choices": [{"index": 0, "mess', media_type="application/json"
            )
        if fault is not None and fault.kind == "body":
            return Response(fault.text or "", media_type="application/json")
        forced_text = fault.text if fault is not None and fault.kind == "content" else None
        finish = fault.finish if fault is not None else None
        if anthropic:
            return JSONResponse(self._anthropic_answer(body, forced_text, finish))
        return JSONResponse(self._openai_answer(body, forced_text, finish))

    def _openai_answer(
        self, body: dict[str, Any], forced_text: str | None, finish: str | None
    ) -> dict[str, Any]:
        prompt = _last_user(body)
        text = self.answer(prompt)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        schema, tool = _openai_schema(body)
        if forced_text is not None:
            text = forced_text
            message["content"] = text
        elif schema is not None:
            text = json.dumps(schema_instance(schema, prompt))
            if tool is not None:
                message["tool_calls"] = [
                    {
                        "id": f"call_{next(self._ids)}",
                        "type": "function",
                        "function": {"name": tool, "arguments": text},
                    }
                ]
            else:
                message["content"] = text
        else:
            message["content"] = text
        reason = finish or ("tool_calls" if "tool_calls" in message else "stop")
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "system_fingerprint": "fp_fake",
            "choices": [
                {"index": 0, "message": message, "finish_reason": reason, "logprobs": None}
            ],
            "usage": _usage(body, text, anthropic=False),
        }

    def _anthropic_answer(
        self, body: dict[str, Any], forced_text: str | None, finish: str | None
    ) -> dict[str, Any]:
        prompt = _last_user(body)
        tools = body.get("tools") or []
        choice = body.get("tool_choice") or {}
        content: list[dict[str, Any]]
        if forced_text is not None:
            text = forced_text
            content = [{"type": "text", "text": text}]
            reason = "end_turn"
        elif tools and choice.get("type") == "tool":
            tool = next(t for t in tools if t["name"] == choice["name"])
            value = schema_instance(tool["input_schema"], prompt)
            text = json.dumps(value)
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids)}",
                    "name": tool["name"],
                    "input": value,
                }
            ]
            reason = "tool_use"
        else:
            text = self.answer(prompt)
            content = [{"type": "text", "text": text}]
            reason = "end_turn"
        return {
            "id": f"msg_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": finish or reason,
            "stop_sequence": None,
            "usage": _usage(body, text, anthropic=True),
        }


# -- helpers -------------------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _last_user(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _usage(body: dict[str, Any], answer: str, *, anthropic: bool) -> dict[str, int]:
    words = sum(len(_text_of(m.get("content")).split()) for m in body.get("messages") or [])
    words += len(_text_of(body.get("system")).split())
    out = len(answer.split())
    if anthropic:
        return {"input_tokens": words, "output_tokens": out}
    return {"prompt_tokens": words, "completion_tokens": out, "total_tokens": words + out}


def _openai_schema(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(schema, forced tool name) of a structured OpenAI-style request."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"].get("schema", {}), None
    for key in ("guided_json", "json_schema"):
        if isinstance(body.get(key), dict):
            return body[key], None
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice["function"]["name"]
        for tool in body.get("tools") or []:
            if tool.get("function", {}).get("name") == name:
                return tool["function"].get("parameters", {}), name
    return None, None


def _error(fault: Fault, *, anthropic: bool) -> Response:
    if anthropic:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(fault.status, "api_error")
        payload: dict[str, Any] = {
            "type": "error",
            "error": {"type": kind, "message": fault.message},
        }
    else:
        payload = {
            "error": {
                "message": fault.message,
                "type": "fake_error",
                "param": None,
                "code": str(fault.status),
            }
        }
    return JSONResponse(payload, status_code=fault.status, headers=fault.headers)


async def _sleep_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep; False as soon as the client has hung up."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(left, 0.05))
        if await request.is_disconnected():
            return False
    return True


async def _drop(request: Request) -> Response:
    """Abort the connection without a response (uvicorn's transport, see `_ExposeTransport`)."""
    transport = request.scope.get(_TRANSPORT_KEY)
    if transport is None:  # pragma: no cover - only with a server other than uvicorn
        raise RuntimeError("fake server: no transport to drop (run it with running_server)")
    transport.abort()
    for _ in range(100):  # let uvicorn see the disconnect so it sends nothing
        if await request.is_disconnected():
            break
        await asyncio.sleep(0.001)
    return Response(status_code=499)


class _ExposeTransport:
    """Raw ASGI wrapper that puts uvicorn's asyncio transport into the scope.

    uvicorn calls the app with ``send`` bound to its request/response cycle, which
    holds the connection's transport; aborting it closes the socket with no bytes
    sent, which clients see as a dropped connection.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            transport = getattr(getattr(send, "__self__", None), "transport", None)
            if transport is not None:
                scope = {**scope, _TRANSPORT_KEY: transport}
        await self.app(scope, receive, send)


@contextlib.contextmanager
def running_server(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 (a free port) in a daemon thread.

    Yields:
        The base URL, e.g. ``http://127.0.0.1:54321`` (OpenAI clients add ``/v1``).
    """
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only
    # when the listening socket's proto is IPPROTO_TCP; with proto 0 every response
    # (headers, then body) waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        http="h11",
        loop="asyncio",
        lifespan="off",
        ws="none",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"fake-llm-server-{port}"
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("fake LLM server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        server.force_exit = True
        thread.join(timeout=5)
        sock.close()


def main() -> None:
    """Serve the fake in the foreground (``--port``, ``--delay``) until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description="fake OpenAI/Anthropic server on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    fake = FakeLLMServer(delay=args.delay)
    uvicorn.run(fake.app, host="127.0.0.1", port=args.port, http="h11", log_level="warning")


if __name__ == "__main__":
    main()
