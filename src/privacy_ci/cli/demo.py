"""`privacy-ci demo`: the main job on the embedded defaults (Riverside corpus)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, print_json, user_errors

if TYPE_CHECKING:
    from privacy_ci.reasoning import FactJudge

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

ASK_SCRIPT: dict[str, str] = {
    "legal_process": "none",
    "required_by_law": "no",
    "serious_threat": "no",
    "purpose": "employment_decision",
}
"""The answers `privacy-ci ask` gets in the demo to the questions the verdict on
`REASONER_EXAMPLE` hinges on; every fact read from the narrative is confirmed, and a
question the script does not answer is left unknown (its presumption holds)."""


def _ask_scripted(judge: FactJudge) -> dict[str, Any]:
    """`REASONER_EXAMPLE` through the questionnaire of ``privacy-ci ask``, answered from
    `ASK_SCRIPT`: each step shown with the answer given, then the verdict step."""
    from privacy_ci.reasoning import Questionnaire, StepKind

    steps: list[dict[str, Any]] = []
    with Questionnaire(judge.regulation, judge=judge) as session:
        step = session.start(REASONER_EXAMPLE)
        while step.kind is not StepKind.VERDICT:
            fact = step.fact
            assert fact is not None
            shown: dict[str, Any] = {
                "kind": step.kind.value,
                "fact": fact,
                "question": step.question,
                "paragraph": step.paragraph,
                "leaning": step.decision.verdict.value if step.decision else None,
            }
            if step.kind is StepKind.CONFIRM:
                assert step.read is not None
                shown["read"] = step.read.as_dict()
                shown["answer"] = {"fact": fact, "confirm": True}
                session.confirm(fact)
            else:
                shown["text"] = step.text
                value = ASK_SCRIPT.get(fact)  # None: left unknown
                shown["answer"] = {"fact": fact, "value": value}
                session.answer(fact, value)
            steps.append(shown)
            step = session.next_step()
    return {"script": dict(ASK_SCRIPT), "steps": steps, "verdict": step.as_dict()}


def reasoner_example() -> dict[str, Any]:
    """The ci-reasoner's judgment of `REASONER_EXAMPLE` (facts, then law), and the same
    case answered through `privacy-ci ask` from `ASK_SCRIPT` (or why it could not run)."""
    from privacy_ci.errors import PrivacyCIError

    try:
        from privacy_ci.reasoning import FactJudge

        judge = FactJudge("hipaa")  # no knowledge base: the narrative names no CI field
        judgment = judge.judge(REASONER_EXAMPLE)
        asked = _ask_scripted(judge)
    except PrivacyCIError as exc:  # no NLP package: the rest still runs
        return {"narrative": REASONER_EXAMPLE, "error": str(exc)}
    return {
        "narrative": REASONER_EXAMPLE,
        "method": "ci-reasoner (model-free)",
        **judgment.as_dict(),
        "ask": asked,
    }


def demo(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    assistant: bool = typer.Option(
        True, help="Also ask the assistant a question over the gated store (runs the model)."
    ),
) -> None:
    """Show the Riverside flow table (Table VI), explained gate decisions, a narrative
    judged by the model-free ci-reasoner and then answered through `privacy-ci ask` from
    a script, and a doctor asking the assistant a question answered only from the
    documents the policy permits."""
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

    from privacy_ci.cli.facts import render_decision, render_judgment
    from privacy_ci.reasoning import load_fact_schema

    console.print()
    console.rule("Privacy Checklist: a narrative judged by the model-free ci-reasoner")
    example = reasoner_example()
    console.print(f"[bold]narrative[/]  {escape(REASONER_EXAMPLE)}", highlight=False)
    if "error" in example:
        console.print(f"[yellow]skipped:[/] {escape(str(example['error']))}", highlight=False)
        return
    schema = load_fact_schema("hipaa")
    render_judgment(example, schema)
    console.print()
    console.rule("The same case through privacy-ci ask, answered from a script")
    asked = example["ask"]
    console.print(
        "[dim]each fact read is confirmed; each question gets the script's answer[/]",
        highlight=False,
    )
    for number, step in enumerate(asked["steps"], 1):
        console.print(
            f"[bold]{number}. {escape(step['fact'])}[/]: {escape(step['question'])}"
            f"  [dim]({escape(step['paragraph'])}; so far {escape(str(step['leaning']))})[/]",
            highlight=False,
        )
        answer = step["answer"]
        if step["kind"] == "confirm":
            read = step["read"]
            console.print(
                f'  read: [bold]{escape(read["value"])}[/] from "{escape(read.get("quote", ""))}"'
                "  -> answered: confirm",
                highlight=False,
            )
        else:
            console.print(f"  {escape(step['text'])}", highlight=False)
            value = answer["value"]
            if value is None:
                shown = "unknown (its presumption holds)"
            else:
                shown = f"{value} ({schema.spec(step['fact']).label(value)})"
            console.print(f"  -> answered: [bold]{escape(shown)}[/]", highlight=False)
    verdict = asked["verdict"]
    console.print()
    render_decision(verdict, verdict["facts"], schema)
