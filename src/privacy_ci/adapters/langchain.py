"""A LangChain retriever over the gated retrieval path (extra: ``langchain``).

    from privacy_ci.adapters import LocalGatedSource
    from privacy_ci.adapters.langchain import GatedLangChainRetriever

    retriever = GatedLangChainRetriever(source=LocalGatedSource(store, key, token), k=4)
    chain = retriever | format_docs | prompt | model    # the chain sees admitted documents only

Each `Document` has the document's id as its ``id`` and the gate's decision in its
``metadata`` (``decision``, ``rule``, ``policy_version``, ``label_version``,
``request_id``, ``requester``, ``role``, ``context``, ``score``, ...). The
requester is the source's (its token's), never an argument of a call.
"""

from __future__ import annotations

import asyncio

from privacy_ci.adapters._extras import missing_extra
from privacy_ci.adapters._source import GatedResult, GatedSource, HttpGatedSource, LocalGatedSource

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise missing_extra("LangChain", "langchain", exc) from exc

from pydantic import ConfigDict, Field

from privacy_ci.store import MAX_K

__all__ = ["GatedLangChainRetriever", "HttpGatedSource", "LocalGatedSource", "to_documents"]


def to_documents(result: GatedResult) -> list[Document]:
    """LangChain documents for a gated result: content, id and decision metadata."""
    return [
        Document(page_content=d.content, metadata=dict(d.metadata), id=d.doc_id)
        for d in result.documents
    ]


class GatedLangChainRetriever(BaseRetriever):
    """Retrieves, for the source's requester, only the documents the gate admits.

    Args:
        source: a `LocalGatedSource` or `HttpGatedSource` (it fixes the requester).
        k: how many candidates to rank within the requester's authorized set (1-100).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: GatedSource
    k: int = Field(default=5, ge=1, le=MAX_K)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return to_documents(self.source.retrieve(query, self.k))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # the store and the HTTP client are synchronous: off the event loop
        return to_documents(await asyncio.to_thread(self.source.retrieve, query, self.k))
