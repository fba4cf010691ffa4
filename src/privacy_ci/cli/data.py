"""`privacy-ci data ...`: where the public datasets live and how to fetch them."""

from __future__ import annotations

import typer

app = typer.Typer(help="Locate, fetch and verify the public datasets.", no_args_is_help=True)
