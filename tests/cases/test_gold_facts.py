"""Gold facts and pair ids in case files, and the packaged datasets that carry them.

The packaged sets are loaded and counted here, never scored: the held-out ones
must not be used to tune anything.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cases import (
    DATASET_NAMES,
    PACKAGED_DATASETS,
    Case,
    GoldFacts,
    Task,
    UnknownDataset,
    list_datasets,
    load_case_file,
    load_dataset,
    packaged_path,
    read_case_file,
)
from privacy_ci.ci import Verdict
from privacy_ci.cli.main import app
from privacy_ci.errors import ValidationFailed
from privacy_ci.reasoning import load_fact_schema

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    "pairs-dev": "hipaa-pairs-dev.jsonl",
    "pairs-validation": "hipaa-pairs-validation.jsonl",
    "pairs-heldout": "hipaa-pairs-heldout.jsonl",
    "cases-heldout": "hipaa-cases-heldout.jsonl",
}
CASE = {"context": "A clinic mailed a patient's chart to a lawyer.", "label": "permit"}


def _write(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


# ---------------------------------------------------------------------------------
# the packaged datasets
# ---------------------------------------------------------------------------------
def test_the_packaged_datasets_are_listed_with_honest_descriptions() -> None:
    listed = list_datasets()
    assert tuple(FILES) == PACKAGED_DATASETS
    assert set(PACKAGED_DATASETS) <= set(listed) and set(PACKAGED_DATASETS) <= set(DATASET_NAMES)
    for name in ("pairs-dev", "pairs-validation"):  # development data
        assert "for development" in listed[name] and "blind" not in listed[name]
    assert "tuned on" in listed["pairs-dev"] and "not held out" in listed["pairs-validation"]
    for name in ("pairs-heldout", "cases-heldout"):
        assert "blind" in listed[name] and "never tuned on" in listed[name]
    assert all("HIPAA" in listed[n] and "gold facts" in listed[n] for n in PACKAGED_DATASETS)


def test_data_datasets_lists_them() -> None:
    result = CliRunner().invoke(app, ["data", "datasets", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert all(name in shown for name in PACKAGED_DATASETS)


def test_they_ship_in_the_package() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["privacy_ci"]
    assert "**/*.jsonl" in package_data
    for name, file in FILES.items():
        path = packaged_path(name)
        assert path.name == file and path.is_file()
        assert path.parent.name == "packaged" and path.parent.parent.name == "cases"
    with pytest.raises(UnknownDataset, match="pairs-dev"):
        packaged_path("real")


@pytest.mark.parametrize("name", list(FILES))
def test_each_loads_without_the_data_directory(name: str, tmp_path: Path) -> None:
    dataset = load_dataset(name, tmp_path)  # an empty data directory: nothing needed there
    assert dataset.name == name and len(dataset) > 0
    protocol = dataset.protocol
    assert protocol.name == name and protocol.regulation == "hipaa"
    assert protocol.task is Task.THREE_WAY and protocol.subset == ""
    assert protocol.source == f"privacy_ci/cases/packaged/{FILES[name]}"
    assert len(protocol.sha256) == 64 and protocol.sha256 == dataset.sha256
    schema = load_fact_schema("hipaa")
    for case in dataset:
        assert case.dataset == name and case.regulation == "hipaa"
        assert isinstance(case.gold_facts, GoldFacts) and case.gold_facts
        assert all(k in schema for k in case.gold_facts)
        assert "facts" not in case.extra.get("metadata", {})
        assert "pair_id" not in case.extra.get("metadata", {})
    ids = [c.id for c in dataset]
    assert len(set(ids)) == len(ids)
    if name.startswith("pairs-"):
        sizes = Counter(c.pair_id for c in dataset)
        assert None not in sizes and set(sizes.values()) == {2}
        for pair in sizes:  # the two members of a pair differ in their labels
            labels = {c.label for c in dataset if c.pair_id == pair}
            assert len(labels) == 2, pair
        assert all("deciding_fact" in c.extra["metadata"] for c in dataset)
    else:
        assert all(c.pair_id is None for c in dataset)


@pytest.mark.parametrize("name", ["pairs-dev", "pairs-validation"])
def test_law_from_gold_facts_is_exact_on_the_development_pairs(name: str) -> None:
    """The issue's target for the pairs written for development (never the held-out sets)."""
    from privacy_ci.evaluation import law_from_gold

    dataset = load_dataset(name)
    scored = law_from_gold(dataset.cases, dataset.protocol)
    assert scored is not None
    assert scored["wrong"] == [] and scored["accuracy"] == 1.0 and scored["n"] == len(dataset)


# ---------------------------------------------------------------------------------
# gold facts and pair ids in a user's case file
# ---------------------------------------------------------------------------------
def test_gold_facts_and_pair_ids_are_first_class(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mine.jsonl",
        {**CASE, "facts": {"holder": "covered_entity", "authorization": "valid"}, "pair_id": 7},
        {**CASE, "label": "prohibit", "facts": {"authorization": "absent"}, "pair_id": "7"},
        {**CASE, "facts": {}, "note": "kept"},
        CASE,
    )
    dataset = load_case_file(path)
    first, second, third, fourth = dataset.cases
    assert first.gold_facts == {"holder": "covered_entity", "authorization": "valid"}
    assert isinstance(first.gold_facts, GoldFacts)
    assert first.pair_id == second.pair_id == "7"
    assert second.label is Verdict.PROHIBIT
    assert third.gold_facts == {} and third.gold_facts is not None and third.pair_id is None
    assert fourth.gold_facts is None and fourth.pair_id is None
    assert third.extra["metadata"] == {"note": "kept"}
    assert "metadata" not in first.extra  # facts and pair_id are not metadata
    assert first.to_dict()["gold_facts"] == {"holder": "covered_entity", "authorization": "valid"}
    assert first.to_dict()["pair_id"] == "7"
    assert "gold_facts" not in fourth.to_dict() and "pair_id" not in fourth.to_dict()
    assert any("carry gold facts" in n for n in dataset.report.notes)
    assert any("1 pair id" in n for n in dataset.report.notes)
    entries = read_case_file(path)
    assert entries[0].facts == first.gold_facts and entries[1].pair_id == "7"
    named = load_case_file(path, name="mine-too")
    assert named.name == "mine-too" and named.cases[0].dataset == "mine-too"
    assert named.cases[3].id == "mine-too-0003"


def test_gold_facts_are_immutable_and_hashable() -> None:
    facts = GoldFacts({"holder": "covered_entity"})
    assert facts == GoldFacts([("holder", "covered_entity")])
    assert hash(facts) == hash(GoldFacts({"holder": "covered_entity"}))
    assert dict(facts) == {"holder": "covered_entity"} and len(facts) == 1
    with pytest.raises(TypeError):
        facts["holder"] = "other"  # type: ignore[index]
    case = load_dataset("pairs-dev").cases[0]
    assert isinstance(hash(case), int)  # a Case stays hashable
    assert isinstance(case, Case)


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"holdr": "covered_entity"}, "field 'facts': unknown fact 'holdr'"),
        (
            {"authorization": "signed"},
            "field 'facts': fact 'authorization': unknown value 'signed'; expected one of",
        ),
        (["holder"], "field 'facts': expected an object of fact -> value, found a list"),
        ({"holder": 3}, "field 'facts': fact 'holder': expected a value name (a string), found"),
        (
            {"holder": ""},
            "field 'facts': fact 'holder': expected a value name (a string), found an",
        ),
    ],
)
def test_bad_gold_facts_name_the_file_line_and_key(
    tmp_path: Path, facts: Any, expected: str
) -> None:
    path = _write(tmp_path / "bad.jsonl", CASE, {**CASE, "facts": facts})
    for load in (load_case_file, read_case_file):
        with pytest.raises(ValidationFailed) as info:
            load(path)
        message = str(info.value)
        assert f"{path} line 2: {expected}" in message, message
        assert "line 1" not in message


def test_every_bad_fact_of_a_file_is_listed(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.jsonl",
        {**CASE, "facts": {"holdr": "x"}},
        {**CASE, "facts": {"authorization": "signed"}, "pair_id": True},
    )
    with pytest.raises(ValidationFailed) as info:
        load_case_file(path)
    message = str(info.value)
    assert "line 1: field 'facts': unknown fact 'holdr'" in message
    assert "line 2: field 'pair_id': expected a non-empty string or an integer" in message
    assert "line 2: field 'facts': fact 'authorization': unknown value 'signed'" in message


def test_gold_facts_need_the_regulations_fact_model(tmp_path: Path) -> None:
    path = _write(tmp_path / "gdpr.jsonl", {**CASE, "facts": {"holder": "covered_entity"}})
    with pytest.raises(ValidationFailed, match="line 1: field 'facts': gold facts need a fact"):
        load_case_file(path, regulation="gdpr")
    as_written = _write(tmp_path / "own.jsonl", {**CASE, "regulation": "gdpr", "facts": {}})
    with pytest.raises(ValidationFailed, match="no fact model for regulation 'gdpr'"):
        read_case_file(as_written)
    unknown = _write(tmp_path / "foo.jsonl", {**CASE, "regulation": "foo", "facts": {"x": "y"}})
    with pytest.raises(ValidationFailed) as info:
        read_case_file(unknown)
    assert "'foo' is not a registered regulation" in str(info.value)
    assert "field 'facts'" not in str(info.value)  # one problem, not two


def test_eval_refuses_bad_gold_facts_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", {**CASE, "facts": {"authorization": "signed"}})
    result = CliRunner().invoke(app, ["eval", "-m", "ci-reasoner", "--dataset", str(path)])
    assert result.exit_code == 2
    assert "line 1: field 'facts': fact 'authorization': unknown value 'signed'" in " ".join(
        result.output.split()
    )
    assert "Traceback" not in result.output
