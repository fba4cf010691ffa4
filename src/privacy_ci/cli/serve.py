"""`privacy-ci serve`, `privacy-ci store ...`, `privacy-ci audit ...`, `privacy-ci token ...`.

The service, the document store (labels and their approval), the audit log and
signing tokens for local use. ``--db`` takes ``sqlite:///FILE``, a file path or
``postgresql://...`` (default: ``$PRIVACY_CI_DB``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors

if TYPE_CHECKING:
    from privacy_ci.store import DocumentStore

store_app = typer.Typer(
    help="The document store: load a corpus, list, approve and revoke labels, assignments.",
    no_args_is_help=True,
)
audit_app = typer.Typer(help="The hash-chained audit log of gate decisions.", no_args_is_help=True)
token_app = typer.Typer(
    help="Signing keys and tokens (JWT HS256) for local use.", no_args_is_help=True
)

DbOpt = typer.Option(
    ...,
    "--db",
    envvar="PRIVACY_CI_DB",
    help="Store: sqlite:///FILE, a file path, or postgresql://... (env PRIVACY_CI_DB).",
)
JsonOpt = typer.Option(False, "--json", help="Print JSON.")
ByOpt = typer.Option(..., "--by", help="Who makes the change (recorded in the history).")
NoteOpt = typer.Option("", "--note", help="Why (recorded in the history).")


def _open(db: str) -> DocumentStore:
    from privacy_ci.store import DocumentStore

    return DocumentStore(db)


def _open_readonly(db: str) -> DocumentStore:
    """An existing store, read-only: a mistyped --db is an error, never a new store."""
    from privacy_ci.store import DocumentStore

    return DocumentStore(db, readonly=True)


# -- serve ------------------------------------------------------------------------------
def serve(
    db: str = DbOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    jwt_key_file: Path = typer.Option(
        ...,
        "--jwt-key-file",
        envvar="PRIVACY_CI_JWT_KEY_FILE",
        help="File holding the HS256 signing key (make one: privacy-ci token keygen).",
    ),
    denial_mode: str = typer.Option(
        "withhold",
        "--denial-mode",
        help="What the assistant's model is told about withheld documents: withhold | explain"
        " (explain needs --explain-denials).",
    ),
    explain_denials: bool = typer.Option(
        False,
        "--explain-denials",
        help="Show requesters why a document is denied (the rule, label errors, unknown ids,"
        " withheld counts). For demonstrations and debugging only: it tells a requester"
        " which documents exist and how many it may not see.",
    ),
    max_token_ttl: int = typer.Option(
        24 * 3600, "--max-token-ttl", min=1, help="Refuse tokens living longer (seconds)."
    ),
    model_slots: int = typer.Option(
        2, "--model-slots", min=1, help="Model jobs at once, per model endpoint (judge, ask)."
    ),
    model_queue: int = typer.Option(
        8, "--model-queue", min=0, help="Model jobs waiting, per endpoint (503 beyond)."
    ),
    model_timeout: float = typer.Option(
        120.0, "--model-timeout", min=1.0, help="Seconds a model job may run."
    ),
    max_event_chars: int = typer.Option(
        8000, "--max-event-chars", min=100, help="Longest event /v1/judge accepts."
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve the Privacy Conductor HTTP API (decide, retrieve, ask, judge, labels) with uvicorn."""
    with user_errors():
        from privacy_ci.assistant import DenialMode
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import ServiceSettings, load_key, serve_forever

        if denial_mode not in {m.value for m in DenialMode}:
            raise PrivacyCIError(f"--denial-mode must be withhold or explain, got {denial_mode!r}")
        key = load_key(jwt_key_file)  # fail here, with the file named, before uvicorn starts
        settings = ServiceSettings(
            jwt_key=key,
            denial_mode=DenialMode(denial_mode),
            explain_denials=explain_denials,
            max_token_lifetime_s=max_token_ttl,
            model_slots=model_slots,
            model_queue=model_queue,
            model_timeout_s=model_timeout,
            max_event_chars=max_event_chars,
        )
        mode = "explaining denials (not for production)" if explain_denials else "denials hidden"
        console.print(
            f"serving {escape(db)} on http://{escape(host)}:{port} (OpenAPI: /docs); {mode}",
            highlight=False,
        )
        serve_forever(
            db,
            jwt_key_file,
            settings,
            host=host,
            port=port,
            log_level=log_level,
            access_log=log_level in ("debug", "info"),
        )


# -- store ------------------------------------------------------------------------------
@store_app.command("init")
def store_init(db: str = DbOpt) -> None:
    """Create the store's tables (idempotent)."""
    with user_errors():
        store = _open(db)
        console.print(f"store ready: {store.engine}, version {store.version()}", highlight=False)
        store.close()


@store_app.command("load-riverside")
def store_load_riverside(
    db: str = DbOpt,
    state: str = typer.Option(
        "approved", "--state", help="Leave the labels approved, or only proposed (grant nothing)."
    ),
    corpus_dir: Path | None = typer.Option(None, "--corpus", help="Another corpus folder."),
) -> None:
    """Load the Riverside Medical Clinic (policy, agents, assignments, labels, content)."""
    with user_errors():
        from privacy_ci.conductor import load_corpus
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.store import load_corpus_into

        if state not in ("approved", "proposed"):
            raise PrivacyCIError(f"--state must be approved or proposed, got {state!r}")
        corpus = load_corpus(corpus_dir)
        store = _open(db)
        try:
            n = load_corpus_into(store, corpus, state=state)
            console.print(
                f"loaded {n} documents ({state} labels), {len(corpus.agents)} agents,"
                f" policy {corpus.policy.version}; store version {store.version()}",
                highlight=False,
            )
        finally:
            store.close()


@store_app.command("labels")
def store_labels(
    db: str = DbOpt,
    state: str | None = typer.Option(None, "--state", help="proposed | approved | revoked."),
    as_json: bool = JsonOpt,
) -> None:
    """List labels with their lifecycle state and version."""
    with user_errors():
        from rich.table import Table

        from privacy_ci.errors import PrivacyCIError

        if state is not None and state not in ("proposed", "approved", "revoked"):
            raise PrivacyCIError(f"--state must be proposed, approved or revoked, got {state!r}")
        store = _open_readonly(db)
        try:
            records = store.labels(state)
        finally:
            store.close()
        if as_json:
            print_json([r.as_dict() for r in records])
            return
        table = Table(title=f"{len(records)} labels", title_justify="left")
        for col in ("document", "state", "v", "tier", "roles", "subject", "by", "at"):
            table.add_column(col)
        for r in records:
            body = r.body
            cells = (
                r.doc_id,
                r.state.value,
                str(r.version),
                str(body.get("sensitivity_tier", "")),
                ", ".join(str(role) for role in body.get("permitted_receiver_roles", [])),
                str(body.get("subject") or "-"),
                r.updated_by,
                r.updated_at[:19],
            )
            table.add_row(*(escape(c) for c in cells))  # stored text, never markup
        console.print(table)


def _lifecycle(db: str, doc_id: str, by: str, note: str, action: str) -> None:
    store = _open(db)
    try:
        fn = store.approve_label if action == "approve" else store.revoke_label
        record = fn(doc_id, by, note)
        console.print(
            f"{record.doc_id}: {record.state.value} (label version {record.version},"
            f" by {record.updated_by}); store version {store.version()}",
            highlight=False,
        )
    finally:
        store.close()


@store_app.command("approve")
def store_approve(doc_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt) -> None:
    """Approve a label (the Policy Authority's act): it grants access from the next request."""
    with user_errors():
        _lifecycle(db, doc_id, by, note, "approve")


@store_app.command("revoke")
def store_revoke(doc_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt) -> None:
    """Revoke a label: the document is denied from the next request on."""
    with user_errors():
        _lifecycle(db, doc_id, by, note, "revoke")


@store_app.command("propose")
def store_propose(label_file: Path, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt) -> None:
    """Propose labels from a YAML/JSON label file (state proposed: they grant nothing yet)."""
    with user_errors():
        from privacy_ci.conductor import load_labels

        labels = load_labels(label_file)
        store = _open(db)
        try:
            for label in labels:
                store.propose_label(label, by, note)
        finally:
            store.close()
        console.print(
            f"proposed {len(labels)} labels; approve each with privacy-ci store approve",
            highlight=False,
        )


@store_app.command("assign")
def store_assign(
    agent_id: str, subject_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt
) -> None:
    """Assign an agent to a data subject (need-to-know)."""
    with user_errors():
        store = _open(db)
        try:
            store.assign(agent_id, subject_id, by, note)
        finally:
            store.close()
        console.print(f"{agent_id} assigned to {subject_id}", highlight=False)


@store_app.command("unassign")
def store_unassign(
    agent_id: str, subject_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt
) -> None:
    """Revoke an assignment; effective on the next request."""
    with user_errors():
        store = _open(db)
        try:
            store.unassign(agent_id, subject_id, by, note)
        finally:
            store.close()
        console.print(f"{agent_id} no longer assigned to {subject_id}", highlight=False)


@store_app.command("history")
def store_history(
    db: str = DbOpt,
    target: str | None = typer.Option(None, "--target", help="A document id or agent->subject."),
    as_json: bool = JsonOpt,
) -> None:
    """Show recorded changes (who approved, edited or revoked what, and when)."""
    with user_errors():
        store = _open_readonly(db)
        try:
            entries = store.history(target)
        finally:
            store.close()
        if as_json:
            print_json([e.as_dict() for e in entries])
            return
        for e in entries:
            console.print(
                f"{e.seq:>6} {e.at[:19]} {e.actor}: {e.action} {e.target_kind} {e.target}",
                highlight=False,
                markup=False,
            )


# -- audit ------------------------------------------------------------------------------
@audit_app.command("verify")
def audit_verify(
    db: str = DbOpt,
    expect_head: str | None = typer.Option(
        None, "--expect-head", help="A head hash recorded elsewhere that the log must end with."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Re-compute the hash chain; report the first bad record (exit 1 if any)."""
    with user_errors():
        store = _open_readonly(db)
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


@audit_app.command("tail")
def audit_tail(
    db: str = DbOpt,
    n: int = typer.Option(20, "-n", min=1, help="How many records."),
    as_json: bool = JsonOpt,
) -> None:
    """Show the last records of the audit log."""
    with user_errors():
        store = _open_readonly(db)
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


# -- token ------------------------------------------------------------------------------
@token_app.command("keygen")
def token_keygen(
    out: Path = typer.Option(..., "--out", help="Write the key to this file (mode 600)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a fresh random HS256 signing key."""
    with user_errors():
        import os

        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import generate_key

        if out.exists() and not force:
            raise PrivacyCIError(f"{out} exists (use --force to overwrite)")
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(generate_key() + "\n")
        except OSError as exc:
            raise PrivacyCIError(f"cannot write the key to {out}: {exc.strerror}") from None
        console.print(f"wrote a 256-bit key to {out}", highlight=False, markup=False)


@token_app.command("mint")
def token_mint(
    agent_id: str = typer.Argument(..., help="The agent (the token's sub)."),
    key_file: Path = typer.Option(
        ..., "--key-file", envvar="PRIVACY_CI_JWT_KEY_FILE", help="The signing key file."
    ),
    role: str | None = typer.Option(None, "--role", help="Role acted in (default: from --db)."),
    context: str | None = typer.Option(None, "--context", help="Context (default: from --db)."),
    db: str | None = typer.Option(
        None,
        "--db",
        envvar="PRIVACY_CI_DB",
        help="Read the agent's role and context from this store.",
    ),
    ttl: int = typer.Option(
        3600, "--ttl", min=1, max=24 * 3600, help="Seconds until it expires (at most a day)."
    ),
    authority: bool = typer.Option(False, "--authority", help="Add the policy-authority claim."),
    as_json: bool = JsonOpt,
) -> None:
    """Mint a signed token for local use (prints it)."""
    with user_errors():
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import issue_token, load_key

        key = load_key(key_file)
        if (role is None or context is None) and db is not None:
            store = _open_readonly(db)
            try:
                agent = store.agents().get(agent_id)
            finally:
                store.close()
            if agent is None:
                raise PrivacyCIError(f"unknown agent {agent_id!r} in {db}")
            if role is None:
                if len(agent.roles) != 1:
                    raise PrivacyCIError(
                        f"agent {agent_id!r} holds roles {sorted(agent.roles)}: pass --role"
                    )
                role = next(iter(agent.roles))
            if context is None:
                context = agent.roles.get(role)
        if role is None or context is None:
            raise PrivacyCIError("pass --role and --context, or --db to read them from a store")
        token = issue_token(key, agent_id, role, context, ttl, authority=authority)
        if as_json:
            payload: dict[str, Any] = {
                "token": token,
                "sub": agent_id,
                "role": role,
                "context": context,
                "ttl": ttl,
                "authority": authority,
            }
            print_json(payload)
        else:
            typer.echo(token)
