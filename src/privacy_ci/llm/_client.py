"""`LLMClient`: the behaviour every backend shares.

Concurrency limit, retries with exponential backoff and jitter that honour
`Retry-After` (on 429, 5xx, timeouts and dropped connections, never on a 4xx that
cannot succeed), the completion cache, and run-level accounting. A call that
still fails is returned as an explicit failed `Completion`, so nothing else in a
batch is lost. A prompt too long for the model is the caller's input error, not a
failed call: the backend's `ContextOverflowError` propagates unchanged.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from privacy_ci.llm._cache import ResponseCache, cache_key
from privacy_ci.llm._types import (
    Backend,
    Completion,
    FinishReason,
    GenerationSettings,
    LLMError,
    Message,
)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, capped; `Retry-After` wins when given.

    Args:
        max_retries: retries after the first attempt.
        base_delay: delay before the first retry, doubled each time.
        max_delay: cap on any one delay (also caps a server's Retry-After).
        jitter: fraction of the delay drawn at random (0 = none).
    """

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.5

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay)
        raw = min(self.base_delay * (2.0**attempt), self.max_delay)
        return raw * (1 - self.jitter) + raw * self.jitter * rng.random()


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


@dataclass
class Usage:
    """Run-level accounting: calls, cache hits, failures, retries, tokens, cost."""

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, c: Completion, price: Price | None) -> None:
        self.calls += 1
        self.retries += c.retries
        if c.cached:
            self.cache_hits += 1
        if not c.ok:
            self.failures += 1
        if not c.cached:
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            if price is not None:
                cost = (
                    c.prompt_tokens * price.input_per_mtok
                    + c.completion_tokens * price.output_per_mtok
                ) / 1e6
                self.cost_usd = (self.cost_usd or 0.0) + cost
        m = self.by_model.setdefault(
            f"{c.provider}:{c.model}", {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        m["calls"] += 1
        if not c.cached:
            m["prompt_tokens"] += c.prompt_tokens
            m["completion_tokens"] += c.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failures": self.failures,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "by_model": self.by_model,
        }


RetryHook = Callable[[int, LLMError, float], None]
SleepFn = Callable[[float], Awaitable[None]]


class LLMClient:
    """Calls one backend with the shared behaviour.

    Args:
        backend: the provider.
        cache: a `ResponseCache`, or None for no caching.
        concurrency: at most this many calls in flight.
        retry: the retry policy.
        price: a price for cost accounting (None: cost not computed).
        on_retry: called as (attempt, error, delay) before each retry (progress output).
        sleep: the sleep function (tests inject a recorder).
        seed: seed of the jitter generator (reproducible backoff schedules).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        cache: ResponseCache | None = None,
        concurrency: int = 4,
        retry: RetryPolicy | None = None,
        price: Price | None = None,
        on_retry: RetryHook | None = None,
        sleep: SleepFn | None = None,
        seed: int = 0,
    ) -> None:
        if concurrency < 1:  # a programming error: LLMConfig and the CLI check it first
            raise ValueError("concurrency must be at least 1")
        self.backend = backend
        self.cache = cache
        self.concurrency = concurrency
        self.retry = retry or RetryPolicy()
        self.price = price
        self.on_retry = on_retry
        self.usage = Usage()
        self._sleep = sleep or asyncio.sleep
        self._rng = random.Random(seed)
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _sem(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._loop = loop
        return self._semaphore

    async def complete(
        self,
        messages: Sequence[Message],
        settings: GenerationSettings | None = None,
        *,
        sample: int = 0,
        use_cache: bool = True,
    ) -> Completion:
        """One completion with retries and caching; failures come back as values.

        Args:
            messages: the chat.
            settings: generation settings (defaults: temperature 0, seed 0).
            sample: index of an independent draw; draws > 0 use seed + sample and
                their own cache entries.
            use_cache: read the cache (a fresh result is always written).

        Returns:
            The `Completion`; `completion.ok` is False when every attempt failed.

        Raises:
            ContextOverflowError: the prompt cannot fit the model's context window.
        """
        settings = settings or GenerationSettings()
        if sample and settings.seed is not None:
            settings = replace(settings, seed=settings.seed + sample)
        key = None
        if self.cache is not None:
            key = cache_key(
                self.backend.provider,
                self.backend.base_url,
                self.backend.model,
                messages,
                settings,
                sample,
            )
            if use_cache:
                hit = self.cache.get(key)
                if hit is not None:
                    self.usage.add(hit, self.price)
                    return hit
        result = await self._attempts(messages, settings)
        if self.cache is not None and key is not None:
            self.cache.put(key, result)
        self.usage.add(result, self.price)
        return result

    async def _attempts(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        attempt = 0
        while True:
            async with self._sem():
                start = time.perf_counter()
                try:
                    result = await self.backend.complete(messages, settings)
                except LLMError as exc:
                    error = exc
                else:
                    result.retries = attempt
                    if not result.latency_s:
                        result.latency_s = time.perf_counter() - start
                    return result
            if not error.retryable or attempt >= self.retry.max_retries:
                kind = "retryable" if error.retryable else "not retryable"
                return Completion(
                    text="",
                    provider=self.backend.provider,
                    model=self.backend.model,
                    finish_reason=FinishReason.ERROR,
                    retries=attempt,
                    error=f"{error} ({kind}; {attempt + 1} attempt(s))",
                )
            delay = self.retry.delay(attempt, error.retry_after, self._rng)
            if self.on_retry is not None:
                self.on_retry(attempt + 1, error, delay)
            await self._sleep(delay)
            attempt += 1

    async def complete_many(
        self,
        batch: Sequence[Sequence[Message]],
        settings: GenerationSettings | None = None,
    ) -> list[Completion]:
        """Complete many chats concurrently (bounded by `concurrency`), in order."""
        return list(await asyncio.gather(*(self.complete(m, settings) for m in batch)))

    def complete_sync(
        self,
        messages: Sequence[Message],
        settings: GenerationSettings | None = None,
        *,
        sample: int = 0,
    ) -> Completion:
        """`complete` for synchronous callers (runs its own event loop)."""
        return asyncio.run(self._complete_and_close(messages, settings, sample))

    async def _complete_and_close(
        self, messages: Sequence[Message], settings: GenerationSettings | None, sample: int
    ) -> Completion:
        return await self.complete(messages, settings, sample=sample)

    async def aclose(self) -> None:
        await self.backend.aclose()
