"""Norms: vocabulary normalisation, both KB loaders, validation and the real files."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.errors import ValidationFailed
from privacy_ci.knowledge import (
    CHECKLIST_FIELDS,
    PRIVACI_FIELDS,
    STRICT_DEFAULTS,
    Norm,
    NormalisationReport,
    NormType,
    Reference,
    ReferenceKind,
    Ternary,
    alias_resolver,
    clean_text,
    exact_resolver,
    is_placeholder,
    load_checklist_kb,
    load_privaci_kb,
    normalise_consent_form,
    normalise_list,
    normalise_norm_type,
    normalise_reference_kind,
    normalise_scalar,
    normalise_ternary,
)
from privacy_ci.regulations import (
    RegulationTree,
    TreeBuilder,
    load_hipaa_graphml,
    load_privaci_law_tree,
)

# ---------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_tree() -> RegulationTree:
    """HIPAA -> 164.502 -> (a), (b); 164.506; a stub; definition-style ids."""
    b = TreeBuilder("hipaa", "HIPAA", "small")
    b.add("164.502", "HIPAA", "§ 164.502 Uses and disclosures.")
    b.add("164.502(a)", "164.502", "(a) Standard.")
    b.add("164.502(b)", "164.502", "(b) Minimum necessary.")
    b.add("164.506", "HIPAA", "§ 164.506 Treatment.")
    b.add("160.103(Business%20associate)(1)(i)", "HIPAA", "Business associate (1)(i)")
    b.add("164.504(a)Planadministrationfunctions", "HIPAA", "Plan administration functions")
    b.add("45 CFR 164.512", None, "")
    return b.build()


def _checklist_entry(node_id: str, **over: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "text": f"\n§ text of {node_id} ",
        "node_index": node_id,
        "refer_list": [],
        "norm_type": "positive_norm",
        "sender": ["cover entity"],
        "recipient": ["none"],
        "subject": ["individual"],
        "sender_role": "Health Care Provider ",
        "recipient_role": "none",
        "subject_role": "patient;",
        "information_type": "protected health information",
        "consent_form": "none;",
        "purpose": "treatment.",
        "sender_is_subject": "no",
        "recipient_is_subject": "not sure",
    }
    entry.update(over)
    return entry


def _privaci_line(node_id: str, *, plain_id: bool = False, **over: Any) -> str:
    values: dict[str, Any] = {
        "norm_type": "Permit",
        "sender": ["cover entity"],
        "sender_role": ["Health Care Provider"],
        "recipient": [],
        "recipient_role": [],
        "subject": ["individual"],
        "subject_role": ["patient"],
        "information_type": ["protected health information"],
        "consent_form": "",
        "purpose": ["treatment"],
        "sender_is_subject": "NO",
        "recipient_is_subject": "Not Sure",
        "regulation_id": node_id,
        "regulation_content": f"text of {node_id}",
        "reference": {},
    }
    values.update(over)
    row = {k: json.dumps(v) for k, v in values.items()}
    if plain_id:
        row["regulation_id"] = node_id
    return json.dumps(row)


def _write_json(tmp_path: Path, data: Any, name: str = "kb.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _write_lines(tmp_path: Path, lines: list[str], name: str = "kb.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hipaa_tree(shared_data: Path) -> RegulationTree:
    tree, _ = load_hipaa_graphml(shared_data / "hipaa/regulation_tree_goldcoin.graphml")
    return tree


@pytest.fixture(scope="module")
def checklist(shared_data: Path, hipaa_tree: RegulationTree) -> tuple[list[Norm], Any]:
    return load_checklist_kb(shared_data / "hipaa/kb_annotated.json", hipaa_tree)


@pytest.fixture(scope="module")
def privaci_hipaa(shared_data: Path, hipaa_tree: RegulationTree) -> tuple[list[Norm], Any]:
    return load_privaci_kb(shared_data / "kb/privaci_bench/hipaa.jsonl", "hipaa", hipaa_tree)


@pytest.fixture(scope="module")
def gdpr_tree(shared_data: Path) -> RegulationTree:
    return load_privaci_law_tree(shared_data / "law_trees/gdpr.graphml", "gdpr")[0]


@pytest.fixture(scope="module")
def ai_act_tree(shared_data: Path) -> RegulationTree:
    return load_privaci_law_tree(shared_data / "law_trees/ai_act.graphml", "ai_act")[0]


# ---------------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Health  Care Provider ", "health care provider"),
        ("patient;", "patient"),
        ("research.", "research"),
        ("none;", "none"),
        ("X;.", "x"),
        ("", ""),
    ],
)
def test_clean_text(raw: str, expected: str) -> None:
    assert clean_text(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "none",
        "none;",
        "None",
        "NULL",
        "null",
        "not sure",
        "N/A",
        "",
        "  ",
        "not specified",
        "none>.",
    ],
)
def test_placeholders(raw: str) -> None:
    assert is_placeholder(clean_text(raw))
    report = NormalisationReport()
    assert normalise_scalar("purpose", raw, "id", report) is None
    assert report.total_normalised == 1
    assert not report.unnormalised


def test_not_placeholders() -> None:
    for raw in ("nonetheless", "nurse", "notice", "no"):
        assert not is_placeholder(clean_text(raw))


def test_list_normalisation_drops_placeholders_and_duplicates() -> None:
    report = NormalisationReport()
    out = normalise_list("sender", ["none", "Cover Entity", "cover entity ", None, 3], "x", report)
    assert out == ("cover entity",)
    assert report.rule_counts("sender")["placeholder 'none' -> None"] == 1
    assert report.rule_counts("sender")["duplicate removed"] == 1
    assert report.rule_counts("sender")["null -> None"] == 1
    # a non-string element is not dropped silently: it is listed
    (bad,) = report.unnormalised_values("sender")
    assert (bad.value, bad.count, bad.example_ids) == ("3", 1, ["x"])


def test_scalar_from_list_joins_and_counts() -> None:
    report = NormalisationReport()
    assert normalise_scalar("sender_role", [], "x", report) is None
    assert normalise_scalar("sender_role", ["Controller"], "x", report) == "controller"
    assert normalise_scalar("sender_role", ["A", "B"], "x", report) == "a; b"
    assert report.rule_counts("sender_role")["several values joined with '; '"] == 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("yes", Ternary.YES),
        ("YES", Ternary.YES),
        ("no", Ternary.NO),
        ("NO", Ternary.NO),
        ("No", Ternary.NO),
        ("not sure", Ternary.UNSURE),
        ("Not Sure", Ternary.UNSURE),
    ],
)
def test_ternaries(raw: str, expected: Ternary) -> None:
    report = NormalisationReport()
    assert normalise_ternary("sender_is_subject", raw, "x", report) is expected
    assert not report.unnormalised


def test_unknown_ternary_is_listed_not_dropped() -> None:
    report = NormalisationReport()
    for eid in ("a", "b"):
        assert normalise_ternary("sender_is_subject", "perhaps", eid, report) is Ternary.UNSURE
    (item,) = report.unnormalised_values()
    assert (item.field, item.value, item.count, item.example_ids) == (
        "sender_is_subject",
        "perhaps",
        2,
        ["a", "b"],
    )
    assert item.action == "set to unsure"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("none", None),
        ("none;", None),
        ("None", None),
        ("", None),
        (None, None),
        ("none (consent determined by the contract)", None),
        ("authorization", "authorization"),
        ("Authorization", "authorization"),
        ("authorization under § 164.508", "authorization"),
        ("authorization (§ 164.508(a)(4))", "authorization"),
        ("waiver;", "waiver of authorization"),
        ("waiver of authorization (approved by irb)", "waiver of authorization"),
        ("satisfactory assurances", "satisfactory assurance"),
        ("oral agreement or objection", "opportunity to agree or object"),
        ("data use agreement", "data use agreement"),
        ("Consent", "consent"),
    ],
)
def test_consent_forms(raw: str | None, expected: str | None) -> None:
    report = NormalisationReport()
    assert normalise_consent_form(raw, "x", report) == expected
    assert not report.unnormalised


def test_unknown_consent_form_is_kept_and_listed() -> None:
    report = NormalisationReport()
    assert normalise_consent_form("Opt-out", "164.520(x)", report) == "opt-out"
    (item,) = report.unnormalised_values("consent_form")
    assert (item.value, item.count, item.example_ids) == ("opt-out", 1, ["164.520(x)"])


def test_norm_type_and_reference_kind_spellings() -> None:
    assert normalise_norm_type("positive_norm") is NormType.POSITIVE
    assert normalise_norm_type("Permit") is NormType.POSITIVE
    assert normalise_norm_type("negative_norm") is NormType.NEGATIVE
    assert normalise_norm_type("Prohibit") is NormType.NEGATIVE
    assert normalise_norm_type("General Definition") is NormType.GENERAL_DEFINITION
    assert normalise_norm_type("general_definition") is NormType.GENERAL_DEFINITION
    assert normalise_norm_type("maybe") is None
    assert normalise_norm_type(3) is None
    assert normalise_reference_kind("Support") is ReferenceKind.SUPPORT
    assert normalise_reference_kind("exception") is ReferenceKind.EXCEPTION
    assert normalise_reference_kind("None") is None
    assert normalise_reference_kind(None) is None
    with pytest.raises(ValueError, match="unknown reference label 'contradicts'"):
        normalise_reference_kind("contradicts")
    with pytest.raises(ValueError):
        normalise_reference_kind(3)


def test_report_merge_and_summary() -> None:
    a, b = NormalisationReport("a"), NormalisationReport("b")
    a.note("purpose", "lowercased")
    b.note("purpose", "lowercased", 2)
    b.unrecognised("consent_form", "choice", "n1", "kept as free text")
    a.merge(b)
    assert a.rule_counts() == {"purpose: lowercased": 3}
    assert a.total_unnormalised == 1
    assert "consent_form='choice'" in a.summary()


# ---------------------------------------------------------------------------------
# checklist loader on small files
# ---------------------------------------------------------------------------------


def test_checklist_loads_and_normalises(tmp_path: Path, small_tree: RegulationTree) -> None:
    path = _write_json(
        tmp_path,
        {
            "164.502(a)": _checklist_entry(
                "164.502(a)", refer_list={"164.506": "support", "164.502(b)": "exception"}
            ),
            "164.502(b)": _checklist_entry("164.502(b)", norm_type="general_definition"),
        },
    )
    norms, report = load_checklist_kb(path, small_tree)
    assert [n.id for n in norms] == ["164.502(a)", "164.502(b)"]
    n = norms[0]
    assert n.norm_type is NormType.POSITIVE and n.is_norm
    assert n.text == "§ text of 164.502(a)"
    assert (n.sender, n.recipient, n.subject) == (("cover entity",), (), ("individual",))
    assert n.sender_role == "health care provider"
    assert n.recipient_role is None
    assert n.subject_role == "patient"
    assert n.consent_form is None
    assert n.purpose == "treatment"
    assert (n.sender_is_subject, n.recipient_is_subject) == (Ternary.NO, Ternary.UNSURE)
    assert n.references == (
        Reference("164.506", ReferenceKind.SUPPORT),
        Reference("164.502(b)", ReferenceKind.EXCEPTION),
    )
    assert n.reference_ids(ReferenceKind.EXCEPTION) == ("164.502(b)",)
    assert n.origin.endswith("kb.json#164.502(a)")
    assert n.raw["consent_form"] == "none;"
    assert norms[1].norm_type is NormType.GENERAL_DEFINITION and not norms[1].is_norm
    assert report.loaded == report.entries == 2 and report.strict
    rules = report.normalisation.rule_counts("consent_form")
    assert rules["placeholder 'none;' -> None"] == 2


def test_checklist_collects_every_problem(tmp_path: Path, small_tree: RegulationTree) -> None:
    bad_unknown = _checklist_entry("164.502(a)", colour="blue")
    bad_missing = _checklist_entry("164.502(b)")
    del bad_missing["purpose"]
    path = _write_json(
        tmp_path,
        {
            "164.502(a)": bad_unknown,
            "164.502(b)": bad_missing,
            "164.999(z)": _checklist_entry("164.999(z)"),
            "164.506": _checklist_entry("164.506", norm_type="permitted_norm"),
            "45 CFR 164.512": _checklist_entry("45 CFR 164.512"),
            "HIPAA": _checklist_entry("HIPAA", refer_list={"nowhere": "support"}),
        },
    )
    with pytest.raises(ValidationFailed) as info:
        load_checklist_kb(path, small_tree)
    text = str(info.value)
    problems = info.value.problems
    assert all(str(path) in p for p in problems)
    assert "#164.502(a): unknown field(s) 'colour'" in text
    assert "#164.502(b): missing field(s) 'purpose'" in text
    assert "#164.999(z): node '164.999(z)' is not in the hipaa tree" in text
    assert "#164.506: unknown norm_type 'permitted_norm'" in text
    assert "#45 CFR 164.512: node '45 CFR 164.512' is a stub" in text
    assert "#HIPAA: reference 'nowhere': target is not in the hipaa tree" in text
    assert len(problems) == 6


def test_checklist_lenient_skips_into_report(tmp_path: Path, small_tree: RegulationTree) -> None:
    path = _write_json(
        tmp_path,
        {
            "164.502(a)": _checklist_entry("164.502(a)", colour="blue"),
            "164.502(b)": _checklist_entry("164.502(b)", refer_list={"nowhere": "support"}),
            "164.506": _checklist_entry("164.506"),
        },
    )
    norms, report = load_checklist_kb(path, small_tree, strict=False)
    assert [n.id for n in norms] == ["164.502(b)", "164.506"]
    assert norms[0].references == ()
    (skipped,) = report.skipped
    assert skipped.entry_id == "164.502(a)" and "unknown field" in skipped.problems[0]
    (dropped,) = report.dropped_references
    assert (dropped.norm_id, dropped.target) == ("164.502(b)", "nowhere")
    assert (report.entries, report.loaded) == (3, 2)
    assert "1 entr(y/ies) skipped" in report.summary()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"sender": "cover entity"}, "field 'sender': expected a list of strings"),
        ({"sender_role": ["a"]}, "field 'sender_role': expected a string"),
        ({"refer_list": ["164.506"]}, "a list must be empty"),
        ({"refer_list": "164.506"}, "expected [] or a {target: label} dict"),
        ({"refer_list": {"164.506": "contradicts"}}, "unknown reference label 'contradicts'"),
        ({"node_index": "164.506"}, "node_index '164.506' differs from the key"),
        ({"norm_type": None}, "unknown norm_type None"),
    ],
)
def test_checklist_field_errors(
    tmp_path: Path, small_tree: RegulationTree, override: dict[str, Any], message: str
) -> None:
    path = _write_json(tmp_path, {"164.502(a)": _checklist_entry("164.502(a)", **override)})
    with pytest.raises(ValidationFailed, match=r"kb\.json#164\.502\(a\)") as info:
        load_checklist_kb(path, small_tree)
    assert message in str(info.value)


def test_checklist_file_errors(tmp_path: Path, small_tree: RegulationTree) -> None:
    with pytest.raises(ValidationFailed, match="file not found"):
        load_checklist_kb(tmp_path / "absent.json", small_tree)
    bad = tmp_path / "bad.json"
    bad.write_text('{"164.502(a)": {', encoding="utf-8")
    with pytest.raises(ValidationFailed, match=r"bad\.json: invalid JSON at line 1"):
        load_checklist_kb(bad, small_tree, strict=False)
    listed = _write_json(tmp_path, [1, 2], "list.json")
    with pytest.raises(ValidationFailed, match="expected a JSON object"):
        load_checklist_kb(listed, small_tree)
    dup = tmp_path / "dup.json"
    entry = json.dumps(_checklist_entry("164.502(a)"))
    dup.write_text(f'{{"164.502(a)": {entry}, "164.502(a)": {entry}}}', encoding="utf-8")
    with pytest.raises(ValidationFailed, match="duplicate key"):
        load_checklist_kb(dup, small_tree)


def test_resolver_is_pluggable(tmp_path: Path, small_tree: RegulationTree) -> None:
    """eCFR-parser spellings reach the published node ids through a resolver."""
    ids = ["160.103(Business associate)(1)(i)", "164.504(a)(Plan administration functions)"]
    path = _write_json(
        tmp_path,
        {
            ids[0]: _checklist_entry(ids[0], refer_list={ids[1]: "support"}),
            ids[1]: _checklist_entry(ids[1]),
        },
    )
    with pytest.raises(ValidationFailed, match="is not in the hipaa tree"):
        load_checklist_kb(path, small_tree)
    norms, report = load_checklist_kb(path, small_tree, resolve=alias_resolver(small_tree))
    assert [n.id for n in norms] == [
        "160.103(Business%20associate)(1)(i)",
        "164.504(a)Planadministrationfunctions",
    ]
    assert norms[0].source_id == ids[0]
    assert norms[0].references == (
        Reference("164.504(a)Planadministrationfunctions", ReferenceKind.SUPPORT),
    )
    assert report.aliases[ids[0]] == "160.103(Business%20associate)(1)(i)"
    # a custom callable works too
    mapping = {ids[0]: "164.502(a)", ids[1]: "164.502(b)"}
    norms, _ = load_checklist_kb(path, small_tree, resolve=mapping.get)
    assert [n.id for n in norms] == ["164.502(a)", "164.502(b)"]


def test_exact_resolver(small_tree: RegulationTree) -> None:
    resolve = exact_resolver(small_tree)
    assert resolve("164.502(a)") == "164.502(a)"
    assert resolve("164.502(A)") is None


# ---------------------------------------------------------------------------------
# PrivaCI loader on small files
# ---------------------------------------------------------------------------------


def test_privaci_double_decoding(tmp_path: Path, small_tree: RegulationTree) -> None:
    path = _write_lines(
        tmp_path,
        [
            _privaci_line("164.502(a)", reference={"164.506": "Support", "164.502(b)": "None"}),
            _privaci_line("164.502(b)", plain_id=True, norm_type="Prohibit", reference=[]),
            "",
        ],
    )
    norms, report = load_privaci_kb(path, "hipaa", small_tree)
    a, b = norms
    assert a.id == "164.502(a)" and a.norm_type is NormType.POSITIVE
    assert a.sender_role == "health care provider" and a.recipient_role is None
    assert a.references == (Reference("164.506", ReferenceKind.SUPPORT),)
    assert report.unlabelled_references == [("164.502(a)", "164.502(b)")]
    assert b.id == "164.502(b)" and b.norm_type is NormType.NEGATIVE
    assert report.normalisation.rule_counts("regulation_id") == {
        "plain string (not JSON-encoded)": 1
    }
    assert a.origin.endswith("kb.jsonl:1") and b.origin.endswith("kb.jsonl:2")
    assert report.entries == 2


def test_privaci_collects_every_problem(tmp_path: Path, small_tree: RegulationTree) -> None:
    extra = json.loads(_privaci_line("164.502(a)"))
    extra["colour"] = json.dumps("blue")
    missing = json.loads(_privaci_line("164.502(b)"))
    del missing["purpose"]
    undecodable = json.loads(_privaci_line("164.506"))
    undecodable["sender"] = "[not json"
    path = _write_lines(
        tmp_path,
        [
            json.dumps(extra),
            json.dumps(missing),
            '{"norm_type": "\\"Permit\\"", ',
            json.dumps(undecodable),
            _privaci_line("164.999"),
            _privaci_line("164.506", norm_type="Allow"),
            _privaci_line("EU.article1.[*"),
            _privaci_line("HIPAA", reference={"164.999": "Support"}),
            "[1, 2]",
        ],
    )
    with pytest.raises(ValidationFailed) as info:
        load_privaci_kb(path, "hipaa", small_tree)
    text = str(info.value)
    assert "kb.jsonl:1: unknown field(s) 'colour'" in text
    assert "kb.jsonl:2: missing field(s) 'purpose'" in text
    assert "kb.jsonl:3: invalid JSON" in text
    assert "kb.jsonl:4: field 'sender': inner value is not valid JSON" in text
    assert "kb.jsonl:5: node '164.999' is not in the hipaa tree" in text
    assert "kb.jsonl:6: unknown norm_type 'Allow'" in text
    assert "kb.jsonl:7: malformed node id 'EU.article1.[*'" in text
    assert "kb.jsonl:8: reference '164.999': target is not in the hipaa tree" in text
    assert "kb.jsonl:9: expected a JSON object" in text
    norms, report = load_privaci_kb(path, "hipaa", small_tree, strict=False)
    assert [n.id for n in norms] == ["HIPAA"]
    assert len(report.skipped) == 8 and len(report.dropped_references) == 1
    assert [s.location.rsplit(":", 1)[1] for s in report.skipped] == list("12345679")


def test_privaci_wrong_value_types(tmp_path: Path, small_tree: RegulationTree) -> None:
    row = json.loads(_privaci_line("164.502(a)"))
    row["sender"] = ["not", "encoded"]
    path = _write_lines(tmp_path, [json.dumps(row), _privaci_line("164.502(a)")])
    with pytest.raises(ValidationFailed) as info:
        load_privaci_kb(path, "hipaa", small_tree)
    assert "kb.jsonl:1: field 'sender': expected a JSON-encoded string, got list" in str(info.value)
    assert len(info.value.problems) == 1  # line 2 is fine; the duplicate check is per loaded id
    dup = _write_lines(tmp_path, [_privaci_line("164.506"), _privaci_line("164.506")], "dup.jsonl")
    with pytest.raises(ValidationFailed, match=r"dup\.jsonl:2: node '164\.506' is annotated twice"):
        load_privaci_kb(dup, "hipaa", small_tree)


def test_privaci_missing_file(tmp_path: Path, small_tree: RegulationTree) -> None:
    with pytest.raises(ValidationFailed, match="file not found"):
        load_privaci_kb(tmp_path / "absent.jsonl", "hipaa", small_tree)


def test_strict_defaults_table() -> None:
    assert STRICT_DEFAULTS == {
        "checklist:hipaa": True,
        "privaci:hipaa": True,
        "privaci:gdpr": False,
        "privaci:ai_act": False,
    }
    assert "gpt_response" not in CHECKLIST_FIELDS and len(CHECKLIST_FIELDS) == 15
    assert len(PRIVACI_FIELDS) == 15


# ---------------------------------------------------------------------------------
# the real files
# ---------------------------------------------------------------------------------


def test_real_checklist_counts(checklist: tuple[list[Norm], Any]) -> None:
    norms, report = checklist
    assert len(norms) == 591 and report.strict and not report.skipped
    assert Counter(n.norm_type for n in norms) == {
        NormType.POSITIVE: 231,
        NormType.NEGATIVE: 32,
        NormType.GENERAL_DEFINITION: 328,
    }
    refs = [r for n in norms for r in n.references]
    assert Counter(r.kind for r in refs) == {
        ReferenceKind.SUPPORT: 232,
        ReferenceKind.EXCEPTION: 62,
    }
    assert sum(1 for n in norms if n.references) == 185
    assert Counter(n.sender_is_subject for n in norms) == {
        Ternary.NO: 453,
        Ternary.UNSURE: 91,
        Ternary.YES: 47,
    }
    assert Counter(n.recipient_is_subject for n in norms) == {
        Ternary.NO: 397,
        Ternary.UNSURE: 99,
        Ternary.YES: 95,
    }
    # "none" placeholders are gone: sender 60, recipient 126 and subject 93 "none"
    # plus one "unspecified" each (164.514(d)(3)(ii)(A))
    assert sum(1 for n in norms if not n.sender) == 60
    assert sum(1 for n in norms if not n.recipient) == 127
    assert sum(1 for n in norms if not n.subject) == 94
    first = norms[0]
    assert first.id == "164.502(a)(1)(i)" and "Permitted fuses" in first.text
    assert first.sender == ("cover entity",) and first.recipient_is_subject is Ternary.YES


def test_real_checklist_normalisation_report(checklist: tuple[list[Norm], Any]) -> None:
    norms, report = checklist
    nrep = report.normalisation
    consent = nrep.rule_counts("consent_form")
    assert consent["placeholder 'none' -> None"] == 463
    assert consent["placeholder 'none;' -> None"] == 7
    # eight "none (remark)" values, each a placeholder of its own wording
    remarks = {k: n for k, n in consent.items() if k.startswith("placeholder 'none (")}
    assert sum(remarks.values()) == 8
    assert consent["synonym 'waiver' -> 'waiver of authorization'"] == 3  # incl. "waiver;"
    assert nrep.rule_counts("recipient")["placeholder 'unspecified' -> None"] == 1
    assert nrep.rule_counts("sender_is_subject") == {"'not sure' -> unsure": 91}
    # every value outside the consent vocabulary is listed with its ids
    unknown = nrep.unnormalised_values()
    assert {u.field for u in unknown} == {"consent_form"}
    assert len(unknown) == 16 and all(u.count == 1 and u.example_ids for u in unknown)
    assert {"choice", "opt-out", "reasonable assurances"} <= {u.value for u in unknown}
    by_value = {u.value: u for u in unknown}
    holder = next(n for n in norms if n.id == by_value["choice"].example_ids[0])
    assert holder.consent_form == "choice" and holder.raw["consent_form"] == "choice"
    forms = Counter(n.consent_form for n in norms)
    assert forms[None] == 478 and forms["authorization"] == 40
    assert forms["waiver of authorization"] == 12 and forms["data use agreement"] == 11


def test_real_privaci_hipaa_double_decoding(privaci_hipaa: tuple[list[Norm], Any]) -> None:
    norms, report = privaci_hipaa
    assert len(norms) == 591 and report.strict and not report.skipped
    assert not report.normalisation.rule_counts("regulation_id")  # all double-encoded
    assert norms[1].id == "164.502(a)(1)(ii)"
    assert norms[1].references == (Reference("164.506", ReferenceKind.SUPPORT),)
    assert norms[1].raw["reference"] == {"164.506": "support"}
    assert report.normalisation.rule_counts("sender_is_subject")["'NO' -> no"] == 453


def test_hipaa_formats_agree(
    checklist: tuple[list[Norm], Any], privaci_hipaa: tuple[list[Norm], Any]
) -> None:
    """Same 591 ids in the same order, same types, same references, same everything."""
    a, _ = checklist
    b, _ = privaci_hipaa
    assert [n.id for n in a] == [n.id for n in b]
    assert [n.norm_type for n in a] == [n.norm_type for n in b]
    assert [n.references for n in a] == [n.references for n in b]
    compared = [f.name for f in dataclasses.fields(Norm) if f.compare]
    for x, y in zip(a, b, strict=True):
        for name in compared:
            assert getattr(x, name) == getattr(y, name), (x.id, name)
    assert a == b


def test_real_gdpr(shared_data: Path, gdpr_tree: RegulationTree) -> None:
    path = shared_data / "kb/privaci_bench/gdpr.jsonl"
    with pytest.raises(ValidationFailed) as info:
        load_privaci_kb(path, "gdpr", gdpr_tree, strict=True)
    assert len(info.value.problems) == 14
    assert "gdpr.jsonl:58: reference 'article_89'" in str(info.value)
    norms, report = load_privaci_kb(path, "gdpr", gdpr_tree)  # default: lenient
    assert not report.strict and len(norms) == 679 and not report.skipped
    assert Counter(n.norm_type for n in norms) == {
        NormType.GENERAL_DEFINITION: 501,
        NormType.POSITIVE: 147,
        NormType.NEGATIVE: 31,
    }
    assert report.normalisation.rule_counts("regulation_id") == {
        "plain string (not JSON-encoded)": 506
    }
    assert len(report.dropped_references) == 14
    # with aliases only the external directive remains
    norms, report = load_privaci_kb(path, "gdpr", gdpr_tree, resolve=alias_resolver(gdpr_tree))
    assert [d.target for d in report.dropped_references] == ["Directive 2002/58/EC"]
    assert report.aliases["article_89"] == "Article 89"
    assert report.aliases["Chapter III"] == "Chapter 3"
    assert report.aliases["article_46"] == "Article 46"  # not "Article 4(6)"
    assert Counter(n.consent_form for n in norms) == {None: 645, "consent": 19, "authorization": 15}


def test_real_ai_act(shared_data: Path, ai_act_tree: RegulationTree) -> None:
    path = shared_data / "kb/privaci_bench/ai_act.jsonl"
    with pytest.raises(ValidationFailed) as info:
        load_privaci_kb(path, "ai_act", ai_act_tree, strict=True)
    assert "ai_act.jsonl:756: malformed node id 'EU_AI_ACT.chapter13.article103.[*'" in str(
        info.value
    )
    norms, report = load_privaci_kb(path, "ai_act", ai_act_tree)
    assert not report.strict and report.entries == 842
    assert len(report.skipped) == 21 and len(norms) == 821
    assert all("malformed node id" in s.problems[0] for s in report.skipped)
    assert {s.entry_id for s in report.skipped} >= {
        "EU_AI_ACT.chapter13.article102.[*",
        "EU_AI_ACT.chapter9.section9-3.article78.[5",
        "EU_AI_ACT.chapter13.article110.‘",
    }
    assert Counter(n.norm_type for n in norms) == {
        NormType.GENERAL_DEFINITION: 394,
        NormType.POSITIVE: 361,
        NormType.NEGATIVE: 66,
    }
    # recitals and annexes are not in the law tree
    assert len(report.dropped_references) == 833
    assert len(report.unlabelled_references) == 12
    assert report.normalisation.rule_counts("recipient_is_subject")["'No' -> no"] == 1
    norms, report = load_privaci_kb(
        path, "ai_act", ai_act_tree, resolve=alias_resolver(ai_act_tree)
    )
    assert len(report.dropped_references) == 809
    assert report.aliases["article3"] == "EU_AI_ACT.chapter1.article3"
    assert Counter(d.target.rstrip("0123456789") for d in report.dropped_references) == {
        "recital": 704,
        "annex": 104,
        "relation": 1,
    }


def test_norms_are_hashable_and_picklable(checklist: tuple[list[Norm], Any]) -> None:
    norms, _ = checklist
    assert len(set(norms)) == 591
    copy = pickle.loads(pickle.dumps(norms[5]))
    assert copy == norms[5] and copy.raw == norms[5].raw


def test_privaci_tree_must_match_regulation(tmp_path: Path, small_tree: RegulationTree) -> None:
    path = _write_lines(tmp_path, [_privaci_line("164.502(a)")])
    with pytest.raises(ValueError, match="a gdpr KB needs a gdpr tree, not hipaa"):
        load_privaci_kb(path, "gdpr", small_tree)
