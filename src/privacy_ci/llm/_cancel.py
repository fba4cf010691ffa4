"""Cooperative cancellation of model work that runs in a worker thread.

An asyncio task can be cancelled, but a llama.cpp generation running in
`asyncio.to_thread` cannot: it would run to its last token and hold the model's
lock. A caller that may abandon a call (the service, when a client disconnects or
a deadline passes) sets `CANCELLED` to an event before calling; the event travels
into the worker thread with the context (`asyncio.to_thread` copies it), and the
embedded backend checks it before it starts and after every token.
"""

from __future__ import annotations

import contextvars
import threading

CANCELLED: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "privacy_ci_llm_cancelled", default=None
)


def cancel_requested() -> bool:
    """Whether the caller of the current model call has abandoned it."""
    event = CANCELLED.get()
    return event is not None and event.is_set()
