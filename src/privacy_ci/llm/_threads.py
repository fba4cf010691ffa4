"""Worker threads for in-process model generation, at a lower CPU priority.

llama.cpp evaluates a prompt on every core. In a process that also answers
latency-bound requests (the service's gate endpoints, or an event loop driving
many calls), a generation would then take the CPU from them. Generation runs
here instead: threads whose Linux nice value is raised (`MODEL_NICE`), which
llama.cpp's compute threads inherit when it starts them from such a thread. The
model still uses every idle core; it only yields when something else needs one.
Elsewhere (no per-thread priorities) the threads run at normal priority.

Calls keep the caller's context variables (like `asyncio.to_thread`), so the
cancellation event of `privacy_ci.llm._cancel` reaches the generation.
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

T = TypeVar("T")

MODEL_NICE = 10
"""How much lower model threads run (CFS weight about 1/10 of a normal thread's)."""

_EXECUTOR: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def _lower_priority() -> None:
    # Linux: nice applies to the calling thread alone (its native id); elsewhere, or
    # when not permitted, the thread keeps normal priority
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MODEL_NICE)


def model_executor() -> ThreadPoolExecutor:
    """The shared low-priority executor for model generation (created on first use)."""
    global _EXECUTOR
    with _LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(
                max_workers=8, thread_name_prefix="privacy-ci-model", initializer=_lower_priority
            )
        return _EXECUTOR


async def run_model_thread(fn: Callable[..., T], /, *args: object) -> T:
    """`fn(*args)` in a low-priority model thread, with the caller's context."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await loop.run_in_executor(model_executor(), call)
