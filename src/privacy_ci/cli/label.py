"""`privacy-ci label ...`: the Conductor's labeling experiment (an LLM writes the labels).

    privacy-ci label run --draws 5 --out runs/label-smollm2           # embedded model
    privacy-ci label run --provider openai-compatible --base-url http://127.0.0.1:8000/v1 \\
        --model qwen2.5-7b --out runs/label-qwen
    privacy-ci label report runs/label-smollm2 runs/label-qwen        # Tables VII-IX
    privacy-ci label prompt RMC-LAB-001                               # what the model sees

    privacy-ci label run --corpus mycorpus --out runs/drafts          # your own folder
    privacy-ci label export runs/drafts --out drafts.yaml             # for store propose

A run records its corpus folder: `report` and `export` read it from there unless
``--corpus`` says otherwise.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors
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
    from privacy_ci.conductor import Corpus
    from privacy_ci.labeling import LabelDrafts, LabelingReport, LabelingRun

app = typer.Typer(
    help="Conductor labeling experiment: an LLM labels the documents; the gate shows the cost.",
    no_args_is_help=True,
)

CorpusOpt = typer.Option(
    None,
    "--corpus",
    help="Corpus folder (policy, agents, labels, assignments). Default: Riverside.",
)
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of tables.")
RunCorpusOpt = typer.Option(
    None,
    "--corpus",
    help="Corpus folder. Default: the one the run labeled (recorded in its manifest).",
)
PAPER_DRAWS = 5
"""The paper's five draws, the default for the packaged corpus (the experiment)."""
CORPUS_DRAWS = 1
"""The default for a user's folder: one draft per document, for the authority to review."""


def corpus_of_run(run: LabelingRun, corpus_dir: Path | None) -> Corpus:
    """The corpus to read a run against: `corpus_dir`, else the folder the run recorded.

    Raises:
        PrivacyCIError: the recorded folder is gone (and is not the packaged corpus).
    """
    from privacy_ci.conductor import load_corpus
    from privacy_ci.errors import PrivacyCIError

    if corpus_dir is not None:
        return load_corpus(corpus_dir)
    folder = run.corpus_folder
    if folder is None or folder.is_dir():
        return load_corpus(folder)
    if folder.parts[-3:] == ("conductor", "corpus", "riverside"):
        return load_corpus()  # the packaged corpus, recorded by another installation
    raise PrivacyCIError(
        f"{run.folder}: the corpus folder it labeled, {folder}, does not exist; pass --corpus DIR"
    )


def render_reports(reports: list[LabelingReport]) -> None:
    """Tables VII, VIII and IX, attribution and controls, one row per configuration."""
    from rich.table import Table

    from privacy_ci.labeling._report import authored_line, report_notes, report_tables

    console.print(authored_line(reports), highlight=False)
    for spec in report_tables(reports):
        table = Table(title=spec.title)
        for i, header in enumerate(spec.headers):
            cells = [row[i] for row in spec.rows]
            numeric = bool(cells) and all(
                c.rstrip("%").replace(".", "").isdigit() or c in ("", "—") for c in cells
            )
            table.add_column(header, justify="right" if numeric else "left")
        for row in spec.rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
    for note in report_notes(reports):
        colour = "red" if note.endswith("not a model") else "yellow"
        console.print(f"[{colour}]{escape(note)}[/]", highlight=False)


@app.command("run")
def run_command(
    out: Path = typer.Option(..., "--out", "-o", help="Run folder (resumed when it exists)."),
    draws: int | None = typer.Option(
        None,
        "--draws",
        help=f"Complete relabelings of the corpus (default: {PAPER_DRAWS}, the paper's, for"
        f" the packaged corpus; {CORPUS_DRAWS} with --corpus).",
    ),
    provider: str | None = ProviderOpt,
    model: str | None = ModelOpt,
    base_url: str | None = BaseUrlOpt,
    temperature: float | None = TemperatureOpt,
    max_tokens: int | None = MaxTokensOpt,
    seed: int | None = SeedOpt,
    concurrency: int = typer.Option(8, "--concurrency", "-c", help="Documents in flight."),
    docs: str | None = typer.Option(
        None, "--docs", help="Comma-separated document ids (default: every document)."
    ),
    name: str | None = typer.Option(None, "--name", help="Name in reports (default: backend)."),
    system_prompt: Path | None = typer.Option(
        None, "--system-prompt", help="Your own system prompt file (default: the paper's)."
    ),
    retry_failures: bool = typer.Option(
        False, "--retry-failures", help="On resume, label again the draws that failed."
    ),
    corpus_dir: Path | None = CorpusOpt,
    no_cache: bool = NoCacheOpt,
    config_file: Path | None = ConfigOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Label every document DRAWS times with a model, then report what the gate does.

    With --corpus DIR, documents of DIR without a label are labeled too: their labels
    are drafts (`label export` then `store propose`), reported as having no authored
    label to compare with."""
    with user_errors():
        from privacy_ci.conductor import load_corpus
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.labeling import Labeler, analyze_run, prompt_from_file, run_labeling
        from privacy_ci.llm import load_llm_config, make_client

        if draws is None:
            draws = PAPER_DRAWS if corpus_dir is None else CORPUS_DRAWS
        if draws < 1 or concurrency < 1:
            raise PrivacyCIError("--draws and --concurrency must be at least 1")
        corpus = load_corpus(corpus_dir)
        config = load_llm_config(
            llm_overrides(
                provider, model, base_url, temperature, max_tokens, seed, concurrency, no_cache
            ),
            config_file,
        )
        settings = config.generation_settings()
        client = make_client(config)
        labeler = Labeler(
            client,
            corpus,
            system_prompt=None if system_prompt is None else prompt_from_file(system_prompt),
            settings=settings,
        )
        ids = None if docs is None else [d.strip() for d in docs.split(",") if d.strip()]
        total = draws * len(ids if ids is not None else labeler.documents)
        seen = {"n": 0, "failed": 0}

        def progress(record: Any) -> None:
            seen["n"] += 1
            seen["failed"] += not record.ok
            if not as_json and (seen["n"] % 25 == 0 or not record.ok):
                note = (
                    "" if record.ok else f"  FAILED {record.doc_id}#{record.draw}: {record.failure}"
                )
                console.print(
                    f"[dim]labeled {seen['n']} new ({seen['failed']} failed){escape(note)}[/]",
                    highlight=False,
                )

        async def go() -> Any:
            try:
                return await run_labeling(
                    labeler,
                    out,
                    draws=draws,
                    concurrency=concurrency,
                    doc_ids=ids,
                    name=name,
                    retry_failures=retry_failures,
                    on_record=progress,
                )
            finally:
                await client.aclose()

        run = asyncio.run(go())
        if not as_json:
            console.print(
                f"{len(run.records)} of {total} labels in {out} ({seen['n']} new);"
                f" backend {labeler.backend}",
                markup=False,
                highlight=False,
            )
        if ids is not None:
            if as_json:
                print_json({"folder": str(out), "labels": [r.as_dict() for r in run.records]})
            else:
                console.print("a subset of documents: run `label report --partial` to analyse it")
            return
        report = analyze_run(run, corpus)
        usable = _usable_drafts(run, corpus) if corpus.unlabelled else None
        if as_json:
            data = report.as_dict()
            if usable is not None:
                data["usable_drafts"] = usable
            print_json(data)
        else:
            render_reports([report])
            if usable is not None:
                console.print(
                    f"{usable['usable']} usable draft(s) of {usable['drafted']} drafted"
                    " (usable: what `label export` writes for draw 1)",
                    markup=False,
                    highlight=False,
                )


@app.command("report")
def report_command(
    runs: list[Path] = typer.Argument(None, help="Labeling run folders."),
    labels: list[Path] = typer.Option(
        None,
        "--labels",
        help="A label file to compare as one configuration of one draw (repeatable).",
    ),
    partial: bool = typer.Option(
        False, "--partial", help="Analyse unfinished runs (missing labels count as failed)."
    ),
    markdown: Path | None = typer.Option(None, "--markdown", help="Also write a Markdown file."),
    html_out: Path | None = typer.Option(
        None,
        "--html",
        help="Also write one self-contained HTML page with the paper's Figures 2 and 3.",
    ),
    corpus_dir: Path | None = RunCorpusOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Tables VII-IX, attribution and controls for labeling runs (and label files).

    Documents without an authored label are listed as drafted (or failed), never
    compared. Label files are read against --corpus, else the first run's corpus.
    --html draws Fig. 2 (over- vs under-granting per draw) and Fig. 3 (decisions that
    change between draws, and those the authored policy denies)."""
    with user_errors():
        from privacy_ci.conductor import load_corpus, load_labels
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.labeling import analyze_run, load_labeling_run, run_from_labels
        from privacy_ci.labeling._report import markdown_report

        if not runs and not labels:
            raise PrivacyCIError("give at least one run folder or --labels file")
        folders = [load_labeling_run(folder) for folder in runs or []]
        files = [
            run_from_labels([load_labels(path)], name=path.name, backend=f"label file {path}")
            for path in labels or []
        ]
        if corpus_dir is not None or not folders:
            corpora = [load_corpus(corpus_dir)] * (len(folders) + len(files))
        else:  # each run against its own folder; label files against the first run's
            corpora = [corpus_of_run(run, None) for run in folders]
            corpora += [corpora[0]] * len(files)
        reports = [
            analyze_run(run, corpus, allow_partial=partial)
            for run, corpus in zip([*folders, *files], corpora, strict=True)
        ]
        written = []
        if markdown is not None:
            markdown.parent.mkdir(parents=True, exist_ok=True)
            markdown.write_text(markdown_report(reports), encoding="utf-8")
            written.append(markdown)
        if html_out is not None:
            from privacy_ci.labeling._html import html_report

            page = html_report(reports)
            try:
                html_out.parent.mkdir(parents=True, exist_ok=True)
                html_out.write_text(page, encoding="utf-8")
            except OSError as exc:
                raise PrivacyCIError(f"cannot write {html_out}: {exc.strerror}") from None
            written.append(html_out)
        if as_json:
            print_json({"configurations": [r.as_dict() for r in reports]})
        else:
            render_reports(reports)
            for path in written:
                console.print(f"wrote {path}", markup=False, highlight=False)


@app.command("export")
def export_command(
    run_dir: Path = typer.Argument(..., help="A labeling run folder."),
    out: Path = typer.Option(..., "--out", "-o", help="The label file to write (YAML or .json)."),
    draw: int = typer.Option(1, "--draw", help="Which draw to export."),
    majority: bool = typer.Option(
        False, "--majority", help="Export the field-wise majority of all draws instead."
    ),
    corpus_dir: Path | None = RunCorpusOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write a run's labels as a label file, for `conductor flows --labels` or for an
    authority to review (`store propose`): the model drafts, the authority approves.

    Documents without an authored label get drafts whose subject, subject type,
    document type and originating context are placeholders to set before approving.
    A failed draw or a draft that is not a valid label for the corpus is left out and
    listed with the reason."""
    with user_errors():
        import json

        import yaml

        from privacy_ci.conductor._labels import dump_labels
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.labeling import draft_labels, load_labeling_run
        from privacy_ci.labeling._labeler import content_sha256, document_texts

        run = load_labeling_run(run_dir)
        corpus = corpus_of_run(run, corpus_dir)
        drafts = draft_labels(run, corpus, None if majority else draw)
        entries = dump_labels(drafts.labels)
        warnings = []
        if run.corpus_sha256 is not None and run.corpus_sha256 != content_sha256(
            document_texts(corpus)
        ):
            warnings.append(
                "the corpus's documents changed since the run: its labels may not fit"
                " them; label them again (`label run` with a new --out)"
            )
        labeled = {r.doc_id for r in run.records}
        drafting = bool(drafts.invalid or drafts.without_authored) or any(
            d in labeled for d in corpus.unlabelled
        )
        if not entries:
            # nothing to review: an empty file and exit 0 read as success (issue 26)
            reasons = "; ".join(f"{d}: {r}" for d, r in [*drafts.failed, *drafts.invalid][:3])
            raise PrivacyCIError(
                f"{run_dir}: no usable label to export, {out} not written"
                f" ({len(drafts.failed)} failed, {len(drafts.invalid)} not valid labels"
                f"{'; ' + reasons if reasons else ''})"
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix.lower() == ".json":
            out.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
        else:
            body = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True)
            out.write_text(_export_header(run, run_dir, draw, majority, drafts) + body, "utf-8")
        summary: dict[str, Any] = {
            "file": str(out),
            "labels": len(entries),
            "failed": [d for d, _ in drafts.failed],
        }
        if drafting:  # only then: the packaged corpus's export reads as it always has
            summary["failures"] = [{"doc_id": d, "reason": r} for d, r in drafts.failed]
            summary["invalid"] = [{"doc_id": d, "reason": r} for d, r in drafts.invalid]
            summary["without_authored_label"] = drafts.without_authored
        if warnings:
            summary["warnings"] = warnings
        if as_json:
            print_json(summary)
            return
        console.print(f"wrote {len(entries)} labels to {out}", markup=False, highlight=False)
        if drafts.without_authored:
            console.print(
                f"[yellow]{len(drafts.without_authored)} draft(s) for documents without an"
                " authored label: set subject, subject_type, document_type and"
                " originating_context (placeholders) before approving:[/]"
                f" {escape(', '.join(drafts.without_authored))}",
                highlight=False,
            )
        for what, left_out in (
            ("document(s) had no label", drafts.failed),
            ("draft(s) are not valid labels", drafts.invalid),
        ):
            if left_out:
                console.print(
                    f"[yellow]{len(left_out)} {what} and are left out:[/]", highlight=False
                )
                for doc_id, reason in left_out:
                    console.print(f"  {escape(doc_id)}: {escape(reason)}", highlight=False)
        for warning in warnings:
            console.print(f"[yellow]{escape(warning)}[/]", highlight=False)


def _usable_drafts(run: LabelingRun, corpus: Corpus) -> dict[str, int]:
    """Drafted documents (a label came back) and usable ones (draw 1 would be exported)."""
    from privacy_ci.labeling import draft_labels

    drafts = draft_labels(run, corpus, 1)
    drafted = {r.doc_id for r in run.records if r.draw == 1 and r.ok}
    return {
        "drafted": len(drafted & set(corpus.unlabelled)),
        "usable": len(drafts.without_authored),
    }


def _export_header(
    run: LabelingRun, run_dir: Path, draw: int, majority: bool, drafts: LabelDrafts
) -> str:
    """The YAML file's comments: who wrote the labels, and what a reviewer must not miss."""
    lines = [
        f"Labels written by {run.backend} (run {run_dir},"
        f" {'majority of all draws' if majority else f'draw {draw}'}).",
        "Drafts: not policy until the Policy Authority reviews and approves them.",
    ]
    if drafts.without_authored:
        lines.append(
            "No authored label, so subject (as the model named it; null:"
            " organization-level, no assignment required), subject_type, document_type"
            " and originating_context are placeholders; check and set them before"
            " approving: " + ", ".join(drafts.without_authored)
        )
    for doc_id, reason in [*drafts.failed, *drafts.invalid]:
        lines.append(f"Left out {doc_id}: {reason}")
    # a reason may quote model output: one comment line each, whatever it holds
    return "".join("# " + " ".join(line.split()) + "\n" for line in lines)


@app.command("prompt")
def prompt_command(
    doc: str = typer.Argument(..., help="Document id, e.g. RMC-LAB-001."),
    corpus_dir: Path | None = CorpusOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show exactly what the labeler is sent for a document (and the output schema)."""
    with user_errors():
        from privacy_ci.conductor import load_corpus
        from privacy_ci.labeling import label_schema, load_labeler_prompt
        from privacy_ci.labeling._labeler import known_subjects, render_user_prompt
        from privacy_ci.labeling._schema import draft_schema

        corpus = load_corpus(corpus_dir)
        system_text = load_labeler_prompt("labeler_system").text
        user_text = render_user_prompt(corpus, doc)
        schema = (
            draft_schema(corpus.policy, known_subjects(corpus))
            if doc in corpus.unlabelled  # drafted: the subject is asked for too
            else label_schema(corpus.policy)
        )
        if as_json:
            print_json({"system": system_text, "user": user_text, "schema": schema})
            return
        console.rule("system")
        console.print(system_text, markup=False, highlight=False)
        console.rule("user")
        console.print(user_text, markup=False, highlight=False)
        console.rule("schema")
        print_json(schema)
