"""An agent that reaches documents only through the gate's MCP server, over stdio.

    python examples/mcp_gated_agent.py                  # gate in-process in the server
    python examples/mcp_gated_agent.py --http           # the server calls the HTTP service
    python examples/mcp_gated_agent.py --retrieve-only  # tools only, no model
    python examples/mcp_gated_agent.py --scripted       # test double instead of a model
    python examples/mcp_gated_agent.py --db store.db --key jwt.key --agent ID --question ...

The agent starts ``privacy-ci mcp serve`` as a subprocess with the requester's
token in a file: the token, not the agent, decides who asks. It lists the tools,
retrieves, answers from what ``retrieve`` returned, and shows that a ``requester``
argument is refused and that a document outside the requester's reach reads
"not available". Needs the ``mcp`` extra; runs offline (see ``_riverside.py``), on a
temporary Riverside store or on yours (``--db``, ``--key``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio
from _riverside import Gated, arguments, document_block, model, needs_extra, riverside, run

try:
    from mcp import ClientSession, StdioServerParameters, stdio_client
except ImportError as exc:
    needs_extra(__file__, "the MCP SDK", "mcp", exc)

from privacy_ci.assistant import SYSTEM_PROMPT, parse_citations
from privacy_ci.llm import GenerationSettings, system, user

OUT_OF_REACH = "RMC-SAL-001"  # a salary letter: no clinical role may receive it


def server_parameters(world: Gated) -> StdioServerParameters:
    """``privacy-ci mcp serve`` for the world's token: in-process or over HTTP."""
    token_file = world.folder / "requester.token"
    token_file.write_text(world.token)
    args = ["-m", "privacy_ci", "mcp", "serve", "--token-file", str(token_file)]
    if world.url:
        args += ["--url", world.url]
    else:
        key_file = world.folder / "jwt.key"
        key_file.write_bytes(world.key)
        args += ["--db", str(world.store.url), "--jwt-key-file", str(key_file)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVACY_CI_TOKEN")}
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def agent(world: Gated, question: str, k: int) -> dict[str, Any]:
    async with (
        stdio_client(server_parameters(world)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        found = await session.call_tool("retrieve", {"query": question, "k": k})
        if found.is_error:
            raise SystemExit(f"retrieve failed: {found.content}")
        result: dict[str, Any] = found.structured_content or {}
        for d in result["documents"]:
            print(
                f"  admitted {d['doc_id']}  {d['title']}  score {d['score']:.3f}  rule {d['rule']}"
            )
        spoofed = await session.call_tool("retrieve", {"query": question, "requester": "PA1"})
        print(f"a 'requester' argument: {spoofed.content[0].text}")  # type: ignore[union-attr]
        denied = await session.call_tool("decide", {"doc_id": OUT_OF_REACH})
        decision = denied.structured_content or {}
        print(f"decide {OUT_OF_REACH}: {decision['decision']} ({decision['rule']})")
        return {
            "tools": [t.name for t in tools.tools],
            "requester": result["requester"],
            "documents": result["documents"],
            "spoofed_error": spoofed.is_error,
            "out_of_reach": decision,
        }


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    args = arguments(__doc__.splitlines()[0], argv)
    with riverside(args.agent, http=args.http, db=args.db, key_file=args.key) as world:
        print(f"{args.agent} asks ({world.url or 'in-process'}): {args.question}")
        seen = anyio.run(agent, world, args.question, args.k)
        out: dict[str, object] = {**seen, "admitted": [d["doc_id"] for d in seen["documents"]]}
        if not args.retrieve_only:
            blocks = [
                document_block(d["doc_id"], d["title"], d["content"]) for d in seen["documents"]
            ]
            prompt = f"Documents:\n{chr(10).join(blocks) or '(none)'}\n\nQuestion: {args.question}"
            completion = model(args.scripted).complete_sync(
                [system(SYSTEM_PROMPT), user(prompt)], GenerationSettings(max_tokens=160)
            )
            answer = completion.text.strip() or f"(no answer: {completion.error})"
            cited, rejected = parse_citations(answer, list(out["admitted"]))  # type: ignore[call-overload]
            print(f"answer: {answer}\ncited: {list(cited)}")
            out |= {"answer": answer, "cited": list(cited), "rejected": list(rejected)}
        return out


if __name__ == "__main__":
    run(main)
