"""`privacy-ci ask`: a questionnaire that asks only what the law still needs.

    privacy-ci ask                                  # question by question, from nothing
    privacy-ci ask "A hospital faxed her lab results to her employer."   # confirm what was read
    privacy-ci ask --facts case.yaml --fact recipient=employer
    privacy-ci ask "..." --json-steps < answers.jsonl                     # a UI drives it

It starts from the facts given (``--facts FILE``, ``--fact KEY=VALUE``) and what the
offline reader finds in the NARRATIVE; each read fact the verdict rests on is shown
with its quote to confirm, change or clear. Then it asks the questions the verdict
still hinges on, in the order the law's rules need them, and stops as soon as the
verdict is determined, showing it with its rule (`privacy_ci.reasoning.Questionnaire`).

In a terminal: pick a value by its number (or type its name); ``?`` shows what the
values mean; ``u`` leaves the fact unknown (it is not asked again); on a
confirmation, Enter confirms the value read; ``q`` stops with the verdict so far.

``--json-steps`` is a line protocol for a UI. Each step is one JSON object on one
line of stdout:

* ``{"kind": "confirm", "fact", "question", "paragraph", "value", "label", "source",
  "quote", "start", "end", "note", "values": [{"value", "label", "description"}],
  "leaning": {"verdict", "determined", "rule"}}``: a fact read from the narrative;
* ``{"kind": "question", "fact", "question", "paragraph", "text", "presumed",
  "values": [{"value", "label", "description", "verdicts", "rule"}], "leaning"}``:
  ``text`` and each value's ``verdicts`` say what each answer leads to; ``presumed``
  is the value taken if the fact is left unknown;
* ``{"kind": "verdict", "verdict", "determined", "rule", "used", "presumed",
  "questions", "near_misses", "exhausted", "facts", "unconfirmed", "explanation"}``:
  the last step (`LawDecision.as_dict` with every fact known and its source);
* ``{"kind": "error", "message", "fact"?}``: the last input line could not be taken;
  the step it answered is sent again and the session goes on.

Answers are one JSON object per line on stdin: ``{"fact": F, "value": V}`` states
a fact (any fact, at any time), ``{"fact": F, "confirm": true}`` confirms a read
fact, ``{"fact": F, "value": null}`` leaves it unknown (it is not asked again).
Blank lines are skipped. The session ends after the verdict step; at the end of
input before it, the verdict on the facts so far is sent (``determined`` says
whether it is final). Bad ``--facts``/``--fact`` input is one error line on stderr
and exit status 2, before any step.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import typer

from privacy_ci.cli._common import console, err_console, escape, user_errors
from privacy_ci.cli.facts import FactOpt, FactsFileOpt, RegulationOpt, given_facts

if TYPE_CHECKING:
    from privacy_ci.reasoning import Questionnaire, Step

_STOP = "q"


def _emit(out: TextIO, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload, separators=(",", ":"), default=str) + "\n")
    out.flush()


def apply_json_answer(session: Questionnaire, line: str, number: int) -> str | None:
    """Apply one input line of the JSON protocol; the fact it names, if any.

    Raises:
        PrivacyCIError: the line is not a JSON object of a documented form, or names
            an unknown fact or value (the message names the line).
    """
    from privacy_ci.errors import PrivacyCIError

    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PrivacyCIError(f"line {number}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise PrivacyCIError(f"line {number}: not JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise PrivacyCIError(f"line {number}: expected a JSON object with 'fact'")
    fact = data.get("fact")
    if not isinstance(fact, str) or not fact:
        raise PrivacyCIError(f"line {number}: 'fact' must name a fact")
    extra = sorted(set(data) - {"fact", "value", "confirm"})
    if extra or ("value" in data) == ("confirm" in data):
        raise PrivacyCIError(
            f"line {number}: expected {{'fact', 'value'}} or {{'fact', 'confirm': true}}"
            + (f"; unknown key(s) {extra}" if extra else "")
        )
    try:
        if "confirm" in data:
            if data["confirm"] is not True:
                raise PrivacyCIError("'confirm' must be true (send 'value' to change the fact)")
            session.confirm(fact)
        else:
            value = data["value"]
            if value is not None and not isinstance(value, str):
                raise PrivacyCIError("'value' must be a value name or null")
            session.answer(fact, value)
    except PrivacyCIError as exc:
        raise PrivacyCIError(f"line {number}: {exc}") from None
    return fact


def run_json_steps(session: Questionnaire, first: Step, lines: TextIO, out: TextIO) -> None:
    """The ``--json-steps`` protocol (see the module docstring) until the verdict."""
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.reasoning import Step, StepKind

    step = first
    _emit(out, step.as_dict())
    number = 0
    while step.kind is not StepKind.VERDICT:
        raw = lines.readline()
        if not raw:  # end of input: the verdict on the facts so far
            _emit(out, session.verdict().as_dict())
            return
        number += 1
        if not raw.strip():
            continue
        try:
            apply_json_answer(session, raw, number)
        except PrivacyCIError as exc:
            _emit(out, Step.error(str(exc), _fact_of(raw)).as_dict())
        step = session.next_step()
        _emit(out, step.as_dict())


def _fact_of(line: str) -> str | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    fact = data.get("fact") if isinstance(data, dict) else None
    return fact if isinstance(fact, str) else None


# ------------------------------------------------------------------------------ terminal
def _show_values(step: Step) -> None:
    for i, choice in enumerate(step.choices, 1):
        console.print(
            f"  {i:2}. [bold]{escape(choice.value)}[/] ({escape(choice.label)}):"
            f" {escape(choice.description)}",
            highlight=False,
        )


def _show_step(step: Step, number: int) -> None:
    from privacy_ci.reasoning import StepKind

    assert step.decision is not None
    console.print()
    console.print(
        f"[bold]{number}. {escape(step.fact or '')}[/]: {escape(step.question)}"
        f"  [dim]({escape(step.paragraph)})[/]",
        highlight=False,
    )
    lean = step.decision
    how = "" if lean.determined else " on presumptions"
    console.print(
        f"  [dim]so far: {lean.verdict.value}{how} ({escape(lean.rule.paragraph)})[/]",
        highlight=False,
    )
    if step.kind is StepKind.CONFIRM:
        assert step.read is not None
        read = step.read
        span = f" at {read.start}-{read.end}" if read.start is not None else ""
        label = next((c.label for c in step.choices if c.value == read.value), read.value)
        named = "" if label == read.value else f" ({escape(label)})"
        console.print(
            f"  read: [bold]{escape(read.value)}[/]{named}"
            f' from [italic]"{escape(read.quote)}"[/]{span}',
            highlight=False,
        )
        keys = "Enter: confirm; ?: the values, to change it (a number or name); u: unknown; q: stop"
    else:
        console.print(f"  {escape(step.text)}", highlight=False)
        for i, choice in enumerate(step.choices, 1):
            leads = " or ".join(v.value for v in choice.verdicts)
            mark = f"  [dim]-> {escape(leads)}[/]" if leads else ""
            console.print(
                f"  {i:2}. {escape(choice.value)}  [dim]{escape(choice.label)}[/]{mark}",
                highlight=False,
            )
        presumed = f" (presumed {step.presumed})" if step.presumed else ""
        keys = f"a number: answer; u: unknown{presumed}; ?: what the values mean; q: stop"
    console.print(f"  [dim]{escape(keys)}[/]", highlight=False)


def _choice(step: Step, reply: str) -> str | None:
    """The value a reply names (a number or a value name), or None."""
    if reply.isdigit() and 1 <= int(reply) <= len(step.choices):
        return step.choices[int(reply) - 1].value
    return next((c.value for c in step.choices if c.value == reply), None)


def _ask_terminal(session: Questionnaire, step: Step) -> Step:
    """Question by question on the terminal, until the verdict (or q, or end of input)."""
    from privacy_ci.reasoning import StepKind

    number = 0
    while step.kind is not StepKind.VERDICT:
        number += 1
        _show_step(step, number)
        fact = step.fact
        assert fact is not None
        while True:
            try:
                reply = console.input("[bold]>[/] ").strip()
            except EOFError:
                return session.verdict()
            if reply == "?":
                _show_values(step)
                continue
            if reply == _STOP:
                return session.verdict()
            if reply == "u":
                session.reject(fact)
                break
            if reply == "" and step.kind is StepKind.CONFIRM:
                session.confirm(fact)
                break
            value = _choice(step, reply)
            if value is not None:
                session.answer(fact, value)
                break
            console.print(
                f"  [yellow]pick 1-{len(step.choices)}, a value name, u, ? or q[/]",
                highlight=False,
            )
        step = session.next_step()
    return step


def _show_verdict(step: Step) -> None:
    from privacy_ci.cli.facts import render_decision

    assert step.decision is not None and step.facts is not None
    console.print()
    render_decision(step.decision.as_dict(), step.facts.as_dict(), step.facts.schema)
    if step.unconfirmed:
        console.print(
            f"[dim]read but not confirmed (they do not change the verdict):"
            f" {escape(', '.join(step.unconfirmed))}[/]",
            highlight=False,
        )


def ask(
    narrative: str | None = typer.Argument(
        None,
        metavar="[NARRATIVE]",
        help="The disclosure in words: the facts read from it are shown to confirm.",
    ),
    facts_file: Path | None = FactsFileOpt,
    fact: list[str] | None = FactOpt,
    regulation: str = RegulationOpt,
    json_steps: bool = typer.Option(
        False,
        "--json-steps",
        help="A line protocol for a UI: each step one JSON object on stdout, each answer"
        ' one JSON object on stdin ({"fact": F, "value": V} / {"fact": F, "confirm": true}'
        ' / {"fact": F, "value": null}).',
    ),
) -> None:
    """Ask only the questions that still decide the verdict, in the order the law needs
    them, and show the verdict with its rule as soon as it is determined."""
    with user_errors():
        from privacy_ci.reasoning import Questionnaire, load_fact_schema

        given = given_facts(load_fact_schema(regulation), facts_file, fact)
        with Questionnaire(regulation, prefetch=True) as session:
            text = (narrative or "").strip() or None
            start = time.perf_counter()
            first = session.start(text, given)
            if json_steps:
                run_json_steps(session, first, sys.stdin, sys.stdout)
                return
            if text is not None:
                err_console.print(
                    f"[dim]read {len(session.pending)} fact(s) from the narrative in"
                    f" {time.perf_counter() - start:.2f}s[/]",
                    highlight=False,
                )
            _show_verdict(_ask_terminal(session, first))
