"""A LlamaIndex query engine whose retriever is the Privacy Conductor's gate.

    python examples/llamaindex_gated_query.py               # in-process gate, embedded model
    python examples/llamaindex_gated_query.py --http        # the same through the HTTP service
    python examples/llamaindex_gated_query.py --agent N01 --retrieve-only
    python examples/llamaindex_gated_query.py --scripted    # test double instead of a model
    python examples/llamaindex_gated_query.py --db store.db --key jwt.key --agent ID --question ...

`RetrieverQueryEngine` synthesises its answer from the nodes `GatedLlamaIndexRetriever`
returns: the documents the gate admits for the agent's token, and no other. Needs
the ``llamaindex`` extra; runs offline (see ``_riverside.py``), on a temporary
Riverside store or on yours (``--db``, ``--key``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _riverside import arguments, model, needs_extra, riverside, run

try:
    from llama_index.core.llms import (
        CompletionResponse,
        CompletionResponseGen,
        CustomLLM,
        LLMMetadata,
    )
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.query_engine import RetrieverQueryEngine

    from privacy_ci.adapters.llamaindex import GatedLlamaIndexRetriever
except ImportError as exc:
    needs_extra(__file__, "LlamaIndex", "llamaindex", exc)

from privacy_ci.assistant import parse_citations
from privacy_ci.llm import GenerationSettings, LLMClient, user


class PrivacyCILLM(CustomLLM):
    """A privacy-ci model client as a LlamaIndex LLM (completion only)."""

    client: Any = None
    context_window: int = 4096
    max_tokens: int = 160

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            model_name=str(self.client.backend.model),
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        settings = GenerationSettings(max_tokens=self.max_tokens)
        completion = self.client.complete_sync([user(prompt)], settings)
        return CompletionResponse(
            text=completion.text.strip() or f"(no answer: {completion.error})"
        )

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        response = self.complete(prompt, formatted, **kwargs)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=response.text, delta=response.text)

        return gen()


def build_engine(retriever: GatedLlamaIndexRetriever, client: LLMClient) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(retriever, llm=PrivacyCILLM(client=client))


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    args = arguments(__doc__.splitlines()[0], argv)
    with riverside(args.agent, http=args.http, db=args.db, key_file=args.key) as world:
        retriever = GatedLlamaIndexRetriever(world.source, k=args.k)
        where = world.url or "in-process"
        print(f"{args.agent} asks ({where}): {args.question}")
        out: dict[str, object] = {}
        if args.retrieve_only:
            nodes = retriever.retrieve(args.question)
        else:
            response = build_engine(retriever, model(args.scripted)).query(args.question)
            nodes = response.source_nodes
            answer = str(response.response)
            cited, rejected = parse_citations(answer, [n.node.node_id for n in nodes])
            out |= {"answer": answer, "cited": list(cited), "rejected": list(rejected)}
        for n in nodes:
            m = n.node.metadata
            print(
                f"  admitted {n.node.node_id}  {m['title']}  score {n.score:.3f}  rule {m['rule']}"
            )
        if "answer" in out:
            print(f"answer: {out['answer']}\ncited: {out['cited']}")
        return {"admitted": [n.node.node_id for n in nodes], **out}


if __name__ == "__main__":
    run(main)
