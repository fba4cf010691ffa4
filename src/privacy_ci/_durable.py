"""Durable run folders: JSONL records appended and fsynced as they finish, a
reader that tolerates a last line cut short by a kill, atomic JSON files, and
the code version stamped into manifests.

Shared by the evaluation runner, the labeling experiment and the knowledge base
build (the last two through `privacy_ci._model_run`), whose runs must all survive
SIGKILL without losing or duplicating a finished record.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import os
import platform
import queue
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privacy_ci import __version__
from privacy_ci.errors import PrivacyCIError


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def code_version() -> dict[str, Any]:
    """The package version, git commit (when run from a checkout) and Python version."""
    return {
        "privacy_ci": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
    }


def git_commit() -> str | None:
    """The checkout's HEAD commit, when the package runs from a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


def read_json(path: Path, missing: str) -> Any:
    """A run's or a folder's JSON file (a manifest), read back.

    Args:
        path: the file.
        missing: the message when there is no such file (what the folder is not, and
            which command makes one).

    Raises:
        PrivacyCIError: no such file (`missing`), or its text is not JSON.
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PrivacyCIError(missing) from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise PrivacyCIError(f"{path}: not JSON ({exc})") from None


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON to `path` via a temp file, fsync and rename (never half written)."""
    data = json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """fsync a folder so a rename in it survives a crash."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass
class RecordsRead:
    """What `read_records` found in a records file.

    Args:
        records: the complete records, in file order.
        valid_bytes: the length of the file's well-formed prefix.
        discarded: bytes of a partial last record (cut short by a kill), if any.
    """

    records: list[dict[str, Any]]
    valid_bytes: int
    discarded: int


def read_records(path: Path | str, key: str = "case_id") -> RecordsRead:
    """Read a ``records.jsonl``, tolerating a partially written last line.

    A last line without its newline, or whose text is not a JSON object, is
    reported in ``discarded`` (its case was in flight when the run stopped). A
    malformed line before the last one means the file was damaged otherwise.

    Args:
        path: the file (a missing file reads as empty).
        key: the field every record carries (its identity).

    Returns:
        The `RecordsRead`.

    Raises:
        PrivacyCIError: a malformed line before the last, or a record without `key`.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return RecordsRead([], 0, 0)
    records: list[dict[str, Any]] = []
    offset = 0
    *complete, _tail = data.split(b"\n")  # _tail: bytes after the last newline
    for number, raw in enumerate(complete, start=1):
        try:
            record = json.loads(raw.decode("utf-8"))
            if not isinstance(record, dict) or key not in record:
                raise ValueError("not a record")
        except (UnicodeDecodeError, ValueError, RecursionError):  # (a line nested too deeply)
            if number == len(complete) and not _tail:
                break  # a last line that is not a record: treat it as cut short
            raise PrivacyCIError(
                f"{path}: line {number} is not a run record; the file is damaged "
                "(remove the line, or start a new run in another folder)"
            ) from None
        records.append(record)
        offset += len(raw) + 1
    return RecordsRead(records, offset, len(data) - offset)


def resume_records(path: Path, key: str = "case_id") -> RecordsRead:
    """`read_records` for a run about to append: a partial last record (cut short by a
    kill) is cut off the file and fsynced, so its item runs again and the next record
    starts on a line of its own.

    Args:
        path: the records file (a missing file reads as empty).
        key: the field every record carries (its identity).

    Returns:
        The `RecordsRead` (``discarded``: the bytes cut off).

    Raises:
        PrivacyCIError: a malformed line before the last, or a record without `key`.
    """
    read = read_records(path, key=key)
    if read.discarded:
        with path.open("r+b") as fh:
            fh.truncate(read.valid_bytes)
            fh.flush()
            os.fsync(fh.fileno())
    return read


class RecordWriter:
    """Appends one JSON line per record from a writer thread, with group commit.

    `write` hands the line to the thread and waits until it is on disk: the thread
    writes every line queued so far, fsyncs once, then releases their writers, so
    the event loop never blocks on the disk and concurrent cases share fsyncs.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._queue: queue.SimpleQueue[tuple[bytes, Callable[[BaseException | None], None]] | None]
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="record-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            stop = False
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            error: BaseException | None = None
            try:
                for data, _ in batch:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(self._fd, view) :]
                os.fsync(self._fd)
            except BaseException as exc:  # reported to every waiting writer
                error = exc
            for _, done in batch:
                done(error)
            if stop:
                return

    async def write(self, record: Mapping[str, Any]) -> None:
        """Append `record` as one line; returns once it is fsynced."""
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def done(error: BaseException | None) -> None:
            def settle() -> None:
                if future.done():
                    return
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

            with contextlib.suppress(RuntimeError):  # the loop closed (the run was cancelled)
                loop.call_soon_threadsafe(settle)

        self._queue.put((line, done))
        await future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        os.close(self._fd)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    return {prefix: value}


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per leaf key whose value differs between two manifests' identities."""
    a, b = _flatten(old), _flatten(new)
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            out.append(f"{key}: {a.get(key, '<absent>')!r} there, {b.get(key, '<absent>')!r} now")
    return out
