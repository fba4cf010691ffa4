"""Bounded YAML/JSON reading (`privacy_ci._structured`, issue 24): aliases refused,
nesting, integers and size bounded, each one clear error with its line, in the
library and through the CLI (no traceback, exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci._structured import (
    MAX_DEPTH,
    MAX_INPUT_BYTES_ENV,
    InputLimitError,
    JsonLimitError,
    YamlLimitError,
    load_json,
    load_yaml,
)
from privacy_ci.cases import load_case_file
from privacy_ci.cli.main import app
from privacy_ci.conductor import load_corpus
from privacy_ci.conductor._corpus import riverside_dir, starter_dir
from privacy_ci.errors import PrivacyCIError, ValidationFailed

runner = CliRunner()
DEEP = 100_000
HUGE = "1" * 5000


def billion_laughs(levels: int = 10) -> str:
    """Each level's list repeats the one above nine times: 9**levels strings if expanded."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


# -- YAML ---------------------------------------------------------------------------------
def test_an_alias_is_refused_naming_its_line() -> None:
    text = "a: &roles [Doctor, Nurse]\nb: 1\nc: *roles\n"
    with pytest.raises(YamlLimitError) as info:
        load_yaml(text)
    assert info.value.line == 3
    assert str(info.value).startswith("line 3: YAML alias *roles: aliases")
    assert isinstance(info.value, yaml.YAMLError)  # callers reporting YAML errors report it
    assert isinstance(info.value, PrivacyCIError)  # and the CLI's handler, if none does


def test_merge_keys_and_recursive_aliases_are_aliases_too() -> None:
    with pytest.raises(YamlLimitError, match="line 3: YAML alias \\*base"):
        load_yaml("base: &base {k: 1}\nover:\n  <<: *base\n")
    with pytest.raises(YamlLimitError, match="line 1: YAML alias \\*x"):
        load_yaml("a: &x [1, *x]\n")


def test_an_anchor_that_no_alias_repeats_is_harmless() -> None:
    assert load_yaml("a: &x [1, 2]\nb: 3\n") == {"a": [1, 2], "b": 3}


def test_pyyaml_dump_of_a_shared_value_is_explained() -> None:
    shared = ["Doctor"]
    text = yaml.safe_dump({"a": shared, "b": shared})
    assert "*id001" in text
    with pytest.raises(YamlLimitError, match=r"yaml\.dump wrote it for a value used twice"):
        load_yaml(text)


def test_a_billion_laughs_is_refused_before_it_expands() -> None:
    with pytest.raises(YamlLimitError) as info:
        load_yaml(billion_laughs())
    assert info.value.line == 2 and "YAML alias *l0" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "[" * DEEP + "]" * DEEP,  # flow
        "- " * DEEP + "x\n",  # block sequences
        "".join(" " * i + "a:\n" for i in range(2000)),  # block mappings
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),  # just past the bound
    ],
    ids=["flow", "block", "mappings", "bound+1"],
)
def test_deep_yaml_is_one_clear_error(text: str) -> None:
    with pytest.raises(YamlLimitError, match=f"nested more than {MAX_DEPTH} levels") as info:
        load_yaml(text)
    assert info.value.line is not None and str(info.value).startswith(f"line {info.value.line}: ")


def test_yaml_at_the_depth_bound_loads() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = load_yaml(text)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []


def test_a_huge_yaml_integer_is_one_clear_error() -> None:
    with pytest.raises(YamlLimitError) as info:
        load_yaml(f"a:\n  b: {HUGE}\n")
    assert str(info.value) == "line 2: an integer of 5,000 digits (at most 20 are read)"
    with pytest.raises(YamlLimitError, match="line 1: an integer of 5,000 digits"):
        load_yaml(f"? {HUGE}\n: key\n")  # as a key too
    assert load_yaml("a: 18446744073709551615\n") == {"a": 2**64 - 1}  # 20 digits: read
    assert load_yaml(f"a: '{HUGE}'\n") == {"a": HUGE}  # a string of digits is a string


def test_a_text_over_the_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "100")
    with pytest.raises(YamlLimitError, match="the text is 201 characters, over the limit of 100"):
        load_yaml("a: " + "x" * 197 + "\n")
    with pytest.raises(JsonLimitError, match=MAX_INPUT_BYTES_ENV):
        load_json(json.dumps(["x" * 200]))
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "lots")
    with pytest.raises(PrivacyCIError, match="expected a positive whole number of bytes"):
        load_yaml("a: 1\n")


# -- JSON ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "[" * DEEP + "]" * DEEP,
        '{"a":' * DEEP + "1" + "}" * DEEP,
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),  # parses, then refused
        '{"a": 1, "a": 2, "b": ' + "[" * 100 + "]" * 100 + "}",  # deep and a duplicate
    ],
    ids=["arrays", "objects", "bound+1", "with-a-duplicate"],
)
def test_deep_json_is_one_clear_error(text: str) -> None:
    with pytest.raises(JsonLimitError, match=f"nested more than {MAX_DEPTH} levels") as info:
        load_json(text)
    assert isinstance(info.value, json.JSONDecodeError) and info.value.lineno == 1


def test_json_at_the_depth_bound_loads() -> None:
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_a_huge_json_integer_is_one_clear_error() -> None:
    with pytest.raises(JsonLimitError) as info:
        load_json('{"a": "1",\n "b": [1, -' + HUGE + "]}")
    assert str(info.value) == "line 2: an integer of 5,000 digits (at most 20 are read)"
    assert (info.value.msg, info.value.lineno) == (info.value.problem, 2)
    # a string of digits, and a long float, are no integers
    assert load_json(json.dumps({"s": HUGE}))["s"] == HUGE
    assert load_json("[1." + "0" * 5000 + "]") == [1.0]


def test_limit_errors_are_one_family() -> None:
    for exc in (YamlLimitError("x", 2), JsonLimitError("x", "[\n1]", 3)):
        assert isinstance(exc, InputLimitError) and isinstance(exc, ValueError)
        assert str(exc) == "line 2: x"


# -- user files and the CLI ---------------------------------------------------------------
def test_case_files_deep_or_huge(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * DEEP + "]" * DEEP + "\n", encoding="utf-8")
    with pytest.raises(ValidationFailed, match=r"deep\.jsonl line 1: values nested more than"):
        load_case_file(deep)
    whole = tmp_path / "deep.json"
    whole.write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    with pytest.raises(ValidationFailed, match="nested more than"):
        load_case_file(whole)
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"text": "a chart was faxed", "n": ' + HUGE + "}\n", encoding="utf-8")
    with pytest.raises(ValidationFailed, match="line 1: an integer of 5,000 digits"):
        load_case_file(huge)


def labelled_corpus(tmp_path: Path, labels: str, name: str = "labels.yaml") -> Path:
    folder = tmp_path / "corpus"
    shutil.copytree(starter_dir(), folder)
    (folder / "labels.yaml").unlink()
    (folder / name).write_text(labels, encoding="utf-8")
    return folder


def validate_error(folder: Path) -> str:
    res = runner.invoke(app, ["conductor", "validate", str(folder)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stderr.startswith("error: "), res.output
    assert "valid:" not in res.output
    return " ".join(res.stderr.split())


LABEL = """\
- doc_id: EX-HANDBOOK
  title: Staff handbook
  document_type: policy document
  sensitivity_tier: internal
  permitted_receiver_roles: {acl}
  subject: null
  subject_type: organization
  extra_sensitive: false
  extra_sensitive_reason: null
  governing_principle: 'operations: every member of staff follows the handbook'
  originating_context: Internal
  pii_attributes: {pii}
  implied_attributes: []
  assignment_required: false
"""


def test_validate_refuses_an_alias_bomb_in_the_acl(tmp_path: Path) -> None:
    bomb = billion_laughs().replace("\n", "\n  ").rstrip()
    text = "bombs:\n  " + bomb + "\ndocuments:\n" + LABEL.format(acl="*l9", pii="[]")
    folder = labelled_corpus(tmp_path, text)
    message = validate_error(folder)
    assert message == f"error: {folder / 'labels.yaml'}: line 3: YAML alias *l0: aliases" + (
        " (*name, and merges <<: *name) are not allowed; write the value out in full"
    )


def test_validate_refuses_pii_attributes_by_alias(tmp_path: Path) -> None:
    text = "documents:\n" + LABEL.format(acl="[Employee]", pii="&p [name, email]")
    text += LABEL.replace("EX-HANDBOOK", "EX-REVIEW-E01").format(acl="[Employee]", pii="*p")
    message = validate_error(labelled_corpus(tmp_path, text))
    assert "labels.yaml: line 27: YAML alias *p" in message


def test_validate_refuses_a_deep_labels_json(tmp_path: Path) -> None:
    folder = labelled_corpus(tmp_path, "[" * DEEP + "]" * DEEP, "labels.json")
    message = validate_error(folder)
    assert message == (
        f"error: {folder / 'labels.json'}: line 1: values nested more than {MAX_DEPTH}"
        " levels deep (the most privacy-ci reads)"
    )


def test_validate_refuses_a_huge_integer_in_labels(tmp_path: Path) -> None:
    text = "documents:\n" + LABEL.format(acl="[Employee]", pii="[]").replace(
        "extra_sensitive: false", f"extra_sensitive: {HUGE}"
    )
    message = validate_error(labelled_corpus(tmp_path, text))
    assert "labels.yaml: line 9: an integer of 5,000 digits (at most 20 are read)" in message


def test_validate_refuses_a_huge_policy_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = labelled_corpus(tmp_path, "documents: []\n")
    size = (folder / "policy.yaml").stat().st_size
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "200")
    message = validate_error(folder)
    assert f"policy.yaml: {size:,} bytes, over the limit of 200 bytes" in message


def test_the_packaged_files_use_no_aliases_and_load() -> None:
    # the bounds hold the packaged corpus, the starter and the reasoner's fact models,
    # law books and reading guides
    assert len(load_corpus().labels) > 100
    load_corpus(starter_dir())
    reasoning = Path(riverside_dir()).parents[2] / "reasoning"
    books = [
        p for folder in ("facts", "law", "reading") for p in (reasoning / folder).glob("*.yaml")
    ]
    assert len(books) >= 3
    for path in [*books, *Path(riverside_dir()).rglob("*.yaml")]:
        load_yaml(path.read_text(encoding="utf-8"))


def test_retrieve_with_a_deep_memory_file(shared_data: Path, tmp_path: Path) -> None:
    memory = tmp_path / "deep.jsonl"
    memory.write_text("[" * DEEP + "]" * DEEP + "\n", encoding="utf-8")
    res = runner.invoke(
        app,
        ["retrieve", "-r", "cases", "--memory", str(memory), "a nurse faxed a chart"],
        env={"PRIVACY_CI_DATA": str(shared_data), "PRIVACY_CI_CACHE": str(tmp_path)},
    )
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stderr.startswith("error: ")
    assert "deep.jsonl line 1: values nested more than 64 levels deep" in res.stderr
