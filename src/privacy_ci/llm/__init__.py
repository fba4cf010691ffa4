"""One way to call any model: OpenAI-compatible servers, OpenAI, Anthropic, or an
embedded local GGUF model, with retries, caching, structured output and accounting.

    from privacy_ci.llm import make_client, user
    client = make_client()                    # embedded default, or privacy-ci.toml
    completion = client.complete_sync([user("Say hello")])
"""

from typing import TYPE_CHECKING

from privacy_ci.llm._cache import ResponseCache, cache_key
from privacy_ci.llm._capabilities import Capabilities, Capability, capabilities_of
from privacy_ci.llm._client import LLMClient, Price, RetryPolicy, Usage
from privacy_ci.llm._config import LLMConfig, load_llm_config, model_configured
from privacy_ci.llm._factory import (
    default_cache_path,
    make_backend,
    make_client,
    unavailable_reason,
)
from privacy_ci.llm._grammar import choice_grammar, gbnf_literal
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
    "AnthropicBackend",
    "Backend",
    "Capabilities",
    "Capability",
    "Completion",
    "ContextOverflowError",
    "EmbeddedBackend",
    "FinishReason",
    "GenerationSettings",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "Message",
    "OpenAICompatibleBackend",
    "Price",
    "ResponseCache",
    "RetryPolicy",
    "Usage",
    "cache_key",
    "capabilities_of",
    "choice_grammar",
    "default_cache_path",
    "gbnf_literal",
    "load_llm_config",
    "make_backend",
    "make_client",
    "model_configured",
    "parse_structured",
    "system",
    "unavailable_reason",
    "user",
]


if TYPE_CHECKING:
    from privacy_ci.llm._anthropic import AnthropicBackend
    from privacy_ci.llm._embedded import EmbeddedBackend
    from privacy_ci.llm._openai import OpenAICompatibleBackend

_BACKENDS = {
    "AnthropicBackend": ("privacy_ci.llm._anthropic", "AnthropicBackend"),
    "EmbeddedBackend": ("privacy_ci.llm._embedded", "EmbeddedBackend"),
    "OpenAICompatibleBackend": ("privacy_ci.llm._openai", "OpenAICompatibleBackend"),
}


def __getattr__(name: str) -> object:
    # the backends import their SDKs (openai, anthropic, llama_cpp): loaded on first use
    if name in _BACKENDS:
        import importlib

        module, attr = _BACKENDS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'privacy_ci.llm' has no attribute {name!r}")
