"""`privacy-ci kb conditions`: the condition catalogue, listed and shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.reasoning import load_catalogue

runner = CliRunner()


@pytest.fixture(autouse=True)
def _data(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))


def invoke_json(*args: str) -> Any:
    res = runner.invoke(app, ["kb", "conditions", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_list_json_matches_the_catalogue() -> None:
    catalogue = load_catalogue("hipaa")
    data = invoke_json()
    assert data["regulation"] == "hipaa" and data["version"] == catalogue.version
    assert [n["id"] for n in data["norms"]] == [n.id for n in catalogue.norms]
    first = data["norms"][0]
    assert set(first) == {"id", "effect", "paragraph", "title", "requires", "conditions"}
    assert sum(n["conditions"] for n in data["norms"]) == len(catalogue.conditions())
    grounds = [g["id"] for g in data["applicability"]["grounds"]]
    assert "employment-record" in grounds and "education-record" in grounds
    # de-identified information is judged by the permitting norm of 164.514, not a ground
    assert "de-identified-information" not in grounds
    assert "164.514(b)-de-identified-information" in [n["id"] for n in data["norms"]]


def test_list_text_shows_entries_and_grounds() -> None:
    res = runner.invoke(app, ["kb", "conditions"])
    assert res.exit_code == 0, res.output
    assert "164.512(e)(1)(ii)-subpoena" in res.stdout  # ids are never cut short
    assert "prohibit" in res.stdout and "Not applicable when" in res.stdout
    assert "employment-record (160.103(Protected health information)(2)(iii))" in res.stdout


def test_entry_id_shows_every_condition() -> None:
    data = invoke_json("164.512(e)(1)(ii)-subpoena")
    (entry,) = data["norms"]
    assert entry["effect"] == "permit" and entry["requires"] == "all"
    conditions = {c["id"]: c for c in entry["conditions"]}
    assert set(conditions) == {"subpoena-or-discovery", "subpoena-satisfactory-assurance"}
    assert "satisfactory assurance" in conditions["subpoena-satisfactory-assurance"]["cues"]["met"]
    res = runner.invoke(app, ["kb", "conditions", "164.512(e)(1)(ii)-subpoena"])
    assert res.exit_code == 0, res.output
    for text in ("subpoena-satisfactory-assurance (164.512(e)(1)(iii))", "met: subpoena;"):
        assert text in res.stdout


def test_condition_id_and_ground_id() -> None:
    data = invoke_json("valid-authorization")
    assert [n["id"] for n in data["norms"]] == ["164.508(a)(1)-authorization"]
    data = invoke_json("employment-record")
    assert data["norms"] == [] and data["grounds"][0]["id"] == "employment-record"
    res = runner.invoke(app, ["kb", "conditions", "education-record"])
    assert res.exit_code == 0 and "not applicable, 160.103(Protected" in res.stdout


def test_paragraph_prefix() -> None:
    data = invoke_json("164.512(f)")
    ids = [n["id"] for n in data["norms"]]
    assert ids and all(i.startswith("164.512(f)") for i in ids)
    assert "164.512(f)(1)(ii)(c)-admin-request" in ids
    # a prefix ends at a paragraph boundary: 164.51 is not 164.512
    res = runner.invoke(app, ["kb", "conditions", "164.51"])
    assert res.exit_code == 2


def test_unknown_id_is_one_error_line() -> None:
    res = runner.invoke(app, ["kb", "conditions", "no-such-[entry]"])
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "'no-such-[entry]'" in lines[0]  # the id as written, not read as markup


def test_regulation_without_catalogue() -> None:
    res = runner.invoke(app, ["kb", "conditions", "-r", "gdpr"])
    assert res.exit_code == 2 and "no condition catalogue" in res.stderr
