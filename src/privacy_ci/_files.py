"""Reading the files of a user's folder without trusting it.

A corpus folder may come from anyone: a ``documents/LEAK.txt`` that is a symbolic link
to the operator's signing key would otherwise be stored as a document and sent to a
model; a link to ``/dev/zero`` reads until memory runs out; a FIFO blocks the reader
forever. So a user file is read only when it is a regular file, no larger than a
limit, and (where a folder is given) inside that folder once every link is resolved.

`file_problem` says what is wrong without opening the file (``lstat``/``stat`` only:
a FIFO, socket or device is never opened). `read_user_file` checks the same, then
opens the resolved path with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO or link swapped in
since the check can neither hang the open nor redirect it), checks the open file again
with ``fstat``, and reads at most ``limit + 1`` bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from privacy_ci.errors import PrivacyCIError

__all__ = ["byte_limit", "file_problem", "is_inside", "read_user_file", "resolved"]

_CHUNK = 1 << 20
# flags where the platform has them (O_NOFOLLOW and O_NONBLOCK are POSIX)
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def byte_limit(default: int, env: str) -> int:
    """`default`, or the environment variable `env` when it is set.

    Raises:
        PrivacyCIError: `env` is set but is not a positive whole number of bytes.
    """
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18 or int(raw) < 1:
        raise PrivacyCIError(f"{env}={raw[:40]!r}: expected a positive whole number of bytes")
    return int(raw)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def resolved(path: Path | str) -> Path:
    """`path` with every symbolic link resolved (strictly: a broken link raises OSError)."""
    return Path(os.path.realpath(path, strict=True))


def is_inside(path: Path | str, folder: Path | str) -> bool:
    """Whether resolved `path` is resolved `folder` or lies below it."""
    path, folder = os.fspath(path), os.fspath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _too_large(path: Path, size: int, limit: int, env: str | None) -> str:
    hint = f"; set {env} to raise the limit" if env else ""
    return f"{path}: {size:,} bytes, over the limit of {limit:,} bytes{hint}"


def file_problem(
    path: Path,
    *,
    limit: int,
    inside: Path | None = None,
    env: str | None = None,
    entry: os.DirEntry[str] | None = None,
    folder_name: str = "the folder",
) -> str | None:
    """What stops `path` from being read as a user file, or None; nothing is opened.

    A problem names the file: it is not found, it is a symbolic link whose target
    lies outside `inside` (or is missing), it is not a regular file (a folder, FIFO,
    socket or device), or it is larger than `limit` bytes.

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.
        inside: the folder (resolved) that a symbolic link must stay in; None: any.
            The folder holding `path` is the caller's to have checked.
        env: the environment variable that sets `limit` (named in the message).
        entry: `path`'s `os.scandir` entry, when the caller has it (saves a call).
        folder_name: what `inside` is, in messages (e.g. "the corpus folder").
    """
    try:
        info = entry.stat(follow_symlinks=False) if entry is not None else os.lstat(path)
    except FileNotFoundError:
        return f"{path}: file not found"
    except OSError as exc:
        return f"{path}: cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        try:
            target = resolved(path)
        except OSError:
            return f"{path}: a symbolic link to a file that does not exist"
        if inside is not None and not is_inside(target, inside):
            return (
                f"{path}: a symbolic link to {target}, outside {folder_name} {inside};"
                " only files inside it are read (copy the file in instead)"
            )
        try:
            info = os.stat(target)
        except OSError as exc:
            return f"{path}: cannot be read ({exc.strerror})"
        if not stat.S_ISREG(info.st_mode):
            return f"{path}: a symbolic link to {_kind(info.st_mode)}, not a regular file"
    elif not stat.S_ISREG(info.st_mode):
        return f"{path}: {_kind(info.st_mode)}, not a regular file"
    if info.st_size > limit:
        return _too_large(path, info.st_size, limit, env)
    return None


def read_user_file(
    path: Path,
    *,
    limit: int,
    inside: Path | None = None,
    env: str | None = None,
    folder_name: str = "the folder",
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see the module docstring).

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.
        inside: the folder (resolved, see `resolved`) that the file must lie in once
            every link, of the file or of a folder above it, is resolved; None: any.
        env: the environment variable that sets `limit` (named in the message).
        folder_name: what `inside` is, in messages.

    Raises:
        PrivacyCIError: `file_problem`'s reasons (checked again on the open file), or
            the file cannot be opened or read.
    """
    problem = file_problem(path, limit=limit, inside=inside, env=env, folder_name=folder_name)
    if problem is not None:
        raise PrivacyCIError(problem)
    try:
        # the resolved name (strings: this runs once per document of a load): a link the
        # checks allowed is followed here, a folder above swapped for a link is caught,
        # and a link put in the file's place since then fails O_NOFOLLOW
        target = os.path.realpath(path, strict=True)
        if inside is not None and not is_inside(target, inside):
            raise PrivacyCIError(f"{path}: resolves to {target}, outside {folder_name} {inside}")
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as exc:
        raise PrivacyCIError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)  # what was opened, not what was checked
        if not stat.S_ISREG(info.st_mode):
            raise PrivacyCIError(f"{path}: {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise PrivacyCIError(_too_large(path, info.st_size, limit, env))
        chunks: list[bytes] = []
        left = limit + 1  # one byte more than allowed tells a file that grew meanwhile
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise PrivacyCIError(f"{path}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:  # it grew between fstat and the read
        raise PrivacyCIError(_too_large(path, len(data), limit, env))
    return data
