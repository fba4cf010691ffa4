"""Build a backend and a client from an `LLMConfig` (imports providers lazily)."""

from __future__ import annotations

from pathlib import Path

from privacy_ci.llm._cache import ResponseCache
from privacy_ci.llm._client import LLMClient, Price, RetryHook, RetryPolicy
from privacy_ci.llm._config import LLMConfig, load_llm_config
from privacy_ci.llm._types import Backend


def default_cache_path() -> Path:
    from privacy_ci.data import cache_dir

    return cache_dir() / "llm-cache.sqlite"


def make_backend(config: LLMConfig) -> Backend:
    """The backend for `config.provider`; heavy client libraries load only here."""
    if config.provider == "embedded":
        from privacy_ci.llm._embedded import EmbeddedBackend

        return EmbeddedBackend.from_config(config)
    if config.provider in ("openai-compatible", "openai"):
        from privacy_ci.llm._openai import OpenAICompatibleBackend

        return OpenAICompatibleBackend.from_config(config)
    if config.provider == "anthropic":
        from privacy_ci.llm._anthropic import AnthropicBackend

        return AnthropicBackend.from_config(config)
    # a programming error: LLMConfig admits only the providers above
    raise ValueError(f"unknown provider {config.provider!r}")  # pragma: no cover


def make_client(
    config: LLMConfig | None = None,
    *,
    backend: Backend | None = None,
    on_retry: RetryHook | None = None,
) -> LLMClient:
    """A ready `LLMClient` for `config` (default: `load_llm_config()`)."""
    config = config or load_llm_config()
    backend = backend or make_backend(config)
    cache = None
    if config.cache:
        cache = ResponseCache(
            Path(config.cache_path) if config.cache_path else default_cache_path()
        )
    price_cfg = config.prices.get(config.model)
    price = Price(price_cfg.input_per_mtok, price_cfg.output_per_mtok) if price_cfg else None
    return LLMClient(
        backend,
        cache=cache,
        concurrency=config.concurrency,
        retry=RetryPolicy(max_retries=config.retries),
        price=price,
        on_retry=on_retry,
    )


def unavailable_reason(config: LLMConfig | None = None) -> str | None:
    """Why the configured model cannot run on this machine (None when it can).

    Only the embedded model can be checked offline (llama-cpp-python and its GGUF
    must be installed); a server's or a hosted model's availability shows at the
    first call.

    Args:
        config: the configuration (default: `load_llm_config()`).
    """
    config = config or load_llm_config()
    if config.provider != "embedded":
        return None
    from privacy_ci.llm._embedded import embedded_unavailable_reason, llama_cpp_available

    if config.model_path:
        if not llama_cpp_available():
            return "llama_cpp is not installed (pip install llama-cpp-python)"
        return (
            None
            if Path(config.model_path).expanduser().is_file()
            else (f"the GGUF file {config.model_path} does not exist")
        )
    return embedded_unavailable_reason()
