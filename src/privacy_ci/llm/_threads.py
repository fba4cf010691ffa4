"""Worker threads for in-process model generation, at a lower CPU priority.

llama.cpp evaluates a prompt on every core. In a process that also answers
latency-bound requests (the service's gate endpoints, or an event loop driving
many calls), a generation would then take the CPU from them. Generation runs
here instead: threads whose Linux nice value is raised (`MODEL_NICE`), which
llama.cpp's compute threads inherit when it starts them from such a thread. The
model still uses every idle core; it only yields when something else needs one.
Elsewhere (no per-thread priorities) the threads run at normal priority.

Calls keep the caller's context variables (like `asyncio.to_thread`), so the
cancellation event of `privacy_ci.llm._cancel` reaches the generation, and each
thread is registered with the caller's `ModelWork` until it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm._cancel import track_model_thread

T = TypeVar("T")

MODEL_NICE = 10
"""How much lower model threads run by default (CFS weight about 1/10 of a normal
thread's); ``PRIVACY_CI_MODEL_NICE`` overrides it (0: normal priority)."""
NICE_ENV = "PRIVACY_CI_MODEL_NICE"


def model_nice() -> int:
    """The nice increment for model threads: `NICE_ENV` if set (0-19), else `MODEL_NICE`."""
    raw = os.environ.get(NICE_ENV, "").strip()
    if not raw:
        return MODEL_NICE
    try:
        value = int(raw)
    except ValueError:
        raise PrivacyCIError(f"{NICE_ENV} must be an integer from 0 to 19, got {raw!r}") from None
    if not 0 <= value <= 19:
        raise PrivacyCIError(f"{NICE_ENV} must be an integer from 0 to 19, got {raw!r}")
    return value


_EXECUTOR: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def _lower_priority(nice: int) -> None:
    # Linux: nice applies to the calling thread alone (its native id); elsewhere, or
    # when not permitted, the thread keeps normal priority
    if nice:
        with contextlib.suppress(AttributeError, OSError):
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)


def model_executor() -> ThreadPoolExecutor:
    """The shared low-priority executor for model generation (created on first use)."""
    global _EXECUTOR
    with _LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(
                max_workers=8,
                thread_name_prefix="privacy-ci-model",
                initializer=_lower_priority,
                initargs=(model_nice(),),
            )
        return _EXECUTOR


async def run_model_thread(fn: Callable[..., T], /, *args: object) -> T:
    """`fn(*args)` in a low-priority model thread, with the caller's context.

    The thread is registered with the caller's `ModelWork`, if any: cancelling the
    awaiting task returns at once, and the work's owner waits for the thread itself.
    """
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    future = model_executor().submit(call)
    track_model_thread(future)
    return await asyncio.wrap_future(future)
