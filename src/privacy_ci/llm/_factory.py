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
