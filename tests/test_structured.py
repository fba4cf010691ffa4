"""Strict YAML/JSON reading (`privacy_ci._structured`): a key given twice is an error,
in every user file the project reads (corpus files: tests/conductor/test_duplicate_keys.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from privacy_ci._structured import DuplicateKeyError, load_json, load_yaml
from privacy_ci.cases import load_dataset
from privacy_ci.cli.judge import load_case_file
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.knowledge import load_flat_definitions


def where_and_lines(exc: DuplicateKeyError) -> list[tuple[str, object, int, int]]:
    return [(d.where, d.key, d.line, d.first_line) for d in exc.duplicates]


# -- YAML ---------------------------------------------------------------------------------
def test_yaml_duplicate_in_a_document_names_doc_id_key_and_lines() -> None:
    text = (
        "documents:\n"  # 1
        "- doc_id: A\n"  # 2
        "  permitted_receiver_roles: [Doctor]\n"  # 3
        "  title: x\n"  # 4
        "  permitted_receiver_roles: [Doctor, HR Manager]\n"  # 5
    )
    # what plain PyYAML does: the last key silently wins
    assert yaml.safe_load(text)["documents"][0]["permitted_receiver_roles"] == [
        "Doctor",
        "HR Manager",
    ]
    with pytest.raises(DuplicateKeyError) as info:
        load_yaml(text)
    assert where_and_lines(info.value) == [("document 'A'", "permitted_receiver_roles", 5, 3)]
    assert str(info.value) == (
        "document 'A': duplicate key 'permitted_receiver_roles' at line 5 (first at line 3)"
    )


def test_yaml_nested_and_several_duplicates_in_file_order() -> None:
    text = (
        "tiers:\n"  # 1
        "  financial:\n"  # 2
        "    assignment_required: false\n"  # 3
        "    assignment_required: true\n"  # 4
        "agents:\n"  # 5
        "- id: D01\n"  # 6
        "  role: Doctor\n"  # 7
        "  extra: {a: 1, a: 2}\n"  # 8
        "- {id: N01, role: Nurse, role: Doctor}\n"  # 9
        "name: one\n"  # 10
        "name: two\n"  # 11
    )
    with pytest.raises(DuplicateKeyError) as info:
        load_yaml(text)
    assert where_and_lines(info.value) == [
        ("tiers.financial", "assignment_required", 4, 3),
        ("agents[0] (id 'D01'), in extra", "a", 8, 8),
        ("agents[1] (id 'N01')", "role", 9, 9),
        ("top level", "name", 11, 10),
    ]
    assert "duplicate key 'a' at line 8 (twice on that line)" in str(info.value)


def test_yaml_keys_compare_by_value_as_the_mapping_would() -> None:
    # YAML 1.1: yes and true are the same key; 1 and "1" are not
    with pytest.raises(DuplicateKeyError, match=r"top level: duplicate key 'true' at line 2"):
        load_yaml("yes: 1\ntrue: 2\n")
    assert load_yaml("1: a\n'1': b\n") == {1: "a", "1": "b"}


def test_yaml_without_duplicates_loads_as_safe_load() -> None:
    text = (
        "base: &b {k: 1, j: 2}\n"  # an anchor no alias repeats is harmless
        "over:\n  <<: {k: 1, j: 2}\n  k: 3\n"  # a merge key may be overridden: YAML means it
        "when: 2024-01-02\n"
        "empty:\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["over"] == {"k": 3, "j": 2}
    assert load_yaml("") is None


def test_yaml_loader_stays_safe_and_refuses_aliases() -> None:
    # aliases, merges of an alias and recursive aliases: see tests/test_structured_bounds.py
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(yaml.YAMLError, match="line 1: YAML alias \\*x"):
        load_yaml("a: &x [1, *x]\n")


# -- JSON ---------------------------------------------------------------------------------
def test_json_duplicates_name_entry_key_and_lines() -> None:
    text = (
        "{\n"  # 1
        '  "documents": [\n'  # 2
        '    {"doc_id": "A",\n'  # 3
        '     "permitted_receiver_roles": ["Doctor"],\n'  # 4
        '     "permitted_receiver_roles": ["HR Manager"]},\n'  # 5
        '    {"id": "D1", "x": {"a": 1, "a": 2}}\n'  # 6
        "  ],\n"  # 7
        '  "top": 1, "top": 2\n'  # 8
        "}\n"
    )
    assert json.loads(text)["top"] == 2  # what plain json does
    with pytest.raises(DuplicateKeyError) as info:
        load_json(text)
    assert where_and_lines(info.value) == [
        ("document 'A'", "permitted_receiver_roles", 5, 4),
        ("documents[1] (id 'D1'), in x", "a", 6, 6),
        ("top level", "top", 8, 8),
    ]


def test_json_escaped_key_is_the_same_key() -> None:
    with pytest.raises(DuplicateKeyError, match=r"top level: duplicate key 'a' at line 2"):
        load_json('{"\\u0061": 1,\n "a": 2}')


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, 2.5, -3e2, true, null, "s\\"q", {"b": {}}], "c": [], "d": "\\u00e9"}',
        ' [ 1 , [ ] , { } , {"a": NaN} ] ',
        '"just a string"',
    ],
)
def test_json_without_duplicates_loads_as_json_loads(text: str) -> None:
    assert repr(load_json(text)) == repr(json.loads(text))


def test_json_syntax_errors_are_unchanged() -> None:
    with pytest.raises(json.JSONDecodeError):
        load_json('{"a": 1,}')


# -- the other user files -----------------------------------------------------------------
def test_case_file_with_a_duplicate_key(tmp_path: Path) -> None:
    case = tmp_path / "case.json"
    case.write_text(
        '{"text": "A nurse faxed a chart.",\n "purpose": "treatment",\n "purpose": "marketing"}',
        encoding="utf-8",
    )
    with pytest.raises(PrivacyCIError) as info:
        load_case_file(case)
    assert str(info.value) == (
        f"--case {case}: duplicate key 'purpose' at line 3 (first at line 2)"
    )


def test_goldcoin_dataset_with_a_duplicate_key(tmp_path: Path) -> None:
    entry = (
        '{"refer_ids": ["164.502"], "sender": "s", "subject": "p", "recipient": "r",\n'
        ' "norm_type": "positive_norm", "context": "first text", "information_type": "i",\n'
        ' "purpose": "p", "context": "second text"}'
    )
    source = tmp_path / "cases" / "goldcoin" / "real.json"
    source.parent.mkdir(parents=True)
    source.write_text(f"[{entry}]", encoding="utf-8")
    with pytest.raises(ValidationFailed) as info:
        load_dataset("real", tmp_path, resolve_gold=False)
    assert info.value.problems == [
        f"{source}: [0]: duplicate key 'context' at line 3 (first at line 2)"
    ]


def test_privaci_dataset_with_a_duplicate_key(tmp_path: Path) -> None:
    source = tmp_path / "cases" / "privaci_bench" / "hipaa.jsonl"
    source.parent.mkdir(parents=True)
    source.write_text('{"norm_type": "permit", "norm_type": "prohibit"}\n', encoding="utf-8")
    with pytest.raises(ValidationFailed) as info:
        load_dataset("privaci-hipaa", tmp_path, resolve_gold=False)
    assert f"{source}: line 1: duplicate key 'norm_type'" in info.value.problems


def test_definitions_with_a_duplicate_term(tmp_path: Path) -> None:
    path = tmp_path / "gdpr.json"
    path.write_text(
        '{\n  "processing": "Any operation.",\n  "processing": "Something else."\n}',
        encoding="utf-8",
    )
    with pytest.raises(ValidationFailed) as info:
        load_flat_definitions(path, "gdpr")
    assert info.value.problems == [
        f"{path}: top level: duplicate key 'processing' at line 3 (first at line 2)"
    ]
