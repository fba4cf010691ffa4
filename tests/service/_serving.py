"""The service on a real uvicorn on 127.0.0.1, for the tests that need a socket
(disconnects, raw bodies, a browser, the HTTP adapters)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI


def wait_for(condition: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """Poll `condition` until it is true; an AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def wait_until_answering(
    proc: subprocess.Popen[bytes], url: str, what: str, log: Callable[[], str], timeout: float = 90
) -> None:
    """Poll `url` until it answers 200; an AssertionError with `log()` when the server
    process `proc` exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}:\n{log()}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not answer {url} within {timeout:.0f} s:\n{log()}")
        time.sleep(0.2)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """`app` on a real uvicorn on 127.0.0.1, in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, "uvicorn to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_process(db: Path, key_file: Path, log: Path) -> Iterator[str]:
    """A real ``privacy-ci serve`` process over the SQLite file `db` (its default
    logging, written to `log`); yields its base URL."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "privacy_ci.cli.main", "serve", "--db", str(db)),
                *("--jwt-key-file", str(key_file), "--port", str(port)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(proc, f"{base}/v1/health", "serve", log.read_text)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)
