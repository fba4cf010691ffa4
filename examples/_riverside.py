"""What the examples share: a gated store, a requester's token, a model.

Offline throughout: a temporary SQLite store holding the packaged Riverside
corpus (105 documents, approved labels), or your own store with ``--db``; a fresh
signing key, or yours with ``--key``; a token for one agent, and either the gate
in-process or the HTTP service on 127.0.0.1. The answer step uses the embedded
local model (SmolLM2, in-process; slow on a small machine), or, with
``--scripted``, the scripted test double, which is not a model: its answer only
shows which documents the chain handed it.
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from privacy_ci.adapters import GatedSource, HttpGatedSource, LocalGatedSource
from privacy_ci.conductor import load_corpus
from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import GenerationSettings, LLMClient, Message
from privacy_ci.service import ServiceSettings, create_app, generate_key, issue_token, load_key
from privacy_ci.store import DocumentStore, load_corpus_into

QUESTION = "What did Aiko Tanaka's lipid panel show?"
# a document's id where a prompt opens it: "[ID] title" (LangChain, MCP) or "doc_id: ID"
_IDS = re.compile(r"^(?:\[([\w.:/-]+)\]|doc_id: ([\w.:/-]+)$)", re.MULTILINE)


def needs_extra(example: str, framework: str, extra: str, exc: ImportError) -> NoReturn:
    """Exit 2 with one line naming the extra to install (the framework is missing)."""
    missing = exc.name or framework
    print(
        f"error: {Path(example).name} needs {framework} ({missing} is not installed):"
        f" pip install 'privacy-ci[{extra}]'",
        file=sys.stderr,
    )
    raise SystemExit(2)


def run(main: Callable[[Sequence[str] | None], object]) -> None:
    """Run an example's `main`: a privacy-ci error is one line and exit 2, as in the CLI."""
    try:
        main(None)
    except PrivacyCIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def arguments(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--db",
        metavar="URL",
        help="Your store (sqlite:///FILE, a file path or postgresql://...; see privacy-ci"
        " store load). Default: a temporary store holding the packaged Riverside corpus.",
    )
    parser.add_argument(
        "--key",
        metavar="FILE",
        type=Path,
        help="The HS256 signing key file that signs the agent's token (privacy-ci token"
        " keygen). Default: a fresh key.",
    )
    parser.add_argument(
        "--agent", default="D01", help="The agent who asks (default D01, a Riverside doctor)."
    )
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("-k", type=int, default=3, help="Candidates ranked by the gate.")
    parser.add_argument(
        "--http", action="store_true", help="Call the HTTP service on 127.0.0.1, not in-process."
    )
    parser.add_argument(
        "--retrieve-only", action="store_true", help="Show the admitted documents; no model."
    )
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="Answer with the scripted test double instead of the embedded model (tests).",
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Gated:
    """The example's world: the store, the key, the agent's token and its source."""

    store: DocumentStore
    key: bytes
    token: str
    source: GatedSource
    url: str | None
    folder: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve(store: DocumentStore, key: bytes) -> Iterator[str]:
    """The privacy-ci service over `store` on 127.0.0.1 (uvicorn in a thread)."""
    import uvicorn

    port = _free_port()
    app = create_app(store, ServiceSettings(jwt_key=key))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the service did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _open_store(db: str | None, folder: Path) -> DocumentStore:
    """The user's store at `db`, or Riverside loaded into a new one in `folder`."""
    if db is not None:
        DocumentStore(db, readonly=True).close()  # a mistyped --db is an error, not a new store
        return DocumentStore(db)
    store = DocumentStore(folder / "riverside.db")
    try:
        load_corpus_into(store, load_corpus())
    except BaseException:
        store.close()
        raise
    return store


def _role_and_context(store: DocumentStore, agent_id: str, where: str) -> tuple[str, str]:
    """The one role (and its context) the store holds for `agent_id`."""
    agent = store.agents().get(agent_id)
    if agent is None:
        raise PrivacyCIError(f"unknown agent {agent_id!r} in {where} (give --agent)")
    if len(agent.roles) != 1:
        raise PrivacyCIError(
            f"agent {agent_id!r} holds roles {sorted(agent.roles)}; the examples act for an"
            " agent with one role"
        )
    role, context = next(iter(agent.roles.items()))
    return role, context


@contextmanager
def riverside(
    agent_id: str = "D01",
    *,
    http: bool = False,
    db: str | None = None,
    key_file: Path | None = None,
) -> Iterator[Gated]:
    """The store (Riverside in a temporary one, or yours at `db`), and the gated source
    of `agent_id`'s token, signed with the key in `key_file` or a fresh one."""
    key = load_key(key_file) if key_file is not None else generate_key().encode()
    with tempfile.TemporaryDirectory(prefix="privacy-ci-example-") as tmp:
        store = _open_store(db, Path(tmp))
        try:
            role, context = _role_and_context(store, agent_id, db or "the Riverside corpus")
            token = issue_token(key, agent_id, role, context, ttl=900)
            if not http:
                yield Gated(store, key, token, LocalGatedSource(store, key, token), None, Path(tmp))
                return
            with _serve(store, key) as url, HttpGatedSource(url, token) as source:
                yield Gated(store, key, token, source, url, Path(tmp))
        finally:
            store.close()


def _scripted_answer(messages: Sequence[Message], settings: GenerationSettings) -> str:
    ids = [a or b for a, b in _IDS.findall(messages[-1].content)]
    if not ids:
        return "(scripted test double) I was given no documents."
    return f"(scripted test double, not a model) I was given {', '.join(f'[{i}]' for i in ids)}."


def model(scripted: bool) -> LLMClient:
    """The answer step's model: the embedded local one, or the scripted test double."""
    if scripted:
        from privacy_ci.llm.testing import ScriptedTestBackend

        return LLMClient(ScriptedTestBackend(_scripted_answer))
    from privacy_ci.llm import load_llm_config, make_client, unavailable_reason

    config = load_llm_config()
    reason = unavailable_reason(config)
    if reason:
        raise SystemExit(f"no model to answer with ({reason}); use --retrieve-only or --scripted")
    return make_client(config)


def document_block(doc_id: str, title: str, content: str, limit: int = 700) -> str:
    """One admitted document as the model sees it: its id in brackets, title, text."""
    return f"[{doc_id}] {title}\n{content[:limit]}"
