"""An MCP server exposing the gate to an agent: ``retrieve`` and ``decide`` (extra: ``mcp``).

    from privacy_ci.adapters import LocalGatedSource
    from privacy_ci.adapters.mcp import build_server, serve_stdio

    serve_stdio(LocalGatedSource(store, key, token))     # or: privacy-ci mcp serve ...

The requester is fixed when the server is made, by its configuration (the token
of its `GatedSource`), never by a tool argument: the two tools take exactly the
fields of the service's ``/v1/retrieve`` and ``/v1/decide`` bodies, checked by the
same models, so an argument such as ``requester`` or ``role`` is refused. A tool
that fails (an agent the store no longer holds in its role, a malformed argument,
the requester's rate) returns an error result naming the reason, as the service's
4xx would; anything else (a bug, a database error) a short fixed message, with the
detail in the server's log (stderr) only. A denied document and an unknown one
read the same ("not available").

A token that stops working while serving (it expired, it was revoked by signing
out, the service refuses it) stops `serve_stdio`: the refused call gets its error
result, the client a log notification, then `TokenRefused` is raised.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from privacy_ci import __version__
from privacy_ci.adapters._extras import missing_extra
from privacy_ci.adapters._source import GatedSource, _validated
from privacy_ci.errors import PrivacyCIError
from privacy_ci.service import AuthError
from privacy_ci.service._models import DecideRequest, RetrieveRequest
from privacy_ci.store import StoreError

try:
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise missing_extra("MCP", "mcp", exc) from exc

__all__ = ["SERVER_NAME", "TOOLS", "TokenRefused", "build_server", "serve_stdio"]

log = logging.getLogger("privacy_ci.adapters.mcp")

SERVER_NAME = "privacy-ci-gate"
INSTRUCTIONS = (
    "Documents of an organisation behind a Contextual Integrity gate. You act for one"
    " requester, fixed by this server's configuration: you cannot choose or change who"
    " you are. `retrieve` returns only the documents the gate admits for that requester;"
    " `decide` says whether one document may reach them. A document that is not"
    " available is not available: do not try to learn why, or whether it exists."
)


@dataclass(frozen=True)
class _ToolSpec:
    name: str
    title: str
    description: str
    model: type[RetrieveRequest] | type[DecideRequest]


TOOLS = (
    _ToolSpec(
        "retrieve",
        "Retrieve admitted documents",
        "The best documents for a query among those the gate admits for this server's"
        " requester, each with its id, title, text, score and the gate's decision"
        " (rule, policy version, label version). The query ranks documents only; it never"
        " decides access.",
        RetrieveRequest,
    ),
    _ToolSpec(
        "decide",
        "Decide one document",
        "Whether one document may reach this server's requester: permit with the rule and"
        " versions, or deny as 'not available' (the same for a document that does not exist).",
        DecideRequest,
    ),
)


def _tool(spec: _ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.model.model_json_schema(),
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )


def _result(payload: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=payload
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


INTERNAL_ERROR = "internal error (details in the server log)"
STORE_ERROR = "the document store cannot be read (details in the server log)"


class TokenRefused(PrivacyCIError):
    """The requester's token stopped working while serving (expired, revoked by
    signing out, or refused by the service): the server stops."""


OnRefused = Callable[[AuthError, "types.RequestId | None"], None]


def build_server(
    source: GatedSource, *, name: str = SERVER_NAME, on_refused: OnRefused | None = None
) -> Server[Any]:
    """The MCP server for one requester: the tools ``retrieve`` and ``decide``.

    A tool's error result names the reason as the service's 4xx would; anything
    else (a bug, a driver error) is a short fixed message, its detail in this
    process's log (stderr), never Python's error text.

    Args:
        source: the gated retrieval path of the requester (its token fixes who asks).
        name: the server's name in the MCP handshake.
        on_refused: called when a call finds the token refused (401), with the
            error and the request's id, after which the server should stop
            (`serve_stdio` does); the call itself still gets its error result.
    """
    specs = {spec.name: spec for spec in TOOLS}

    def call(spec: _ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        body = _validated(spec.model, arguments)  # extra fields (requester, role) refused
        if isinstance(body, RetrieveRequest):
            return source.retrieve(body.query, body.k).as_dict()
        return source.decide(body.doc_id)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(spec) for spec in TOOLS])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = specs.get(params.name)
        if spec is None:
            return _error(
                f"unknown tool {_shown(params.name)}; this server has: {', '.join(specs)}"
            )
        arguments = dict(params.arguments or {})
        try:
            # the store and the HTTP client are synchronous: in a worker thread
            payload = await anyio.to_thread.run_sync(call, spec, arguments)
        except AuthError as exc:
            if on_refused is not None:  # it says why the server stops
                on_refused(exc, ctx.request_id)
                return _error(f"{spec.name} refused: {exc}; this server stops")
            log.warning("%s: the requester's token is refused: %s", spec.name, exc)
            return _error(f"{spec.name} refused: {exc}")
        except StoreError as exc:  # its message may name a server path
            log.warning("%s: the document store is unavailable: %s", spec.name, exc)
            return _error(f"{spec.name} refused: {STORE_ERROR}")
        except PrivacyCIError as exc:
            return _error(f"{spec.name} refused: {exc}")
        except Exception:
            log.exception("%s failed", spec.name)
            return _error(f"{spec.name} failed: {INTERNAL_ERROR}")
        return _result(payload)

    return Server(
        name,
        version=__version__,
        title="privacy-ci: documents behind the Privacy Conductor's gate",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _shown(value: str) -> str:
    """A client-supplied name in a message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class _Stop:
    """Why and after which request `serve_stdio` stops."""

    error: AuthError | None = None
    request_id: types.RequestId | None = None

    def __call__(self, error: AuthError, request_id: types.RequestId | None) -> None:
        if self.error is None:
            self.error, self.request_id = error, request_id


class _StdinLines:
    """This process's stdin, line by line, read by a daemon thread; `end` ends it
    early, as if the client had closed stdin.

    The SDK reads stdin in a worker thread that cannot be cancelled, so a server
    whose client keeps stdin open could never stop on its own. A daemon thread
    blocked in ``os.read`` holds no Python lock (sys.stdin's buffer would), so it
    neither holds up the stop nor the process's exit.
    """

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](16)
        token = anyio.lowlevel.current_token()
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = 0

        def put(line: bytes) -> None:
            anyio.from_thread.run(self._send.send, line.decode("utf-8", "replace"), token=token)

        def pump() -> None:
            try:
                pending = b""
                while chunk := os.read(fd, 65536):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        put(line + b"\n")
                if pending:
                    put(pending)
                anyio.from_thread.run_sync(self._send.close, token=token)
            except (OSError, RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # stdin is gone, or the server stopped and nobody reads any more

        threading.Thread(target=pump, name="mcp-stdin", daemon=True).start()

    def end(self) -> None:
        self._send.close()

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._receive:
            async for line in self._receive:
                yield line


def serve_stdio(source: GatedSource, *, name: str = SERVER_NAME) -> None:
    """Serve the MCP server over this process's stdin and stdout until the client
    leaves, or until a call finds the requester's token refused.

    Raises:
        TokenRefused: the token stopped working while serving (expired, revoked, or
            refused by the service); the refused call got its error result first,
            and the client a log notification saying why the server stops.
    """
    stop = _Stop()
    server = build_server(source, name=name, on_refused=stop)

    async def run() -> None:
        stdin = _StdinLines()
        relay_send, relay_receive = anyio.create_memory_object_stream[SessionMessage](0)

        async def relay(write: Any) -> None:  # the transport's send stream
            """Forward the server's messages; after the refused call's answer, tell the
            client why, and end stdin: the server winds down as when a client leaves,
            writing out everything it was sent."""
            async with relay_receive:
                async for message in relay_receive:
                    await write.send(message)
                    if stop.error is not None and _answers(message, stop.request_id):
                        await write.send(_notice(f"the requester's token is refused: {stop.error}"))
                        stdin.end()
            await write.aclose()

        async with (
            stdio_server(stdin=cast("anyio.AsyncFile[str]", stdin)) as (read, write),
            anyio.create_task_group() as io,
        ):
            io.start_soon(relay, write)
            await server.run(read, relay_send, server.create_initialization_options())

    anyio.run(run)
    if stop.error is not None:
        raise TokenRefused(
            f"the requester's token was refused while serving ({stop.error}); the MCP"
            " server stopped: start it again with a valid token"
        )


def _answers(message: SessionMessage, request_id: types.RequestId | None) -> bool:
    inner = message.message
    return isinstance(inner, (types.JSONRPCResponse, types.JSONRPCError)) and inner.id == request_id


def _notice(text: str) -> SessionMessage:
    """A log message to the client (``notifications/message``, level error)."""
    return SessionMessage(
        types.JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/message",
            params={"level": "error", "logger": SERVER_NAME, "data": text},
        )
    )
