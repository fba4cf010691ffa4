"""`privacy-ci data ...`: where the public datasets live and how to fetch them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, err_console, escape, print_json, user_errors

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from privacy_ci.data import FileResult, Source

app = typer.Typer(help="Locate, fetch and verify the public datasets.", no_args_is_help=True)

_STATUS_STYLE = {
    "ok": "green",
    "present": "green",
    "downloaded": "green",
    "missing": "yellow",
    "corrupt": "red",
    "failed": "red",
}


@app.command()
def where(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Print the data directory ($PRIVACY_CI_DATA) and the cache directory ($PRIVACY_CI_CACHE)."""
    from privacy_ci.data import cache_dir, data_dir

    data, cache = data_dir(), cache_dir()
    if as_json:
        print_json({"data_dir": str(data), "cache_dir": str(cache)})
        return
    console.print(f"data  {data}", markup=False, highlight=False)
    console.print(f"cache {cache}", markup=False, highlight=False)


@app.command()
def status(
    directory: Path | None = typer.Option(
        None, "--dir", help="Data directory to check (default: $PRIVACY_CI_DATA or the user cache)."
    ),
    only: list[str] | None = typer.Option(
        None, "--only", help="Check only files whose path starts with this prefix (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check every data file against its pinned sha256: ok, missing or corrupt.

    Exits 1 if any file is missing or corrupt.
    """
    from privacy_ci.data import SOURCES_BY_PATH, data_dir, verify

    root = directory if directory is not None else data_dir()
    with user_errors():
        states = verify(root, only=only)
    counts = {k: sum(1 for _, s in states if s == k) for k in ("ok", "missing", "corrupt")}
    summary = (
        f"{counts['ok']} ok, {counts['missing']} missing, {counts['corrupt']} corrupt in {root}"
    )
    if as_json:
        files: list[dict[str, Any]] = []
        for path, state in states:
            src = SOURCES_BY_PATH[path]
            files.append({"path": path, "status": state, "size": src.size, "sha256": src.sha256})
        print_json(
            {
                "data_dir": str(root),
                "ok": counts["ok"] == len(states),
                "summary": counts,
                "files": files,
            }
        )
    else:
        from rich.table import Table

        table = Table(box=None, pad_edge=False)
        table.add_column("status")
        table.add_column("file")
        table.add_column("size", justify="right")
        for path, state in states:
            style = _STATUS_STYLE[state]
            table.add_row(f"[{style}]{state}[/]", path, _human(SOURCES_BY_PATH[path].size))
        console.print(table, highlight=False)
        console.print(summary, markup=False, highlight=False)
        if counts["ok"] != len(states):
            hint = "privacy-ci data fetch" + (f" --dir {root}" if directory is not None else "")
            console.print(
                f"Run `{hint}` to download what is missing.", markup=False, highlight=False
            )
    if counts["ok"] != len(states):
        raise typer.Exit(code=1)


@app.command()
def fetch(
    directory: Path | None = typer.Option(
        None, "--dir", help="Data directory to fill (default: $PRIVACY_CI_DATA or the user cache)."
    ),
    only: list[str] | None = typer.Option(
        None, "--only", help="Fetch only files whose path starts with this prefix (repeatable)."
    ),
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        help="Replace https://raw.githubusercontent.com; files at {URL}/{repo}/{commit}/{path}.",
    ),
    mirror: str | None = typer.Option(
        None,
        "--mirror",
        help="A mirror laid out like the data directory ({URL}/{path}); a URL or a local folder.",
    ),
    force: bool = typer.Option(False, "--force", help="Download even files already present."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per network operation."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report (no progress bar)."),
) -> None:
    """Download the public data files at their pinned commits and verify their sha256.

    Files already present and correct are skipped. Exits 1 if any file failed.
    """
    from privacy_ci.data import fetch as fetch_data
    from privacy_ci.data import select
    from privacy_ci.errors import PrivacyCIError

    with user_errors():
        if base_url is not None and mirror is not None:
            raise PrivacyCIError("give either --base-url or --mirror, not both")
        total = sum(s.size for s in select(only))
        if as_json:
            report = fetch_data(
                directory,
                base_url=base_url,
                mirror=mirror,
                only=only,
                force=force,
                timeout=timeout,
            )
        else:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TransferSpeedColumn,
            )

            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
            )
            with Progress(*columns, console=err_console, transient=True) as bar:
                report = fetch_data(
                    directory,
                    base_url=base_url,
                    mirror=mirror,
                    only=only,
                    force=force,
                    timeout=timeout,
                    progress=_RichProgress(bar, total),
                )

    if as_json:
        print_json(report.to_dict())
    else:
        for result in report.failed:
            err_console.print(
                f"[bold red]failed:[/] {escape(f'{result.path}: {result.error}')}",
                highlight=False,
            )
        style = "red" if report.failed else "green"
        console.print(f"[{style}]{escape(report.summary())}[/]", highlight=False)
    if report.failed:
        raise typer.Exit(code=1)


class _RichProgress:
    """Draws `fetch` progress: one bar for all bytes, one for the current file."""

    def __init__(self, bar: Progress, total: int) -> None:
        self._bar = bar
        self._overall: TaskID = bar.add_task("all files", total=total)
        self._file: TaskID | None = None
        self._done = 0
        self._current = 0

    def start(self, source: Source, url: str) -> None:
        """A download (or a retry) starts."""
        self._current = 0
        if self._file is None:
            self._file = self._bar.add_task(source.path, total=source.size)
        else:
            self._bar.reset(self._file, total=source.size, description=source.path)
        self._bar.update(self._overall, completed=self._done)

    def advance(self, source: Source, nbytes: int) -> None:
        """More bytes of the current file arrived."""
        self._current += nbytes
        if self._file is not None:
            self._bar.advance(self._file, nbytes)
        self._bar.update(self._overall, completed=self._done + self._current)

    def finish(self, result: FileResult) -> None:
        """A file is done."""
        self._done += result.size
        self._current = 0
        self._bar.update(self._overall, completed=self._done)
        if result.status == "downloaded":
            self._bar.console.print(f"[green]downloaded[/] {escape(result.path)}", highlight=False)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


@app.command("datasets")
def datasets(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The named evaluation datasets and their protocols."""
    from privacy_ci.cli._common import console, print_json, user_errors

    with user_errors():
        from privacy_ci.cases import list_datasets

        rows = list_datasets()
        if as_json:
            print_json(rows)
            return
        for name, description in rows.items():
            console.print(f"[bold]{name}[/]  {description}", highlight=False)
