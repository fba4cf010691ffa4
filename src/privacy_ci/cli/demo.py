"""`privacy-ci demo`: the main job on the embedded defaults (Riverside corpus)."""

from __future__ import annotations

import typer

from privacy_ci.cli._common import console, print_json, user_errors

# (agent, document, acting context or None, what the example shows)
EXAMPLES = [
    ("D01", "RMC-LAB-001", None, "a permit: the attending doctor reads her patient's lab report"),
    (
        "D02",
        "RMC-LAB-001",
        None,
        "a denial for a missing assignment: another doctor, not assigned to the patient",
    ),
    (
        "D01",
        "RMC-LAB-001",
        "Administrative",
        "a role outside its context: the same doctor acting in the administrative context",
    ),
    (
        "T01",
        "RMC-CLM-001",
        None,
        "a denial by the ACL: an IT contractor in the administrative context asks for a claim",
    ),
]

REASONER_EXAMPLE = (
    "A hospital sent a patient's full psychiatric record to the patient's employer after the"
    " HR manager asked by phone. The patient had not signed any authorization."
)
"""The Privacy Checklist part: one narrative, judged and explained with no model."""


def reasoner_example() -> dict[str, object]:
    """The ci-reasoner's judgment of `REASONER_EXAMPLE` (or why it could not run)."""
    from privacy_ci.errors import PrivacyCIError

    try:
        from privacy_ci.reasoning import CIReasoner

        reasoning = CIReasoner().judge(REASONER_EXAMPLE)
    except PrivacyCIError as exc:  # no data or no NLP package: the rest still runs
        return {"narrative": REASONER_EXAMPLE, "error": str(exc)}
    return {
        "narrative": REASONER_EXAMPLE,
        "method": "ci-reasoner (model-free)",
        **reasoning.as_dict(),
    }


def demo(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    assistant: bool = typer.Option(
        True, help="Also ask the assistant a question over the gated store (runs the model)."
    ),
) -> None:
    """Show the Riverside flow table (Table VI), explained gate decisions, and a doctor
    asking the assistant a question answered only from the documents the policy permits."""
    with user_errors():
        from privacy_ci.cli.conductor import decide_payload, render_decision, render_flow_table
        from privacy_ci.conductor import load_corpus
        from privacy_ci.conductor._analysis import enumerate_flows

        corpus = load_corpus()
        table = enumerate_flows(corpus).as_dict()
        examples = [
            {"shows": shows, **decide_payload(corpus, agent, doc, context=ctx)}
            for agent, doc, ctx, shows in EXAMPLES
        ]
        if as_json:
            from io import StringIO

            from rich.console import Console

            payload: dict[str, object] = {"flows": table, "examples": examples}
            payload["checklist"] = reasoner_example()
            if assistant:
                from privacy_ci.service import demo_assistant

                payload["assistant"] = demo_assistant(Console(file=StringIO()))
            print_json(payload)
            return
        console.rule("Privacy Conductor: Riverside Medical Clinic")
        console.print(
            f"Policy '{corpus.policy.name}' by {corpus.policy.authority};"
            f" {len(corpus.agents)} agents, {len(corpus.labels)} labelled documents.\n",
            markup=False,
        )
        render_flow_table(table, corpus)
        for example in examples:
            console.print(f"\n[bold]Example:[/] {example['shows']}")
            render_decision(example)
        _render_reasoner_example()
        if assistant:
            from privacy_ci.service import demo_assistant

            console.print()
            console.rule("The gate inside the assistant's retrieval path")
            demo_assistant(console)


def _render_reasoner_example() -> None:
    from rich.markup import escape

    from privacy_ci.cli.judge import _render_reasoning

    console.print()
    console.rule("Privacy Checklist: a narrative judged by the model-free ci-reasoner")
    example = reasoner_example()
    console.print(f"[bold]narrative[/]  {escape(REASONER_EXAMPLE)}", highlight=False)
    if "error" in example:
        console.print(f"[yellow]skipped:[/] {escape(str(example['error']))}", highlight=False)
        return
    console.print(f"[bold]verdict[/]  {example['verdict'] or 'undetermined'}", highlight=False)
    _render_reasoning(example)
