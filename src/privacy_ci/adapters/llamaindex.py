"""A LlamaIndex retriever over the gated retrieval path (extra: ``llamaindex``).

    from privacy_ci.adapters import HttpGatedSource
    from privacy_ci.adapters.llamaindex import GatedLlamaIndexRetriever
    from llama_index.core.query_engine import RetrieverQueryEngine

    retriever = GatedLlamaIndexRetriever(HttpGatedSource("http://127.0.0.1:8000", token), k=4)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)   # synthesises from admitted nodes

Each node's ``node_id`` is the document's id and its ``metadata`` holds the gate's
decision (``decision``, ``rule``, ``policy_version``, ``label_version``,
``request_id``, ``requester``, ...). Only ``doc_id`` and ``title`` reach the
model's prompt with the text; the rest stays out of prompts and embeddings.
"""

from __future__ import annotations

import asyncio

from privacy_ci.adapters._extras import missing_extra
from privacy_ci.adapters._source import GatedResult, GatedSource, HttpGatedSource, LocalGatedSource
from privacy_ci.errors import PrivacyCIError
from privacy_ci.store import MAX_K

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise missing_extra("LlamaIndex", "llamaindex", exc) from exc

__all__ = ["GatedLlamaIndexRetriever", "HttpGatedSource", "LocalGatedSource", "to_nodes"]

_SHOWN_TO_MODEL = ("doc_id", "title")


def to_nodes(result: GatedResult) -> list[NodeWithScore]:
    """LlamaIndex nodes for a gated result: text, id, score and decision metadata."""
    nodes = []
    for d in result.documents:
        hidden = [k for k in d.metadata if k not in _SHOWN_TO_MODEL]
        node = TextNode(
            id_=d.doc_id,
            text=d.content,
            metadata=dict(d.metadata),
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
        )
        nodes.append(NodeWithScore(node=node, score=d.score))
    return nodes


class GatedLlamaIndexRetriever(BaseRetriever):
    """Retrieves, for the source's requester, only the documents the gate admits.

    Args:
        source: a `LocalGatedSource` or `HttpGatedSource` (it fixes the requester).
        k: how many candidates to rank within the requester's authorized set (1-100).
        **kwargs: passed to LlamaIndex's `BaseRetriever` (``callback_manager``, ``verbose``).
    """

    def __init__(self, source: GatedSource, k: int = 5, **kwargs: object) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise PrivacyCIError(f"k must be an integer between 1 and {MAX_K}, got {k!r}")
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.source = source
        self.k = k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self.source.retrieve(query_bundle.query_str, self.k))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # the store and the HTTP client are synchronous: off the event loop
        result = await asyncio.to_thread(self.source.retrieve, query_bundle.query_str, self.k)
        return to_nodes(result)
