"""`privacy-ci eval` and `privacy-ci report`: evaluate a method on a dataset; report on runs.

    privacy-ci eval --method bm25-content --dataset real              # embedded model
    privacy-ci eval --method dp --dataset synthetic --provider openai-compatible \\
        --base-url http://localhost:8000/v1 --model llama3 --concurrency 16 --out runs/dp
    privacy-ci report runs/dp runs/bm25 --out report/

``eval`` writes a run folder (``manifest.json``, one ``records.jsonl`` line per
case, ``metrics.json``) and prints the scores beside the model-free baselines,
naming the backend. On cases with gold facts it also prints the accuracy of the
law from the gold facts and the reading accuracy per fact; on minimal pairs, pair
accuracy and the flip rate beside the baselines'. Running the same command again
resumes an interrupted run; a folder holding a different run is refused. ``report``
writes ``report.md`` and a self-contained ``report.html``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import (
    console,
    cross_checker,
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
    SeedOpt,
    TemperatureOpt,
    llm_overrides,
)

if TYPE_CHECKING:
    from privacy_ci.judging import Method
    from privacy_ci.llm import LLMClient

__all__ = [
    "build_eval_method",
    "eval_command",
    "print_cross_check",
    "print_fact_metrics",
    "print_metrics",
    "report_command",
]


def build_eval_method(
    name: str, client: LLMClient, kb: Any, judge_config: Any, settings: Any
) -> Method:
    """The method to evaluate (`privacy_ci.judging.build_method`; tests replace this).

    Args:
        name: the method name.
        client: the LLM client.
        kb: the knowledge base, or None for methods that need none.
        judge_config: the `JudgeConfig`.
        settings: the base `GenerationSettings`.

    Returns:
        The method.
    """
    from privacy_ci.judging import build_method

    return build_method(name, client, kb, judge_config, settings=settings)


_READS_ROLE_GRAPH = frozenset({"ci-reasoner", "checklist-qa"})


def _kb_identity(kb: Any, kb_dir: Path | None) -> str | None:
    """The knowledge base in a run's identity: the tree's hash for the published KB (as
    runs have always recorded it); for a built folder, a hash of its norms too, since
    it shares the tree."""
    if kb is None:
        return None
    if kb_dir is None:
        return str(kb.tree.content_hash())
    from privacy_ci.retrieval import kb_fingerprint

    return "built:" + kb_fingerprint(kb)


def print_cross_check(block: dict[str, Any]) -> None:
    """Print a run's cross-check: the agreement table, how many of the reasoner's verdicts
    rest on presumptions, and the flagged cases' ids by kind."""
    from rich.table import Table

    reasoner = str(block.get("reasoner") or "ci-reasoner")
    title = (
        f"cross-check with the {reasoner}: agreement {_pct(block['agreement'])}% "
        f"({block['agreed']}/{block['compared']}), {block['flagged']} flagged"
    )
    kinds = block.get("flags")
    if isinstance(kinds, dict) and block["flagged"]:  # (older runs' blocks lack it)
        title += " (" + ", ".join(f"{n} {kind}" for kind, n in kinds.items()) + ")"
    if block.get("on_presumptions") is not None:
        title += f"; the law's verdict rests on presumptions in {block['on_presumptions']}"
    if block.get("reasoner_errors"):
        title += f"; the reasoner failed on {block['reasoner_errors']}"
    table = Table(title=escape(title), title_justify="left")
    table.add_column(f"model \\ {reasoner}", no_wrap=True)
    for column in block["columns"]:
        table.add_column(escape(column), justify="right")
    for row, counts in zip(block["rows"], block["counts"], strict=True):
        table.add_row(escape(row), *(str(x) for x in counts))
    console.print(table)
    if block["flagged_cases"]:
        console.print(
            "[bold]flagged[/] " + escape(", ".join(block["flagged_cases"])), highlight=False
        )


def _ci_text(value: float | None, ci: dict[str, Any] | None) -> str:
    shown = _pct(value)
    if ci:
        shown += f" ({_pct(ci.get('low'), 1)}-{_pct(ci.get('high'), 1)})"
    return shown


def _share_text(value: float | None, ci: dict[str, Any] | None) -> str:
    shown = f"{_pct(value)}%"
    if ci:
        shown += f" (95% CI {_pct(ci.get('low'), 1)}-{_pct(ci.get('high'), 1)})"
    return shown


def print_fact_metrics(metrics: dict[str, Any]) -> None:
    """Print the blocks of a run on cases with gold facts or pair ids: the law from gold
    facts, reading per fact, pair accuracy and flip rate beside the baselines'."""
    from rich.table import Table

    facts = metrics.get("gold_facts")
    if isinstance(facts, dict):
        law = facts.get("law_from_gold") or {}
        if law.get("error"):
            console.print(f"law from gold facts: {escape(str(law['error']))}", highlight=False)
        elif law:
            line = (
                f"[bold]law from gold facts[/] ({escape(str(law.get('law')))}, "
                f"{law['n']} cases): {law['correct']}/{law['n']} right, "
                f"{_share_text(law['accuracy'], law.get('accuracy_ci'))}; "
                f"{law['determined']} decided without presumptions"
            )
            console.print(line, highlight=False)
            for wrong in law.get("wrong", [])[:10]:
                console.print(
                    escape(
                        f"  law != gold: {wrong['case']} gold {wrong['gold']}, law "
                        f"{wrong['law']} ({wrong['rule']})"
                    ),
                    highlight=False,
                )
        reading = facts.get("reading")
        if not isinstance(reading, dict):
            console.print(f"[dim]{escape(str(facts.get('reading_note', '')))}[/]", highlight=False)
        else:
            overall = reading["overall"]
            table = Table(
                title=escape(
                    f"reading per fact ({reading['cases']} cases): "
                    f"{overall['right']}/{overall['gold']} gold facts right, "
                    f"{_share_text(overall['accuracy'], overall.get('accuracy_ci'))}; "
                    "every fact right on "
                    f"{reading['all_right_cases']} cases"
                ),
                title_justify="left",
            )
            for column in ("fact", "gold", "right", "wrong", "missing (presumed)"):
                table.add_column(column, justify="left" if column == "fact" else "right")
            table.add_column("acc % (95% CI)", justify="right", no_wrap=True)
            table.add_column("most frequent errors (gold -> read)")
            for name, row in reading["facts"].items():
                errors = ", ".join(f"{k} x{n}" for k, n in list(row["confusions"].items())[:2])
                table.add_row(
                    escape(name),
                    str(row["gold"]),
                    str(row["right"]),
                    str(row["wrong"]),
                    f"{row['missing']} ({row['missing_presumed']})",
                    _ci_text(row["accuracy"], row.get("accuracy_ci")),
                    escape(errors),
                )
            console.print(table)
        end = facts.get("end_to_end")
        if isinstance(end, dict):
            line = (
                f"[bold]end to end[/] ({end['n']} cases with gold facts): "
                f"{end['correct']}/{end['n']} right, "
                f"{_share_text(end['accuracy'], end.get('accuracy_ci'))}"
            )
            bases = facts.get("baselines") or {}
            if bases:
                line += "; baselines: " + ", ".join(
                    f"{escape(name)} {_pct(block['accuracy'])}%" for name, block in bases.items()
                )
            console.print(line, highlight=False)
    pairs = metrics.get("pairs")
    if isinstance(pairs, dict):
        title = f"minimal pairs: {pairs['pairs']} complete"
        if pairs.get("incomplete"):
            title += f", {pairs['incomplete']} incomplete (not scored)"
        table = Table(title=escape(title), title_justify="left")
        table.add_column("predictor", no_wrap=True)
        table.add_column("pair acc % (95% CI)", justify="right", no_wrap=True)
        table.add_column("flip rate % (95% CI)", justify="right", no_wrap=True)
        table.add_column("both right", justify="right")
        table.add_column("flipped", justify="right")

        def cells(label: str, block: dict[str, Any]) -> list[str]:
            return [
                escape(label),
                _ci_text(block["pair_accuracy"], block.get("pair_accuracy_ci")),
                _ci_text(block["flip_rate"], block.get("flip_rate_ci")),
                str(block["both_right"]),
                str(block["flipped"]),
            ]

        table.add_row(*cells(f"{metrics.get('method')} · {metrics.get('backend')}", pairs))
        for name, block in (pairs.get("baselines") or {}).items():
            table.add_row(*cells(f"baseline: {name}", block), style="dim")
        console.print(table)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "model"


def _pct(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}"


def print_metrics(metrics: dict[str, Any], *, backend_detail: str = "") -> None:
    """Print a run's scores beside its baselines as a rich table.

    Args:
        metrics: the run's metrics document (``metrics.json``).
        backend_detail: more about the backend (base URL), shown in the title.
    """
    from rich.table import Table

    from privacy_ci.evaluation import TEST_DOUBLE_PROVIDER

    main = metrics["scores"]["main"]
    classes: list[str] = list(main["classes"])
    backend = metrics.get("backend") or "unknown backend"
    title = (
        f"{metrics.get('method')} on {metrics['dataset']['name']} "
        f"({main['task']}, {main['n']} cases) — backend {backend}"
    )
    if backend_detail:
        title += f" ({backend_detail})"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("predictor", no_wrap=True)
    table.add_column("acc % (95% CI)", justify="right", no_wrap=True)
    table.add_column("Ma-F1 % (95% CI)", justify="right", no_wrap=True)
    for c in classes:
        table.add_column(f"F1 {c}", justify="right")
    has_comp = metrics["scores"].get("compliance") is not None
    if has_comp:
        table.add_column("compl. Ma-F1", justify="right")
    table.add_column("unparsed", justify="right")

    def row(label: str, scores: dict[str, Any]) -> list[str]:
        s = scores["main"]
        acc = s["accuracy_ci"]
        f1ci = s.get("macro_f1_ci") or {}
        cells = [
            label,
            f"{_pct(s['accuracy'])} ({_pct(acc['low'], 1)}-{_pct(acc['high'], 1)})",
            f"{_pct(s['macro_f1'])}"
            + (f" ({_pct(f1ci.get('low'), 1)}-{_pct(f1ci.get('high'), 1)})" if f1ci else ""),
            *(_pct(s["per_class"][c]["f1"]) for c in classes),
        ]
        if has_comp:
            comp = scores.get("compliance")
            cells.append(_pct(comp["macro_f1"]) if comp else "—")
        cells.append(str(s["unparsed"]))
        return cells

    label = f"{metrics.get('method')} · {backend}"
    if metrics.get("test_double"):
        label += f" (TEST DOUBLE: {TEST_DOUBLE_PROVIDER}, not a model)"
    table.add_row(*(escape(cell) for cell in row(label, metrics["scores"])))
    for name, base in metrics.get("baselines", {}).items():
        cells = row(f"baseline: {name}", base["scores"])
        table.add_row(*(escape(cell) for cell in cells), style="dim")
    console.print(table)
    if metrics.get("test_double"):
        err_console.print(
            "[bold yellow]warning:[/] these verdicts come from the scripted test backend; "
            "they are NOT model accuracy."
        )
    console.print(
        f"[dim]judged {metrics['judged']}/{metrics['cases']}  errors {metrics['errors']}  "
        f"unparsed {metrics['unparsed']}  run {escape(str(metrics.get('run', '')))}[/]",
        highlight=False,
    )
    print_fact_metrics(metrics)
    if isinstance(metrics.get("cross_check"), dict):
        print_cross_check(metrics["cross_check"])


def eval_command(
    method: str = typer.Option(
        ...,
        "--method",
        "-m",
        help="A judging method (privacy-ci methods lists them).",
    ),
    dataset: str = typer.Option(
        "real",
        "--dataset",
        "-d",
        help="A dataset name (`privacy-ci data` lists them), or a .json/.jsonl file of "
        "labelled cases (GoldCoin or PrivaCI-Bench fields; named after its stem).",
    ),
    provider: str | None = ProviderOpt,
    model: str | None = ModelOpt,
    base_url: str | None = BaseUrlOpt,
    concurrency: int = typer.Option(
        16, "--concurrency", "-c", help="Cases (and model calls) in flight at once."
    ),
    limit: int | None = typer.Option(
        None, "--limit", "-n", help="Judge a stratified sample of N cases (seed 0)."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Run folder (default runs/DATASET-METHOD-MODEL[-nN])."
    ),
    k: int | None = typer.Option(
        None, "--k", help="Regulations retrieved and filtered (default 5)."
    ),
    retriever: str | None = typer.Option(
        None,
        "--retriever",
        help="The retriever of a method that retrieves (privacy-ci methods lists them).",
    ),
    constrain: bool | None = typer.Option(
        None,
        "--constrain/--no-constrain",
        help="Constrain answers (default: on for the embedded model, off otherwise).",
    ),
    temperature: float | None = TemperatureOpt,
    max_tokens: int | None = MaxTokensOpt,
    seed: int | None = SeedOpt,
    retry_errors: bool = typer.Option(
        False, "--retry-errors", help="On resume, judge again the cases whose model call failed."
    ),
    no_cache: bool = NoCacheOpt,
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    cross_check: bool = typer.Option(
        False,
        "--cross-check",
        help="Run the model-free ci-reasoner beside the method and flag the verdicts the "
        "law, on the facts it reads, does not support (a cross-checked run is another run).",
    ),
    kb_dir: Path | None = typer.Option(
        None,
        "--kb",
        help="A knowledge base folder built by `privacy-ci kb build` (its regulation must "
        "be the dataset's); default the published one.",
    ),
    config_file: Path | None = ConfigOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
) -> None:
    """Evaluate a judging method on a dataset; prints the scores beside the baselines."""
    with user_errors():
        from privacy_ci.cases import load_dataset
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.evaluation import run_eval
        from privacy_ci.judging import JudgeConfig
        from privacy_ci.llm import load_llm_config, make_client

        spec = method_spec(method, retriever)
        if concurrency < 1:
            raise PrivacyCIError("--concurrency must be at least 1")
        if limit is not None and limit < 1:
            raise PrivacyCIError("--limit must be at least 1")
        data = load_dataset(dataset)
        changes: dict[str, Any] = {
            "k": k,
            spec.retriever_option or "retriever": retriever,
            "constrain": constrain,
        }
        if kb_dir is not None:  # a run over a built KB is another run: its hash differs
            from privacy_ci.knowledge import read_kb_manifest

            built_for = str(read_kb_manifest(kb_dir).get("regulation"))
            if built_for != data.protocol.regulation:
                raise PrivacyCIError(
                    f"{kb_dir} is a {built_for} knowledge base; dataset {dataset!r} is judged "
                    f"against {data.protocol.regulation}"
                )
            changes["kb"] = str(kb_dir)
            changes["regulation"] = built_for
        judge_config = JudgeConfig(**{n: v for n, v in changes.items() if v is not None})
        config = load_llm_config(
            llm_overrides(
                provider, model, base_url, temperature, max_tokens, seed, concurrency, no_cache
            ),
            config_file,
        )
        settings = config.generation_settings()
        kb = None
        if spec.needs_kb or kb_dir is not None:
            from privacy_ci.knowledge import open_knowledge_base

            try:
                kb = open_knowledge_base(data.protocol.regulation, kb_dir)
            except ValueError as exc:
                raise PrivacyCIError(
                    f"method {method!r} needs a knowledge base, and dataset {dataset!r} "
                    f"({data.protocol.regulation}) has none: {exc}"
                ) from None
        elif method in _READS_ROLE_GRAPH:
            # the fact reader reads CI fields through the role graph when the data is
            # installed: the run's identity names the knowledge base it came from
            from privacy_ci.errors import DataMissingError
            from privacy_ci.knowledge import open_knowledge_base

            try:
                kb = open_knowledge_base(data.protocol.regulation, None)
            except (ValueError, DataMissingError):
                kb = None
        checker = cross_checker(method, spec, kb, data.protocol.regulation) if cross_check else None
        client = make_client(config)
        judge = build_eval_method(method, client, kb, judge_config, settings)
        folder = out or Path("runs") / (  # a case file's run is named after its stem
            f"{_slug(data.name)}-{method}-{_slug(config.model)}"
            + (f"-n{limit}" if limit else "")
            + ("-xc" if cross_check else "")  # another run than the one without
        )
        llm_facts = config.model_dump(exclude={"prices"})
        llm_facts["api_key_set"] = config.api_key() is not None

        async def go() -> Any:
            try:
                return await run_eval(
                    judge,
                    data,
                    folder,
                    concurrency=concurrency,
                    limit=limit,
                    progress=not no_progress,
                    client=client,
                    settings=settings,
                    judge_config=judge_config,
                    prompts=spec.prompts,
                    knowledge_base=_kb_identity(kb, kb_dir),
                    retry_errors=retry_errors,
                    extra={"llm_config": llm_facts},
                    cross_check=checker,
                )
            finally:
                await client.aclose()

        result = asyncio.run(go())
        if as_json:
            print_json(result.metrics)
        else:
            from privacy_ci.judging._pipeline import MODEL_FREE

            # a model-free method's verdicts owe nothing to the configured model's URL
            model_free = result.metrics.get("backend") == MODEL_FREE
            detail = "" if model_free else client.backend.base_url or ""
            print_metrics(result.metrics, backend_detail=detail)
            if result.resumed:
                console.print(
                    f"[dim]resumed: {result.resumed} case(s) were already judged, "
                    f"{result.judged} judged now[/]",
                    highlight=False,
                )
        if not result.metrics["complete"]:
            raise typer.Exit(1)


def report_command(
    runs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run folders of `eval`."),
    out: Path = typer.Option(Path("report"), "--out", "-o", help="Output folder."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Skip the figures."),
    as_json: bool = typer.Option(False, "--json", help="Print the written paths as JSON."),
) -> None:
    """Write a Markdown and a self-contained HTML report over run folders."""
    with user_errors():
        from privacy_ci.evaluation import load_run, write_report

        loaded = [load_run(r) for r in runs]
        written = write_report(loaded, out, plots=not no_plots)
        if as_json:
            print_json({k: str(v) for k, v in written.items()})
            return
        doubles = [r.name for r in loaded if r.test_double]
        if doubles:
            err_console.print(
                "[bold yellow]warning:[/] scripted test backend run(s), marked in every table: "
                + escape(", ".join(doubles)),
                highlight=False,
            )
        console.print(
            f"wrote {written['markdown']} and {written['html']}", markup=False, highlight=False
        )
