"""`privacy-ci judge`: judge one event with a Privacy Checklist method.

    privacy-ci judge "A nurse faxed a patient's chart to her employer." --method dp
    privacy-ci judge --case case.json --method ci-es-content --json
    privacy-ci judge "..." --provider openai-compatible --base-url http://localhost:8000/v1

With no model configured (no ``--provider``/``--model``/``--base-url``, no
``PRIVACY_CI_LLM_*`` variable, no ``[llm]`` model in privacy-ci.toml) the default
method is the model-free ``ci-reasoner`` (facts, then law: the verdict in well under
a second once loaded); with one, ``bm25-content`` on that model. ``--facts FILE``
and ``--fact KEY=VALUE`` state facts of the disclosure (`privacy-ci facts schema`):
the ci-reasoner takes them as given and reads only the rest. Any backend of
`privacy-ci llm config` works for the model methods.

A ``--case`` file holds one case (a JSON object, or a JSON list or JSONL file of
several, with ``--index N`` picking one) in the GoldCoin or PrivaCI-Bench schema of
`privacy_ci.cases.read_case_file`: the narrative (``context``, ``text``,
``case_content`` or ``event``), ``id``, the CI fields (``sender``, ``recipient``,
``subject``, their ``*_role`` names, ``information_type``, ``purpose``,
``consent_form``). Gold fields (``norm_type``, ``label``, ``refer_ids`` ...) are
validated but never reach a prompt; other keys are kept as metadata. An EVENT TEXT
argument wins over the file's text.
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
    from privacy_ci.reasoning import FactSchema


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


def _render(
    judgment: Judgment, pipeline: Pipeline, elapsed: float, loaded: float | None = None
) -> None:
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
    reasoning = next((st.parsed for st in judgment.steps if st.name == "reason"), None)
    if isinstance(reasoning, dict):  # the ci-reasoner: the rule names the paragraph
        from privacy_ci.cli.facts import render_judgment

        render_judgment(reasoning, _fact_schema(pipeline), with_verdict=False)
    elif judgment.cited_ids:
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
    if judgment.rationale.strip():
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
    load = "" if loaded is None else f"  (loading the reader first: {loaded:.2f}s)"
    console.print(f"[dim]total {elapsed:.2f}s{load}[/]", highlight=False)


def _fact_schema(pipeline: Pipeline) -> FactSchema | None:
    """The fact schema of the pipeline's regulation (for the facts' labels), if it has one."""
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.reasoning import load_fact_schema

    try:
        return load_fact_schema(pipeline.context.config.regulation)
    except PrivacyCIError:
        return None


def default_method(
    overrides: dict[str, Any], config_file: Path | None, model_options: bool = False
) -> str:
    """The method of a `judge` without ``--method``: ``bm25-content`` when a model is
    configured (a flag, the environment or privacy-ci.toml), or an option only the model
    methods take is given; else the model-free ``ci-reasoner``."""
    from privacy_ci.llm import model_configured

    if model_options or model_configured(overrides, config_file):
        return "bm25-content"
    return "ci-reasoner"


def given_event_facts(
    regulation: str, facts_file: Path | None, fact: list[str] | None
) -> dict[str, dict[str, Any]] | None:
    """``--facts`` and ``--fact`` as `Event.facts` (a facts-file mapping), validated
    against the regulation's fact schema; None when neither is given.

    Raises:
        FactError: an unknown fact or value (naming the file or argument and the key),
            or a regulation without a fact model.
    """
    if facts_file is None and not fact:
        return None
    from privacy_ci.cli.facts import given_facts
    from privacy_ci.reasoning import load_fact_schema

    return given_facts(load_fact_schema(regulation), facts_file, fact).as_dict()


def _load_reasoner(pipeline: Pipeline, event: Event) -> float | None:
    """Load the reader of the judge the ci-reasoner will use for `event` (NLP,
    embeddings, its examples; the knowledge base only if that judge reads roles) before
    the clock of the judgment starts: seconds taken. A short fixed sentence is read to
    do it (the reader loads on first use). None when it cannot load: the judgment's
    step then records why."""
    import time

    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.judging._reason import fact_judge

    start = time.perf_counter()
    try:
        fact_judge(pipeline.context, event).read("A clinic sent a record to a hospital.")
    except PrivacyCIError:
        return None
    return time.perf_counter() - start


def _render_cross_check(checked: CrossCheck, schema: FactSchema | None = None) -> None:
    """The ci-reasoner's verdict beside the model's; for a flag, its deciding rule, the
    facts that rule used (source and quote), the near misses and the questions."""
    from privacy_ci.cli.facts import render_fact

    data = checked.as_dict()
    if data["reasoner_verdict"] is None:
        verdict = "no verdict (it failed)"
    else:
        verdict = data["reasoner_verdict"] + ("" if checked.determined else " (on presumptions)")
    agree = "agrees" if checked.agree else "disagrees"
    console.print(
        f"[bold]cross-check[/]  {data['reasoner']}: {escape(verdict)} ({agree} with the model)",
        highlight=False,
    )
    if checked.error:
        console.print(f"  [yellow]{escape(checked.error)}[/]", highlight=False)
    flag = data["flag"]
    if flag is None:
        if data["reasoner_rule"]:
            console.print(f"  rule: {escape(data['reasoner_rule'])}", highlight=False)
        console.print("  not flagged", highlight=False)
        return
    console.print(
        f"  [bold red]flagged[/] {escape(flag['kind'])}: {escape(flag['reason'])}",
        highlight=False,
    )
    rule = flag["rule"] or {"id": data["reasoner_rule"], "paragraph": "", "title": ""}
    console.print(
        f"  rule: {escape(str(rule.get('paragraph', '')))} {escape(str(rule.get('title', '')))}"
        f"  [dim]({escape(str(rule['id']))}"
        + (f": {escape(str(rule['effect']))}" if rule.get("effect") else "")
        + ")[/]",
        highlight=False,
    )
    if flag["facts"]:
        console.print("  facts the rule used", highlight=False)
        for name, fact in flag["facts"].items():
            render_fact(schema, name, fact, "    ")
    for miss in flag["near_misses"]:
        fails = "; ".join(
            f"{f['fact']} is {f['value'] or 'unknown'}, needs {' or '.join(f['needs'])}"
            for f in miss["failing"]
        )
        console.print(
            f"  near miss {escape(miss['paragraph'])} {escape(miss['title'])}: {escape(fails)}",
            highlight=False,
        )
    for question in flag["questions"]:
        console.print(
            f"  question [bold]{escape(question['fact'])}[/]: {escape(question['question'])}"
            f"  [dim]{escape(question['text'])}[/]",
            highlight=False,
        )


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
    method: str | None = typer.Option(
        None,
        "--method",
        "-m",
        help="A judging method (privacy-ci methods lists them). Default: ci-reasoner"
        " (model-free) when no model is configured, else bm25-content; --retriever, --k,"
        " --reference-chars, --constrain or --cross-check also choose bm25-content.",
    ),
    facts_file: Path | None = typer.Option(
        None,
        "--facts",
        help="A JSON or YAML file of facts of the disclosure (fact -> value; privacy-ci facts"
        " schema lists them): the ci-reasoner takes them as given and reads only the rest.",
    ),
    fact: list[str] | None = typer.Option(
        None,
        "--fact",
        help="One fact as KEY=VALUE (repeatable; wins over --facts), e.g. authorization=absent.",
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

        overrides = llm_overrides(
            provider, model, base_url, temperature, max_tokens, None, None, no_cache
        )
        if method is None:
            model_options = (retriever, k, reference_chars, constrain)
            method = default_method(
                overrides,
                config_file,
                cross_check or any(o is not None for o in model_options),
            )
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
        stated = given_event_facts(judge_config.regulation, facts_file, fact)
        if stated is not None:
            from dataclasses import replace

            event = replace(event, facts=stated)
        config = load_llm_config(overrides, config_file)
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

        loaded = _load_reasoner(pipeline, event) if method == "ci-reasoner" else None
        start = time.perf_counter()
        judgment = asyncio.run(run())
        elapsed = time.perf_counter() - start
        checked = None if checker is None else checker.check_sync(event, judgment.verdict)
        if as_json:
            kb = pipeline.context.kb
            payload = {
                **judgment.as_dict(),
                "event": {
                    "id": event.id,
                    "text": event.text,
                    "flow": event.flow.as_dict(),
                    "facts": dict(event.facts),
                },
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
                "load_s": None if loaded is None else round(loaded, 4),
                "usage": client.usage.as_dict() if client is not None else None,
            }
            reasoning = next((st.parsed for st in judgment.steps if st.name == "reason"), None)
            if reasoning is not None:
                payload["reasoning"] = reasoning
            if checked is not None:
                payload["cross_check"] = checked.as_dict()
            print_json(payload)
        else:
            _render(judgment, pipeline, elapsed, loaded)
            if checked is not None:
                _render_cross_check(checked, _fact_schema(pipeline))
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
