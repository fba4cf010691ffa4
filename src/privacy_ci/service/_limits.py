"""Bounds on what one requester, and all of them together, can make the service do.

* `RateLimiter`: a token bucket per requester (keyed by the verified agent id), so
  one requester cannot flood the audit log or the model; over the limit is HTTP 429
  with ``Retry-After``.
* `WorkPool`: a fixed number of model jobs at a time per endpoint and a bounded
  queue in front of them; a full queue is HTTP 503 with ``Retry-After`` instead of
  an unbounded wait. A job runs under a deadline and is cancelled when its client
  goes away (`run_bounded`), so abandoned work does not hold a slot.

The cheap endpoints (decide, retrieve) never wait on a `WorkPool`: they keep their
latency while the model endpoints are saturated.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm._cancel import CANCELLED

T = TypeVar("T")


class RateLimited(PrivacyCIError):
    """The requester sent more than its rate allows (HTTP 429)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Busy(PrivacyCIError):
    """Every slot and queue place of a model endpoint is taken (HTTP 503)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TimedOut(PrivacyCIError):
    """A model job ran past its deadline and was stopped (HTTP 504)."""


class ClientGone(PrivacyCIError):
    """The client disconnected; its job was cancelled (nobody reads the answer)."""


def retry_after_header(seconds: float) -> dict[str, str]:
    """``Retry-After`` in whole seconds, at least 1 (RFC 9110 allows no fractions)."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


@dataclass(frozen=True)
class Rate:
    """A token bucket: `per_s` tokens a second, at most `burst` saved up.

    Args:
        per_s: sustained rate (tokens per second).
        burst: bucket size: how much may be spent at once after a quiet spell.
    """

    per_s: float
    burst: float

    def __post_init__(self) -> None:
        if self.per_s <= 0 or self.burst < 1:
            # a programming error: rates come from code (ServiceSettings), not users
            raise ValueError("a rate needs per_s > 0 and burst >= 1")


class RateLimiter:
    """Token buckets per key (a requester id), least recently used forgotten first.

    Args:
        rate: the bucket every key gets.
        name: what is limited, for messages (``model requests``, ``decisions``).
        max_keys: how many keys to remember (a forgotten key starts with a full bucket).
        clock: the time source (tests pass a fake one).
    """

    def __init__(
        self,
        rate: Rate,
        name: str,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.name = name
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, cost: float = 1.0) -> None:
        """Spend `cost` tokens of `key`'s bucket.

        Raises:
            RateLimited: not enough tokens; nothing is spent. ``retry_after`` says
                when there will be. A cost above the burst can never be paid and
                says so.
        """
        if cost > self.rate.burst:
            raise RateLimited(
                f"this request costs {cost:g} {self.name}, more than the limit of"
                f" {self.rate.burst:g} at once: split it",
                retry_after=cost / self.rate.per_s,
            )
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.pop(key, (self.rate.burst, now))
            tokens = min(self.rate.burst, tokens + (now - then) * self.rate.per_s)
            if tokens < cost:
                self._buckets[key] = (tokens, now)
                wait = (cost - tokens) / self.rate.per_s
                raise RateLimited(
                    f"rate limit: at most {self.rate.per_s:g} {self.name} per second"
                    f" (bursts of {self.rate.burst:g}) per requester; retry in {wait:.1f} s",
                    retry_after=wait,
                )
            self._buckets[key] = (tokens - cost, now)
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)


class WorkPool:
    """At most `slots` jobs at once and `queue` more waiting; the rest are refused.

    Args:
        name: the endpoint, for messages.
        slots: jobs that run at the same time.
        queue: jobs that may wait for a slot (0: none wait).
    """

    def __init__(self, name: str, slots: int, queue: int) -> None:
        if slots < 1 or queue < 0:
            # a programming error: the CLI checks --model-slots and --model-queue first
            raise ValueError("a work pool needs slots >= 1 and queue >= 0")
        self.name = name
        self.slots = slots
        self.queue = queue
        self._sem = asyncio.Semaphore(slots)
        self._admitted = 0  # running + waiting
        self._mean_s = 5.0  # running estimate of a job's duration, for Retry-After

    @property
    def admitted(self) -> int:
        """Jobs running or waiting now."""
        return self._admitted

    def _retry_after(self) -> float:
        return self._mean_s * (1 + self._admitted / self.slots)

    async def run(self, job: Callable[[], Awaitable[T]]) -> T:
        """Run `job` in a slot, waiting in the queue if need be.

        Raises:
            Busy: every slot and queue place is taken (nothing was started).
        """
        if self._admitted >= self.slots + self.queue:
            raise Busy(
                f"{self.name} is busy: {self.slots} running and {self.queue} waiting;"
                " try again later",
                retry_after=self._retry_after(),
            )
        self._admitted += 1
        try:
            async with self._sem:
                start = time.monotonic()
                try:
                    return await job()
                finally:
                    # exponential moving average of recent job durations
                    self._mean_s = 0.8 * self._mean_s + 0.2 * (time.monotonic() - start)
        finally:
            self._admitted -= 1


async def run_bounded(
    job: Callable[[], Awaitable[T]],
    *,
    timeout_s: float,
    disconnected: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """Run `job` until it finishes, its deadline passes, or the client goes away.

    The job sees a fresh `CANCELLED` event; it is set (and the task cancelled) on
    timeout or disconnect, so work in a worker thread stops at its next check.

    Args:
        job: the model work.
        timeout_s: the deadline in seconds.
        disconnected: a coroutine function that returns when the client disconnects.

    Raises:
        TimedOut: the deadline passed.
        ClientGone: the client disconnected first.
    """
    cancelled = threading.Event()

    async def guarded() -> T:
        CANCELLED.set(cancelled)
        return await job()

    work: asyncio.Task[T] = asyncio.ensure_future(guarded())
    watcher: asyncio.Task[None] | None = (
        asyncio.ensure_future(disconnected()) if disconnected is not None else None
    )
    waiting: set[asyncio.Future[object]] = {work}  # type: ignore[arg-type]
    if watcher is not None:
        waiting.add(watcher)  # type: ignore[arg-type]
    try:
        done, _ = await asyncio.wait(
            waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    except asyncio.CancelledError:
        cancelled.set()
        work.cancel()
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
    if work in done:
        return work.result()
    cancelled.set()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    if watcher is not None and watcher in done:
        raise ClientGone("the client disconnected; its job was cancelled")
    raise TimedOut(f"the model did not answer within {timeout_s:g} s; the job was stopped")
