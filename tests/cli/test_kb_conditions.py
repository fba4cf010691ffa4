"""`privacy-ci kb conditions`: the law book the ci-reasoner applies (`load_law`), its
rules listed in the order they are tried, and one rule or a paragraph's rules shown."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.reasoning import load_law

runner = CliRunner()


def invoke_json(*args: str) -> Any:
    res = runner.invoke(app, ["kb", "conditions", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_list_json_is_the_law_book_in_order() -> None:
    book = load_law("hipaa")
    data = invoke_json()
    assert data["regulation"] == "hipaa"
    assert data["law"] == book.version_id and data["facts"] == book.schema.version_id
    rules = data["rules"]
    assert [r["id"] for r in rules] == [r.id for r in (*book.rules, book.default)]
    assert [r["order"] for r in rules] == list(range(len(rules)))
    first = rules[0]
    assert set(first) == {
        "id",
        "paragraph",
        "title",
        "effect",
        "order",
        "when",
        "unless",
        "facts",
    }
    # precedence: not applicable, then prohibitions, required, permissions, the default
    effects = [r["effect"] for r in rules]
    assert effects[0] == "not_applicable" and effects[-1] == "prohibit"
    assert rules[-1]["id"] == "164.502(a)-general-rule" and rules[-1]["facts"] == []
    last_not_applicable = max(i for i, e in enumerate(effects) if e == "not_applicable")
    first_permit = effects.index("permit")
    assert last_not_applicable < effects.index("prohibit") < first_permit
    assert "prohibit" not in effects[first_permit:-1]
    ids = [r["id"] for r in rules]
    assert "employment-record" in ids and "education-record" in ids


def test_list_text_shows_every_rule_id_uncut() -> None:
    res = runner.invoke(app, ["kb", "conditions"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    book = load_law("hipaa")
    assert f"{len(book.rules)} rules and the default" in res.stdout
    for rule in (*book.rules, book.default):
        assert rule.id in res.stdout  # ids are what a reader copies: never cut
    assert "164.512(e)(1)(ii)-subpoena-with-assurances" in res.stdout


def test_rule_id_shows_when_and_unless() -> None:
    data = invoke_json("164.508(a)(2)-psychotherapy-notes")
    (rule,) = data["rules"]
    assert rule["effect"] == "prohibit" and rule["paragraph"] == "164.508(a)(2)"
    assert rule["when"] == "information: psychotherapy notes"
    assert "authorization: a valid authorization covers it" in rule["unless"]
    assert rule["facts"][0] == "information" and "authorization" in rule["facts"]
    # ids match whatever their case
    assert invoke_json("164.508(A)(2)-PSYCHOTHERAPY-NOTES")["rules"] == [rule]
    res = runner.invoke(
        app, ["kb", "conditions", "164.508(a)(2)-psychotherapy-notes"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    total = len(load_law("hipaa").rules) + 1
    head = f"164.508(a)(2)-psychotherapy-notes (prohibit, 164.508(a)(2), tried 6 of {total})"
    assert head in res.stdout
    assert "when: information: psychotherapy notes" in res.stdout and "unless: (" in res.stdout


def test_the_default_rule() -> None:
    (rule,) = invoke_json("164.502(a)-general-rule")["rules"]
    assert rule["when"] == "" and rule["unless"] is None
    res = runner.invoke(app, ["kb", "conditions", "164.502(a)-general-rule"])
    assert res.exit_code == 0 and "when: no permission applies" in res.stdout


def test_paragraph_prefix() -> None:
    data = invoke_json("164.512(f)")
    ids = [r["id"] for r in data["rules"]]
    assert ids and all(r["paragraph"].startswith("164.512(f)") for r in data["rules"])
    assert "164.512(f)(1)(ii)-law-enforcement-process" in ids
    assert "164.512(e)(1)(i)-court-order" not in ids
    # a prefix ends at a paragraph boundary: 164.51 is not 164.512
    res = runner.invoke(app, ["kb", "conditions", "164.51"])
    assert res.exit_code == 2 and "no rule or paragraph matches '164.51'" in res.stderr


def test_unknown_id_is_one_error_line() -> None:
    res = runner.invoke(app, ["kb", "conditions", "no-such-[entry]"])
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "'no-such-[entry]'" in lines[0]  # the id as written, not read as markup


def test_regulation_without_a_law_book() -> None:
    res = runner.invoke(app, ["kb", "conditions", "-r", "gdpr"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no fact model for regulation 'gdpr'" in lines[0]
