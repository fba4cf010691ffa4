"""`privacy-ci conductor ...`: the Privacy Conductor gate over a corpus."""

from __future__ import annotations

import typer

app = typer.Typer(help="Privacy Conductor: decide who may receive a document.", no_args_is_help=True)
