"""Definition dictionaries: the three published files, lookups and validation."""

from __future__ import annotations

import difflib
import itertools
import json
from pathlib import Path

import pytest

from privacy_ci.errors import ValidationFailed
from privacy_ci.knowledge import (
    DEFINITION_FILES,
    Definition,
    Definitions,
    definition_key,
    load_definitions,
    load_flat_definitions,
    load_hipaa_definitions,
)


@pytest.fixture(scope="module")
def hipaa(shared_data: Path) -> Definitions:
    return load_definitions("hipaa", shared_data)


@pytest.fixture(scope="module")
def gdpr(shared_data: Path) -> Definitions:
    return load_definitions("gdpr", shared_data)


@pytest.fixture(scope="module")
def ai_act(shared_data: Path) -> Definitions:
    return load_definitions("ai_act", shared_data)


def test_definition_key() -> None:
    assert definition_key("personal_data") == "personal data"
    assert definition_key("  Personal   Data ") == "personal data"
    assert definition_key("Header.") == "header"


# -- HIPAA -------------------------------------------------------------------------


def test_hipaa_counts_and_sources(hipaa: Definitions) -> None:
    assert len(hipaa) == 54  # = the paper's 54 definitions
    assert hipaa.regulation == "hipaa"
    assert hipaa.terms[:2] == ["Implementation specification", "Protected health information"]
    covered = hipaa["Covered entity"]
    assert covered.text.startswith("Covered entity means: (1) A health plan.")
    assert covered.source == "https://www.law.cornell.edu/cfr/text/45/160.103"
    assert all(d.source.startswith("https://www.law.cornell.edu/") for d in hipaa)


def test_hipaa_odd_key_is_reported(hipaa: Definitions) -> None:
    assert list(hipaa.report.odd_keys) == ["Header."]
    assert "paragraph heading" in hipaa.report.odd_keys["Header."]
    assert "Header." in hipaa  # kept, so the count matches the paper
    assert not hipaa.report.collisions


@pytest.mark.parametrize(
    ("query", "term", "method"),
    [
        ("Covered entity", "Covered entity", "exact"),
        ("covered ENTITY", "Covered entity", "exact"),
        ("  treatment ", "Treatment", "exact"),
        ("covered entities", "Covered entity", "normalised"),
        ("business associates", "Business associate", "normalised"),
    ],
)
def test_hipaa_exact_and_normalised_lookup(
    hipaa: Definitions, query: str, term: str, method: str
) -> None:
    (match,) = hipaa.lookup(query)
    assert (match.term, match.score, match.method) == (term, 1.0, method)
    assert match.definition is hipaa.get(term)


def test_hipaa_fuzzy_lookup(hipaa: Definitions) -> None:
    matches = hipaa.lookup("protected health info")
    assert matches[0].term == "Protected health information"
    # stems "protect health info" / "protect health information": Jaccard 2/4 loses to
    # 0.9 x the difflib ratio (2 x 19 matching characters / 45)
    ratio = difflib.SequenceMatcher(
        None, "protect health info", "protect health information", autojunk=False
    ).ratio()
    assert matches[0].method == "fuzzy" and matches[0].score == round(0.9 * ratio, 4) == 0.76
    assert [m.term for m in matches] == [
        "Protected health information",
        "Electronic protected health information",
    ]
    assert all(a.score >= b.score for a, b in itertools.pairwise(matches))
    assert hipaa.lookup("provider")[0].term == "Health care provider"
    assert hipaa.lookup("personal data") == []
    assert hipaa.lookup("personal data", min_score=0.0, limit=2)  # nearest, however far


def test_missing_term_error_names_nearest(hipaa: Definitions) -> None:
    with pytest.raises(KeyError, match=r"no definition of 'protected health info'.*nearest"):
        hipaa["protected health info"]
    assert hipaa.get("nothing like it") is None
    assert "nothing like it" not in hipaa


# -- GDPR --------------------------------------------------------------------------


def test_gdpr_counts(gdpr: Definitions) -> None:
    assert len(gdpr) == 26
    assert gdpr.terms[:3] == ["personal_data", "processing", "restriction_of_processing"]
    assert not gdpr.report.odd_keys


@pytest.mark.parametrize(
    "query", ["personal data", "Personal Data", "personal_data", "PERSONAL_DATA"]
)
def test_gdpr_snake_case_keys(gdpr: Definitions, query: str) -> None:
    (match,) = gdpr.lookup(query)
    assert (match.term, match.method) == ("personal_data", "exact")
    assert match.definition.display_term == "personal data"
    assert gdpr[query].text.startswith("Any information relating to an identified")


def test_gdpr_fuzzy(gdpr: Definitions) -> None:
    assert gdpr.lookup("controler")[0].term == "controller"
    assert gdpr.lookup("data concerning health")[0].method == "exact"
    assert gdpr.lookup("health data")[0].term == "data_concerning_health"


# -- AI Act ------------------------------------------------------------------------


def test_ai_act_counts_and_lookup(ai_act: Definitions) -> None:
    assert len(ai_act) == 68
    assert {"AI system", "provider", "deployer"} <= set(ai_act.terms)
    assert ai_act.lookup("ai system")[0].method == "exact"
    assert ai_act.lookup("AI systems")[0].term == "AI system"
    assert ai_act.lookup("deployers")[0].term == "deployer"
    biometric = {m.term for m in ai_act.lookup("biometric")}
    assert {"biometric data", "biometric identification", "biometric verification"} <= biometric


# -- files and validation ----------------------------------------------------------


def test_definition_files_table() -> None:
    assert DEFINITION_FILES == {
        "hipaa": "hipaa/definitions.json",
        "gdpr": "law_trees/definitions/gdpr.json",
        "ai_act": "law_trees/definitions/ai_act.json",
    }
    with pytest.raises(ValueError, match="unknown regulation 'ccpa'"):
        load_definitions("ccpa", "/nowhere")


def test_hipaa_format_errors(tmp_path: Path) -> None:
    path = tmp_path / "defs.json"
    path.write_text(
        json.dumps(
            {
                "Good": {"content": "Good means good.", "source": "x"},
                "NoContent": {"source": "x"},
                "Extra": {"content": "c", "source": "x", "note": 1},
                "Flat": "just text",
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ValidationFailed) as info:
        load_hipaa_definitions(path)
    text = str(info.value)
    assert f"{path}#NoContent: 'content' must be a non-empty string" in text
    assert f"{path}#Extra: unknown field(s) 'note'" in text
    assert f"{path}#Flat: expected {{content, source}}" in text
    assert len(info.value.problems) == 3


def test_flat_format_errors(tmp_path: Path) -> None:
    path = tmp_path / "flat.json"
    path.write_text(json.dumps({"ok": "fine", "bad": 3, "empty": " "}), encoding="utf-8")
    with pytest.raises(ValidationFailed) as info:
        load_flat_definitions(path, "gdpr")
    assert len(info.value.problems) == 2
    assert f"{path}#bad: the definition must be a non-empty string" in str(info.value)
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(ValidationFailed, match="expected a JSON object"):
        load_flat_definitions(path, "gdpr")
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ValidationFailed, match=r"flat\.json: invalid JSON at line 1"):
        load_flat_definitions(path, "gdpr")
    with pytest.raises(ValidationFailed, match="file not found"):
        load_flat_definitions(tmp_path / "absent.json", "gdpr")


def test_collisions_are_reported() -> None:
    defs = Definitions(
        "gdpr",
        [Definition("personal_data", "first"), Definition("Personal data", "second")],
    )
    assert defs["personal data"].text == "first"
    assert defs.report.collisions == {"personal data": ["personal_data", "Personal data"]}
    assert len(defs) == 2
