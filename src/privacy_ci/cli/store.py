"""`privacy-ci store ...`: the document store (labels and their approval, assignments).

Load a corpus folder (`store load`; `store load-riverside` for the packaged one);
list, propose, approve and revoke labels, assign agents to data subjects, and read
the change history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors
from privacy_ci.cli._store_common import (
    ByOpt,
    DbOpt,
    JsonOpt,
    NoteOpt,
    open_store,
    open_store_readonly,
)

app = typer.Typer(
    help="The document store: load a corpus, list, approve and revoke labels, assignments.",
    no_args_is_help=True,
)


@app.command("init")
def store_init(db: str = DbOpt) -> None:
    """Create the store's tables (idempotent)."""
    with user_errors():
        store = open_store(db)
        console.print(f"store ready: {store.engine}, version {store.version()}", highlight=False)
        store.close()


StateOpt = typer.Option(
    "approved", "--state", help="Leave the labels approved, or only proposed (grant nothing)."
)


def load_folder(db: str, folder: Path | None, state: str) -> dict[str, Any]:
    """Validate a corpus folder and write it into the store at `db`, in one transaction.

    Returns:
        What was loaded (policy, agents, assignments, documents, documents without a
        label), the labels in the store after the load (``labels``: in force, awaiting
        review, revoked: a load replaces the labels it names and keeps the others),
        what this load wrote (``loaded``) and the seconds taken.

    Raises:
        PrivacyCIError: a bad ``--state``, or a malformed folder (every problem listed;
            the store is not opened, so nothing is written).
    """
    import time

    from privacy_ci.conductor import load_corpus
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.store import load_corpus_into

    if state not in ("approved", "proposed"):
        raise PrivacyCIError(f"--state must be approved or proposed, got {state!r}")
    started = time.perf_counter()
    corpus = load_corpus(folder)
    unlabelled = corpus.unlabelled
    validated = time.perf_counter()
    store = open_store(db)
    try:
        before = store.label_counts()
        labels = load_corpus_into(store, corpus, state=state)
        version, engine, name = store.version(), store.engine, store.db.name
        # what is in force after the load, not only what it wrote: labels from earlier
        # loads and reviews stay, including those of documents this corpus leaves
        # unlabelled
        after = store.label_counts()
        in_force = store.in_force_ids() if unlabelled else set()
    finally:
        store.close()
    # a load adds or replaces labels, never removes one
    new = after["total"] - before["total"]
    kept = [doc_id for doc_id in unlabelled if doc_id in in_force]
    done = time.perf_counter()
    return {
        "corpus": str(corpus.source),
        "store": {"engine": engine, "name": name, "version": version},
        "policy": {"name": corpus.policy.name, "version": corpus.policy.version},
        "agents": len(corpus.agents),
        "policy_authority": len(corpus.directory.policy_authority),
        "assignments": sum(len(s) for s in corpus.assignments.values()),
        "labels": {
            "approved": after["in_force"],
            "proposed": after["proposed"],
            "revoked": after["revoked"],
        },
        "loaded": {"labels": labels, "state": state, "new": new, "replaced": labels - new},
        "documents": labels + len(unlabelled),
        "unlabelled": len(unlabelled),
        "unlabelled_ids": list(unlabelled),
        "unlabelled_in_force": kept,
        "seconds": {
            "validate": round(validated - started, 3),
            "store": round(done - validated, 3),
            "total": round(done - started, 3),
        },
    }


def _ids(ids: list[str]) -> str:
    """At most five ids, then how many more."""
    more = f", ... ({len(ids) - 5} more)" if len(ids) > 5 else ""
    return ", ".join(ids[:5]) + more


def render_load(report: dict[str, Any], state: str) -> None:
    """The load report as text: a headline, then one line per kind of thing loaded.

    The ``labels`` line counts what is in force in the store after the load (a load
    keeps the labels it does not name); ``this load`` says what it wrote."""
    docs, unlabelled = report["documents"], report["unlabelled"]
    labelled = docs - unlabelled
    if unlabelled:
        what = f"{labelled} with {state} labels, {unlabelled} without a label"
    else:
        what = f"{state} labels"
    store = report["store"]
    seconds = report["seconds"]
    labels, loaded = report["labels"], report["loaded"]
    approved_now = loaded["labels"] if state == "approved" else 0
    elsewhere = (
        f"; {labels['approved']} labels in force in the store"
        if labels["approved"] != approved_now
        else ""
    )
    console.print(
        f"loaded {docs} documents ({what}) in {seconds['total']:.2f} s"
        f" (validate {seconds['validate']:.2f} s, store {seconds['store']:.2f} s){elsewhere}",
        highlight=False,
    )
    in_store = (
        f"in the store now: {labels['approved']} in force (approved),"
        f" {labels['proposed']} awaiting review (proposed)"
    )
    if labels["revoked"]:
        in_store += f", {labels['revoked']} revoked"
    wrote = f"{loaded['labels']} {state} labels"
    if loaded["labels"]:
        wrote += f" ({loaded['new']} new, {loaded['replaced']} replacing a stored label)"
    if state == "proposed" and loaded["labels"]:
        wrote += ": a proposal changes no access until it is approved"
    kept = report["unlabelled_in_force"]
    kept_ids = set(kept)
    nobody = [d for d in report["unlabelled_ids"] if d not in kept_ids]
    no_label = []
    if nobody:
        no_label.append(
            f"{len(nobody)}: stored, granted to nobody until a label is approved ({_ids(nobody)})"
        )
    if kept:
        no_label.append(f"{len(kept)}: the label in force in the store stays ({_ids(kept)})")
    rows = [
        ("from", report["corpus"]),
        ("into", f"{store['engine']} {store['name']}, store version {store['version']}"),
        ("policy", f"{report['policy']['name']} {report['policy']['version']}"),
        ("agents", f"{report['agents']} (and {report['policy_authority']} Policy Authority)"),
        ("assignments", str(report["assignments"])),
        ("labels", in_store),
        ("this load", wrote),
        ("no label", "; ".join(no_label) if no_label else "0"),
    ]
    for key, value in rows:
        console.print(f"  {key:<12} {escape(value)}", highlight=False)


@app.command("load")
def store_load(
    folder: Path = typer.Argument(..., help="A corpus folder (see privacy-ci corpus init)."),
    db: str = DbOpt,
    state: str = StateOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Load a corpus folder: policy, agents, assignments, labels and every document.

    A document in documents/ without a label is stored and granted to nobody until a
    label for it is approved. The folder is validated first: a malformed one is
    reported (every problem) and nothing is written.
    """
    with user_errors():
        report = load_folder(db, folder, state)
        if as_json:
            print_json(report)
        else:
            render_load(report, state)


@app.command("load-riverside")
def store_load_riverside(
    db: str = DbOpt,
    state: str = StateOpt,
    corpus_dir: Path | None = typer.Option(None, "--corpus", help="Another corpus folder."),
    as_json: bool = JsonOpt,
) -> None:
    """Load the Riverside Medical Clinic (policy, agents, assignments, labels, content).

    A shortcut for ``store load`` with the packaged Riverside folder.
    """
    with user_errors():
        report = load_folder(db, corpus_dir, state)
        if as_json:
            print_json(report)
        else:
            render_load(report, state)


@app.command("labels")
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
        store = open_store_readonly(db)
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


VersionOpt = typer.Option(
    ...,
    "--version",
    help="The label version you reviewed (privacy-ci store review DOC shows it); refused if"
    " the label changed since.",
)


def _verdict(
    db: str,
    doc_id: str,
    verdict: str,
    by: str,
    note: str,
    version: int | None,
    *,
    accept_widening: bool = False,
) -> None:
    """One verdict through the store's one review path (version, widening rule, history,
    audit record), printed with who gains and loses access."""
    from privacy_ci.store import ReviewVerdict

    with open_store(db) as store:
        outcome = store.review_label(
            doc_id,
            ReviewVerdict(verdict),
            by,
            version=version,
            note=note,
            accept_widening=accept_widening,
        )
        record = outcome.record
        console.print(
            f"{record.doc_id}: {record.state.value} (label version {record.version},"
            f" by {record.updated_by}); audit record {outcome.audit_seq}",
            highlight=False,
            markup=False,
        )
        if outcome.diff is not None and outcome.diff.changes and verdict != "reject":
            console.print(f"  {_consequence(outcome.diff)}", highlight=False, markup=False)


def _consequence(diff: Any) -> str:
    parts = []
    for name, changes in (("gained", diff.gained), ("lost", diff.lost)):
        if changes:
            keys = ", ".join(c.principal.key for c in changes[:10])
            more = f" (+{len(changes) - 10})" if len(changes) > 10 else ""
            parts.append(f"{name} access: {keys}{more}")
    if diff.if_assigned:
        keys = ", ".join(c.principal.key for c in diff.if_assigned[:10])
        parts.append(f"would gain access if assigned: {keys}")
    if diff.latent_roles:
        parts.append(f"roles that gain access: {', '.join(diff.latent_roles)}")
    return "; ".join(parts) or "no change in access"


@app.command("review")
def store_review(doc_id: str, db: str = DbOpt, as_json: bool = JsonOpt) -> None:
    """What approving a proposal would change: who gains and loses access now, who would
    gain if assigned to its subject, and which roles gain (nothing is written)."""
    with user_errors():
        with open_store_readonly(db) as store:
            pending = store.pending_review(doc_id)
        diff, record = pending.diff, pending.record
        if as_json:
            print_json(pending.as_dict())
            return
        in_force = (
            f"version {record.in_force_version} stays in force until a verdict"
            if record.in_force_version is not None
            else "nothing is in force: no one has access"
        )
        console.print(
            f"{record.doc_id}: proposal version {record.version} by {record.updated_by};"
            f" {in_force}",
            highlight=False,
            markup=False,
        )
        verdict = "widens access" if diff.widens else "does not widen access"
        console.print(
            f"  if approved: {verdict}: {_consequence(diff)}", highlight=False, markup=False
        )
        flag = " --accept-widening" if diff.widens else ""
        console.print(
            f"  approve: privacy-ci store approve {record.doc_id} --version {record.version}"
            f"{flag} --by NAME",
            highlight=False,
            markup=False,
        )


@app.command("approve")
def store_approve(
    doc_id: str,
    db: str = DbOpt,
    by: str = ByOpt,
    note: str = NoteOpt,
    version: int = VersionOpt,
    accept_widening: bool = typer.Option(
        False,
        "--accept-widening",
        help="Approve although someone gains access (now or if assigned to the subject);"
        " without it such an approval is refused.",
    ),
) -> None:
    """Approve the proposal you reviewed (or reinstate a revoked label): it is in force
    from the next request. Recorded in the history and the audit log."""
    with user_errors():
        _verdict(db, doc_id, "approve", by, note, version, accept_widening=accept_widening)


@app.command("reject")
def store_reject(
    doc_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt, version: int = VersionOpt
) -> None:
    """Reject the proposal you reviewed: the label in force stays as it is (a label never
    approved is revoked). Recorded in the history and the audit log."""
    with user_errors():
        _verdict(db, doc_id, "reject", by, note, version)


@app.command("revoke")
def store_revoke(
    doc_id: str,
    db: str = DbOpt,
    by: str = ByOpt,
    note: str = NoteOpt,
    version: int | None = typer.Option(
        None, "--version", help="The label version you saw (refused if it changed since)."
    ),
) -> None:
    """Revoke a label: the document is denied from the next request on. Audited."""
    with user_errors():
        _verdict(db, doc_id, "revoke", by, note, version)


@app.command("propose")
def store_propose(label_file: Path, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt) -> None:
    """Propose labels from a YAML/JSON label file. A proposal changes no access: a label
    in force stays in force until the proposal is approved or rejected."""
    with user_errors():
        from privacy_ci.conductor import load_labels

        labels = load_labels(label_file)
        with open_store(db) as store:
            records = [store.propose_label(label, by, note) for label in labels]
        kept = sum(1 for r in records if r.in_force_version is not None)
        console.print(
            f"proposed {len(labels)} labels; they change no access until approved"
            + (f" ({kept} approved labels stay in force meanwhile)" if kept else "")
            + "; review each with privacy-ci store review DOC, or on /review",
            highlight=False,
            markup=False,
        )


@app.command("assign")
def store_assign(
    agent_id: str, subject_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt
) -> None:
    """Assign an agent to a data subject (need-to-know)."""
    with user_errors():
        store = open_store(db)
        try:
            store.assign(agent_id, subject_id, by, note)
        finally:
            store.close()
        console.print(f"{agent_id} assigned to {subject_id}", highlight=False)


@app.command("unassign")
def store_unassign(
    agent_id: str, subject_id: str, db: str = DbOpt, by: str = ByOpt, note: str = NoteOpt
) -> None:
    """Revoke an assignment; effective on the next request."""
    with user_errors():
        store = open_store(db)
        try:
            store.unassign(agent_id, subject_id, by, note)
        finally:
            store.close()
        console.print(f"{agent_id} no longer assigned to {subject_id}", highlight=False)


@app.command("history")
def store_history(
    db: str = DbOpt,
    target: str | None = typer.Option(None, "--target", help="A document id or agent->subject."),
    as_json: bool = JsonOpt,
) -> None:
    """Show recorded changes (who approved, edited or revoked what, and when)."""
    with user_errors():
        store = open_store_readonly(db)
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
