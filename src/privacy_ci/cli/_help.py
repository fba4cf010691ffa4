"""Help text wrapped at spaces only, at any terminal width.

typer's rich help lays options out in a table of five columns that, below about
100 columns, cuts option names, env vars and words with "…". Click's plain layout
(two columns) fits any width, but its wrapper still cuts a word longer than its
column and breaks at hyphens (``privaci-`` / ``bench``). `HelpGroup` gives every
command of the tree a formatter that breaks lines at spaces only (a word longer
than the line overflows it, whole), and lists each sub-command with the whole first
paragraph of its help, not one cut to the width.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["HelpGroup", "wrap"]

# click's HelpFormatter, reached through typer (which may carry its own copy of click)
_ClickFormatter: Any = typer.Context.formatter_class


def wrap(
    text: str,
    width: int,
    initial_indent: str = "",
    subsequent_indent: str = "",
    paragraphs: bool = False,
) -> str:
    """`text` filled to `width`, lines broken at spaces only.

    With `paragraphs`, blank lines separate paragraphs, each filled on its own and
    indented as its first line is; one that starts with a line holding only ``\\b``
    keeps its lines as written (click's convention).
    """
    wrapper = textwrap.TextWrapper(
        width=max(width, 1),
        initial_indent=initial_indent,
        subsequent_indent=subsequent_indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    if not paragraphs:
        return wrapper.fill(" ".join(text.split()))
    blocks: list[list[str]] = [[]]
    for line in text.expandtabs().splitlines():
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    out = []
    for block in filter(None, blocks):
        extra = " " * (len(block[0]) - len(block[0].lstrip()))
        if block[0].strip() == "\b":
            out.append("\n".join(initial_indent + extra + line for line in block[1:]))
            continue
        para = textwrap.TextWrapper(
            width=max(width, 1),
            initial_indent=initial_indent + extra,
            subsequent_indent=subsequent_indent + extra,
            break_long_words=False,
            break_on_hyphens=False,
        )
        # lines joined, spaces within a line kept (click sets its "[default: ...]" two apart)
        out.append(para.fill(" ".join(line.strip() for line in block)))
    return "\n\n".join(out)


class WrapFormatter(_ClickFormatter):  # type: ignore[misc]  # click's class, through typer
    """Click's help formatter with `wrap` in place of its word-cutting wrapper."""

    width: int
    current_indent: int

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        prefix = "Usage: " if prefix is None else prefix
        usage_prefix = f"{prefix:>{self.current_indent}}{prog} "
        text_width = self.width - self.current_indent
        if text_width >= len(usage_prefix) + 20:
            indent = " " * len(usage_prefix)
            self.write(wrap(args, text_width, usage_prefix, indent))
        else:
            # a long command path: the arguments go on the lines below it
            self.write(usage_prefix.rstrip() + "\n")
            indent = " " * (max(self.current_indent, len(prefix)) + 4)
            self.write(wrap(args, text_width, indent, indent))
        self.write("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap(text, self.width, indent, indent, paragraphs=True) + "\n")

    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        rows = [(str(first), str(second or "")) for first, second in rows]
        if not rows:
            return
        first_col = min(max(len(first) for first, _ in rows), col_max) + col_spacing
        column = " " * (first_col + self.current_indent)
        text_width = max(self.width - first_col - 2, 10)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + column)
            lines = wrap(second, text_width, paragraphs=True).splitlines()
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write((column + line).rstrip() + "\n")


class _WrapContext(typer.Context):
    formatter_class = WrapFormatter


def _first_paragraph(text: str) -> str:
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


def _adopt(command: Any) -> None:
    command.context_class = _WrapContext
    if not command.short_help and command.help:
        # the list of sub-commands shows this whole, wrapped; click would cut it
        command.short_help = _first_paragraph(command.help)
    for sub in getattr(command, "commands", {}).values():
        _adopt(sub)


class HelpGroup(TyperGroup):
    """The root group: every command below it prints its help with `WrapFormatter`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _adopt(self)
