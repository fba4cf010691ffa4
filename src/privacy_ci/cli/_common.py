"""Helpers shared by the CLI modules: error handling and JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape as _rich_escape

if TYPE_CHECKING:
    from privacy_ci.judging import CrossChecker, MethodSpec
    from privacy_ci.knowledge import KnowledgeBase

# Wide enough for the flow tables when output is piped (rich assumes 80 columns then).
# No emoji codes: ":name:" in an id or a file name must print as written.
console = Console(width=None if sys.stdout.isatty() else 120, emoji=False)
err_console = Console(stderr=True, emoji=False)

__all__ = [
    "console",
    "cross_checker",
    "err_console",
    "escape",
    "method_spec",
    "print_json",
    "run_with_errors",
    "user_errors",
]

T = TypeVar("T")


def escape(text: object) -> str:
    """`text` for a rich markup string: shown as written, wherever it lands.

    rich's own `escape` doubles a trailing backslash, which is right only when a tag
    follows (elsewhere both show); closing the text with an empty style span makes
    a trailing backslash print once whatever comes after it.
    """
    raw = str(text)
    body = raw.rstrip("\\")
    trailing = len(raw) - len(body)
    out = _rich_escape(body)
    return out + "\\" * (2 * trailing) + "[none][/none]" if trailing else out


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a `PrivacyCIError` into one line on stderr and exit code 2."""
    from privacy_ci.errors import PrivacyCIError

    try:
        yield
    except PrivacyCIError as exc:
        # Messages quote user input (ids, paths): escaped, never read as markup.
        # soft_wrap: one line per message line, however narrow the terminal.
        err_console.print(
            f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(code=2) from None


def print_json(payload: Any) -> None:
    """Write one JSON document to stdout (no rich markup, stable key order)."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def run_with_errors(fn: Callable[[], T]) -> T:
    with user_errors():
        return fn()


def method_spec(method: str, retriever: str | None) -> Any:
    """The registered judging method named `method` (a `MethodSpec`).

    Raises:
        PrivacyCIError: unknown method, or a ``--retriever`` for a method that
            retrieves nothing.
    """
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.judging import METHODS

    spec = METHODS.get(method)
    if spec is None:
        raise PrivacyCIError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if retriever is not None and spec.retriever_option is None:
        raise PrivacyCIError(f"--retriever: method {method!r} retrieves no regulations")
    return spec


def cross_checker(
    method: str, spec: MethodSpec, kb: KnowledgeBase | None, regulation: str
) -> CrossChecker:
    """The ``--cross-check`` reasoner of `judge` and `eval`, loaded before any model call.

    Raises:
        PrivacyCIError: the method calls no model, or the regulation has no law book.
    """
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.judging import CrossChecker

    if not spec.needs_model:
        raise PrivacyCIError(
            f"--cross-check runs the ci-reasoner beside a model; {method!r} calls no model"
        )
    checker = CrossChecker(kb, regulation)
    try:
        checker.reasoner  # noqa: B018  (load the law book now: its errors come first)
    except (PrivacyCIError, ValueError) as exc:
        raise PrivacyCIError(f"--cross-check: no reasoner for {regulation}: {exc}") from None
    return checker
