"""`privacy-ci corpus ...`: start a corpus folder of your own.

A corpus is a folder: policy.yaml, agents.yaml, labels.yaml, assignments.yaml and a
documents/ folder. Validate it with ``privacy-ci conductor validate DIR`` and load
it with ``privacy-ci store load DIR --db URL``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privacy_ci.cli._common import console, escape, print_json, user_errors

app = typer.Typer(
    help="Corpus folders: start one (policy, agents, assignments, labels, documents).",
    no_args_is_help=True,
)


@app.command("init")
def corpus_init(
    folder: Path = typer.Argument(..., help="The folder to create (new, or empty)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Write a commented starter corpus: policy, agents (with a Policy Authority member),
    assignments, an empty label file and two example documents."""
    with user_errors():
        import shutil

        from privacy_ci.conductor._corpus import starter_dir
        from privacy_ci.errors import PrivacyCIError

        if folder.exists() and not folder.is_dir():
            raise PrivacyCIError(f"{folder} exists and is not a folder; choose a new folder")
        if folder.is_dir() and any(folder.iterdir()):
            # never mix the starter into someone's files, nor overwrite them
            raise PrivacyCIError(f"{folder} is not empty; choose a new or empty folder")
        try:
            shutil.copytree(starter_dir(), folder, dirs_exist_ok=True)
        except OSError as exc:
            raise PrivacyCIError(f"cannot write {folder}: {exc}") from None
        files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        if as_json:
            print_json({"folder": str(folder), "files": files})
            return
        where = escape(str(folder))
        console.print(f"wrote a starter corpus to {where}:", highlight=False)
        for name in files:
            console.print(f"  {escape(name)}", highlight=False)
        console.print(
            "next: put your documents in documents/ (<doc_id>.txt, .md, .pdf or .docx),"
            " edit the YAML files, then\n"
            f"  privacy-ci conductor validate {where}\n"
            f"  privacy-ci store load {where} --db store.db",
            highlight=False,
        )
