"""Users' own case files: `load_case_file`, `load_dataset(path)`, `eval --dataset FILE`
and `judge --case FILE`, on GoldCoin- and PrivaCI-Bench-style files and bad input."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from privacy_ci.cases import (
    Task,
    UnknownDataset,
    load_case_file,
    load_dataset,
    read_case_file,
)
from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.llm import GenerationSettings, LLMClient, Message
from privacy_ci.llm.testing import ScriptedTestBackend

P, X, NA = Verdict.PERMIT, Verdict.PROHIBIT, Verdict.NOT_APPLICABLE

GOLDCOIN: list[dict[str, Any]] = [
    {
        "context": "A nurse faxed a patient's HIV test result to the patient's employer.",
        "sender": "Nurse",
        "recipient": "Employer",
        "subject": "Patient",
        "information_type": "HIV test result",
        "purpose": "None",
        "norm_type": "negative_norm",
        "refer_ids": ["164.502(a)", "164.502"],
        "source": "my clinic audit",
        "note": {"reviewer": "ab", "round": 2},
    },
    {
        "context": "A doctor sent a referral letter to a specialist for treatment.",
        "sender": "Doctor",
        "recipient": "Specialist",
        "subject": "Patient",
        "information_type": "Referral letter",
        "purpose": "Treatment",
        "norm_type": "positive_norm",
        "refer_ids": ["164.506(c)(2)"],
    },
    {
        "context": "A neighbour told a friend about a party.",
        "norm_type": "Not Applicable",
        "refer_ids": [],
        "id": "party",
    },
]

PRIVACI_LINE: dict[str, Any] = {
    "norm_type": "prohibit",
    "sender": ["City of Plainfield"],
    "sender_role": ["Public Entity/Administrator"],
    "recipient": ["William Michelson"],
    "recipient_role": ["Citizen", "Requester of Information"],
    "subject": ["City employees"],
    "subject_role": ["Subjects of the health insurance plans"],
    "information_type": ["Health insurance plan details", "claims experience"],
    "consent_form": "",
    "purpose": "To fulfill a public records request under OPRA",
    "followed_articles": [],
    "violated_articles": ["164.502(a)", None],
    "case_content": "In the City of Plainfield, a citizen requested health plan records.",
    "sender_is_subject": "no",
}


def write(path: Path, content: str | list[Any] | dict[str, Any]) -> Path:
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


def jsonl(path: Path, *entries: dict[str, Any] | str) -> Path:
    lines = [e if isinstance(e, str) else json.dumps(e) for e in entries]
    return write(path, "\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------
def test_a_goldcoin_json_list(tmp_path: Path, shared_data: Path) -> None:
    path = write(tmp_path / "audit.json", GOLDCOIN)
    data = load_case_file(path, data_dir=shared_data)
    assert data.name == "audit" and len(data) == 3
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    protocol = data.protocol
    assert (protocol.name, protocol.regulation, protocol.task) == ("audit", "hipaa", Task.THREE_WAY)
    assert protocol.sha256 == data.sha256 and protocol.source == str(path.resolve())
    assert [c.id for c in data] == ["audit-0000", "audit-0001", "party"]
    assert [c.label for c in data] == [X, P, NA]
    first = data[0]
    # GoldCoin's sender/recipient/subject are roles
    assert first.flow == Flow.of(
        sender_role="Nurse",
        recipient_role="Employer",
        subject_role="Patient",
        information_type="HIV test result",
    )
    assert first.flow.principle.purpose is None  # "None" is a placeholder
    assert first.extra["placeholders"] == {"purpose": "None"}
    assert first.gold_ids == ("164.502(a)", "164.502")
    assert first.gold_nodes == ("164.502(a)", "164.502")
    assert first.extra["metadata"] == {"source": "my clinic audit", "note": GOLDCOIN[0]["note"]}
    assert first.extra["item"] == 0 and first.extra["row"] == 0
    assert "metadata" not in data[1].extra
    assert data[2].flow.is_empty and data[2].gold_ids == ()
    assert data.report.gold_status == "resolved" and data.report.gold_resolved == 3
    assert data.report.placeholder_counts() == {"purpose": 1}
    assert any("note, source" in n for n in data.report.notes)
    assert data.label_counts() == {P: 1, X: 1, NA: 1}


def test_a_jsonl_file_with_flat_names_and_a_privaci_line(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "mine.jsonl",
        {
            "text": "A pharmacist shared a prescription with an insurer.",
            "sender_role": "Pharmacist",
            "recipient": "Acme Insurance",
            "recipient_role": "Health plan",
            "consent_form": "authorization",
            "label": "Permit",
            "gold_ids": ["164.506"],
            "id": 17,
        },
        "",
        PRIVACI_LINE,
    )
    data = load_dataset(str(path), resolve_gold=False)
    assert data.name == "mine" and [c.id for c in data] == ["17", "mine-0001"]
    own, pb = data
    assert own.label is P and own.gold_ids == ("164.506",) and own.gold_nodes == ()
    assert own.flow.fields() == {
        "sender": None,
        "sender_role": "Pharmacist",
        "recipient": "Acme Insurance",
        "recipient_role": "Health plan",
        "subject": None,
        "subject_role": None,
        "information_type": None,
        "purpose": None,
        "consent_form": "authorization",
    }
    assert own.extra == {"row": 0, "line": 1}
    # PrivaCI-Bench: lists joined with "; ", names beside roles, both article lists
    assert pb.label is X and pb.text == PRIVACI_LINE["case_content"]
    assert pb.flow.sender.name == "City of Plainfield"
    assert pb.flow.sender.role == "Public Entity/Administrator"
    assert pb.flow.recipient.role == "Citizen; Requester of Information"
    assert pb.flow.information_type == "Health insurance plan details; claims experience"
    assert pb.flow.principle.consent is None
    assert pb.gold_ids == ("164.502(a)",)
    assert pb.extra["violated_articles"] == ("164.502(a)",)
    assert pb.extra["followed_articles"] == ()
    assert pb.extra["metadata"] == {"sender_is_subject": "no"}
    assert pb.extra["line"] == 3
    assert [(s.row, s.reason) for s in data.report.skipped] == [(2, "blank line")]
    assert data.report.rows == 3 and data.report.gold_status.startswith("not resolved")


def test_load_dataset_takes_a_path_and_still_a_name(tmp_path: Path) -> None:
    path = write(tmp_path / "one.json", GOLDCOIN[2])  # one JSON object: a one-case dataset
    by_path = load_dataset(path, resolve_gold=False)
    assert by_path.name == "one" and len(by_path) == 1 and by_path[0].id == "party"
    assert load_dataset(str(path), resolve_gold=False).cases == by_path.cases
    with pytest.raises(UnknownDataset, match=r"json/\.jsonl file of cases"):
        load_dataset("no-such-dataset")


def test_a_regulation_field_or_argument(tmp_path: Path) -> None:
    gdpr = {"text": "A shop emailed a customer list.", "norm_type": "prohibit"}
    path = jsonl(tmp_path / "g.jsonl", {**gdpr, "regulation": "gdpr"}, gdpr)
    data = load_case_file(path, resolve_gold=False)
    assert data.protocol.regulation == "gdpr" and {c.regulation for c in data} == {"gdpr"}
    with pytest.raises(ValidationFailed, match=r"g\.jsonl line 1: field 'regulation': 'gdpr'"):
        load_case_file(path, regulation="hipaa", resolve_gold=False)
    with pytest.raises(PrivacyCIError, match="unknown regulation 'ccpa'"):
        load_case_file(path, regulation="ccpa")
    mixed = jsonl(
        tmp_path / "m.jsonl", {**gdpr, "regulation": "gdpr"}, {**gdpr, "regulation": "hipaa"}
    )
    with pytest.raises(ValidationFailed, match="line 2: field 'regulation': 'hipaa', but line 1"):
        load_case_file(mixed, resolve_gold=False)


def test_read_case_file_needs_no_label(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "u.jsonl", {"context": "A clinic called a patient.", "note": "n"})
    (entry,) = read_case_file(path)
    assert entry.label is None and entry.where == "line 1" and entry.metadata == {"note": "n"}
    with pytest.raises(ValidationFailed, match=r"u\.jsonl line 1: field 'norm_type': missing"):
        load_case_file(path)


# ---------------------------------------------------------------------------------
# bad input: one clear error each
# ---------------------------------------------------------------------------------
OK = json.dumps({"context": "A clinic called a patient.", "norm_type": "permit"})


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("c.jsonl", f'{OK}\n{{"context": "x", norm_type: 1}}\n', "c.jsonl line 2: not valid JSON"),
        (
            "c.jsonl",
            f'{OK}\n{{"norm_type": "permit", "sender": "Nurse"}}\n',
            "c.jsonl line 2: field 'context': missing",
        ),
        (
            "c.jsonl",
            f'{OK}\n{OK}\n{{"context": "x", "norm_type": ""}}\n',
            "c.jsonl line 3: field 'norm_type': '' is not a label (expected one of ",
        ),
        (
            "c.jsonl",
            '{"context": "x", "norm_type": "maybe"}\n',
            "c.jsonl line 1: field 'norm_type': 'maybe' is not a label (expected one of forbid,",
        ),
        (
            "c.json",
            json.dumps([json.loads(OK), {**json.loads(OK), "sender": ["Nurse", "Clinic"]}]),
            "c.json item [1]: field 'sender': expected a string, found a list",
        ),
        ("c.jsonl", f"{OK}\n[1, 2]\n", "c.jsonl line 2: expected a JSON object (one case)"),
        ("c.jsonl", f'{OK}\n"a case"\n', "c.jsonl line 2: expected a JSON object"),
        ("c.json", "[3]", "c.json item [0]: expected a JSON object (one case), found a number"),
        ("c.jsonl", "", "c.jsonl: empty file (no cases)"),
        ("c.json", " \n\n", "c.json: empty file (no cases)"),
        ("c.jsonl", "\n\n", "c.jsonl: empty file (no cases)"),
        ("c.json", "[]", "c.json: the JSON list holds no cases"),
        ("c.json", "42", "c.json: expected a JSON object, a list of objects or one object"),
        (
            "c.json",
            '{\n  "context": "x",\n  "norm_type": "permit",\n}\n',
            "c.json line 4: not valid JSON",
        ),
        (
            "c.jsonl",
            '{"context": "x", "norm_type": "permit", "refer_ids": "164.502"}\n',
            "c.jsonl line 1: field 'refer_ids': expected a list of regulation ids, found a string",
        ),
        (
            "c.jsonl",
            '{"context": "x", "norm_type": "permit", "purpose": 7}\n',
            "c.jsonl line 1: field 'purpose': expected a string or null, found a number",
        ),
        (
            "c.jsonl",
            '{"case_content": "x", "norm_type": "permit", "sender": ["a", 2]}\n',
            "c.jsonl line 1: field 'sender': list element 2 is not a string",
        ),
        (
            "c.jsonl",
            '{"context": ["x"], "norm_type": "permit"}\n',
            "c.jsonl line 1: field 'context': expected the narrative as a string, found a list",
        ),
        (
            "c.jsonl",
            '{"context": "x", "text": "y", "norm_type": "permit"}\n',
            "c.jsonl line 1: fields 'context' and 'text' give different narratives",
        ),
        (
            "c.jsonl",
            '{"context": "x", "norm_type": "permit", "label": "prohibit"}\n',
            "c.jsonl line 1: fields 'norm_type' and 'label' disagree",
        ),
        (
            "c.jsonl",
            '{"context": "x", "norm_type": "permit", "norm_type": "prohibit"}\n',
            "c.jsonl line 1: duplicate key 'norm_type'",
        ),
        (
            "c.jsonl",
            '{"text": "x", "norm_type": "permit", "id": "a"}\n{"text": "y", "norm_type": "permit", "id": "a"}\n',
            "c.jsonl line 2: field 'id': 'a' is also the id of line 1",
        ),
        (
            "c.jsonl",
            '{"text": "x", "norm_type": "permit", "id": true}\n',
            "c.jsonl line 1: field 'id': expected a non-empty string or an integer",
        ),
    ],
)
def test_bad_input_is_one_clear_error(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = write(tmp_path / name, content)
    with pytest.raises(ValidationFailed) as caught:
        load_case_file(path, resolve_gold=False)
    assert caught.value.problems == [caught.value.problems[0]]  # exactly one
    assert caught.value.problems[0].startswith(str(path)), caught.value.problems
    assert message in caught.value.problems[0], caught.value.problems


def test_every_bad_line_is_listed_and_missing_files_are_named(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "c.jsonl", "{oops", OK, '{"context": "x", "norm_type": "no"}')
    with pytest.raises(ValidationFailed) as caught:
        load_case_file(path)
    assert [p.split(": ")[0] for p in caught.value.problems] == [
        f"{path} line 1",
        f"{path} line 3",
    ]
    with pytest.raises(PrivacyCIError, match=r"nope\.jsonl: cannot read the file"):
        load_dataset(tmp_path / "nope.jsonl")
    write(tmp_path / "latin.jsonl", "")
    (tmp_path / "latin.jsonl").write_bytes(b'{"context": "caf\xe9"}\n')
    with pytest.raises(ValidationFailed, match="not UTF-8"):
        load_case_file(tmp_path / "latin.jsonl")


# ---------------------------------------------------------------------------------
# the CLI, over the scripted test backend
# ---------------------------------------------------------------------------------
def _scripted(monkeypatch: pytest.MonkeyPatch, answer: str) -> list[str]:
    """Make every CLI client a scripted one; returns the prompts it is sent."""
    prompts: list[str] = []

    def reply(messages: Sequence[Message], settings: GenerationSettings) -> str:
        prompts.append("\n".join(m.content for m in messages))
        return answer

    def make_client(*args: Any, **kwargs: Any) -> LLMClient:
        return LLMClient(ScriptedTestBackend(reply), cache=None)

    monkeypatch.setattr("privacy_ci.llm.make_client", make_client)
    return prompts


@pytest.fixture
def cli_env(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVACY_CI_CONFIG", raising=False)
    for name in ("PROVIDER", "MODEL", "BASE_URL", "CACHE_PATH"):
        monkeypatch.delenv(f"PRIVACY_CI_LLM_{name}", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_eval_on_a_case_file_end_to_end(cli_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privacy_ci.cli.evaluate import eval_command

    app = typer.Typer()
    app.command("eval")(eval_command)
    app.command("other")(lambda: None)  # a group, so that "eval" is a subcommand
    prompts = _scripted(monkeypatch, "Choice: A. Prohibited")
    path = jsonl(cli_env / "my cases.jsonl", *GOLDCOIN)
    args = ["eval", "--dataset", str(path), "--method", "dp", "--no-progress"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["judged"] == 3 and metrics["complete"] and metrics["test_double"]
    assert metrics["dataset"]["name"] == "my cases"
    assert metrics["dataset"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert metrics["scores"]["main"]["correct"] == 1  # only the prohibit case
    assert len(prompts) == 3
    (folder,) = (cli_env / "runs").iterdir()
    assert folder.name.startswith("my-cases-dp-")
    assert (folder / "metrics.json").is_file() and (folder / "records.jsonl").is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["dataset"]["source"] == str(path.resolve())

    again = CliRunner().invoke(app, args)  # the same file resumes
    assert again.exit_code == 0, again.output
    assert "resumed: 3 case(s)" in again.output and len(prompts) == 3

    jsonl(path, *GOLDCOIN[:2])  # another file of that name is another run
    changed = CliRunner().invoke(app, args)
    assert changed.exit_code == 2 and "refusing to resume" in changed.output

    unlabelled = jsonl(cli_env / "u.jsonl", {"text": "x"}, {"text": "y", "norm_type": "permit"})
    bad = CliRunner().invoke(app, ["eval", "--dataset", str(unlabelled), "-m", "dp"])
    assert bad.exit_code == 2 and "line 1: field 'norm_type': missing" in bad.output


GOLD_MARKERS = ("negative_norm", "Forbid", "164.530(zz)", "GOLD-SECRET-NOTE")


def test_judge_a_goldcoin_case_object(cli_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privacy_ci.cli.judge import judge

    app = typer.Typer()
    app.command("judge")(judge)
    app.command("other")(lambda: None)
    prompts = _scripted(monkeypatch, "Choice: B. Permitted")
    case = {
        **GOLDCOIN[0],
        "id": "audit-7",
        "label": "Forbid",
        "refer_ids": ["164.530(zz)(9)"],
        "note": "GOLD-SECRET-NOTE",
    }
    path = write(cli_env / "case.json", case)
    for method in ("dp", "flow-judge"):
        prompts.clear()
        result = CliRunner().invoke(app, ["judge", "--case", str(path), "-m", method, "--json"])
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout)
        assert payload["event"]["id"] == "audit-7"
        assert payload["event"]["text"] == case["context"]
        assert prompts and all(case["context"] in p for p in prompts)
        for marker in GOLD_MARKERS:  # gold fields and metadata never reach a prompt
            assert not any(marker in p for p in prompts), (method, marker)
    assert "Employer" in prompts[0]  # flow-judge shows the CI fields: the roles arrive

    several = jsonl(cli_env / "several.jsonl", *GOLDCOIN)
    result = CliRunner().invoke(app, ["judge", "--case", str(several), "-m", "dp", "--json"])
    assert result.exit_code == 2 and "holds 3 cases; pick one with --index 0..2" in result.output
    prompts.clear()
    args = ["judge", "--case", str(several), "--index", "2", "-m", "dp", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["event"]["id"] == "party"
    assert GOLDCOIN[2]["context"] in prompts[0]
    result = CliRunner().invoke(app, [*args[:3], "--index", "3", "-m", "dp"])
    assert result.exit_code == 2 and "--index 3 is out of range" in result.output
    result = CliRunner().invoke(app, ["judge", "text", "--index", "1"])
    assert result.exit_code == 2 and "give --case too" in result.output
