"""Options and store opening shared by the store, audit, token and serve commands.

``--db`` takes ``sqlite:///FILE``, a file path or ``postgresql://...`` (default:
``$PRIVACY_CI_DB``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from privacy_ci.store import DocumentStore

DbOpt = typer.Option(
    ...,
    "--db",
    envvar="PRIVACY_CI_DB",
    help="Store: sqlite:///FILE, a file path, or postgresql://... (env PRIVACY_CI_DB).",
)
JsonOpt = typer.Option(False, "--json", help="Print JSON.")
ByOpt = typer.Option(..., "--by", help="Who makes the change (recorded in the history).")
NoteOpt = typer.Option("", "--note", help="Why (recorded in the history).")


def open_store(db: str) -> DocumentStore:
    """The store at `db`, created when it does not exist yet (for commands that write)."""
    from privacy_ci.store import DocumentStore

    return DocumentStore(db)


def open_store_readonly(db: str) -> DocumentStore:
    """An existing store, read-only: a mistyped --db is an error, never a new store."""
    from privacy_ci.store import DocumentStore

    return DocumentStore(db, readonly=True)
