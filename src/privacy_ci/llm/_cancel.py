"""Cooperative cancellation of model work that runs in a worker thread.

An asyncio task can be cancelled, but a llama.cpp generation running in a worker
thread cannot: it would run to its last token and hold the model's lock. A caller
that may abandon a call (the service, when a client disconnects or a deadline
passes) sets `CANCELLED` to an event before calling; the event travels into the
worker thread with the context (`asyncio.to_thread` and `run_model_thread` copy
it), and the embedded backend checks it while it waits for the model, between
chunks of the prompt and after every token.

Cancelling the asyncio task returns at once while the thread still computes, so a
caller that counts work (the service's slots) also needs to know when the thread
has stopped: `ModelWork` is the event plus the model threads started under it
(`run_model_thread` registers them), and `ModelWork.stopped` waits for them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from typing import Any

CANCELLED: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "privacy_ci_llm_cancelled", default=None
)
_WORK: contextvars.ContextVar[ModelWork | None] = contextvars.ContextVar(
    "privacy_ci_llm_work", default=None
)


def cancel_requested() -> bool:
    """Whether the caller of the current model call has abandoned it."""
    event = CANCELLED.get()
    return event is not None and event.is_set()


class ModelWork:
    """One piece of model work a caller may abandon: its cancel event and its threads.

    `enter` makes it the current context's work: every model call made from that
    context (and the tasks and threads it starts) sees `event`, and every model
    thread started from it is tracked until it returns.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._threads: set[concurrent.futures.Future[Any]] = set()

    def enter(self) -> None:
        """Make this the work of the current context (call it in the job's own task)."""
        CANCELLED.set(self.event)
        _WORK.set(self)

    def cancel(self) -> None:
        """Ask every model call of this work to stop at its next check."""
        self.event.set()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()

    @property
    def running(self) -> int:
        """Model threads of this work still computing."""
        with self._lock:
            return len(self._threads)

    def track(self, future: concurrent.futures.Future[Any]) -> None:
        """Count `future` (a model thread's) as running until it is done."""
        with self._lock:
            self._threads.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._threads.discard(future)

    async def stopped(self) -> None:
        """Return once no model thread of this work is computing."""
        while True:
            with self._lock:
                pending = list(self._threads)
            if not pending:
                return
            waits = [asyncio.wrap_future(f) for f in pending]
            await asyncio.wait(waits)
            for w in waits:  # the thread's outcome belongs to its own caller
                if not w.cancelled():
                    w.exception()


def track_model_thread(future: concurrent.futures.Future[Any]) -> None:
    """Register a model thread with the current `ModelWork`, if the caller set one."""
    work = _WORK.get()
    if work is not None:
        work.track(future)
