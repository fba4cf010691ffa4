"""`privacy-ci facts ...`: the fact model of a regulation, and the law on given facts.

    privacy-ci facts schema                      # every fact: question, paragraph, values
    privacy-ci facts schema --json > facts.json  # the JSON Schema of a facts file
    privacy-ci facts decide --facts case.yaml --fact authorization=absent

A facts file is a JSON or YAML object of fact -> value (``{"holder":
"covered_entity", "authorization": "absent"}``), or fact -> an object with ``value``
and its provenance (``source``, ``quote``, ``start``, ``end``, ``note``); an unknown
fact or value is one error naming it. ``--fact KEY=VALUE`` arguments win over the
file. The renderers here (`render_judgment`) also print the ci-reasoner's answer
for ``privacy-ci judge`` and the verdict of ``privacy-ci ask``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors

if TYPE_CHECKING:
    from privacy_ci.reasoning import Facts, FactSchema

app = typer.Typer(
    help="The facts of a disclosure: the fact model (schema) and the law on given facts.",
    no_args_is_help=True,
)

RegulationOpt = typer.Option(
    "hipaa", "--regulation", "-r", help="Whose facts and law (HIPAA has both)."
)
FactsFileOpt = typer.Option(
    None,
    "--facts",
    help="A JSON or YAML file of facts (fact -> value); `privacy-ci facts schema` lists them.",
)
FactOpt = typer.Option(
    None,
    "--fact",
    help="One fact as KEY=VALUE (repeatable; wins over --facts), e.g. authorization=absent.",
)

_LISTED = 8  # values listed per answer of a question (the purposes run to thirty)
_VERDICT_STYLE = {"permit": "green", "prohibit": "red", "not_applicable": "cyan"}


def given_facts(
    schema: FactSchema, facts_file: Path | None, fact_args: Sequence[str] | None
) -> Facts:
    """The facts of ``--facts FILE`` and ``--fact KEY=VALUE`` (the arguments win).

    Raises:
        FactError: the file cannot be read, or a key or value is unknown (naming it).
    """
    from privacy_ci.reasoning import Facts, load_facts_file, parse_fact_args

    facts = Facts(schema) if facts_file is None else load_facts_file(facts_file, schema)
    if fact_args:
        facts = facts.with_facts(dict(parse_fact_args(fact_args, schema)))
    return facts


def _where(fact: Mapping[str, Any]) -> str:
    """Where a fact came from, with its quote and offsets."""
    source = str(fact.get("source", "given"))
    if source == "given" and str(fact.get("note", "")).startswith("confirmed"):
        source = "given (confirmed)"  # read, then confirmed in ask
    if source == "presumed":
        return "presumed: not stated"
    quote = fact.get("quote")
    if not quote:
        note = fact.get("note")
        return f"{source} ({note})" if note else source
    span = f" at {fact['start']}-{fact['end']}" if fact.get("start") is not None else ""
    return f'{source}: "{quote}"{span}'


def _label(schema: FactSchema | None, name: str, value: str) -> str:
    if schema is None or name not in schema or value not in schema.spec(name).values:
        return ""
    return schema.spec(name).label(value)


def render_fact(schema: FactSchema | None, name: str, fact: Mapping[str, Any], indent: str) -> None:
    value = str(fact["value"])
    label = _label(schema, name, value)
    shown = f"{value} ({label})" if label and label != value else value
    console.print(
        f"{indent}{escape(name)} = [bold]{escape(shown)}[/]  [dim]{escape(_where(fact))}[/]",
        highlight=False,
    )


def render_verdict_line(decision: Mapping[str, Any], with_verdict: bool = True) -> None:
    """The verdict, whether it is determined, and the deciding rule with its paragraph."""
    verdict = str(decision["verdict"])
    style = _VERDICT_STYLE.get(verdict, "bold")
    how = (
        "yes: every value of the unknown facts gives it"
        if decision["determined"]
        else "no: it rests on presumptions; the questions below settle it"
    )
    if with_verdict:
        console.print(f"[bold]verdict[/]  [bold {style}]{escape(verdict)}[/]", highlight=False)
    console.print(f"[bold]determined[/]  {how}", highlight=False)
    rule = decision["rule"]
    console.print(
        f"[bold]rule[/]  {escape(rule['paragraph'])} {escape(rule['title'])}"
        f"  [dim]({escape(rule['id'])}: {escape(rule['effect'])})[/]",
        highlight=False,
    )


def render_decision(
    decision: Mapping[str, Any],
    facts: Mapping[str, Mapping[str, Any]] | None = None,
    schema: FactSchema | None = None,
    with_verdict: bool = True,
) -> None:
    """A law decision (`LawDecision.as_dict`): the verdict, determined or not, the deciding
    rule, the facts it used with their sources and quotes, the presumptions, the
    questions that would settle it with the verdict per answer, the near misses, and
    (with `facts`) every other fact known. `with_verdict` False: the caller printed the
    verdict line."""
    render_verdict_line(decision, with_verdict)
    used: Mapping[str, Mapping[str, Any]] = decision.get("used") or {}
    if used:
        console.print("[bold]facts the rule used[/]")
        for name, fact in used.items():
            render_fact(schema, name, fact, "  ")
    others = {k: v for k, v in (facts or {}).items() if k not in used}
    if others:
        console.print("[bold]other facts[/]")
        for name, fact in others.items():
            render_fact(schema, name, fact, "  ")
    presumed: Mapping[str, str] = decision.get("presumed") or {}
    if presumed:
        listed = ", ".join(f"{k} = {v}" for k, v in presumed.items())
        console.print(
            f"[bold]presumed[/] (not stated; each is a question below)  {escape(listed)}",
            highlight=False,
        )
    questions = decision.get("questions") or []
    if questions:
        console.print("[bold]questions that would settle it[/]")
        for q in questions:
            console.print(
                f"  [bold]{escape(q['fact'])}[/]: {escape(q['question'])}", highlight=False
            )
            console.print(f"    {escape(q['text'])}", highlight=False)
            for branch in q["branches"]:
                verdicts = " or ".join(branch["verdicts"])
                values: list[str] = branch["values"]
                # a branch of several answers may reach its verdict by several rules
                rule = f" by {branch['rule']}" if branch.get("rule") and len(values) == 1 else ""
                shown = ", ".join(values[:_LISTED])
                if len(values) > _LISTED:
                    shown += f" and {len(values) - _LISTED} more"
                console.print(
                    f"    [dim]{escape(shown)} -> {escape(verdicts)}{escape(rule)}[/]",
                    highlight=False,
                )
    misses = decision.get("near_misses") or []
    if misses:
        console.print("[bold]near misses[/] (permissions that fail on one fact)")
        for miss in misses:
            fails = "; ".join(
                f"{f['fact']} is {f['value'] or 'unknown'}, needs {' or '.join(f['needs'])}"
                for f in miss["failing"]
            )
            console.print(
                f"  {escape(miss['paragraph'])} {escape(miss['title'])}: {escape(fails)}",
                highlight=False,
            )
    if decision.get("exhausted"):
        console.print(
            "[yellow]the law engine's branch budget ran out: the verdict may be determined"
            " although it says not[/]",
            highlight=False,
        )


def render_judgment(
    judgment: Mapping[str, Any], schema: FactSchema | None = None, with_verdict: bool = True
) -> None:
    """A `FactJudgment.as_dict()`: the decision with every fact known."""
    render_decision(judgment["decision"], judgment.get("facts"), schema, with_verdict)


@app.command("schema")
def schema_command(
    regulation: str = RegulationOpt,
    as_json: bool = typer.Option(
        False, "--json", help="Print the JSON Schema (draft 2020-12) of a facts file."
    ),
) -> None:
    """The fact model: each fact's question, paragraph, values (with labels) and presumption."""
    with user_errors():
        from privacy_ci.reasoning import load_fact_schema

        schema = load_fact_schema(regulation)
        if as_json:
            print_json(schema.json_schema())
            return
        console.print(
            f"[bold]{escape(schema.version_id)}[/]: {len(schema.facts)} facts; a facts file"
            " is an object of fact -> value (privacy-ci facts schema --json for its JSON Schema)",
            highlight=False,
        )
        for spec in schema:
            console.print()
            console.print(
                f"[bold]{escape(spec.name)}[/]  {escape(spec.question)}"
                f"  [dim]({escape(spec.paragraph)})[/]",
                highlight=False,
            )
            width = max(len(v) for v in spec.values)
            for value in spec.values.values():
                console.print(
                    f"  {escape(value.name.ljust(width))}  {escape(value.label)}", highlight=False
                )
            if spec.presume is not None:
                why = f": {spec.presume_note}" if spec.presume_note else ""
                console.print(
                    f"  [dim]presumed {escape(spec.presume)} when not stated{escape(why)}[/]",
                    highlight=False,
                )


@app.command("decide")
def decide_command(
    facts_file: Path | None = FactsFileOpt,
    fact: list[str] | None = FactOpt,
    regulation: str = RegulationOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the decision as JSON."),
) -> None:
    """The law on the given facts alone (no narrative): verdict, whether it is determined,
    the deciding rule, the facts used, the presumptions, the questions with the verdict
    per answer, and near misses."""
    with user_errors():
        from privacy_ci.reasoning import FactJudgment, apply_law, load_law

        book = load_law(regulation)
        facts = given_facts(book.schema, facts_file, fact)
        judgment = FactJudgment(facts, apply_law(book, facts), book.version_id)
        if as_json:
            print_json({"regulation": regulation, **judgment.as_dict()})
            return
        render_judgment(judgment.as_dict(), book.schema)
