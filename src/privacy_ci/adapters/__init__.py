"""The gate behind LLM application frameworks: LangChain, LlamaIndex and MCP.

An application's chain or agent sees only the documents the Privacy Conductor's
gate admits for one requester, the one named by a signed token:

    from privacy_ci.adapters import HttpGatedSource, LocalGatedSource
    source = LocalGatedSource(store, key, token)          # in-process, over a DocumentStore
    source = HttpGatedSource("http://127.0.0.1:8000", token)   # or the running service

    from privacy_ci.adapters.langchain import GatedLangChainRetriever    # extra: langchain
    from privacy_ci.adapters.llamaindex import GatedLlamaIndexRetriever  # extra: llamaindex
    from privacy_ci.adapters.mcp import build_server                     # extra: mcp

Each framework is an optional extra and is imported only by its own module, so
importing this package (or running ``privacy-ci --help``) loads none of them.
"""

from privacy_ci.adapters._source import (
    GatedDocument,
    GatedResult,
    GatedSource,
    HttpGatedSource,
    LocalGatedSource,
    ServiceError,
)
from privacy_ci.errors import ValidationFailed
from privacy_ci.service import AuthError, Forbidden

__all__ = [
    "AuthError",
    "Forbidden",
    "GatedDocument",
    "GatedResult",
    "GatedSource",
    "HttpGatedSource",
    "LocalGatedSource",
    "ServiceError",
    "ValidationFailed",
]
