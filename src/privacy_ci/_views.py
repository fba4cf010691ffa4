"""`LiveMapping`: a read-only mapping rebuilt on every access.

Tables that are derived from a registry (the regulations' files, the manifest with
the files registered regulations bring) stay importable as constants while the
registry, which can grow at run time, remains their only source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

__all__ = ["LiveMapping"]

V = TypeVar("V")


class LiveMapping(Mapping[str, V]):
    """A read-only mapping recomputed by ``build`` on every access.

    Args:
        build: makes the current mapping (cheap: it runs on every lookup).
    """

    def __init__(self, build: Callable[[], Mapping[str, V]]) -> None:
        self._build = build

    def __getitem__(self, key: str) -> V:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._build()))

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._build())!r})"
