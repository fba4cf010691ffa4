"""`privacy-ci conductor ...`: the Privacy Conductor gate over a corpus."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors

if TYPE_CHECKING:
    from privacy_ci.conductor import Corpus, Decision, FlowClass, Label, Requester

app = typer.Typer(
    help="Privacy Conductor: decide who may receive a document.", no_args_is_help=True
)

CorpusOpt = typer.Option(
    None,
    "--corpus",
    help="Corpus folder (policy, agents, labels, assignments). Default: Riverside.",
)
LabelsOpt = typer.Option(
    None, "--labels", help="Adjudicate this label file instead of the corpus's."
)
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _load(corpus_dir: Path | None, labels_file: Path | None = None) -> Corpus:
    from dataclasses import replace

    from privacy_ci.conductor import load_corpus, load_labels, validate_corpus
    from privacy_ci.errors import ValidationFailed

    corpus = load_corpus(corpus_dir)
    if labels_file is not None:
        labels = load_labels(labels_file)
        problems = validate_corpus(
            corpus.policy, corpus.directory, labels, corpus.assignments, str(labels_file.parent)
        )
        if problems:
            raise ValidationFailed(problems)
        corpus = replace(corpus, labels=labels)
    return corpus


@app.command()
def flows(
    corpus_dir: Path | None = CorpusOpt,
    labels_file: Path | None = LabelsOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Enumerate every (agent, document) flow; count per class and per tier, compared
    with Table VI of the Conductor paper for the packaged Riverside corpus."""
    with user_errors():
        from privacy_ci.conductor._analysis import enumerate_flows, table_vi_mismatch

        corpus = _load(corpus_dir, labels_file)
        table = enumerate_flows(corpus)
        # Table VI counts Riverside's flows: another corpus is not compared with it
        data = table.as_dict(not_table_vi=table_vi_mismatch(corpus))
        if as_json:
            print_json(data)
            return
        render_flow_table(data, corpus)


def render_flow_table(data: dict[str, Any], corpus: Corpus) -> None:
    """Print the class table, the tier table and the agreement line; the Table VI
    column and verdict only when `data` was compared with Table VI (Riverside)."""
    from rich.table import Table

    compared = data.get("matches_table_vi") is not None
    title = (
        f"{len(corpus.agents)} agents x {len(corpus.labels)} documents = {data['flows']} flows"
        f"  (policy {data['policy_version']})"
    )
    columns = ["class", "condition", "n", "Table VI", "expected", "gate permit", "gate deny"]
    if not compared:
        columns.remove("Table VI")
    t = Table(title=title, title_justify="left")
    for col in columns:
        t.add_column(col, justify="left" if col in ("class", "condition", "expected") else "right")
    for key, row in data["classes"].items():
        tv = row.get("table_vi")
        mark = "" if tv is None or tv == row["n"] else " [red]≠[/]"
        t.add_row(
            key,
            row["condition"],
            f"{row['n']:,}{mark}",
            *(["-" if tv is None else f"{tv:,}"] if compared else []),
            row["expected"],
            f"{row['gate_permit']:,}",
            f"{row['gate_deny']:,}",
        )
    rows = data["classes"].values()
    expect_permit = sum(r["n"] for r in rows if r["expected"] == "permit")
    t.add_row(
        "total",
        "",
        f"{data['flows']:,}",
        *(["2,520"] if compared else []),
        "259 / 2,261" if compared else f"{expect_permit:,} / {data['flows'] - expect_permit:,}",
        f"{data['permit']:,}",
        f"{data['deny']:,}",
        end_section=True,
    )
    console.print(t)
    classes = list(data["classes"])
    tt = Table(title="Flows per sensitivity tier", title_justify="left")
    tt.add_column("tier")
    for key in classes:
        tt.add_column(key, justify="right")
    tt.add_column("total", justify="right")
    for tier, counts in data["tiers"].items():
        tt.add_row(tier, *[str(counts.get(k, 0) or "") for k in classes], str(sum(counts.values())))
    console.print(tt)
    agree = data["agreement"]
    if not compared:
        status = "not compared with Table VI (Riverside's counts)"
    elif data["matches_table_vi"]:
        status = "[green]matches Table VI[/]"
    else:
        status = "[red]differs from Table VI[/]"
    console.print(
        f"gate agrees with the expected class on {agree['agree']:,} of {data['flows']:,} flows"
        f" ({agree['disagree']} disagreements); {status}"
    )


def _flow_payload(
    corpus: Corpus, requester: Requester, label: Label, decision: Decision, flow_class: FlowClass
) -> dict[str, Any]:
    from privacy_ci.conductor import describe_flow

    return {
        "agent": requester.id,
        "agent_name": corpus.directory.person_name(requester.id),
        "active_role": requester.active_role,
        "active_context": requester.active_context,
        "doc": label.doc_id,
        "title": label.title,
        **decision.as_dict(),
        "flow_class": flow_class.value,
        "flow_class_condition": flow_class.condition,
        "flow": describe_flow(requester, label, corpus).as_dict(),
        "label": {
            "sensitivity_tier": label.sensitivity_tier.value,
            "permitted_receiver_roles": sorted(label.permitted_receiver_roles),
            "subject": label.subject,
            "originating_context": label.originating_context,
            "extra_sensitive": label.extra_sensitive,
        },
        "requester_assigned_to_subject": (
            None if label.subject is None else label.subject in requester.assignments
        ),
    }


def decide_payload(
    corpus: Corpus, agent: str, doc: str, role: str | None = None, context: str | None = None
) -> dict[str, Any]:
    """Decide one flow and describe it (shared by `decide` and `privacy-ci demo`)."""
    from privacy_ci.conductor import Gate, classify_flow

    requester = corpus.requester(agent, role=role, context=context)
    label = corpus.label(doc)
    decision = Gate(corpus.policy).decide(requester, label)
    return _flow_payload(
        corpus, requester, label, decision, classify_flow(requester, label, corpus.policy)
    )


def render_decision(payload: dict[str, Any]) -> None:
    """Print one explained decision."""
    from rich.panel import Panel

    p: dict[str, Any] = {k: escape(v) if isinstance(v, str) else v for k, v in payload.items()}
    label = {k: escape(str(v)) for k, v in p["label"].items()}
    colour = "green" if p["decision"] == "permit" else "red"
    flow: dict[str, Any] = {
        k: (
            {kk: escape(str(vv)) for kk, vv in v.items()} if isinstance(v, dict) else escape(str(v))
        )
        for k, v in p["flow"].items()
    }
    lines = [
        f"[bold {colour}]{p['decision'].upper()}[/]  rule [bold]{p['rule']}[/]: {p['explanation']}",
        f"requester  {p['agent']} {p['agent_name']} acting as {p['active_role']}"
        f" in context {p['active_context']}",
        f"document   {p['doc']} {p['title']}",
        f"           tier {label['sensitivity_tier']}, ACL {label['permitted_receiver_roles']},"
        f" originating context {label['originating_context']}",
        "flow (CI parameters)",
        f"  sender                  {flow['sender']['name']} \\[{flow['sender']['role']}]",
        f"  recipient               {flow['recipient']['name']} \\[{flow['recipient']['role']}]",
        f"  subject                 {flow['subject']['name']} \\[{flow['subject']['role']}]",
        f"  information type        {flow['information_type']}",
        f"  transmission principle  {flow['transmission_principle']['purpose']}",
        f"assigned to subject: {p['requester_assigned_to_subject']}"
        f"   flow class {p['flow_class']} ({p['flow_class_condition']})",
        f"policy {p['policy_version']}",
    ]
    console.print(Panel("\n".join(lines), expand=False, border_style=colour), highlight=False)


@app.command()
def decide(
    agent: str = typer.Option(..., "--agent", help="Agent id, e.g. D01."),
    doc: str = typer.Option(..., "--doc", help="Document id, e.g. RMC-LAB-001."),
    role: str | None = typer.Option(
        None, "--role", help="Act in this role instead of the agent's."
    ),
    context: str | None = typer.Option(
        None, "--context", help="Act in this context instead of the agent's own."
    ),
    corpus_dir: Path | None = CorpusOpt,
    labels_file: Path | None = LabelsOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Decide one flow: the decision, the rule that decided and the flow's CI parameters."""
    with user_errors():
        corpus = _load(corpus_dir, labels_file)
        payload = decide_payload(corpus, agent, doc, role, context)
        if as_json:
            print_json(payload)
        else:
            render_decision(payload)


@app.command()
def validate(
    corpus_dir: Path | None = typer.Argument(None, help="Corpus folder. Default: Riverside."),
    as_json: bool = JsonOpt,
) -> None:
    """Validate a corpus folder: every file, entry and cross-reference."""
    from privacy_ci.errors import ValidationFailed

    try:
        with user_errors():
            corpus = _load(corpus_dir)
    except typer.Exit:
        raise
    except ValidationFailed:  # pragma: no cover - user_errors handles it
        raise
    summary = {
        "corpus": str(corpus.source),
        "valid": True,
        "policy": corpus.policy.name,
        "policy_version": corpus.policy.version,
        "agents": len(corpus.agents),
        "documents": len(corpus.labels),
        # files in documents/ that no label names: loaded, granted to nobody
        "unlabelled": len(corpus.unlabelled),
        "distinct_acls": len({frozenset(lb.permitted_receiver_roles) for lb in corpus.labels}),
        "assignments": sum(len(s) for s in corpus.assignments.values()),
    }
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"[green]valid[/]: {summary['documents']} labelled documents"
            + (
                f" and {summary['unlabelled']} without a label (stored, granted to nobody)"
                if summary["unlabelled"]
                else ""
            )
            + f", {summary['agents']} agents,"
            f" {summary['distinct_acls']} distinct ACLs, {summary['assignments']} assignments;"
            f" policy {escape(str(summary['policy']))} {summary['policy_version']}",
            highlight=False,
        )


@app.command()
def controls(
    corpus_dir: Path | None = CorpusOpt,
    field: str = typer.Option("extra_sensitive", help="Boolean label field to invert."),
    as_json: bool = JsonOpt,
) -> None:
    """Inert-field control (section VI-D): invert a field on every label, re-adjudicate."""
    with user_errors():
        from privacy_ci.conductor._analysis import inert_field_control
        from privacy_ci.conductor._labels import Label
        from privacy_ci.errors import PrivacyCIError

        if (
            Label.model_fields.get(field) is None
            or Label.model_fields[field].annotation is not bool
        ):
            raise PrivacyCIError(f"--field {field!r} is not a boolean label field")
        result = inert_field_control(_load(corpus_dir), field)
        if as_json:
            print_json(result.as_dict())
        else:
            console.print(
                f"inverting {escape(field)} on every document changed {result.changed} of"
                f" {result.flows:,} decisions; permits {result.permits_before} ->"
                f" {result.permits_after}"
            )


@app.command()
def show(
    doc: str = typer.Argument(..., help="Document id, e.g. RMC-LAB-001."),
    corpus_dir: Path | None = CorpusOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print a document's label and its text (from the corpus's content: templates or files)."""
    with user_errors():
        corpus = _load(corpus_dir)
        label = corpus.label(doc)
        text = corpus.content(doc)
        if as_json:
            print_json({"label": label.model_dump(mode="json"), "content": text})
            return
        for key, value in label.model_dump(mode="json").items():
            console.print(f"[bold]{key}[/]: {escape(str(value))}", highlight=False)
        console.rule()
        console.print(text, markup=False, highlight=False)


@app.command()
def documents(
    out: Path = typer.Option(..., "--out", help="Folder to write one <doc_id>.txt per document."),
    corpus_dir: Path | None = CorpusOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write every document's text (from the corpus's content: templates or files)."""
    with user_errors():
        from privacy_ci.conductor import corpus_digest, render_corpus, write_documents

        corpus = _load(corpus_dir)
        texts = render_corpus(corpus)
        paths = write_documents(texts, out)
        digest = corpus_digest(texts)
        if as_json:
            print_json({"folder": str(out), "documents": len(paths), "sha256": digest})
        else:
            console.print(
                f"wrote {len(paths)} documents to {escape(str(out))} (corpus sha256 {digest})",
                highlight=False,
            )
