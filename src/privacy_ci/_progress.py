"""A progress bar on stderr with counters beside it (or nothing), for runs that ask a
model about many items: an evaluation's cases, a knowledge base build's leaves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CounterBar"]


class CounterBar:
    """A rich progress bar: description, bar, done/total, counters, elapsed, remaining.

    Disabled, it draws nothing and only counts.

    Args:
        enabled: draw the bar.
        label: its description.
        total: items in all.
        counters: counter name -> caption, in the order shown (``caption N · ...``).
        done: items already done (a resumed run).
        console: the rich console (default: a new one on stderr).
    """

    def __init__(
        self,
        enabled: bool,
        label: str,
        total: int,
        counters: Mapping[str, str],
        *,
        done: int = 0,
        console: Any = None,
    ) -> None:
        self.counts = dict.fromkeys(counters, 0)
        self._bar: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(" · ".join(f"{c} {{task.fields[{name}]}}" for name, c in counters.items())),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console if console is not None else Console(stderr=True),
        )
        self._task = self._bar.add_task(label, total=total, completed=done, **self.counts)

    def __enter__(self) -> CounterBar:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def count(self, advance: int = 0, **more: int) -> None:
        """Add to the counters named, advance the bar by `advance` items, and redraw."""
        for name, n in more.items():
            self.counts[name] += n
        if self._bar is not None:
            self._bar.update(self._task, advance=advance, **self.counts)
