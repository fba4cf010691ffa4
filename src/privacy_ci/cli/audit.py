"""`privacy-ci audit ...`: verify and read the hash-chained audit log of gate decisions."""

from __future__ import annotations

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors
from privacy_ci.cli._store_common import DbOpt, JsonOpt, open_store_readonly

app = typer.Typer(help="The hash-chained audit log of gate decisions.", no_args_is_help=True)


@app.command("verify")
def audit_verify(
    db: str = DbOpt,
    expect_head: str | None = typer.Option(
        None, "--expect-head", help="A head hash recorded elsewhere that the log must end with."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Re-compute the hash chain; report the first bad record (exit 1 if any)."""
    with user_errors():
        store = open_store_readonly(db)
        try:
            report = store.audit.verify(expect_head)
        finally:
            store.close()
        if as_json:
            print_json(report.as_dict())
        elif report.ok:
            console.print(
                f"[green]audit log verified[/]: {report.records} records, head"
                f" {report.head_seq} {report.head_hash}",
                highlight=False,
            )
        else:
            where = "" if report.first_bad_seq is None else f" at record {report.first_bad_seq}"
            console.print(
                f"[red]audit log BROKEN{where}[/]: {escape(report.problem or '')}",
                highlight=False,
            )
        if not report.ok:
            raise typer.Exit(code=1)


@app.command("tail")
def audit_tail(
    db: str = DbOpt,
    n: int = typer.Option(20, "-n", min=1, help="How many records."),
    as_json: bool = JsonOpt,
) -> None:
    """Show the last records of the audit log."""
    with user_errors():
        store = open_store_readonly(db)
        try:
            head = store.audit.recorded_head()
            after = max(0, (head[0] if head else 0) - n)
            records = store.audit.records(after)
        finally:
            store.close()
        if as_json:
            print_json([r.as_dict() for r in records])
            return
        from privacy_ci.store import BATCH_DECISION, batch_decisions

        for r in records:
            what = r.rule or r.detail
            if r.decision == BATCH_DECISION:  # one record for a whole batch: summarise it
                decided = batch_decisions(r.detail)
                permits = sum(d["decision"] == "permit" for d in decided)
                what = f"{len(decided)} decisions ({permits} permit)"
            console.print(
                f"{r.seq:>8} {r.at[:23]} {r.requester}/{r.role}@{r.context}"
                f" {r.action} {r.doc_id or '(' + r.decision + ')'} {r.decision}"
                f" {what} {r.hash[:12]}",
                highlight=False,
                markup=False,
            )
