"""An MCP server exposing the gate to an agent: ``retrieve`` and ``decide`` (extra: ``mcp``).

    from privacy_ci.adapters import LocalGatedSource
    from privacy_ci.adapters.mcp import build_server, serve_stdio

    serve_stdio(LocalGatedSource(store, key, token))     # or: privacy-ci mcp serve ...

The requester is fixed when the server is made, by its configuration (the token
of its `GatedSource`), never by a tool argument: the two tools take exactly the
fields of the service's ``/v1/retrieve`` and ``/v1/decide`` bodies, checked by the
same models, so an argument such as ``requester`` or ``role`` is refused. A tool
that fails (a bad token, an agent the store no longer holds in its role, a
malformed argument) returns an error result naming the reason, as the service's
4xx would; a denied document and an unknown one read the same ("not available").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio

from privacy_ci import __version__
from privacy_ci.adapters._extras import missing_extra
from privacy_ci.adapters._source import GatedSource, _validated
from privacy_ci.errors import PrivacyCIError
from privacy_ci.service._models import DecideRequest, RetrieveRequest

try:
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise missing_extra("MCP", "mcp", exc) from exc

__all__ = ["SERVER_NAME", "TOOLS", "build_server", "serve_stdio"]

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


def build_server(source: GatedSource, *, name: str = SERVER_NAME) -> Server[Any]:
    """The MCP server for one requester: the tools ``retrieve`` and ``decide``.

    Args:
        source: the gated retrieval path of the requester (its token fixes who asks).
        name: the server's name in the MCP handshake.
    """
    specs = {spec.name: spec for spec in TOOLS}

    def call(spec: _ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        body = _validated(spec.model, **arguments)  # extra fields (requester, role) refused
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
            return _error(f"unknown tool {params.name!r}; this server has: {', '.join(specs)}")
        arguments = dict(params.arguments or {})
        try:
            # the store and the HTTP client are synchronous: in a worker thread
            payload = await anyio.to_thread.run_sync(call, spec, arguments)
        except PrivacyCIError as exc:
            return _error(f"{params.name} refused: {exc}")
        return _result(payload)

    return Server(
        name,
        version=__version__,
        title="privacy-ci: documents behind the Privacy Conductor's gate",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(source: GatedSource, *, name: str = SERVER_NAME) -> None:
    """Serve the MCP server over this process's stdin and stdout until the client leaves."""
    server = build_server(source, name=name)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
