"""`privacy-ci kb build` and `privacy-ci kb compare`: a regulation's knowledge base built
by a model from the regulation text, and measured against the published one.

    privacy-ci kb build --only 164.512 --limit 5 --out runs/kb-hipaa-smollm2
    privacy-ci kb build --dry-run                    # nodes, calls, tokens; no model
    privacy-ci kb compare runs/kb-hipaa-smollm2      # vs the published HIPAA KB
    privacy-ci kb show 164.512(a)(1) --kb runs/kb-hipaa-smollm2
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci._progress import CounterBar
from privacy_ci.cli._common import console, err_console, escape, print_json, user_errors
from privacy_ci.cli.kb import JsonOpt, RegOpt, TreeOpt, app
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
    from privacy_ci.annotation import Comparison, NodeRecord


class _Progress(CounterBar):
    """A progress bar on stderr: leaves done, re-asks, failures, the client's retries."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        counters = {"reasks": "re-asked", "failures": "failed", "retries": "retries"}
        super().__init__(enabled and total != 0, label, total, counters, console=err_console)

    def retry(self, *_: Any) -> None:
        self.count(retries=1)

    def record(self, rec: NodeRecord) -> None:
        self.count(1, reasks=max(0, len(rec.attempts) - 1), failures=int(not rec.ok))


@app.command("build")
def build_command(
    regulation: str = RegOpt,
    tree: str = TreeOpt,
    only: str | None = typer.Option(
        None, "--only", help="Only the leaves under this node id or starting with this prefix."
    ),
    limit: int | None = typer.Option(None, "--limit", "-n", help="Only the first N leaves."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Build folder (run + knowledge base; resumed when it exists)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print nodes, calls and estimated tokens; call no model."
    ),
    provider: str | None = ProviderOpt,
    model: str | None = ModelOpt,
    base_url: str | None = BaseUrlOpt,
    temperature: float | None = TemperatureOpt,
    max_tokens: int | None = MaxTokensOpt,
    seed: int | None = SeedOpt,
    concurrency: int = typer.Option(4, "--concurrency", "-c", help="Leaves in flight."),
    parse_retries: int = typer.Option(
        2, "--parse-retries", help="Re-asks after an answer that does not parse."
    ),
    retry_failures: bool = typer.Option(
        False, "--retry-failures", help="On resume, ask again about the leaves that failed."
    ),
    graphs: bool = typer.Option(
        True, "--graphs/--no-graphs", help="Build the role and attribute graphs (WordNet)."
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    no_cache: bool = NoCacheOpt,
    config_file: Path | None = ConfigOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Annotate every leaf of a regulation with a model (Table 5) and write a knowledge base."""
    with user_errors():
        from privacy_ci.annotation import estimate_cost, select_leaves
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.regulations import get_regulation, load_regulation_tree

        spec = get_regulation(regulation)
        variant = spec.check_tree(tree)
        regulation_tree, _ = load_regulation_tree(spec.key, None, variant)
        leaves = select_leaves(regulation_tree, only, limit)
        if dry_run:
            cost = estimate_cost(regulation_tree, leaves, parse_retries)
            data = {"regulation": spec.key, "tree": variant, "only": only, **cost.as_dict()}
            if as_json:
                print_json(data)
                return
            console.print(
                f"{spec.name} ({variant} tree): {cost.nodes:,} leaves, {cost.calls:,} calls"
                f" ({cost.max_calls:,} if every answer were re-asked {parse_retries} times),"
                f" ~{cost.prompt_tokens:,} prompt + ~{cost.completion_tokens:,} completion tokens"
                f" ({cost.references:,} references asked about)",
                highlight=False,
            )
            console.print(f"[dim]estimate: {escape(cost.method)}[/]", highlight=False)
            return
        if out is None:
            raise PrivacyCIError("give --out DIR (the build folder), or --dry-run")
        if concurrency < 1 or parse_retries < 0:
            raise PrivacyCIError("--concurrency must be at least 1, --parse-retries at least 0")
        summary, run = _build(
            spec.key,
            regulation_tree,
            variant,
            leaves,
            out,
            {"only": only, "limit": limit},
            llm_overrides(
                provider, model, base_url, temperature, max_tokens, seed, concurrency, no_cache
            ),
            config_file,
            concurrency=concurrency,
            parse_retries=parse_retries,
            retry_failures=retry_failures,
            graphs=graphs,
            progress=not no_progress and not as_json,
        )
        attempts = [a for r in run.records for a in r.attempts]
        latency = [a["latency_s"] for a in attempts if not a.get("cached")]
        data = {
            **summary.as_dict(),
            "backend": run.backend,
            "leaves": len(run.nodes),
            "annotated": len(run.records) - len(run.failures()),
            "calls": len(attempts),
            "prompt_tokens": sum(int(a.get("prompt_tokens") or 0) for a in attempts),
            "completion_tokens": sum(int(a.get("completion_tokens") or 0) for a in attempts),
            "seconds_per_call": round(sum(latency) / len(latency), 3) if latency else None,
        }
        if as_json:
            print_json(data)
        else:
            console.print(
                f"{escape(str(out))}: {data['annotated']}/{data['leaves']} leaves annotated by"
                f" {escape(run.backend)} ({len(summary.failures)} failed,"
                f" {len(summary.missing)} not yet asked), {data['calls']} calls,"
                f" {data['prompt_tokens']:,}+{data['completion_tokens']:,} tokens,"
                f" {data['seconds_per_call']} s per call",
                highlight=False,
            )
            console.print(
                f"knowledge base: {summary.norms} norms, {summary.definitions} definitions"
                + (
                    f", role graph {summary.role_graph['nodes']} nodes /"
                    f" {summary.role_graph['edges']} edges"
                    if summary.role_graph
                    else ""
                )
                + (
                    f", attribute graph {summary.attribute_graph['nodes']} nodes /"
                    f" {summary.attribute_graph['edges']} edges"
                    if summary.attribute_graph
                    else ""
                ),
                highlight=False,
            )
            for node_id, why in list(summary.failures.items())[:10]:
                console.print(f"  FAILED {node_id}: {why}", markup=False, highlight=False)
            from privacy_ci.llm.testing import is_test_double

            if is_test_double(run.backend) or run.backend.startswith("embedded:"):
                console.print(
                    "[yellow]a small local model: a wiring check, not an annotation to use[/]"
                )
        if summary.failures or summary.missing:
            raise typer.Exit(1)


def _build(
    regulation: str,
    tree: Any,
    variant: str,
    leaves: list[str],
    out: Path,
    selection: dict[str, Any],
    overrides: dict[str, Any],
    config_file: Path | None,
    *,
    concurrency: int,
    parse_retries: int,
    retry_failures: bool,
    graphs: bool,
    progress: bool,
) -> Any:
    from privacy_ci.annotation import (
        TAXONOMY_FILE,
        Annotator,
        load_wordnet,
        run_annotation,
        wordnet_folder,
        write_kb_folder,
    )
    from privacy_ci.data import data_dir
    from privacy_ci.knowledge import load_attribute_graph
    from privacy_ci.llm import load_llm_config, make_client

    wordnet = taxonomy = None
    if graphs:
        wordnet_folder()  # no WordNet: one clear error before any model call
        taxonomy_path = data_dir() / TAXONOMY_FILE
        taxonomy = load_attribute_graph(taxonomy_path) if taxonomy_path.is_file() else None
    config = load_llm_config(overrides, config_file)
    bar = _Progress(progress, len(leaves), f"annotating {regulation}")
    client = make_client(config, on_retry=bar.retry)
    annotator = Annotator(
        client, tree, settings=config.generation_settings(), parse_retries=parse_retries
    )

    async def go() -> Any:
        try:
            return await run_annotation(
                annotator,
                out,
                leaves,
                tree_variant=variant,
                selection=selection,
                concurrency=concurrency,
                retry_failures=retry_failures,
                on_record=bar.record,
            )
        finally:
            await client.aclose()

    with bar:
        run = asyncio.run(go())
    if graphs:
        wordnet = load_wordnet()
    summary = write_kb_folder(run, tree, wordnet=wordnet, taxonomy=taxonomy)
    return summary, run


@app.command("compare")
def compare_command(
    built: Path = typer.Argument(..., help="A built knowledge base folder (kb build --out)."),
    published: Path | None = typer.Argument(
        None, help="Another knowledge base folder (default: the published KB of its regulation)."
    ),
    semantic: bool = typer.Option(
        True,
        "--semantic/--no-semantic",
        help="Also match values by meaning (packaged MiniLM, cosine >= 0.7).",
    ),
    differences: int = typer.Option(
        10, "--differences", help="List this many differing norms (0: none; all in --json)."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Field-by-field agreement of a built knowledge base with the published one."""
    with user_errors():
        from privacy_ci.annotation import SEMANTIC_MODEL, compare_knowledge_bases
        from privacy_ci.knowledge import load_kb_folder, load_knowledge_base, read_kb_manifest

        ours = load_kb_folder(built)
        if published is not None:
            theirs = load_kb_folder(published)
        else:
            theirs = load_knowledge_base(
                ours.regulation, hipaa_tree=str(read_kb_manifest(built).get("tree", "ecfr"))
            )
        scorer = None
        if semantic:
            from privacy_ci.retrieval import embedding_similarity

            scorer = embedding_similarity(SEMANTIC_MODEL)
        comparison = compare_knowledge_bases(ours, theirs, scorer=scorer)
        if as_json:
            print_json(comparison.as_dict())
            return
        _print_comparison(comparison, str(built), str(published or "published"), differences)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _print_comparison(c: Comparison, built: str, published: str, differences: int) -> None:
    from rich.table import Table

    cov = c.coverage
    console.print(
        f"{escape(built)} vs {escape(published)} ({c.regulation}): {cov['both']} norms in both"
        f" ({cov['built']} built, {cov['published']} published)",
        highlight=False,
    )
    base = c.baseline or {}
    t = Table(title="Agreement with the published annotations (%)", title_justify="left")
    for col in ("measure", "exact", "normalised", "semantic", "both empty", "baseline"):
        t.add_column(col, justify="left" if col == "measure" else "right")
    t.add_row(
        "norm type",
        _pct(c.norm_type["agreement"]),
        "",
        "",
        "",
        _pct(base.get("norm_type", {}).get("agreement")),
    )
    for name, row in c.fields.items():
        b = base.get("fields", {}).get(name, {})
        t.add_row(
            name,
            _pct(row["exact"]),
            _pct(row["normalised"]),
            _pct(row["semantic"]),
            str(row["both_empty"]),
            _pct(b.get("normalised")),
        )
    for name, row in c.is_subject.items():
        b = base.get("is_subject", {}).get(name, {})
        t.add_row(name, _pct(row["agreement"]), "", "", "", _pct(b.get("agreement")))
    refs = c.references
    t.add_row(
        f"references ({refs['both']} shared)",
        _pct(refs["agreement"]),
        "",
        "",
        "",
        _pct(base.get("references", {}).get("agreement")),
    )
    console.print(t)
    if c.semantic:
        console.print(
            f"semantic: {c.semantic['model']}, cosine >= {c.semantic['threshold']};"
            " baseline: every norm a general definition, every field empty, 'not sure',"
            " every reference 'support' (its normalised agreement)",
            highlight=False,
        )
    confusion = c.norm_type["confusion"]
    ct = Table(title="Norm type (rows published, columns built)", title_justify="left")
    ct.add_column("")
    for col in confusion:
        ct.add_column(col, justify="right")
    for row, cells in confusion.items():
        ct.add_row(row, *(str(v) for v in cells.values()))
    console.print(ct)
    for name, overlap in (("role graph", c.role_graph), ("attribute graph", c.attribute_graph)):
        if overlap is None:
            continue
        parts = [
            f"{kind} {o['both']}/{o['published']} (precision {_pct(o['precision'])},"
            f" recall {_pct(o['recall'])})"
            for kind, o in overlap.items()
        ]
        console.print(f"{name}: " + "; ".join(parts), highlight=False)
    for note in c.notes:
        console.print(f"[dim]{escape(note)}[/]", highlight=False)
    for diff in c.differences[:differences]:
        fields = ", ".join(diff["fields"])
        console.print(f"  differs {diff['id']}: {fields}", markup=False, highlight=False)
