"""Where the tests find the real public data and the two papers, and what happens
when they are not there.

The data is ``$PRIVACY_CI_DATA`` (CI passes ``../shared/data``), else the repository's
``../shared/data``; the papers lie beside it (``$PRIVACY_CI_DATA/../papers``), else in
the repository's ``../shared/papers``.

Missing data or papers skip the tests that need them on a developer's machine, but
fail them in CI (``CI`` set to true, or ``PRIVACY_CI_DATA`` set): a CI run that
silently tested less must not be green.

Both settings are read once, when the test session starts, so a test that changes
``PRIVACY_CI_DATA`` with monkeypatch changes neither.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]

_ENV_DATA = os.environ.get("PRIVACY_CI_DATA", "").strip()
# resolved now: CI passes a relative path, and some tests change directory
_DATA = Path(_ENV_DATA).expanduser().resolve() if _ENV_DATA else REPO.parent / "shared" / "data"
_ENV_CI = os.environ.get("CI", "").strip().lower()
_TRUE = {"1", "true", "yes", "on"}


def in_ci() -> bool:
    """Whether this session runs in CI (``CI`` true, or ``PRIVACY_CI_DATA`` set)."""
    return _ENV_CI in _TRUE or bool(_ENV_DATA)


def data_dir() -> Path:
    """The real public data: ``$PRIVACY_CI_DATA`` (absolute), else ``../shared/data``."""
    return _DATA


def papers_dir() -> Path:
    """The papers' text: beside the data directory, else the repository's ``../shared/papers``.

    Returns the first candidate that exists, or the first candidate (for the message)
    when none does.
    """
    candidates = []
    if _ENV_DATA:
        candidates.append(data_dir().parent / "papers")
    candidates.append(REPO.parent / "shared" / "papers")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return candidates[0]


def missing(where: str, detail: str) -> NoReturn:
    """Skip the test (a developer without the data), or fail it (CI).

    Args:
        where: the path that was looked for.
        detail: what is missing there.
    """
    if in_ci():
        pytest.fail(
            f"{detail} at {where}: CI (CI={os.environ.get('CI', '')!r}, "
            f"PRIVACY_CI_DATA={_ENV_DATA!r}) must not skip tests for missing data or papers",
            pytrace=False,
        )
    pytest.skip(f"{detail} at {where} (set PRIVACY_CI_DATA)")


def require_files(root: Path, relative: Iterable[str], what: str) -> Path:
    """`root`, after checking that every path in `relative` is a file under it.

    Skips (developer) or fails (CI) naming the missing files.
    """
    if not root.is_dir():
        missing(str(root), f"{what}: the folder does not exist")
    absent = [rel for rel in relative if not (root / rel).is_file()]
    if absent:
        shown = ", ".join(absent[:8]) + (f" and {len(absent) - 8} more" if len(absent) > 8 else "")
        missing(str(root), f"{what}: {len(absent)} file(s) missing ({shown})")
    return root


def require_data() -> Path:
    """The real data directory, with ``SOURCES.md`` and every file of the manifest."""
    from privacy_ci.data import SOURCES

    return require_files(
        data_dir(), ["SOURCES.md", *(s.path for s in SOURCES)], "the shared public data"
    )


def paper(name: str) -> Path:
    """The text of one paper (``privacy-checklist.txt``, ``privacy-conductor.txt``)."""
    root = papers_dir()
    require_files(root, [name], "the papers' text")
    return root / name
