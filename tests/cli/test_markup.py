"""User-supplied text is printed as written, never read as rich markup or emoji codes.

Before the fix ``privacy-ci conductor show '[/x]'`` died with a rich MarkupError
traceback (the shared error printer put the message through markup) and
``'[bold]x'`` lost its brackets. Every command here is given such text as an id,
a name or a path.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from privacy_ci.cli._common import escape
from privacy_ci.cli.main import app

runner = CliRunner()

HOSTILE = ["[/x]", "[bold]x", "[link=http://e]x[/link]", "[red]x[/]", ":thumbs_up: x\\"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVACY_CI_CONFIG", raising=False)


def run(args: list[str]) -> Any:
    res = runner.invoke(app, args)
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def one_error(res: Any, text: str) -> str:
    """Exit 2, nothing on stdout, one `error:` line that quotes `text` as written."""
    assert res.exit_code == 2, res.output
    assert res.stdout == "", res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert text in lines[0], lines[0]
    return str(lines[0])


ERROR_COMMANDS: list[tuple[str, list[str]]] = [
    ("conductor show", ["conductor", "show", "{}"]),
    ("conductor show --json", ["conductor", "show", "{}", "--json"]),
    ("conductor decide --doc", ["conductor", "decide", "--agent", "D01", "--doc", "{}"]),
    ("conductor decide --agent", ["conductor", "decide", "--agent", "{}", "--doc", "RMC-LAB-001"]),
    ("conductor controls --field", ["conductor", "controls", "--field", "{}"]),
    ("conductor validate", ["conductor", "validate", "missing/{}"]),
    ("label prompt", ["label", "prompt", "{}"]),
    ("label report --labels", ["label", "report", "--labels", "missing/{}.yaml"]),
    ("judge --method", ["judge", "A nurse faxed a chart.", "--method", "{}"]),
    ("judge --case", ["judge", "--case", "missing/{}.json"]),
    ("eval --method", ["eval", "--method", "{}"]),
    ("retrieve --regulation", ["retrieve", "a query", "--regulation", "{}"]),
    ("llm ask --schema", ["llm", "ask", "hello", "--schema", "missing/{}.json"]),
    ("kb show --regulation", ["kb", "show", "164.502", "--regulation", "{}"]),
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize(("name", "args"), ERROR_COMMANDS, ids=[n for n, _ in ERROR_COMMANDS])
def test_unknown_ids_give_one_literal_error_line(name: str, args: list[str], text: str) -> None:
    argv = [a.replace("{}", text) for a in args]
    # a path argument is printed as pathlib spells it ("//" collapses)
    shown = text.replace("//", "/") if any(a.startswith("missing/") for a in args) else text
    one_error(run(argv), shown)


@pytest.mark.parametrize("text", HOSTILE)
def test_unknown_node_in_the_knowledge_base(shared_data: Path, text: str) -> None:
    env = {"PRIVACY_CI_DATA": str(shared_data)}
    for args in (["kb", "show", text], ["kb", "refs", text]):
        res = runner.invoke(app, args, env=env)
        assert "Traceback" not in res.output, res.output
        line = one_error(res, text)
        assert line == f"error: hipaa: no node {text!r} in the regulation tree"


@pytest.mark.parametrize("text", HOSTILE)
def test_no_definition_quotes_the_term(shared_data: Path, text: str) -> None:
    term = f"zzz{text}zzz"  # resembles no defined term
    res = runner.invoke(app, ["kb", "define", term], env={"PRIVACY_CI_DATA": str(shared_data)})
    assert res.exit_code == 1, res.output
    assert res.stdout.strip() == f"hipaa: no definition resembles {term!r}"


@pytest.mark.parametrize("text", HOSTILE)
def test_a_decision_for_an_unknown_role_prints_the_role(text: str) -> None:
    args = ["conductor", "decide", "--agent", "D01", "--doc", "RMC-LAB-001", "--role", text]
    res = run(args)
    assert res.exit_code == 0, res.output
    assert f"acting as {text} in context Medical" in res.stdout, res.stdout
    assert f"Dr. Helen Marsh [{text}]" in res.stdout, res.stdout


@pytest.mark.parametrize("text", HOSTILE)
def test_paths_are_printed_as_written(tmp_path: Path, text: str) -> None:
    out = f"docs-{text}".replace("/", "_")  # one folder, named with the markup
    res = run(["conductor", "documents", "--out", out])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"wrote 105 documents to {out} (corpus sha256 "), res.stdout
    res = runner.invoke(app, ["data", "where"], env={"PRIVACY_CI_DATA": str(tmp_path / out)})
    assert res.exit_code == 0 and res.stdout.splitlines()[0] == f"data  {tmp_path / out}"


def test_error_line_is_not_wrapped_at_80_columns() -> None:
    long_id = "RMC-" + "X" * 120
    line = one_error(run(["conductor", "show", long_id]), long_id)
    assert len(line) > 120


@pytest.mark.parametrize("text", [*HOSTILE, "x\\\\", "\\[bold]x", "a [b] c"])
@pytest.mark.parametrize(
    ("template", "shown"),
    [
        ("{}", "{}"),
        ("a {} b", "a {} b"),
        ("[bold]{}[/] b", "{} b"),
        ("[bold]a [red]{}[/red][/bold]", "a {}"),
    ],
)
def test_escape_shows_text_as_written_wherever_it_lands(
    text: str, template: str, shown: str
) -> None:
    # rich's own escape doubles a trailing backslash unless a tag follows it
    out = Console(file=io.StringIO(), width=200, emoji=False)
    out.print(template.replace("{}", escape(text)), highlight=False)
    table = Table(title=escape(text))
    table.add_column(escape(text))
    table.add_row(escape(text))
    out.print(table)
    printed = out.file.getvalue()  # type: ignore[attr-defined]
    assert printed.splitlines()[0] == shown.replace("{}", text)
    assert printed.count(text) >= 4  # the line, the title, the header and the cell
