"""Download and verify the public data files.

Each file is streamed to a temporary file in its destination folder, checked
against the pinned sha256 and size of the manifest, then renamed into place
atomically, so the data directory never holds a partial or unverified file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import unquote, urlsplit

from privacy_ci.data._manifest import Source, select
from privacy_ci.data._paths import data_dir
from privacy_ci.errors import DataIntegrityError, PrivacyCIError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "FetchProgress",
    "FetchReport",
    "FileResult",
    "FileStatus",
    "RetriesExhausted",
    "VerifyStatus",
    "download_file",
    "fetch",
    "sha256_file",
    "verify",
]

FileStatus = Literal["downloaded", "present", "failed"]
"""Outcome of one file in `fetch`."""

VerifyStatus = Literal["ok", "missing", "corrupt"]
"""State of one file in `verify`."""

_CHUNK = 1 << 16
_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class FetchProgress(Protocol):
    """Receives progress events from `fetch` (the CLI draws a progress bar with it)."""

    def start(self, source: Source, url: str) -> None:
        """A download (or a retry of it) starts; bytes counted so far are discarded."""

    def advance(self, source: Source, nbytes: int) -> None:
        """``nbytes`` more bytes of ``source`` were received."""

    def finish(self, result: FileResult) -> None:
        """A file is done: downloaded, already present or failed."""


@dataclass(frozen=True, slots=True)
class FileResult:
    """What `fetch` did with one file.

    Attributes:
        path: path relative to the data directory.
        status: ``downloaded``, ``present`` (already there with the right hash) or ``failed``.
        bytes: bytes transferred for this file (0 when present).
        size: expected size from the manifest.
        url: where it was (or would have been) downloaded from.
        error: one-line reason, when failed.
        exception: the error itself, when failed (not serialised).
    """

    path: str
    status: FileStatus
    bytes: int
    size: int
    url: str
    error: str | None = None
    exception: PrivacyCIError | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this result.

        Returns:
            ``path``, ``status``, ``bytes``, ``size``, ``url`` and ``error``.
        """
        return {
            "path": self.path,
            "status": self.status,
            "bytes": self.bytes,
            "size": self.size,
            "url": self.url,
            "error": self.error,
        }


@dataclass(slots=True)
class FetchReport:
    """The outcome of `fetch`: one `FileResult` per selected file, in manifest order.

    Attributes:
        dest: the data directory written to.
        source: where files came from (upstream base URL or mirror).
        files: per-file results.
    """

    dest: Path
    source: str
    files: list[FileResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no file failed."""
        return not self.failed

    @property
    def downloaded(self) -> list[FileResult]:
        """Files that were downloaded and verified."""
        return [f for f in self.files if f.status == "downloaded"]

    @property
    def present(self) -> list[FileResult]:
        """Files that were already present with the right hash."""
        return [f for f in self.files if f.status == "present"]

    @property
    def failed(self) -> list[FileResult]:
        """Files that could not be fetched."""
        return [f for f in self.files if f.status == "failed"]

    @property
    def bytes_downloaded(self) -> int:
        """Total bytes transferred."""
        return sum(f.bytes for f in self.files)

    def summary(self) -> str:
        """One line: counts per status, bytes and destination.

        Returns:
            E.g. ``"34 downloaded (23.1 MB), 1 present, 0 failed in /data"``.
        """
        return (
            f"{len(self.downloaded)} downloaded ({_human(self.bytes_downloaded)}), "
            f"{len(self.present)} present, {len(self.failed)} failed in {self.dest}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the report.

        Returns:
            ``dest``, ``source``, ``ok``, ``summary`` (counts) and ``files``.
        """
        return {
            "dest": str(self.dest),
            "source": self.source,
            "ok": self.ok,
            "summary": {
                "downloaded": len(self.downloaded),
                "present": len(self.present),
                "failed": len(self.failed),
                "bytes": self.bytes_downloaded,
            },
            "files": [f.to_dict() for f in self.files],
        }

    def raise_for_failures(self) -> None:
        """Raise if any file failed.

        Raises:
            PrivacyCIError: the error of the only failed file, or one error listing all
                failed files (a `DataIntegrityError` if any of them had a hash mismatch).
        """
        failed = self.failed
        if not failed:
            return
        if len(failed) == 1 and failed[0].exception is not None:
            raise failed[0].exception
        lines = [f"{len(failed)} of {len(self.files)} data files failed:"]
        lines += [f"  {f.path}: {f.error}" for f in failed]
        cls = (
            DataIntegrityError
            if any(isinstance(f.exception, DataIntegrityError) for f in failed)
            else PrivacyCIError
        )
        raise cls("\n".join(lines))


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def sha256_file(path: Path) -> str:
    """The sha256 of a file.

    Args:
        path: the file.

    Returns:
        64 lowercase hex digits.
    """
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _state(path: Path, source: Source) -> VerifyStatus:
    try:
        if not path.is_file():
            return "missing"
        if path.stat().st_size != source.size:
            return "corrupt"
        return "ok" if sha256_file(path) == source.sha256 else "corrupt"
    except OSError:
        return "corrupt"


def verify(
    dest: Path | None = None, *, only: Sequence[str] | None = None
) -> list[tuple[str, VerifyStatus]]:
    """Check every manifest file in a data directory against its pinned hash.

    Args:
        dest: the data directory (default `data_dir()`).
        only: path prefixes to check (default all files).

    Returns:
        ``(path, status)`` per file in manifest order; status is ``ok``, ``missing`` or
        ``corrupt`` (wrong size or sha256, or unreadable).

    Raises:
        PrivacyCIError: a prefix in ``only`` matches no file.
    """
    root = data_dir() if dest is None else Path(dest)
    return [(s.path, _state(root / s.path, s)) for s in select(only)]


class _Transient(Exception):
    """A failure worth retrying (connection error, timeout, 5xx)."""

    def __init__(self, message: str, *, connection: bool = False) -> None:
        super().__init__(message)
        self.connection = connection


class RetriesExhausted(PrivacyCIError):
    """A download kept failing with connection errors, timeouts or 5xx replies.

    Attributes:
        connection: the last failure was a failed connection (host unreachable).
    """

    def __init__(self, message: str, *, connection: bool = False) -> None:
        super().__init__(message)
        self.connection = connection


def _write_verified(
    chunks: Iterable[bytes],
    target: Path,
    *,
    sha256: str,
    size: int | None,
    what: str,
    label: str,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Stream chunks to a temp file next to ``target``, verify, then rename into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        n = 0
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                n += len(chunk)
                if size is not None and n > size:
                    raise DataIntegrityError(
                        f"{label}: got more than the expected {size} bytes from {what} "
                        f"(expected sha256 {sha256}); the partial download was removed"
                    )
                digest.update(chunk)
                fh.write(chunk)
                if on_chunk is not None:
                    on_chunk(len(chunk))
            fh.flush()
            os.fsync(fh.fileno())
        actual = digest.hexdigest()
        if actual != sha256 or (size is not None and n != size):
            expected_size = f" ({size} bytes)" if size is not None else ""
            raise DataIntegrityError(
                f"{label}: sha256 mismatch for {what}: expected {sha256}{expected_size}, "
                f"got {actual} ({n} bytes); the download was discarded"
            )
        tmp.chmod(0o644)
        os.replace(tmp, target)
        return n
    finally:
        tmp.unlink(missing_ok=True)


def _http_attempt(
    client: httpx.Client,
    url: str,
    target: Path,
    sha256: str,
    size: int | None,
    label: str,
    on_chunk: Callable[[int], None] | None,
) -> int:
    import httpx

    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                if response.status_code in _RETRY_STATUS:
                    raise _Transient(status)
                raise PrivacyCIError(f"GET {url} failed: {status}")
            return _write_verified(
                response.iter_bytes(_CHUNK),
                target,
                sha256=sha256,
                size=size,
                what=url,
                label=label,
                on_chunk=on_chunk,
            )
    except httpx.TransportError as exc:
        connection = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
        message = f"{type(exc).__name__}: {exc}".rstrip(": ")
        raise _Transient(message, connection=connection) from exc


def _local_path(location: str) -> Path | None:
    """A local directory mirror (plain path or file:// URL), else None."""
    parts = urlsplit(location)
    if parts.scheme in ("http", "https"):
        return None
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    return Path(location).expanduser()


def download_file(
    url: str,
    target: Path,
    *,
    sha256: str,
    size: int | None = None,
    client: httpx.Client | None = None,
    timeout: float = 60,
    retries: int = 3,
    backoff: float = 0.5,
    label: str | None = None,
    on_start: Callable[[], None] | None = None,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Download one URL (or copy one local file) to ``target`` if it matches ``sha256``.

    Args:
        url: ``http(s)://`` URL, ``file://`` URL or local path.
        target: final path; a temp file in the same folder is renamed onto it.
        sha256: expected sha256 (64 hex).
        size: expected size in bytes, if known (a larger body is cut off early).
        client: HTTP client to use (a temporary one is made if None).
        timeout: seconds, per network operation, for a temporary client.
        retries: extra attempts after connection errors, timeouts and 5xx/429 replies.
        backoff: seconds before the first retry; doubled after each.
        label: name of the file in error messages (default ``target.name``).
        on_start: called before each attempt (progress display).
        on_chunk: called with the size of each chunk received.

    Returns:
        The number of bytes written.

    Raises:
        DataIntegrityError: the bytes do not match ``sha256``/``size``; no file is left.
        PrivacyCIError: HTTP error naming the URL and status (`RetriesExhausted` when
            retries ran out).
        OSError: the target folder cannot be written.
    """
    label = label or target.name
    local = _local_path(url)
    if local is not None:
        if on_start is not None:
            on_start()
        try:
            with local.open("rb") as fh:
                return _write_verified(
                    iter(lambda: fh.read(_CHUNK), b""),
                    target,
                    sha256=sha256,
                    size=size,
                    what=str(local),
                    label=label,
                    on_chunk=on_chunk,
                )
        except FileNotFoundError:
            raise PrivacyCIError(f"{local} does not exist (local mirror)") from None

    own_client = client is None
    http = _make_client(timeout) if client is None else client
    try:
        attempts = max(0, retries) + 1
        for attempt in range(attempts):
            if on_start is not None:
                on_start()
            try:
                return _http_attempt(http, url, target, sha256, size, label, on_chunk)
            except _Transient as exc:
                if attempt + 1 >= attempts:
                    raise RetriesExhausted(
                        f"GET {url} failed after {attempts} attempt(s): {exc}",
                        connection=exc.connection,
                    ) from None
                time.sleep(backoff * (2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        if own_client:
            http.close()


def _make_client(timeout: float) -> httpx.Client:
    import httpx

    from privacy_ci import __version__

    return httpx.Client(
        timeout=httpx.Timeout(timeout),
        follow_redirects=True,
        headers={"User-Agent": f"privacy-ci/{__version__} (data fetch)"},
    )


def fetch(
    dest: Path | None = None,
    *,
    base_url: str | None = None,
    mirror: str | None = None,
    only: Sequence[str] | None = None,
    force: bool = False,
    timeout: float = 60,
    client: httpx.Client | None = None,
    retries: int = 3,
    backoff: float = 0.5,
    progress: FetchProgress | None = None,
) -> FetchReport:
    """Download the manifest's data files into a data directory, verifying each one.

    Files already present with the right sha256 are skipped (unless ``force``). A file
    that fails (HTTP error, hash mismatch, write error) is reported and left absent;
    the other files are still fetched. Nothing partial is ever left in ``dest``.

    Args:
        dest: the data directory (default `data_dir()`); created if needed.
        base_url: replaces ``https://raw.githubusercontent.com``; files are fetched from
            ``{base_url}/{repo}/{commit}/{source_path}``.
        mirror: a flat mirror laid out like the data directory, files at
            ``{mirror}/{path}``: an ``http(s)://`` URL, a ``file://`` URL or a local folder.
        only: path prefixes to fetch (``hipaa/``, ``cases/goldcoin/real.json``).
        force: download even files that are already present and correct.
        timeout: seconds per network operation (connect, read).
        client: HTTP client to use; one is created (and closed) if None.
        retries: extra attempts per file after connection errors, timeouts and 5xx.
        backoff: seconds before the first retry, doubled after each.
        progress: receives per-file progress events.

    Returns:
        A `FetchReport` with one entry per selected file; check ``report.ok`` or call
        ``report.raise_for_failures()``.

    Raises:
        PrivacyCIError: both ``base_url`` and ``mirror`` given, a prefix in ``only``
            matches no file, or ``dest`` cannot be created.
    """
    if base_url is not None and mirror is not None:
        raise PrivacyCIError("give either a base URL or a mirror, not both")
    root = data_dir() if dest is None else Path(dest).expanduser()
    selected = select(only)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrivacyCIError(f"cannot create the data directory {root}: {exc}") from None

    if mirror is not None:
        origin = mirror
    else:
        from privacy_ci.data._manifest import DEFAULT_BASE_URL

        origin = base_url or DEFAULT_BASE_URL
    report = FetchReport(dest=root, source=origin)

    own_client = client is None and (mirror is None or _local_path(mirror) is None)
    http = _make_client(timeout) if own_client else client
    unreachable: dict[str, str] = {}
    try:
        for source in selected:
            url = source.mirror_url(mirror) if mirror is not None else source.url(base_url)
            result = _fetch_one(
                source,
                url,
                root,
                force=force,
                client=http,
                timeout=timeout,
                retries=retries,
                backoff=backoff,
                progress=progress,
                unreachable=unreachable,
            )
            report.files.append(result)
            if progress is not None:
                progress.finish(result)
    finally:
        if own_client and http is not None:
            http.close()
    return report


def _fetch_one(
    source: Source,
    url: str,
    root: Path,
    *,
    force: bool,
    client: httpx.Client | None,
    timeout: float,
    retries: int,
    backoff: float,
    progress: FetchProgress | None,
    unreachable: dict[str, str],
) -> FileResult:
    target = root / source.path
    if not force and _state(target, source) == "ok":
        return FileResult(source.path, "present", 0, source.size, url)

    host = urlsplit(url).netloc
    if host and host in unreachable:
        exc = PrivacyCIError(
            f"skipped: an earlier download from {host} failed: {unreachable[host]}"
        )
        return FileResult(source.path, "failed", 0, source.size, url, str(exc), exc)

    received = 0

    def on_start() -> None:
        nonlocal received
        received = 0
        if progress is not None:
            progress.start(source, url)

    def on_chunk(n: int) -> None:
        nonlocal received
        received += n
        if progress is not None:
            progress.advance(source, n)

    try:
        n = download_file(
            url,
            target,
            sha256=source.sha256,
            size=source.size,
            client=client,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            label=source.path,
            on_start=on_start,
            on_chunk=on_chunk,
        )
    except PrivacyCIError as exc:
        if isinstance(exc, RetriesExhausted) and exc.connection and host:
            unreachable[host] = str(exc)
        return FileResult(source.path, "failed", received, source.size, url, str(exc), exc)
    except OSError as exc:
        err = PrivacyCIError(f"cannot write {target}: {exc.strerror or exc}")
        return FileResult(source.path, "failed", received, source.size, url, str(err), err)
    return FileResult(source.path, "downloaded", n, source.size, url)
