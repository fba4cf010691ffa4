"""The Assistant: answers from the documents the retrieval path admitted, and nothing else.

    from privacy_ci.assistant import Assistant, ask
    answer = ask(store, requester, "What did the lipid panel show?", k=3)
    answer.text, answer.cited

The assistant holds no credentials and no store: `ask` runs the gated retrieval
path for the verified requester, and the assistant only sees its admitted documents.
"""

from __future__ import annotations

from privacy_ci.assistant._assistant import (
    NO_CITATION_NOTE,
    NO_DOCUMENTS_ANSWER,
    SYSTEM_PROMPT,
    Answer,
    Assistant,
    DenialMode,
    parse_citations,
)
from privacy_ci.conductor import Requester
from privacy_ci.store import DocumentStore, retrieve_for


def ask(
    store: DocumentStore,
    requester: Requester,
    question: str,
    k: int = 3,
    assistant: Assistant | None = None,
) -> Answer:
    """Retrieve for the verified requester (audited as ``ask``), then answer.

    Args:
        store: the document store.
        requester: the verified requester.
        question: the question; it ranks documents and is put to the model, it
            never decides access.
        k: how many documents to rank.
        assistant: the assistant (default: embedded model, ``withhold``).

    Returns:
        The `Answer`.
    """
    retrieval = retrieve_for(store, requester, question, k, action="ask")
    return (assistant or Assistant()).answer_sync(question, retrieval)


__all__ = [
    "NO_CITATION_NOTE",
    "NO_DOCUMENTS_ANSWER",
    "SYSTEM_PROMPT",
    "Answer",
    "Assistant",
    "DenialMode",
    "ask",
    "parse_citations",
]
