"""LLMClient behaviour with the scripted test double (no model, no network)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from privacy_ci.llm import (
    GenerationSettings,
    LLMClient,
    LLMError,
    Price,
    ResponseCache,
    RetryPolicy,
    user,
)
from privacy_ci.llm.testing import ScriptedTestBackend


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def test_retry_then_success_records_retries_and_honours_retry_after() -> None:
    backend = ScriptedTestBackend(
        [
            LLMError("429", retryable=True, retry_after=3.0, status=429),
            LLMError("503", retryable=True, status=503),
            "ok",
        ]
    )
    sleep = SleepRecorder()
    seen: list[int] = []
    client = LLMClient(
        backend,
        sleep=sleep,
        retry=RetryPolicy(base_delay=0.5, jitter=0.0),
        on_retry=lambda a, e, d: seen.append(a),
    )
    c = run(client.complete([user("hi")]))
    assert c.ok and c.text == "ok" and c.retries == 2
    assert sleep.delays == [3.0, 1.0]  # Retry-After, then base * 2**1
    assert seen == [1, 2]
    assert client.usage.retries == 2 and client.usage.calls == 1


def test_retry_after_is_capped() -> None:
    policy = RetryPolicy(max_delay=5.0)
    assert policy.delay(0, 120.0, random.Random(0)) == 5.0


def test_backoff_grows_exponentially_within_jitter_bounds() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=100.0, jitter=0.5)
    rng = random.Random(1)
    for attempt in range(6):
        raw = 2.0**attempt
        d = policy.delay(attempt, None, rng)
        assert raw * 0.5 <= d <= raw


def test_non_retryable_fails_once_explicitly() -> None:
    backend = ScriptedTestBackend([LLMError("400 bad request", retryable=False, status=400), "x"])
    client = LLMClient(backend, sleep=SleepRecorder())
    c = run(client.complete([user("hi")]))
    assert not c.ok and "400 bad request" in (c.error or "") and "1 attempt" in (c.error or "")
    assert len(backend.calls) == 1 and c.finish_reason.value == "error"
    assert client.usage.failures == 1


def test_exhausted_retries_return_a_failure_value() -> None:
    backend = ScriptedTestBackend([LLMError("500", retryable=True, status=500)], cycle=True)
    client = LLMClient(backend, sleep=SleepRecorder(), retry=RetryPolicy(max_retries=3))
    c = run(client.complete([user("hi")]))
    assert not c.ok and c.retries == 3 and len(backend.calls) == 4
    assert "4 attempt(s)" in (c.error or "")


def test_batch_keeps_every_other_result() -> None:
    def answer(messages, settings):  # type: ignore[no-untyped-def]
        text = messages[-1].content
        if text == "q3":
            return LLMError("401 unauthorized", retryable=False, status=401)
        return text.upper()

    client = LLMClient(ScriptedTestBackend(answer), sleep=SleepRecorder(), concurrency=3)
    results = run(client.complete_many([[user(f"q{i}")] for i in range(8)]))
    assert [r.text for r in results] == ["Q0", "Q1", "Q2", "", "Q4", "Q5", "Q6", "Q7"]
    assert not results[3].ok and all(r.ok for i, r in enumerate(results) if i != 3)


def test_concurrency_limit() -> None:
    in_flight = 0
    peak = 0

    class Slow(ScriptedTestBackend):
        async def complete(self, messages, settings):  # type: ignore[no-untyped-def]
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return await super().complete(messages, settings)

    client = LLMClient(Slow(["a"], cycle=True), concurrency=4)
    run(client.complete_many([[user(str(i))] for i in range(20)]))
    assert peak == 4


def test_structured_output_parse_error_is_a_value() -> None:
    client = LLMClient(ScriptedTestBackend(['{"verdict": "permit"}', "not json"]))
    schema = {"type": "object", "properties": {"verdict": {"enum": ["permit", "prohibit"]}}}
    settings = GenerationSettings(json_schema=schema)
    good = run(client.complete([user("a")], settings))
    bad = run(client.complete([user("b")], settings))
    assert good.parsed == {"verdict": "permit"} and good.parse_error is None
    assert bad.ok and bad.parsed is None and bad.text == "not json"
    assert "invalid JSON" in (bad.parse_error or "")


def test_cache_hits_samples_and_no_error_caching(tmp_path: Path) -> None:
    backend = ScriptedTestBackend(["one", "two", LLMError("500", retryable=False), "three"])
    cache = ResponseCache(tmp_path / "c.sqlite")
    client = LLMClient(backend, cache=cache, sleep=SleepRecorder())
    first = run(client.complete([user("x")]))
    again = run(client.complete([user("x")]))
    assert (first.text, first.cached) == ("one", False)
    assert (again.text, again.cached) == ("one", True)
    assert len(backend.calls) == 1
    draw = run(client.complete([user("x")], sample=1))
    assert draw.text == "two" and backend.calls[-1][1].seed == 1  # seed + sample
    failed = run(client.complete([user("y")]))
    assert not failed.ok
    retried = run(client.complete([user("y")]))
    assert retried.text == "three"  # the failure was not cached
    assert cache.stats()["entries"] == 3
    assert client.usage.cache_hits == 1
    assert cache.clear() == 3 and cache.stats()["entries"] == 0


def test_cache_key_covers_settings(tmp_path: Path) -> None:
    backend = ScriptedTestBackend(["a", "b"])
    client = LLMClient(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    run(client.complete([user("x")], GenerationSettings(temperature=0.0)))
    c = run(client.complete([user("x")], GenerationSettings(temperature=0.7)))
    assert c.text == "b" and not c.cached


def test_usage_cost_and_tokens() -> None:
    client = LLMClient(ScriptedTestBackend(["a b c"]), price=Price(1.0, 2.0))
    run(client.complete([user("one two")]))
    u = client.usage.as_dict()
    assert (u["prompt_tokens"], u["completion_tokens"]) == (2, 3)
    assert u["cost_usd"] == pytest.approx((2 * 1.0 + 3 * 2.0) / 1e6)


def test_complete_sync_twice() -> None:
    client = LLMClient(ScriptedTestBackend(["a", "b"]))
    assert client.complete_sync([user("1")]).text == "a"
    assert client.complete_sync([user("2")]).text == "b"


def test_scripted_double_cannot_be_configured() -> None:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.llm import load_llm_config

    with pytest.raises(PrivacyCIError, match="provider"):
        load_llm_config({"provider": "scripted-test-double"})
