"""The MCP server, end to end: an MCP client session over stdio with ``privacy-ci mcp
serve`` in a subprocess (the gate in-process, and calling the service on 127.0.0.1).
The requester is the token's; the service's leakage tests pass through the tools."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import Corpus, Gate
from privacy_ci.service import ServiceSettings, create_app
from privacy_ci.store import DocumentStore
from tests.adapters._gated import (
    DOCTOR,
    FORGED,
    KEY,
    QUERIES,
    UNKNOWN_ID,
    _add_unauthorized_documents,
    assert_denial_reads_as_unknown,
    assert_no_leak,
    permitted_ids,
    stable,
    token,
)
from tests.service._serving import serving


def _files(folder: Path, bearer: str = DOCTOR) -> tuple[Path, Path]:
    key_file, token_file = folder / "jwt.key", folder / "requester.token"
    key_file.write_bytes(KEY)
    token_file.write_text(bearer + "\n")
    return key_file, token_file


@asynccontextmanager
async def _session(*args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "privacy_ci", "mcp", "serve", *args]
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def _documents(session: ClientSession, query: str) -> list[dict[str, Any]]:
    result = await session.call_tool("retrieve", {"query": query, "k": 10})
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return list(result.structured_content["documents"])


async def _decide(session: ClientSession, doc_id: str) -> dict[str, Any]:
    result = await session.call_tool("decide", {"doc_id": doc_id})
    assert not result.is_error and result.structured_content is not None, _text(result)
    return dict(result.structured_content)


async def _leak_checks(
    session: ClientSession, store: DocumentStore, corpus: Corpus, permitted: set[str]
) -> None:
    """The service's leakage tests, through the MCP tools."""
    before = [stable(await _documents(session, q)) for q in QUERIES]
    extra = _add_unauthorized_documents(store, corpus, 25)
    after = [stable(await _documents(session, q)) for q in QUERIES]
    assert_no_leak(before, after, extra, permitted)
    assert_denial_reads_as_unknown(
        await _decide(session, extra[0]), await _decide(session, UNKNOWN_ID)
    )


# Arguments an agent might try: identity fields are refused like any malformed one.
BAD_CALLS = [
    ("retrieve", {"query": "lipid", "requester": "PA1"}, "requester: Extra inputs are not"),
    ("retrieve", {"query": "lipid", "role": "Policy Authority"}, "role: Extra inputs"),
    ("retrieve", {"query": "lipid", "token": "x"}, "token: Extra inputs"),
    ("decide", {"doc_id": "RMC-LAB-002", "agent": "D02"}, "agent: Extra inputs"),
    ("decide", {"doc_id": "RMC-LAB-002", "context": "Medical"}, "context: Extra inputs"),
    ("retrieve", {}, "query: Field required"),
    ("retrieve", {"query": ""}, "query: String should have at least 1 character"),
    ("retrieve", {"query": "lipid", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("retrieve", {"query": "lipid", "k": "five"}, "k: Input should be a valid integer"),
    ("decide", {"doc_id": 7}, "doc_id: Input should be a valid string"),
    ("nope", {}, "unknown tool 'nope'"),
]


def test_an_agent_over_stdio_sees_only_what_the_gate_admits(
    riverside: DocumentStore, corpus: Corpus, gate: Gate, tmp_path: Path
) -> None:
    key_file, token_file = _files(tmp_path)
    permitted = permitted_ids(corpus, gate)

    async def agent() -> None:
        async with _session(
            "--db", str(riverside.url), "--jwt-key-file", str(key_file), "--token-file",
            str(token_file),
        ) as session:  # fmt: skip
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"retrieve", "decide"}
            assert set(tools["retrieve"].input_schema["properties"]) == {"query", "k"}
            assert set(tools["decide"].input_schema["properties"]) == {"doc_id"}
            assert all(t.input_schema["additionalProperties"] is False for t in tools.values())

            lipid = await session.call_tool("retrieve", {"query": "lipid panel cholesterol"})
            body = lipid.structured_content
            assert body is not None and body["requester"] == "D01" and body["role"] == "Doctor"
            assert body["documents"][0]["doc_id"] == "RMC-LAB-003"
            assert "RMC-LAB-003" in _text(lipid)  # the same JSON as text, for any client
            assert (await _decide(session, "RMC-LAB-003"))["decision"] == "permit"

            for name, arguments, message in BAD_CALLS:
                result = await session.call_tool(name, arguments)
                assert result.is_error and message in _text(result), (arguments, _text(result))

            await _leak_checks(session, riverside, corpus, permitted)

            # the requester is checked against the store at every call
            riverside.put_agent("D01", "Dr. Helen Marsh", {"Doctor": "Administrative"}, "admin")
            moved = await session.call_tool("retrieve", {"query": "lipid panel"})
            assert moved.is_error
            assert "holds role 'Doctor' in context 'Administrative'" in _text(moved)

    anyio.run(agent)
    # (the set-up's own label verdicts are audited too, as action "review")
    requesters = {r.requester for r in riverside.audit.records() if r.action != "review"}
    assert requesters == {"D01"} and riverside.audit.verify().ok


def test_an_agent_over_stdio_through_the_http_service(
    sqlite_riverside: DocumentStore, corpus: Corpus, gate: Gate, tmp_path: Path
) -> None:
    nurse = token("N01", "Nurse", "Medical")
    _, token_file = _files(tmp_path, nurse)
    permitted = permitted_ids(corpus, gate, "N01")
    app_ = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))

    async def agent(url: str) -> None:
        async with _session("--url", url, "--token-file", str(token_file)) as session:
            found = await _documents(session, "lipid panel cholesterol")
            assert found and {d["doc_id"] for d in found} <= permitted
            assert "RMC-LAB-003" not in {d["doc_id"] for d in found}  # not her patient
            spoofed = await session.call_tool("retrieve", {"query": "x", "requester": "D01"})
            assert spoofed.is_error and "requester: Extra inputs" in _text(spoofed)
            await _leak_checks(session, sqlite_riverside, corpus, permitted)

    with serving(app_) as url:
        anyio.run(agent, url)
    audited = sqlite_riverside.audit.records()
    assert {r.requester for r in audited if r.action != "review"} == {"N01"}


@pytest.mark.parametrize(
    ("bearer", "args", "message"),
    [
        (FORGED, [], "signature does not verify"),
        (token("GHOST", "Doctor", "Medical"), [], "unknown agent 'GHOST'"),
        (token("D01", "Nurse", "Medical"), [], "does not hold role 'Nurse'"),
        ("", [], "is empty"),
        (DOCTOR, ["--url", "http://127.0.0.1:9"], "either --db"),
        (DOCTOR, ["--no-key"], "--db needs --jwt-key-file"),
        (DOCTOR, ["--db", "{tmp}/missing.db"], "no store at"),
    ],
    ids=["forged", "unknown-agent", "role-not-held", "empty", "db-and-url", "no-key", "no-store"],
)
def test_a_bad_configuration_is_one_error_before_serving(
    sqlite_riverside: DocumentStore, tmp_path: Path, bearer: str, args: list[str], message: str
) -> None:
    key_file, token_file = _files(tmp_path, bearer)
    argv = ["mcp", "serve", "--token-file", str(token_file)]
    if "--no-key" in args:
        argv += ["--db", str(sqlite_riverside.url)]
    elif args[:1] == ["--db"]:
        argv += ["--db", args[1].format(tmp=tmp_path), "--jwt-key-file", str(key_file)]
    else:
        argv += ["--db", str(sqlite_riverside.url), "--jwt-key-file", str(key_file), *args]
    result = CliRunner().invoke(app, argv, env={"PRIVACY_CI_DB": None, "PRIVACY_CI_TOKEN": None})
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines


def test_without_a_token_and_with_a_bad_url(tmp_path: Path) -> None:
    env = {"PRIVACY_CI_DB": None, "PRIVACY_CI_TOKEN": None, "PRIVACY_CI_TOKEN_FILE": None}
    result = CliRunner().invoke(app, ["mcp", "serve", "--url", "http://127.0.0.1:9"], env=env)
    assert result.exit_code == 2 and "no requester token" in result.output
    env["PRIVACY_CI_TOKEN"] = DOCTOR
    result = CliRunner().invoke(app, ["mcp", "serve", "--url", "127.0.0.1:9"], env=env)
    assert result.exit_code == 2 and "must start with http://" in result.output
