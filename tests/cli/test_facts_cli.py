"""`privacy-ci facts schema`, `privacy-ci facts decide`, `privacy-ci judge --facts/--fact`
and the judge's default method."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cli.facts import app as facts_app
from privacy_ci.cli.judge import default_method, judge
from privacy_ci.llm import model_configured
from privacy_ci.reasoning import Facts, apply_law, load_fact_schema, load_law

SCHEMA = load_fact_schema("hipaa")
# psychotherapy notes sent to an employer, every other fact at its presumption: every
# fact known, so the verdict is determined whatever the law book says
NOTES = {
    **{s.name: s.presume for s in SCHEMA if s.presume is not None},
    "holder": "covered_entity",
    "information": "psychotherapy_notes",
    "recipient": "employer",
    "purpose": "employment_decision",
}


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test entry point."""

    app.add_typer(facts_app, name="facts")
    app.command("judge")(judge)
    return app


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No config file and no LLM environment: no model is configured."""
    monkeypatch.chdir(tmp_path)
    for name in list(__import__("os").environ):
        if name.startswith("PRIVACY_CI_LLM_") or name == "PRIVACY_CI_CONFIG":
            monkeypatch.delenv(name)
    return {"PRIVACY_CI_CACHE": str(tmp_path / "cache")}


def run(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli(), args, env=env)


def flat(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ facts schema
def test_schema_lists_every_fact_with_question_paragraph_values_and_presumption() -> None:
    result = run(["facts", "schema"])
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    for spec in SCHEMA:
        assert spec.question in out and spec.paragraph in out
        for value in spec.values.values():
            assert f"{value.name} {value.label}" in out
    assert "presumed absent when not stated" in out  # the authorization's presumption


def test_schema_json_is_a_json_schema_that_checks_facts_files(tmp_path: Path) -> None:
    result = run(["facts", "schema", "--json"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema == SCHEMA.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = {
        **NOTES,
        "legal_process": {"value": "none", "source": "read", "quote": "no subpoena", "start": 3},
    }
    validator.validate(good)
    for bad in (
        {"colour": "blue"},
        {"holder": "hospital"},
        {"holder": 1},
        {"legal_process": {"value": "none", "extra": 1}},
        {"legal_process": {"source": "read"}},
    ):
        assert not validator.is_valid(bad), bad
    # the files the schema accepts are the files `--facts` reads
    path = tmp_path / "good.json"
    path.write_text(json.dumps(good))
    decided = run(["facts", "decide", "--facts", str(path), "--json"])
    assert decided.exit_code == 0, decided.output


def test_schema_of_a_regulation_without_a_fact_model_is_one_error() -> None:
    result = run(["facts", "schema", "-r", "gdpr"])
    assert result.exit_code == 2
    assert "no fact model for regulation 'gdpr'" in flat(result.stderr)


# ------------------------------------------------------------------ facts decide
def test_decide_prints_the_law_on_the_given_facts(tmp_path: Path) -> None:
    path = tmp_path / "case.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in NOTES.items()))
    want = apply_law(load_law(), Facts.from_mapping(SCHEMA, NOTES))
    assert want.determined
    result = run(["facts", "decide", "--facts", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == want.verdict.value and data["determined"] is True
    assert data["decision"]["rule"]["id"] == want.rule.id
    assert data["facts"]["holder"] == {"value": "covered_entity", "source": "given"}
    human = run(["facts", "decide", "--facts", str(path)])
    assert human.exit_code == 0, human.output
    out = flat(human.stdout)
    assert f"verdict {want.verdict.value}" in out and want.rule.paragraph in out
    assert "determined yes" in out and "facts the rule used" in out


def test_decide_on_open_facts_names_the_questions_and_presumptions() -> None:
    args = ["--fact", "holder=covered_entity", "--fact", "information=phi"]
    args += ["--fact", "recipient=employer", "--fact", "authorization=absent"]
    result = run(["facts", "decide", *args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    decision = data["decision"]
    assert data["determined"] is False and decision["questions"]
    assert decision["presumed"] and decision["near_misses"]
    for q in decision["questions"]:
        assert {b["verdicts"][0] for b in q["branches"]} == {"permit", "prohibit"}
    out = flat(run(["facts", "decide", *args]).stdout)
    assert "questions that would settle it" in out and "presumed: not stated" in out
    assert "near misses" in out and "authorization is absent, needs valid" in out


def test_fact_arguments_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(json.dumps({**NOTES, "information": "phi"}))
    override = ["--fact", "information=psychotherapy_notes"]
    result = run(["facts", "decide", "--facts", str(path), *override, "--json"])
    data = json.loads(result.stdout)
    assert data["facts"]["information"]["value"] == "psychotherapy_notes"
    assert data["facts"]["information"]["note"] == "--fact"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"holder": "covered_entity", "colour": "blue"}, "unknown fact 'colour'"),
        ({"holder": "hospital"}, "fact 'holder': unknown value 'hospital'"),
        ({"holder": {"value": "covered_entity", "why": "x"}}, "unknown field(s) ['why']"),
        (["holder"], "expected an object of facts"),
    ],
)
def test_decide_bad_facts_file_is_one_error_naming_it(
    tmp_path: Path, content: Any, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    result = run(["facts", "decide", "--facts", str(path)])
    assert result.exit_code == 2
    err = flat(result.stderr)
    assert message in err and "bad.json" in err and "Traceback" not in err


def test_decide_bad_fact_argument_and_missing_file(tmp_path: Path) -> None:
    for args, message in (
        (["--fact", "holder"], "expected KEY=VALUE"),
        (["--fact", "holder=x"], "unknown value 'x'"),
        (["--facts", str(tmp_path / "none.yaml")], "no such facts file"),
    ):
        result = run(["facts", "decide", *args])
        assert result.exit_code == 2, args
        assert message in flat(result.stderr), args


# ------------------------------------------------------------------ judge --facts
def test_judge_facts_with_an_unknown_key_exits_2_naming_it(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = tmp_path / "facts.yaml"
    path.write_text("holder: covered_entity\nconsent_signed: yes\n")
    result = run(["judge", "A clinic sent a chart.", "--facts", str(path)], env)
    assert result.exit_code == 2
    err = flat(result.stderr)
    assert "unknown fact 'consent_signed'" in err and "facts.yaml" in err
    result = run(["judge", "A clinic sent a chart.", "--fact", "holder=clinic"], env)
    assert result.exit_code == 2
    assert "--fact 'holder=clinic'" in flat(result.stderr)
    assert "unknown value 'clinic'" in flat(result.stderr)


def test_the_default_method_follows_the_model_configuration(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not model_configured()
    assert default_method({}, None) == "ci-reasoner"
    assert default_method({}, None, model_options=True) == "bm25-content"
    assert default_method({"provider": "openai"}, None) == "bm25-content"
    assert default_method({"temperature": 0.5}, None) == "ci-reasoner"  # tunes, chooses nothing
    config = tmp_path / "privacy-ci.toml"
    config.write_text("[llm]\ntemperature = 0.2\n")
    assert default_method({}, None) == "ci-reasoner"
    config.write_text('[llm]\nprovider = "openai-compatible"\nbase_url = "http://x/v1"\n')
    assert default_method({}, None) == "bm25-content"
    config.unlink()
    monkeypatch.setenv("PRIVACY_CI_LLM_MODEL", "some-model")
    assert default_method({}, None) == "bm25-content"


@pytest.mark.slow
def test_judge_default_is_the_ci_reasoner_with_given_facts(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """No model configured: `judge "..."` is the ci-reasoner; given facts are taken as
    given, and the output shows the verdict, whether it is determined, the rule with its
    paragraph, each fact's source and quote, and the questions."""
    pytest.importorskip("spacy")
    text = "A hospital faxed her lab results to her employer although she never signed a release."
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"purpose": "employment_decision"}))
    result = run(["judge", text, "--facts", str(path), "--json"], env)
    if result.exit_code == 2 and "install" in result.stderr:
        pytest.skip(result.stderr)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["method"] == "ci-reasoner" and data["backend"] == "model-free"
    assert data["event"]["facts"] == {
        "purpose": {"value": "employment_decision", "source": "given"}
    }
    reasoning = data["reasoning"]
    assert reasoning["facts"]["purpose"]["source"] == "given"
    read = [f for f in reasoning["facts"].values() if f["source"] == "read"]
    assert read and all(f["quote"] in text for f in read)
    assert reasoning["decision"]["rule"]["paragraph"]
    assert data["verdict"] == reasoning["verdict"] and "load_s" in data
    assert data["steps"][0]["parsed"] == reasoning  # the existing keys are kept
    human = run(["judge", text], env)
    assert human.exit_code == 0, human.output
    out = flat(human.stdout)
    assert "method ci-reasoner" in out and "determined" in out and "rule" in out
    assert 'read: "A hospital"' in out
    assert "questions that would settle it" in out
