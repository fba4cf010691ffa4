"""Model calls a caller abandons stop, and in-process generation runs at a lower CPU
priority than its caller (the service's gate endpoints keep the CPU)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from privacy_ci.llm import GenerationSettings, LLMError, user
from privacy_ci.llm._cancel import CANCELLED, cancel_requested
from privacy_ci.llm._embedded import CANCELLED_MESSAGE, EmbeddedBackend
from privacy_ci.llm._threads import MODEL_NICE, run_model_thread


class CountingEvent(threading.Event):
    """An event that reports itself set from its `after`-th check on (a token counter)."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks > self.after or super().is_set()


def test_the_cancel_event_travels_into_the_model_thread() -> None:
    event = threading.Event()

    async def go() -> tuple[bool, bool]:
        CANCELLED.set(event)
        before = await run_model_thread(cancel_requested)
        event.set()
        return before, await run_model_thread(cancel_requested)

    assert asyncio.run(go()) == (False, True)
    assert cancel_requested() is False  # outside that context nothing is cancelled


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_model_threads_run_at_a_lower_priority() -> None:
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = nice()
    assert asyncio.run(run_model_thread(nice)) == min(19, mine + MODEL_NICE)
    assert nice() == mine  # the caller's own thread is untouched


def test_the_model_nice_value_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.llm._threads import NICE_ENV, model_nice

    assert model_nice() == MODEL_NICE
    monkeypatch.setenv(NICE_ENV, "0")
    assert model_nice() == 0
    for bad in ("high", "20", "-1"):
        monkeypatch.setenv(NICE_ENV, bad)
        with pytest.raises(PrivacyCIError, match=NICE_ENV):
            model_nice()


@pytest.fixture(scope="module")
def backend() -> EmbeddedBackend:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    b = EmbeddedBackend()
    b.load()
    return b


STORY = [user("Write a long story about a lighthouse keeper and a storm.")]
LONG = GenerationSettings(max_tokens=400, temperature=0.0)


def _complete(backend: EmbeddedBackend, event: threading.Event | None) -> object:
    async def go() -> object:
        CANCELLED.set(event)
        try:
            return await backend.complete(STORY, LONG)
        except LLMError as exc:
            return exc

    return asyncio.run(go())


def test_a_generation_stops_between_tokens_when_cancelled(backend: EmbeddedBackend) -> None:
    uncancelled = _complete(backend, threading.Event())
    assert not isinstance(uncancelled, LLMError)
    assert uncancelled.completion_tokens > 20  # type: ignore[attr-defined]
    event = CountingEvent(after=6)  # one check before the lock, then one per token
    stopped = _complete(backend, event)
    assert isinstance(stopped, LLMError) and str(stopped) == CANCELLED_MESSAGE
    assert not stopped.retryable
    assert event.checks == 7  # it stopped at the first check that saw the event set
    # the model's lock was released: the next call runs normally
    again = _complete(backend, None)
    assert again.text == uncancelled.text  # type: ignore[attr-defined]


def test_a_call_abandoned_while_waiting_never_starts(backend: EmbeddedBackend) -> None:
    event = threading.Event()
    event.set()
    stopped = _complete(backend, event)
    assert isinstance(stopped, LLMError) and str(stopped) == CANCELLED_MESSAGE
