"""LLMClient + the real OpenAICompatibleBackend against a faulty server.

Retries, backoff, Retry-After, timeouts, dropped connections, malformed bodies and
structured output, permanent failures inside concurrent batches, the concurrency
limit and the cache, all over HTTP on 127.0.0.1. Sleeps are recorded, not slept.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.llm import (
    FinishReason,
    GenerationSettings,
    LLMClient,
    OpenAICompatibleBackend,
    ResponseCache,
    RetryPolicy,
    user,
)
from tests.llm.fake_openai_server import FakeLLMServer, Fault, expected_answer, running_server

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}


class SleepRecorder:
    """Stands in for asyncio.sleep: records the delays, returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeLLMServer, str]]:
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        yield fake, url + "/v1"


@pytest.fixture
def fake(served: tuple[FakeLLMServer, str]) -> FakeLLMServer:
    served[0].reset()
    return served[0]


@pytest.fixture
def sleep() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def make(served: tuple[FakeLLMServer, str], fake: FakeLLMServer, sleep: SleepRecorder) -> Any:
    def factory(*, timeout: float = 5.0, **kw: Any) -> LLMClient:
        kw.setdefault("retry", RetryPolicy(max_retries=3, base_delay=0.01, jitter=0.0))
        backend = OpenAICompatibleBackend(model="fake-model", base_url=served[1], timeout=timeout)
        return LLMClient(backend, sleep=sleep, **kw)

    return factory


def one(
    client: LLMClient, prompt: str = "hi", settings: GenerationSettings | None = None, **kw: Any
) -> Any:
    async def go() -> Any:
        try:
            return await client.complete([user(prompt)], settings, **kw)
        finally:
            await client.aclose()

    return asyncio.run(go())


# -- retries ---------------------------------------------------------------------------
def test_429_then_success_sleeps_retry_after(
    fake: FakeLLMServer, make: Any, sleep: SleepRecorder
) -> None:
    fake.push(Fault.rate_limit("1"))
    c = one(make())
    assert c.ok and c.text == expected_answer("hi") and c.retries == 1
    assert sleep.delays == [1.0] and len(fake.requests) == 2


def test_retry_after_is_capped_by_max_delay(
    fake: FakeLLMServer, make: Any, sleep: SleepRecorder
) -> None:
    fake.push(Fault.rate_limit("1"), Fault.rate_limit_ms(250))
    c = one(make(retry=RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.5)))
    assert c.ok and c.retries == 2 and sleep.delays == [0.5, 0.25]


def test_500_and_503_then_success(fake: FakeLLMServer, make: Any, sleep: SleepRecorder) -> None:
    fake.push(Fault.http(500), Fault.http(503))
    c = one(make())
    assert c.ok and c.retries == 2 and sleep.delays == [0.01, 0.02]
    assert len(fake.requests) == 3


def test_timeouts_then_success(fake: FakeLLMServer, make: Any) -> None:
    fake.push(Fault.slow(2.0), Fault.slow(2.0))
    c = one(make(timeout=0.2))
    assert c.ok and c.retries == 2 and c.text == expected_answer("hi")


def test_dropped_connection_then_success(fake: FakeLLMServer, make: Any) -> None:
    fake.push(Fault.drop(), Fault.drop())
    c = one(make())
    assert c.ok and c.retries == 2 and len(fake.requests) == 3


def test_malformed_body_is_retried(fake: FakeLLMServer, make: Any) -> None:
    fake.push(Fault.malformed_body(), Fault.body({"id": "no-choices"}))
    c = one(make())
    assert c.ok and c.retries == 2 and len(fake.requests) == 3


def test_exhausted_retries_give_an_explicit_failed_completion(
    fake: FakeLLMServer, make: Any
) -> None:
    fake.push(*[Fault.http(503, "busy")] * 3)
    c = one(make(retry=RetryPolicy(max_retries=2, base_delay=0.01)))
    assert not c.ok and c.finish_reason is FinishReason.ERROR and c.text == ""
    assert c.retries == 2 and "3 attempt(s)" in c.error and "HTTP 503: busy" in c.error
    assert len(fake.requests) == 3


@pytest.mark.parametrize("status", [400, 401])
def test_client_errors_are_not_retried(
    fake: FakeLLMServer, make: Any, sleep: SleepRecorder, status: int
) -> None:
    fake.push(Fault.http(status, "invalid temperature"))
    c = one(make())
    assert not c.ok and c.retries == 0 and sleep.delays == []
    assert f"HTTP {status}: invalid temperature" in c.error and "not retryable" in c.error
    assert len(fake.requests) == 1


def test_malformed_structured_output_is_returned_not_retried(
    fake: FakeLLMServer, make: Any
) -> None:
    fake.push(Fault.content('{"label": unquoted}'))
    c = one(make(), settings=GenerationSettings(json_schema=SCHEMA))
    assert c.ok and c.retries == 0 and c.parsed is None
    assert c.parse_error and c.text == '{"label": unquoted}'
    assert len(fake.requests) == 1


def test_on_retry_hook_gets_attempt_numbers(fake: FakeLLMServer, make: Any) -> None:
    seen: list[tuple[int, int | None, float]] = []
    fake.push(Fault.http(500), Fault.rate_limit("1"))
    c = one(make(on_retry=lambda attempt, err, delay: seen.append((attempt, err.status, delay))))
    assert c.ok and seen == [(1, 500, 0.01), (2, 429, 1.0)]


def test_backoff_grows_exponentially_with_bounded_jitter(
    fake: FakeLLMServer, make: Any, sleep: SleepRecorder
) -> None:
    policy = RetryPolicy(max_retries=4, base_delay=0.01, max_delay=0.05, jitter=0.5)
    fake.push(*[Fault.http(502)] * 4)
    c = one(make(retry=policy, seed=7))
    assert c.ok and c.retries == 4
    for attempt, delay in enumerate(sleep.delays):
        raw = min(0.01 * 2**attempt, 0.05)
        assert raw * 0.5 <= delay <= raw, (attempt, delay)
    # the policy alone: exponential, jittered, capped, never above the cap
    rng = random.Random(3)
    for attempt in range(10):
        raw = min(0.01 * 2**attempt, 0.05)
        draws = [policy.delay(attempt, None, rng) for _ in range(50)]
        assert all(raw * 0.5 <= d <= raw for d in draws)
        assert len(set(draws)) > 1  # there is jitter
    assert policy.delay(0, 10.0, rng) == 0.05  # Retry-After wins but is capped


# -- batches and concurrency -----------------------------------------------------------
def test_batch_with_permanent_failures_keeps_everything_else_in_order(
    fake: FakeLLMServer, make: Any
) -> None:
    fake.fail_matching("BAD", Fault.http(400, "rejected"))
    fake.fail_matching("DOWN", Fault.http(503, "down"))
    fake.push(Fault.http(500), Fault.drop(), Fault.rate_limit("1"))  # transient, anywhere
    prompts = [
        f"question {i}" + (" BAD" if i in (3, 11) else "") + (" DOWN" if i == 17 else "")
        for i in range(20)
    ]
    client = make(concurrency=4, retry=RetryPolicy(max_retries=2, base_delay=0.01))

    async def go() -> list[Any]:
        try:
            return await client.complete_many([[user(p)] for p in prompts])
        finally:
            await client.aclose()

    results = asyncio.run(go())
    assert len(results) == 20
    for i, (prompt, c) in enumerate(zip(prompts, results, strict=True)):
        if i in (3, 11):
            assert not c.ok and "HTTP 400: rejected" in c.error and c.retries == 0
        elif i == 17:
            assert not c.ok and "HTTP 503: down" in c.error and c.retries == 2
        else:
            assert c.ok and c.text == expected_answer(prompt), (i, c.error)
    bad = [r for r in fake.requests if "BAD" in r.body["messages"][-1]["content"]]
    down = [r for r in fake.requests if "DOWN" in r.body["messages"][-1]["content"]]
    assert len(bad) == 2 and len(down) == 3
    assert client.usage.failures == 3 and client.usage.calls == 20


def test_concurrency_limit_is_respected(fake: FakeLLMServer, make: Any) -> None:
    fake.delay = 0.05
    client = make(concurrency=4)

    async def go() -> list[Any]:
        try:
            return await client.complete_many([[user(f"p{i}")] for i in range(20)])
        finally:
            await client.aclose()

    results = asyncio.run(go())
    assert all(c.ok for c in results)
    assert fake.max_in_flight == 4  # reached, never exceeded


# -- cache -----------------------------------------------------------------------------
def test_cache_hits_samples_and_errors(fake: FakeLLMServer, make: Any, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "llm.sqlite")
    client = make(cache=cache)
    first = one(client, "cached prompt")
    second = one(client, "cached prompt")
    assert first.ok and not first.cached and second.cached and second.text == first.text
    assert len(fake.requests) == 1

    other = one(client, "cached prompt", sample=1)
    assert other.ok and not other.cached and len(fake.requests) == 2
    assert [b["seed"] for b in fake.bodies] == [0, 1]  # draw 1 uses seed + 1

    fake.push(Fault.http(400))
    failed = one(client, "fails once")
    assert not failed.ok
    retried = one(client, "fails once")  # the failure was not cached
    assert retried.ok and not retried.cached and len(fake.requests) == 4
    assert client.usage.cache_hits == 1
    cache.close()
