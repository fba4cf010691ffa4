"""One way to call any model: OpenAI-compatible servers, OpenAI, Anthropic, or an
embedded local GGUF model, with retries, caching, structured output and accounting.

    from privacy_ci.llm import make_client, user
    client = make_client()                    # embedded default, or privacy-ci.toml
    completion = client.complete_sync([user("Say hello")])
"""

from privacy_ci.llm._cache import ResponseCache, cache_key
from privacy_ci.llm._client import LLMClient, Price, RetryPolicy, Usage
from privacy_ci.llm._config import LLMConfig, load_llm_config
from privacy_ci.llm._factory import default_cache_path, make_backend, make_client
from privacy_ci.llm._types import (
    Backend,
    Completion,
    ContextOverflowError,
    FinishReason,
    GenerationSettings,
    LLMError,
    Message,
    parse_structured,
    system,
    user,
)

__all__ = [
    "Backend",
    "Completion",
    "ContextOverflowError",
    "FinishReason",
    "GenerationSettings",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "Message",
    "Price",
    "ResponseCache",
    "RetryPolicy",
    "Usage",
    "cache_key",
    "default_cache_path",
    "load_llm_config",
    "make_backend",
    "make_client",
    "parse_structured",
    "system",
    "user",
]
