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

In-process, a requester gets the service's rate of audited decisions by default
(`service_decision_rate`); ``LocalGatedSource(..., rate=Rate(per_s, burst))`` sets
another and ``rate=UNLIMITED`` none (a trusted batch job). Over it, every call
raises `RateLimitExceeded` (as the service's 429 does over HTTP).
"""

from privacy_ci.adapters._source import (
    UNLIMITED,
    GatedDocument,
    GatedResult,
    GatedSource,
    HttpGatedSource,
    LocalGatedSource,
    RateLimitExceeded,
    ServiceError,
    service_decision_rate,
)
from privacy_ci.errors import ValidationFailed
from privacy_ci.service import AuthError, Forbidden
from privacy_ci.service._limits import Rate

__all__ = [
    "UNLIMITED",
    "AuthError",
    "Forbidden",
    "GatedDocument",
    "GatedResult",
    "GatedSource",
    "HttpGatedSource",
    "LocalGatedSource",
    "Rate",
    "RateLimitExceeded",
    "ServiceError",
    "ValidationFailed",
    "service_decision_rate",
]
