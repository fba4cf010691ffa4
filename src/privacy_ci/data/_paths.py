"""Where the data and the caches live, and a check that the needed files are there.

The data directory may be shared and read-only; anything computed from it
(indexes, embeddings, downloads in progress of other tools) goes to `cache_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

from privacy_ci.errors import DataMissingError

__all__ = ["CACHE_ENV", "DATA_ENV", "FETCH_COMMAND", "cache_dir", "data_dir", "require"]

DATA_ENV = "PRIVACY_CI_DATA"
"""Environment variable that overrides the data directory."""

CACHE_ENV = "PRIVACY_CI_CACHE"
"""Environment variable that overrides the cache directory."""

FETCH_COMMAND = "privacy-ci data fetch"
"""The command that downloads the data files."""

_APP_NAME = "privacy-ci"
_MAX_LISTED = 5


def _user_cache_root() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir(_APP_NAME))


def _from_env(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def data_dir() -> Path:
    """The directory that holds the public data files.

    Returns:
        ``$PRIVACY_CI_DATA`` if set (``~`` expanded), else
        ``platformdirs.user_cache_dir("privacy-ci")/data``. The directory may not exist.
    """
    return _from_env(DATA_ENV) or _user_cache_root() / "data"


def cache_dir() -> Path:
    """The directory for caches and indexes (never inside the data directory).

    Returns:
        ``$PRIVACY_CI_CACHE`` if set (``~`` expanded), else
        ``platformdirs.user_cache_dir("privacy-ci")/cache``. The directory may not exist.
    """
    return _from_env(CACHE_ENV) or _user_cache_root() / "cache"


def require(*relative_paths: str) -> Path:
    """Check that data files are present, and return the data directory.

    Only presence is checked (cheap); `privacy_ci.data.verify` checks the hashes.

    Args:
        relative_paths: paths relative to the data directory, e.g.
            ``"hipaa/kb_annotated.json"``. With none, every file of the manifest is required.

    Returns:
        The data directory (`data_dir()`).

    Raises:
        DataMissingError: one or more files are missing; the message names the data
            directory, the missing files and the command that fetches them.
    """
    root = data_dir()
    if not relative_paths:
        from privacy_ci.data._manifest import manifest

        relative_paths = tuple(s.path for s in manifest())
    missing = [p for p in relative_paths if not (root / p).is_file()]
    if missing:
        listed = ", ".join(missing[:_MAX_LISTED])
        if len(missing) > _MAX_LISTED:
            listed += f" and {len(missing) - _MAX_LISTED} more"
        noun = "file is" if len(missing) == 1 else "files are"
        raise DataMissingError(
            f"{len(missing)} data {noun} missing from {root}: {listed}. "
            f"Run `{FETCH_COMMAND}` to download them, "
            f"or set {DATA_ENV} to a directory that has them."
        )
    return root
