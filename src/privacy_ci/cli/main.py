"""Entry point of the `privacy-ci` command.

Library imports happen inside the commands so that `privacy-ci --help` stays fast.
"""

from __future__ import annotations

import typer

from privacy_ci import __version__
from privacy_ci.cli import (
    ask,
    audit,
    conductor,
    corpus,
    data,
    demo,
    evaluate,
    facts,
    judge,
    kb,
    label,
    llm,
    mcp_server,
    retrieval,
    serve,
    store,
    tokens,
)
from privacy_ci.cli._help import HelpGroup

app = typer.Typer(
    name="privacy-ci",
    help="Contextual Integrity for LLM applications: judge information flows against "
    "regulations (Privacy Checklist) and gate document access by policy (Privacy Conductor).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, lines broken at spaces only, at any width (see `_help`): rich's
    # option table cuts names and words with "…" on terminals under ~100 columns.
    cls=HelpGroup,
    rich_markup_mode=None,
    context_settings={"max_content_width": 100},
)
app.add_typer(conductor.app, name="conductor")
app.add_typer(corpus.app, name="corpus")
app.add_typer(label.app, name="label")
app.add_typer(data.app, name="data")
app.add_typer(kb.app, name="kb")
app.add_typer(llm.app, name="llm")
app.add_typer(llm.cache_app, name="cache")
app.command(name="serve")(serve.serve)
app.add_typer(store.app, name="store")
app.add_typer(audit.app, name="audit")
app.add_typer(tokens.app, name="token")
app.add_typer(mcp_server.app, name="mcp")
app.command(name="demo")(demo.demo)
app.command(name="retrieve")(retrieval.retrieve_command)
app.add_typer(retrieval.app, name="retrieval")
app.command(name="judge")(judge.judge)
app.add_typer(facts.app, name="facts")
app.command(name="ask")(ask.ask)
app.command(name="methods")(judge.methods_command)
app.command(name="eval")(evaluate.eval_command)
app.command(name="report")(evaluate.report_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privacy-ci {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """privacy-ci command line."""


if __name__ == "__main__":  # pragma: no cover
    app()
