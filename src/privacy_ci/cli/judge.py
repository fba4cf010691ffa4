"""`privacy-ci judge`: judge one event with a Privacy Checklist method.

    privacy-ci judge "A nurse faxed a patient's chart to her employer." --method dp
    privacy-ci judge --case case.json --method ci-es-content --json
    privacy-ci judge "..." --provider openai-compatible --base-url http://localhost:8000/v1

The default model is the embedded local one (constrained answers); any backend of
`privacy-ci llm config` works. A ``--case`` file is a JSON object with the case
fields: ``text`` (also ``case_content``, ``context`` or ``event``), ``id``,
``sender_role``, ``recipient_role``, ``subject_role``, ``information_type``,
``purpose``, ``consent_form`` (strings, lists of strings or null); other fields
of a `privacy_ci.cases.Case` (``label``, ``gold_ids`` ...) are accepted and ignored,
anything else is an error. An EVENT TEXT argument wins over the file's text.
"""

from __future__ import annotations

import asyncio
import json
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
    from privacy_ci.judging import Event, Judgment, Pipeline

_TEXT_KEYS = ("text", "case_content", "context", "event")
_IGNORED_KEYS = (
    "dataset",
    "regulation",
    "label",
    "gold_ids",
    "gold_nodes",
    "extra",
    "norm_type",
)


def _field(path: Path, key: str, value: Any) -> str | None:
    from privacy_ci.errors import PrivacyCIError

    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(v.strip() for v in value if v.strip()) or None
    raise PrivacyCIError(
        f"--case {path}: field {key!r} must be a string, a list of strings or null, "
        f"not {type(value).__name__}"
    )


def load_case_file(path: Path, text: str | None = None) -> Event:
    """Read a ``--case`` JSON file into an `Event`.

    Args:
        path: the file.
        text: the event text from the command line (wins over the file's).

    Returns:
        The event.

    Raises:
        PrivacyCIError: one message naming the file and what is wrong.
    """
    from privacy_ci._structured import DuplicateKeyError, load_json
    from privacy_ci.ci import FIELDS, Flow
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.judging import Event

    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PrivacyCIError(f"--case {path}: cannot read the file ({exc})") from None
    try:
        data = load_json(raw)
    except DuplicateKeyError as exc:
        raise PrivacyCIError(f"--case {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PrivacyCIError(
            f"--case {path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise PrivacyCIError(
            f"--case {path}: expected a JSON object with the case fields, "
            f"got a {type(data).__name__}"
        )
    allowed = {*_TEXT_KEYS, *FIELDS, *_IGNORED_KEYS, "id"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise PrivacyCIError(
            f"--case {path}: unknown field(s) {', '.join(unknown)}; expected "
            f"{', '.join(('text', 'id', *FIELDS))}"
        )
    file_text = next(
        (_field(path, k, data[k]) for k in _TEXT_KEYS if data.get(k) is not None), None
    )
    event_text = (text or "").strip() or file_text
    if not event_text:
        raise PrivacyCIError(
            f"--case {path}: no event text (give a 'text' field or the EVENT TEXT argument)"
        )
    case_id = data.get("id")
    if case_id is not None and not isinstance(case_id, str | int):
        raise PrivacyCIError(f"--case {path}: field 'id' must be a string")
    flow = Flow.of({k: _field(path, k, data.get(k)) for k in FIELDS})
    return Event(text=event_text, id="" if case_id is None else str(case_id), flow=flow)


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
    console.print(f"[dim]total {elapsed:.2f}s[/]", highlight=False)


def judge(
    event_text: str | None = typer.Argument(
        None, metavar="EVENT_TEXT", help="The event to judge (or give a --case file)."
    ),
    case: Path | None = typer.Option(
        None, "--case", help="A JSON file with the case fields (text, roles, purpose, ...)."
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
    temperature: float | None = TemperatureOpt,
    max_tokens: int | None = MaxTokensOpt,
    no_cache: bool = NoCacheOpt,
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
        if case is not None:
            event = load_case_file(case, event_text)
        elif event_text and event_text.strip():
            event = Event(text=event_text.strip())
        else:
            raise PrivacyCIError("give the EVENT TEXT to judge, or a --case file")
        changes: dict[str, Any] = {
            "k": k,
            spec.retriever_option or "retriever": retriever,
            "constrain": constrain,
            "reference_chars": reference_chars,
        }
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

        client = make_client(config, on_retry=note_retry)
        pipeline = build_method(method, client, config=judge_config, settings=settings)

        async def run() -> Judgment:
            try:
                return await pipeline.judge(event)
            finally:
                await client.aclose()

        start = time.perf_counter()
        judgment = asyncio.run(run())
        elapsed = time.perf_counter() - start
        if as_json:
            kb = pipeline.context.kb
            payload = {
                **judgment.as_dict(),
                "event": {"id": event.id, "text": event.text},
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
                "usage": client.usage.as_dict(),
            }
            print_json(payload)
        else:
            _render(judgment, pipeline, elapsed)
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
