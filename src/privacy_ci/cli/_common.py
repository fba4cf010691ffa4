"""Helpers shared by the CLI modules: error handling and JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console

# Wide enough for the flow tables when output is piped (rich assumes 80 columns then).
console = Console(width=None if sys.stdout.isatty() else 120)
err_console = Console(stderr=True)

T = TypeVar("T")


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a `PrivacyCIError` into one line on stderr and exit code 2."""
    from privacy_ci.errors import PrivacyCIError

    try:
        yield
    except PrivacyCIError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        raise typer.Exit(code=2) from None


def print_json(payload: Any) -> None:
    """Write one JSON document to stdout (no rich markup, stable key order)."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def run_with_errors(fn: Callable[[], T]) -> T:
    with user_errors():
        return fn()
