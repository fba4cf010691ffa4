"""`privacy-ci judge`: judge one event with a Privacy Checklist method.

    privacy-ci judge "A nurse faxed a patient's chart to her employer." --method dp
    privacy-ci judge --case case.json --method ci-es-content --json
    privacy-ci judge "..." --provider openai-compatible --base-url http://localhost:8000/v1

The default model is the embedded local one (constrained answers); any backend of
`privacy-ci llm config` works. A ``--case`` file holds one case (a JSON object, or
a JSON list or JSONL file of several, with ``--index N`` picking one) in the
GoldCoin or PrivaCI-Bench schema of `privacy_ci.cases.read_case_file`: the
narrative (``context``, ``text``, ``case_content`` or ``event``), ``id``, the CI
fields (``sender``, ``recipient``, ``subject``, their ``*_role`` names,
``information_type``, ``purpose``, ``consent_form``). Gold fields (``norm_type``,
``label``, ``refer_ids`` ...) are validated but never reach a prompt; other keys
are kept as metadata. An EVENT TEXT argument wins over the file's text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import (
    console,
    err_console,
    escape,
    method_spec,
    print_json,
    user_errors,
)
from privacy_ci.cli.llm import (
    BaseUrlOpt,
    ConfigOpt,
    MaxTokensOpt,
    ModelOpt,
    NoCacheOpt,
    ProviderOpt,
    TemperatureOpt,
    llm_overrides,
)

if TYPE_CHECKING:
    from privacy_ci.judging import CrossCheck, Event, Judgment, Pipeline


def load_case_file(path: Path, text: str | None = None, index: int | None = None) -> Event:
    """Read a ``--case`` file into an `Event` (see `privacy_ci.cases.read_case_file`).

    Only the narrative, the id and the CI fields make the event: the gold fields
    (``norm_type``, ``label``, ``refer_ids`` ...) and the metadata are validated
    and dropped, so they never reach a prompt.

    Args:
        path: a JSON object, or a JSON list or JSONL file of cases.
        text: the event text from the command line (wins over the file's).
        index: which case of a file of several (from 0); None for a file of one.

    Returns:
        The event.

    Raises:
        PrivacyCIError: every problem, each naming ``--case``, the file, the line
            or item and the field.
    """
    from privacy_ci.cases import read_case_file
    from privacy_ci.errors import PrivacyCIError, ValidationFailed
    from privacy_ci.judging import Event

    try:
        entries = read_case_file(path, require_text=False)
    except ValidationFailed as exc:
        raise ValidationFailed([f"--case {p}" for p in exc.problems]) from None
    except PrivacyCIError as exc:
        raise PrivacyCIError(f"--case {exc}") from None
    n = len(entries)
    if index is None and n > 1:
        raise PrivacyCIError(f"--case {path}: holds {n} cases; pick one with --index 0..{n - 1}")
    if index is not None and not 0 <= index < n:
        raise PrivacyCIError(
            f"--case {path}: --index {index} is out of range (the file holds {n} case(s))"
        )
    entry = entries[index or 0]
    event_text = (text or "").strip() or entry.text
    if not event_text:
        where = f" {entry.where}" if entry.where else ""
        raise PrivacyCIError(
            f"--case {path}{where}: no event text (give a 'text' field or the EVENT TEXT argument)"
        )
    return Event(text=event_text, id=entry.id or "", flow=entry.flow)


def _render(judgment: Judgment, pipeline: Pipeline, elapsed: float) -> None:
    verdict = judgment.verdict.value if judgment.verdict is not None else None
    if judgment.error:
        err_console.print(
            f"[bold red]model call failed:[/] {escape(judgment.error)}", highlight=False
        )
    label = verdict or ("no verdict (the answer did not parse)" if not judgment.error else "none")
    console.print(f"[bold]verdict[/]  {label}", highlight=False)
    console.print(
        f"[dim]method {judgment.method}  backend {escape(judgment.backend)}[/]", highlight=False
    )
    kb = pipeline.context.kb
    if judgment.cited_ids:
        console.print("[bold]regulations kept[/]")
        for node_id in judgment.cited_ids:
            text = ""
            if kb is not None:
                from privacy_ci.judging import truncate_text

                spec = " ".join(kb.tree.full_specification(node_id).split())
                text = truncate_text(spec, 160)
            console.print(f"  {node_id}: {text}", highlight=False, markup=False)
    elif pipeline.spec is not None and pipeline.spec.needs_kb and not judgment.error:
        console.print("[bold]regulations kept[/]  none")
    reasoning = next((st.parsed for st in judgment.steps if st.name == "reason"), None)
    if isinstance(reasoning, dict):
        _render_reasoning(reasoning)
    elif judgment.rationale.strip():
        from privacy_ci.judging import truncate_text

        console.print("[bold]rationale[/]")
        console.print(
            "  " + truncate_text(" ".join(judgment.rationale.split()), 600),
            highlight=False,
            markup=False,
        )
    console.print("[bold]steps[/]")
    for step in judgment.steps:
        extra = f"  ids {escape(', '.join(step.retrieved_ids))}" if step.retrieved_ids else ""
        note = f"  [yellow]{escape(step.error)}[/]" if step.error else ""
        cached = "  cached" if step.cached else ""
        console.print(
            f"  {step.name:12} {step.prompt_name or '-':18} {step.latency_s:7.2f}s"
            f"  {step.prompt_tokens}+{step.completion_tokens} tok{cached}{extra}{note}",
            highlight=False,
        )
    console.print(f"[dim]total {elapsed:.2f}s[/]", highlight=False)


def _render_reasoning(reasoning: dict[str, Any]) -> None:
    """The ci-reasoner's explanation: applicability, the deciding norm, its conditions."""
    console.print(f"[bold]rule[/]  {escape(reasoning['rule'])}", highlight=False)
    console.print("[bold]applicability[/]")
    for line in reasoning["applicability"]["reasons"]:
        console.print(f"  {escape(line)}", highlight=False)
    deciding = reasoning.get("deciding")
    if deciding:
        console.print(
            f"[bold]deciding norm[/]  {escape(deciding['id'])} ({escape(deciding['paragraph'])})"
            f" {escape(deciding['title'])}",
            highlight=False,
        )
        for how in deciding["matched"]:
            console.print(f"  matched {escape(how)}", highlight=False)
        _render_conditions(deciding["conditions"], "  ")
    others = [c for c in reasoning["candidates"] if not deciding or c["id"] != deciding["id"]]
    if others:
        listed = ", ".join(f"{c['id']} ({c['effect']})" for c in others[:6])
        console.print(f"[bold]other candidate norms[/]  {escape(listed)}", highlight=False)


_STATUS_STYLE = {"met": "green", "contradicted": "red", "unstated": "yellow"}


def _render_conditions(conditions: list[dict[str, Any]], indent: str) -> None:
    """Each condition with its status, question and paragraph; its evidence below."""
    for cond in conditions:
        style = _STATUS_STYLE[cond["status"]]
        console.print(
            f"{indent}[{style}]{cond['status']:12}[/] {escape(cond['question'])}"
            f" ({escape(cond['paragraph'])})",
            highlight=False,
        )
        for ev in cond["evidence"]:
            where = f" at {ev['start']}-{ev['end']}" if "start" in ev else ""
            console.print(
                f'{indent}    {ev["states"]}: "{escape(ev["quote"])}"{where}', highlight=False
            )


def _render_cross_check(checked: CrossCheck) -> None:
    """The ci-reasoner's verdict beside the model's, and the flag with its conditions."""
    data = checked.as_dict()
    verdict = data["reasoner_verdict"] or "undetermined"
    agree = "agrees" if checked.agree else "disagrees"
    console.print(
        f"[bold]cross-check[/]  {data['reasoner']}: {escape(verdict)} ({agree} with the model)",
        highlight=False,
    )
    if checked.error:
        console.print(f"  [yellow]{escape(checked.error)}[/]", highlight=False)
    elif data["reasoner_rule"]:
        console.print(f"  rule: {escape(data['reasoner_rule'])}", highlight=False)
    flag = data["flag"]
    if flag is None:
        console.print("  not flagged", highlight=False)
        return
    console.print(
        f"  [bold red]flagged[/] {escape(flag['kind'])}: {escape(flag['reason'])}",
        highlight=False,
    )
    _render_conditions(flag["conditions"], "    ")


def judge(
    event_text: str | None = typer.Argument(
        None, metavar="EVENT_TEXT", help="The event to judge (or give a --case file)."
    ),
    case: Path | None = typer.Option(
        None,
        "--case",
        help="A JSON or JSONL file of a case (GoldCoin or PrivaCI-Bench fields: narrative, "
        "roles, purpose, ...); gold fields never reach the prompt.",
    ),
    index: int | None = typer.Option(
        None, "--index", help="Which case of a --case file holding several (from 0)."
    ),
    method: str = typer.Option(
        "bm25-content",
        "--method",
        "-m",
        help="A judging method (privacy-ci methods lists them).",
    ),
    provider: str | None = ProviderOpt,
    model: str | None = ModelOpt,
    base_url: str | None = BaseUrlOpt,
    k: int | None = typer.Option(
        None, "--k", help="Regulations retrieved and filtered (default 5)."
    ),
    retriever: str | None = typer.Option(
        None,
        "--retriever",
        help="The retriever of a method that retrieves (bm25-content: default bm25-paper;"
        " ci-es-content: default roles); privacy-ci methods lists them.",
    ),
    constrain: bool | None = typer.Option(
        None,
        "--constrain/--no-constrain",
        help="Constrain answers (default: on for the embedded model, off otherwise).",
    ),
    reference_chars: int | None = typer.Option(
        None, "--reference-chars", help="Characters of each regulation text shown (default 1500)."
    ),
    sender: str | None = typer.Option(None, "--sender", help="The sender's role."),
    recipient: str | None = typer.Option(None, "--recipient", help="The recipient's role."),
    subject: str | None = typer.Option(None, "--subject", help="The data subject's role."),
    info: str | None = typer.Option(None, "--info", help="The information type."),
    purpose: str | None = typer.Option(None, "--purpose", help="The purpose of the flow."),
    temperature: float | None = TemperatureOpt,
    max_tokens: int | None = MaxTokensOpt,
    no_cache: bool = NoCacheOpt,
    cross_check: bool = typer.Option(
        False,
        "--cross-check",
        help="Run the model-free ci-reasoner beside the method: its verdict, and a flag "
        "when its checklist does not support the model's.",
    ),
    kb_dir: Path | None = typer.Option(
        None, "--kb", help="A knowledge base folder built by `privacy-ci kb build`."
    ),
    config_file: Path | None = ConfigOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the judgment as JSON."),
) -> None:
    """Judge one event: prints the verdict, the regulations kept, a rationale and each step."""
    with user_errors():
        import time

        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.judging import Event, JudgeConfig, build_method
        from privacy_ci.llm import load_llm_config, make_client

        spec = method_spec(method, retriever)
        if index is not None and case is None:
            raise PrivacyCIError("--index picks a case of a --case file; give --case too")
        if case is not None:
            event = load_case_file(case, event_text, index)
        elif event_text and event_text.strip():
            event = Event(text=event_text.strip())
        else:
            raise PrivacyCIError("give the EVENT TEXT to judge, or a --case file")
        given = {
            "sender_role": sender,
            "recipient_role": recipient,
            "subject_role": subject,
            "information_type": info,
            "purpose": purpose,
        }
        if any(v is not None for v in given.values()):
            from dataclasses import replace

            from privacy_ci.ci import Flow

            fields = {**event.flow.fields(), **{k: v for k, v in given.items() if v is not None}}
            event = replace(event, flow=Flow.of(fields))
        changes: dict[str, Any] = {
            "k": k,
            spec.retriever_option or "retriever": retriever,
            "constrain": constrain,
            "reference_chars": reference_chars,
        }
        if kb_dir is not None:  # the folder names its regulation
            from privacy_ci.knowledge import read_kb_manifest

            changes["kb"] = str(kb_dir)
            changes["regulation"] = str(read_kb_manifest(kb_dir).get("regulation"))
        judge_config = JudgeConfig(**{n: v for n, v in changes.items() if v is not None})
        config = load_llm_config(
            llm_overrides(provider, model, base_url, temperature, max_tokens, None, None, no_cache),
            config_file,
        )
        settings = config.generation_settings()

        def note_retry(attempt: int, error: Exception, delay: float) -> None:
            err_console.print(
                f"[yellow]retry {attempt}[/] in {delay:.1f}s: {escape(str(error))}",
                highlight=False,
            )

        client = make_client(config, on_retry=note_retry) if spec.needs_model else None
        pipeline = build_method(method, client, config=judge_config, settings=settings)
        checker = None
        if cross_check:  # loaded before the model is called: its errors come first
            from privacy_ci.cli._common import cross_checker

            checker = cross_checker(method, spec, pipeline.context.kb, judge_config.regulation)

        async def run() -> Judgment:
            try:
                return await pipeline.judge(event)
            finally:
                if client is not None:
                    await client.aclose()

        start = time.perf_counter()
        judgment = asyncio.run(run())
        elapsed = time.perf_counter() - start
        checked = None if checker is None else checker.check_sync(event, judgment.verdict)
        if as_json:
            kb = pipeline.context.kb
            payload = {
                **judgment.as_dict(),
                "event": {"id": event.id, "text": event.text, "flow": event.flow.as_dict()},
                "regulations": [
                    {
                        "id": node_id,
                        "text": kb.tree.full_specification(node_id) if kb is not None else "",
                    }
                    for node_id in judgment.cited_ids
                ],
                "config": {
                    "k": judge_config.k,
                    "retriever": getattr(judge_config, spec.retriever_option)
                    if spec.retriever_option
                    else None,
                    "constrained": pipeline.context.constrained,
                    "reference_chars": judge_config.reference_chars,
                },
                "elapsed_s": round(elapsed, 4),
                "usage": client.usage.as_dict() if client is not None else None,
            }
            reasoning = next((st.parsed for st in judgment.steps if st.name == "reason"), None)
            if reasoning is not None:
                payload["reasoning"] = reasoning
            if checked is not None:
                payload["cross_check"] = checked.as_dict()
            print_json(payload)
        else:
            _render(judgment, pipeline, elapsed)
            if checked is not None:
                _render_cross_check(checked)
        if judgment.error:
            raise typer.Exit(1)


def methods_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the judging methods and the retrievers (their registries)."""
    with user_errors():
        from rich.table import Table

        from privacy_ci.judging import METHODS
        from privacy_ci.retrieval import RETRIEVERS

        methods: list[dict[str, Any]] = [
            {
                "name": m.name,
                "title": m.title,
                "steps": list(m.steps),
                "prompts": list(m.prompts),
                "needs_kb": m.needs_kb,
                "retriever_option": m.retriever_option,
            }
            for m in METHODS.values()
        ]
        retrievers = [
            {"name": r.name, "description": r.description, "default": r.compared_by_default}
            for r in RETRIEVERS.values()
        ]
        if as_json:
            print_json({"methods": methods, "retrievers": retrievers})
            return
        table = Table(
            title="judging methods (privacy-ci judge/eval --method)", title_justify="left"
        )
        for col in ("method", "what", "steps"):
            table.add_column(col)
        for m in methods:
            table.add_row(escape(m["name"]), escape(m["title"]), escape(" -> ".join(m["steps"])))
        console.print(table)
        table = Table(title="retrievers (--retriever)", title_justify="left")
        for col in ("retriever", "what"):
            table.add_column(col)
        for r in retrievers:
            table.add_row(escape(r["name"]), escape(r["description"]))
        console.print(table)
