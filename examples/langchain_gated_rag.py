"""A LangChain RAG chain whose retriever is the Privacy Conductor's gate.

    python examples/langchain_gated_rag.py                  # in-process gate, embedded model
    python examples/langchain_gated_rag.py --http           # the same through the HTTP service
    python examples/langchain_gated_rag.py --agent N01 --retrieve-only
    python examples/langchain_gated_rag.py --scripted       # test double instead of a model
    python examples/langchain_gated_rag.py --db store.db --key jwt.key --agent ID --question ...

The chain is ``{context: retriever | format, question} | prompt | model``. Its
retriever, `GatedLangChainRetriever`, returns only the documents the gate admits
for the agent's token, so nothing else can reach the prompt, whatever the
question says. Needs the ``langchain`` extra; runs offline (see ``_riverside.py``),
on a temporary Riverside store or on yours (``--db``, ``--key``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _riverside import arguments, document_block, model, needs_extra, riverside, run

try:
    from langchain_core.documents import Document
    from langchain_core.prompt_values import PromptValue
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

    from privacy_ci.adapters.langchain import GatedLangChainRetriever
except ImportError as exc:
    needs_extra(__file__, "LangChain", "langchain", exc)

from privacy_ci.assistant import SYSTEM_PROMPT, parse_citations
from privacy_ci.llm import GenerationSettings, LLMClient, Message


def format_documents(docs: list[Document]) -> str:
    if not docs:
        return "(no documents)"
    return "\n\n".join(document_block(str(d.id), d.metadata["title"], d.page_content) for d in docs)


def as_runnable(client: LLMClient) -> Runnable[PromptValue, str]:
    """A privacy-ci model client as a LangChain runnable: prompt in, answer text out."""
    roles = {"system": "system", "human": "user", "ai": "assistant"}

    def call(prompt: PromptValue) -> str:
        messages = [Message(roles[m.type], str(m.content)) for m in prompt.to_messages()]  # type: ignore[arg-type]
        completion = client.complete_sync(messages, GenerationSettings(max_tokens=160))
        return completion.text.strip() or f"(no answer: {completion.error})"

    return RunnableLambda(call)


def build_chain(retriever: GatedLangChainRetriever, client: LLMClient) -> Runnable[str, str]:
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM_PROMPT), ("human", "Documents:\n{context}\n\nQuestion: {question}")]
    )
    context = retriever | RunnableLambda(format_documents)
    return {"context": context, "question": RunnablePassthrough()} | prompt | as_runnable(client)


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    args = arguments(__doc__.splitlines()[0], argv)
    with riverside(args.agent, http=args.http, db=args.db, key_file=args.key) as world:
        retriever = GatedLangChainRetriever(source=world.source, k=args.k)
        docs = retriever.invoke(args.question)
        where = world.url or "in-process"
        print(f"{args.agent} asks ({where}): {args.question}")
        for d in docs:
            m = d.metadata
            print(f"  admitted {d.id}  {m['title']}  score {m['score']:.3f}  rule {m['rule']}")
        out: dict[str, object] = {"admitted": [d.id for d in docs]}
        if not args.retrieve_only:
            answer = build_chain(retriever, model(args.scripted)).invoke(args.question)
            cited, rejected = parse_citations(answer, [str(d.id) for d in docs])
            print(f"answer: {answer}\ncited: {list(cited)}  rejected citations: {list(rejected)}")
            out |= {"answer": answer, "cited": list(cited), "rejected": list(rejected)}
        return out


if __name__ == "__main__":
    run(main)
