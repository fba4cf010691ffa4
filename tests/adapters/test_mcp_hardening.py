"""The MCP server's hardening (issue 24): it stops on a token that stops working, in
both modes, and never answers a client with Python's error text.

The outside tester's findings: ``privacy-ci mcp serve --url`` kept serving with a
forged token although the README says it stops; a tool argument named ``model``
answered with a Python ``TypeError``; a malformed token crashed ``mcp serve``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent
from typer.testing import CliRunner

from privacy_ci.adapters import GatedResult, LocalGatedSource
from privacy_ci.adapters.mcp import INTERNAL_ERROR, STORE_ERROR, build_server
from privacy_ci.cli.main import app
from privacy_ci.service import AuthError, ServiceSettings, create_app, verify_token
from privacy_ci.store import DocumentStore, StoreError
from tests.adapters._gated import DOCTOR, FORGED, KEY, token
from tests.service._serving import serving
from tests.service.test_token_fuzz import HOSTILE, craft

PYTHON_TEXT = ("Traceback", "TypeError", "KeyError", "got multiple values", "<class", 'File "')
NO_ENV = {"PRIVACY_CI_DB": None, "PRIVACY_CI_TOKEN": None, "PRIVACY_CI_TOKEN_FILE": None}


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def _call(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[CallToolResult]:
    """Call the tools in turn through an in-memory MCP client session."""
    results: list[CallToolResult] = []

    async def agent() -> None:
        async with Client(server) as client:
            for name, arguments in calls:
                results.append(await client.call_tool(name, arguments))

    anyio.run(agent)
    return results


# -- what a client is told -----------------------------------------------------------------
# Names that once met the adapter's own parameters, and others an agent might send.
ODD_NAMES = ["model", "values", "self", "spec", "arguments", "source", "cls", "__class__", ""]


def test_unexpected_arguments_are_field_errors_never_python_text(riverside: DocumentStore) -> None:
    server = build_server(LocalGatedSource(riverside, KEY, DOCTOR))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("retrieve", {"query": "lipid", name: "x"}) for name in ODD_NAMES
    ]
    calls += [("decide", {"doc_id": "RMC-LAB-003", name: 1}) for name in ODD_NAMES]
    for (tool, arguments), result in zip(calls, _call(server, calls), strict=True):
        name = next(k for k in arguments if k not in ("query", "doc_id"))
        assert result.is_error
        shown = name or "arguments"  # an argument without a name
        assert _text(result) == f"{tool} refused: {shown}: Extra inputs are not permitted"


WRONG_TYPES: list[tuple[str, dict[str, Any], str]] = [
    ("retrieve", {"query": ["lipid"]}, "query: Input should be a valid string"),
    ("retrieve", {"query": {"$ne": ""}}, "query: Input should be a valid string"),
    ("retrieve", {"query": "lipid", "k": 1.5}, "k: Input should be a valid integer"),
    ("retrieve", {"query": "lipid", "k": [3]}, "k: Input should be a valid integer"),
    ("retrieve", {"query": "lipid", "k": 10**30}, "k: Input should be less than or equal"),
    ("retrieve", {"query": None}, "query: Input should be a valid string"),
    ("decide", {"doc_id": None}, "doc_id: Input should be a valid string"),
    ("decide", {"doc_id": ["RMC-LAB-003"]}, "doc_id: Input should be a valid string"),
    ("decide", {}, "doc_id: Field required"),
    ("nope", {"model": 1}, "unknown tool 'nope'"),
]


def test_wrong_types_are_field_errors(riverside: DocumentStore) -> None:
    server = build_server(LocalGatedSource(riverside, KEY, DOCTOR))
    calls: list[tuple[str, dict[str, Any]]] = [(tool, args) for tool, args, _ in WRONG_TYPES]
    for (_, _, says), result in zip(WRONG_TYPES, _call(server, calls), strict=True):
        text = _text(result)
        assert result.is_error and says in text, text
        assert not any(word in text for word in PYTHON_TEXT), text


class Broken:
    """A gated source whose calls fail with `error` (a bug, a driver error, ...)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def retrieve(self, query: str, k: int = 5) -> GatedResult:
        raise self.error

    def decide(self, doc_id: str) -> dict[str, Any]:
        raise self.error

    def close(self) -> None:
        pass


SECRET = "/srv/secret/store.db"


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (RuntimeError(f"cannot open {SECRET}"), f"retrieve failed: {INTERNAL_ERROR}"),
        (KeyError(SECRET), f"retrieve failed: {INTERNAL_ERROR}"),
        (TypeError(f"{SECRET}() got multiple values"), f"retrieve failed: {INTERNAL_ERROR}"),
        (AttributeError(SECRET), f"retrieve failed: {INTERNAL_ERROR}"),
        (StoreError(f"sqlite error: unable to open {SECRET}"), f"retrieve refused: {STORE_ERROR}"),
    ],
    ids=["runtime", "key", "type", "attribute", "store"],
)
def test_internal_errors_are_a_fixed_message_with_details_in_the_log(
    error: BaseException, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="privacy_ci"):
        (result,) = _call(build_server(Broken(error)), [("retrieve", {"query": "x"})])
    assert result.is_error and _text(result) == says
    assert SECRET in caplog.text  # the detail is in the server's log only


def test_a_refused_token_answers_the_call_then_asks_to_stop() -> None:
    stops: list[tuple[AuthError, object]] = []
    server = build_server(
        Broken(AuthError("the token has expired")),
        on_refused=lambda error, request: stops.append((error, request)),
    )
    (result,) = _call(server, [("decide", {"doc_id": "RMC-LAB-003"})])
    assert _text(result) == "decide refused: the token has expired; this server stops"
    assert len(stops) == 1 and str(stops[0][0]) == "the token has expired"
    assert stops[0][1] is not None  # the id of the call it answered
    # without a stop callback (a library's own server) the call is refused, no more
    (alone,) = _call(build_server(Broken(AuthError("the token has expired"))), [("decide", {})])
    assert _text(alone) == "decide refused: doc_id: Field required"


# -- `privacy-ci mcp serve` ------------------------------------------------------------------
def _files(folder: Path, bearer: str) -> tuple[Path, Path]:
    key_file, token_file = folder / "jwt.key", folder / "requester.token"
    key_file.write_bytes(KEY + b"\n")
    token_file.write_text(bearer + "\n")
    return key_file, token_file


def _one_error(argv: list[str]) -> str:
    result = CliRunner().invoke(app, ["mcp", "serve", *argv], env=NO_ENV)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    return lines[0]


@pytest.mark.parametrize("case", ["crit-list", "kid-int", "kid-null", "header-not-json"])
def test_a_malformed_token_is_one_error_before_serving_in_both_modes(
    sqlite_riverside: DocumentStore, tmp_path: Path, case: str
) -> None:
    malformed = craft(*HOSTILE[case], key=None)
    key_file, token_file = _files(tmp_path, malformed)
    db = ["--db", str(sqlite_riverside.url), "--jwt-key-file", str(key_file)]
    assert "token" in _one_error([*db, "--token-file", str(token_file)]).lower()
    with serving(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))) as url:
        line = _one_error(["--url", url, "--token-file", str(token_file)])
    assert "token" in line.lower() or "JWT" in line


@pytest.mark.parametrize(
    ("bearer", "says"),
    [
        (FORGED, "signature does not verify"),
        (token("GHOST", "Doctor", "Medical"), "unknown agent 'GHOST'"),
        (token("D01", "Nurse", "Medical"), "does not hold role 'Nurse'"),
    ],
    ids=["forged", "unknown-agent", "role-not-held"],
)
def test_over_http_a_bad_token_is_one_error_before_serving(
    sqlite_riverside: DocumentStore, tmp_path: Path, bearer: str, says: str
) -> None:
    _, token_file = _files(tmp_path, bearer)
    with serving(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))) as url:
        assert says in _one_error(["--url", url, "--token-file", str(token_file)])
    # nothing was decided for it
    assert not [r for r in sqlite_riverside.audit.records() if r.action != "review"]


def test_over_http_an_unreachable_service_is_one_error(tmp_path: Path) -> None:
    _, token_file = _files(tmp_path, DOCTOR)
    with serving(create_app(DocumentStore(":memory:"), ServiceSettings(jwt_key=KEY))) as url:
        pass  # the port is free again
    assert "cannot reach the service" in _one_error(["--url", url, "--token-file", str(token_file)])


class Raw:
    """``privacy-ci mcp serve`` driven line by line over its stdin and stdout, stdin
    kept open (a client that never leaves), so only the server can end the session."""

    def __init__(self, *argv: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in NO_ENV}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "privacy_ci", "mcp", "serve", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.lines.get(timeout=60)
        return json.loads(line) if line else None

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = self.receive()
        assert answer is not None and answer.get("id") == self.next_id, answer
        return answer

    def initialize(self) -> None:
        client = {"name": "test", "version": "0"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        assert "result" in self.request("initialize", params)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def decide(self, doc_id: str) -> dict[str, Any]:
        params = {"name": "decide", "arguments": {"doc_id": doc_id}}
        result: dict[str, Any] = self.request("tools/call", params)["result"]
        return result


@contextmanager
def _raw(*argv: str) -> Iterator[Raw]:
    raw = Raw(*argv)
    try:
        yield raw
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()
        raw.proc.wait(timeout=20)


def _stops_after_revocation(raw: Raw, store: DocumentStore, bearer: str) -> None:
    """Decide once, revoke the token in the store, and see the server stop on its own."""
    raw.initialize()
    assert raw.decide("RMC-LAB-003")["structuredContent"]["decision"] == "permit"
    claims = verify_token(bearer, KEY)
    store.revoke_token(claims.token_id, claims.expires_at, "D01")
    refused = raw.decide("RMC-LAB-003")
    assert refused["isError"] and "revoked" in refused["content"][0]["text"]
    assert refused["content"][0]["text"].endswith("; this server stops")
    notice = raw.receive()  # the client is told in the protocol too
    assert notice is not None and notice["method"] == "notifications/message"
    assert notice["params"]["level"] == "error" and "revoked" in notice["params"]["data"]
    assert raw.receive() is None  # stdout closed
    assert raw.proc.wait(timeout=30) == 2  # though the client keeps stdin open
    assert raw.proc.stderr is not None
    lines = [line for line in raw.proc.stderr.read().decode().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the requester's token was refused")
    assert "revoked" in lines[0] and "Traceback" not in lines[0]


def test_in_process_a_token_revoked_while_serving_stops_the_server(
    sqlite_riverside: DocumentStore, tmp_path: Path
) -> None:
    bearer = token("D01", "Doctor", "Medical", ttl=600)
    key_file, token_file = _files(tmp_path, bearer)
    db = str(sqlite_riverside.url)
    argv = ("--db", db, "--jwt-key-file", str(key_file), "--token-file", str(token_file))
    with _raw(*argv) as raw:
        _stops_after_revocation(raw, sqlite_riverside, bearer)


def test_over_http_a_token_the_service_refuses_while_serving_stops_the_server(
    sqlite_riverside: DocumentStore, tmp_path: Path
) -> None:
    bearer = token("D01", "Doctor", "Medical", ttl=600)
    _, token_file = _files(tmp_path, bearer)
    with (
        serving(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))) as url,
        _raw("--url", url, "--token-file", str(token_file)) as raw,
    ):
        _stops_after_revocation(raw, sqlite_riverside, bearer)
