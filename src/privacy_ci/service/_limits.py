"""Bounds on what one requester, and all of them together, can make the service do.

* `RateLimiter`: a token bucket per requester (keyed by the verified agent id), so
  one requester cannot flood the audit log or the model; over the limit is HTTP 429
  with ``Retry-After``.
* `WorkPool`: a fixed number of model jobs at a time per endpoint and a bounded
  queue in front of them; a full queue is HTTP 503 with ``Retry-After`` instead of
  an unbounded wait. Slots go round robin across the requesters waiting, and one
  requester holds at most its share of the places (HTTP 429 beyond), so one
  requester's burst neither delays nor locks out the others. A job runs under a
  deadline and is cancelled when its client goes away (`run_bounded`): the model
  stops at its next check, and the slot frees once it has stopped, not before.

The cheap endpoints (decide, retrieve) never wait on a `WorkPool`: they keep their
latency while the model endpoints are saturated.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm._cancel import ModelWork

T = TypeVar("T")

_REMEMBERED = 10_000
"""Requesters whose last turn a `WorkPool` remembers (those idle longest go first)."""


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


class OverShare(RateLimited):
    """The requester already holds its share of a model endpoint's places (HTTP 429)."""


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

    Waiting jobs are served fairly across requesters, not first come first served:
    when a slot frees, it goes to the waiting requester with the fewest jobs running,
    and among those to the one served least recently (round robin); one requester's
    own jobs start in the order they came. One requester holds at most `share` of the
    places (running and waiting), so it cannot fill the queue for everyone else.

    Args:
        name: the endpoint, for messages.
        slots: jobs that run at the same time.
        queue: jobs that may wait for a slot (0: none wait).
        share: jobs one requester may hold, running and waiting (default: half the
            places, at least 1).
    """

    def __init__(self, name: str, slots: int, queue: int, share: int | None = None) -> None:
        if share is None:
            share = default_share(slots, queue)
        if slots < 1 or queue < 0 or share < 1:
            # a programming error: the CLI checks its options first
            raise ValueError("a work pool needs slots >= 1, queue >= 0 and share >= 1")
        self.name = name
        self.slots = slots
        self.queue = queue
        self.share = share
        self._free = slots
        self._admitted = 0  # running + waiting
        self._held: dict[str, int] = {}  # per requester: running + waiting
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        # when each requester last got a slot, least recent first
        self._served: OrderedDict[str, int] = OrderedDict()
        self._turn = itertools.count()
        self._mean_s = 5.0  # running estimate of a job's duration, for Retry-After

    @property
    def admitted(self) -> int:
        """Jobs running or waiting now."""
        return self._admitted

    def holding(self, requester: str) -> int:
        """Jobs of `requester` running or waiting now."""
        return self._held.get(requester, 0)

    def _retry_after(self) -> float:
        return self._mean_s * (1 + self._admitted / self.slots)

    async def run(self, job: Callable[[], Awaitable[T]], requester: str = "") -> T:
        """Run `job` for `requester` in a slot, waiting in the queue if need be.

        Raises:
            Busy: every slot and queue place is taken (nothing was started).
            OverShare: `requester` already holds its share of the places.
        """
        if self._admitted >= self.slots + self.queue:
            raise Busy(
                f"{self.name} is busy: {self.slots} running and {self.queue} waiting;"
                " try again later",
                retry_after=self._retry_after(),
            )
        if self.holding(requester) >= self.share:
            jobs = "1 job" if self.share == 1 else f"{self.share} jobs"
            raise OverShare(
                f"{self.name}: you already have {jobs} running or waiting, as many as one"
                " requester may hold; try again when one has finished",
                retry_after=self._mean_s * (1 + self.share / self.slots),
            )
        self._admitted += 1
        self._held[requester] = self.holding(requester) + 1
        try:
            await self._acquire(requester)
            try:
                start = time.monotonic()
                try:
                    return await job()
                finally:
                    # exponential moving average of recent job durations
                    self._mean_s = 0.8 * self._mean_s + 0.2 * (time.monotonic() - start)
            finally:
                self._release(requester)
        finally:
            self._admitted -= 1
            self._held[requester] -= 1
            if not self._held[requester]:
                del self._held[requester]

    def _grant(self, requester: str) -> None:
        self._free -= 1
        self._running[requester] = self._running.get(requester, 0) + 1
        self._served[requester] = next(self._turn)
        self._served.move_to_end(requester)
        if len(self._served) > _REMEMBERED:
            # forget the longest-idle requesters (they rank as never served)
            for idle in [r for r in self._served if r not in self._held][: _REMEMBERED // 10]:
                del self._served[idle]

    async def _acquire(self, requester: str) -> None:
        if self._free and not self._waiting:
            self._grant(requester)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(requester, deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release(requester)  # granted just before the cancel arrived
            else:
                queue = self._waiting[requester]
                queue.remove(granted)
                if not queue:
                    del self._waiting[requester]
            raise

    def _release(self, requester: str) -> None:
        self._free += 1
        self._running[requester] -= 1
        if not self._running[requester]:
            del self._running[requester]
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to waiting requesters: fewest running first, then the one
        served least recently; FIFO within one requester."""
        while self._free and self._waiting:
            requester = min(
                self._waiting,
                key=lambda r: (self._running.get(r, 0), self._served.get(r, -1)),
            )
            queue = self._waiting[requester]
            granted = queue.popleft()
            if not queue:
                del self._waiting[requester]
            if granted.done():  # defensive: a cancelled waiter removes itself
                continue
            self._grant(requester)
            granted.set_result(None)


def default_share(slots: int, queue: int) -> int:
    """Places one requester may hold by default: half of them, at least 1."""
    return max(1, (slots + queue) // 2)


async def run_bounded(
    job: Callable[[], Awaitable[T]],
    *,
    timeout_s: float,
    disconnected: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """Run `job` until it finishes, its deadline passes, or the client goes away.

    The job runs as a fresh `ModelWork`: its cancel event is set (and the task
    cancelled) on timeout or disconnect, so work in a model thread stops at its next
    check (the next token, the next chunk of a prompt; an HTTP backend's request is
    closed with the task). This returns only once the job's model threads have
    stopped, so a slot held around it is never free while the model still computes.

    Args:
        job: the model work.
        timeout_s: the deadline in seconds.
        disconnected: a coroutine function that returns when the client disconnects.

    Raises:
        TimedOut: the deadline passed.
        ClientGone: the client disconnected first.
    """
    work_of_job = ModelWork()

    async def guarded() -> T:
        work_of_job.enter()
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
        # the caller is gone too: stop the work, and still wait for its threads
        await _stop(work, work_of_job)
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
    if work in done:
        # nothing may go on computing for a finished job (a sibling call of a failed
        # `gather`, say): stop it and wait, which costs nothing when all is done
        await _stop(work, work_of_job)
        return work.result()
    await _stop(work, work_of_job)
    if watcher is not None and watcher in done:
        raise ClientGone("the client disconnected; its job was cancelled")
    raise TimedOut(f"the model did not answer within {timeout_s:g} s; the job was stopped")


async def _stop(work: asyncio.Task[T], model_work: ModelWork) -> None:
    """Cancel `work` and wait until it and its model threads have stopped.

    A second cancellation of the caller while waiting is deferred until the threads
    have stopped (they stop at their next check), then re-raised.
    """
    model_work.cancel()
    work.cancel()
    settled = asyncio.ensure_future(_settled(work, model_work))
    interrupted = False
    while True:
        try:
            await asyncio.shield(settled)
            break
        except asyncio.CancelledError:
            interrupted = True
    if interrupted:
        raise asyncio.CancelledError


async def _settled(work: asyncio.Task[T], model_work: ModelWork) -> None:
    await asyncio.wait({work})
    if not work.cancelled():
        work.exception()  # a job that failed as it was stopped: nobody reads that
    await model_work.stopped()
