"""`privacy-ci label run | report | prompt` through the real app, with the model
replaced by the scripted test double (never selectable from configuration, so
`make_client` is patched)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import Corpus, riverside_dir
from privacy_ci.labeling import load_labeler_prompt
from privacy_ci.llm import LLMClient, LLMConfig
from privacy_ci.llm.testing import ScriptedTestBackend

from . import authored_answers, by_document, doc_id_of, label_json

runner = CliRunner()
LABELS = riverside_dir() / "labels.yaml"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVACY_CI_CONFIG", raising=False)
    for name in ("PROVIDER", "MODEL", "BASE_URL", "CACHE_PATH"):
        monkeypatch.delenv(f"PRIVACY_CI_LLM_{name}", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def model(env: Path, corpus: Corpus, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Patch `privacy_ci.llm.make_client` (the command imports it when it runs)."""
    state: dict[str, Any] = {"backends": [], "configs": [], "answer": authored_answers(corpus)}

    def make_client(config: LLMConfig | None = None, **_: Any) -> LLMClient:
        backend = ScriptedTestBackend(by_document(lambda d: state["answer"](d)))
        state["backends"].append(backend)
        state["configs"].append(config)
        return LLMClient(backend, cache=None)

    monkeypatch.setattr("privacy_ci.llm.make_client", make_client)
    return state


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["label", *args])


def ok_json(*args: str) -> Any:
    res = invoke(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def error_line(res: Any) -> str:
    """The one error message (rich wraps it at 80 columns when stderr is not a tty)."""
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and "Traceback" not in res.output, res.output
    assert res.stderr.startswith("error: ") and res.stderr.count("error:") == 1, res.stderr
    return " ".join(res.stderr.split())


# -- prompt ---------------------------------------------------------------------------------
def test_prompt_json_has_system_user_and_schema(env: Path) -> None:
    data = ok_json("prompt", "RMC-LAB-001")
    assert set(data) == {"system", "user", "schema"}
    assert data["system"] == load_labeler_prompt("labeler_system").text
    assert data["user"].startswith("Classify this clinic document.\n\nTitle : Complete blood count")
    assert "Subject : Maria Alvarez\n" in data["user"]
    assert "Document ID: RMC-LAB-001" in data["user"]
    assert data["schema"]["required"] == [
        "sensitivity_tier",
        "permitted_receiver_roles",
        "extra_sensitive",
        "governing_principle",
    ]


def test_prompt_text_and_unknown_document(env: Path) -> None:
    res = invoke("prompt", "RMC-MEM-001")
    assert res.exit_code == 0, res.output
    assert "Subject : organization-level (no individual subject)" in res.stdout
    assert "Return the label as structured output." in res.stdout
    assert "unknown document 'RMC-NOPE'" in error_line(invoke("prompt", "RMC-NOPE"))


# -- report ---------------------------------------------------------------------------------
def test_report_of_the_authored_label_file(env: Path) -> None:
    data = ok_json("report", "--labels", str(LABELS))
    (conf,) = data["configurations"]
    t7 = conf["table_vii"]
    assert (t7["privacy_violations"], t7["over_blocks"], t7["permits"]) == (0, 0, 259)
    assert t7["tier_conformance"] == t7["acl_conformance"] == 1.0
    assert conf["test_double"] is False and conf["name"] == "labels.yaml"
    assert conf["authored"] == {"permit": 259, "deny": 2261}


def test_report_of_a_relabeled_file_shows_the_violations(env: Path) -> None:
    text = LABELS.read_text(encoding="utf-8")
    marker = "- doc_id: RMC-LAB-001\n"
    head, rest = text.split(marker, 1)
    rest = rest.replace(
        "permitted_receiver_roles: [Doctor, Nurse]",
        "permitted_receiver_roles: [Doctor, Nurse, Billing Specialist]",
        1,
    )
    (env / "wrong.yaml").write_text(head + marker + rest, encoding="utf-8")
    data = ok_json("report", "--labels", str(LABELS), "--labels", str(env / "wrong.yaml"))
    authored, wrong = data["configurations"]
    assert authored["table_vii"]["privacy_violations"] == 0
    # P01's billing specialist (B01) gains Maria Alvarez's lab report
    assert wrong["table_vii"]["privacy_violations"] == 1
    assert wrong["attribution"]["privacy_violations"] == {"permitted_receiver_roles": 1}


def test_label_run_and_report_of_the_folder(env: Path, model: dict[str, Any]) -> None:
    out = env / "run"
    report = ok_json("run", "--out", str(out), "--draws", "2", "--name", "authored")
    assert len(model["backends"][0].calls) == 210
    assert report["name"] == "authored" and report["test_double"] is True
    assert report["backend"] == "scripted-test-double:scripted"
    t7 = report["table_vii"]
    assert (t7["privacy_violations"], t7["over_blocks"], t7["permits"]) == (0, 0, 259)
    assert report["stability"]["unstable_flows"] == 0 and report["draws"] == 2
    # the folder, reported again
    (conf,) = ok_json("report", str(out))["configurations"]
    assert conf["test_double"] is True and conf["table_vii"] == t7
    # as text: the tables, and the warning that no model wrote these labels
    res = invoke("report", str(out), "--markdown", str(env / "report.md"))
    assert res.exit_code == 0, res.output
    assert "Table VII" in res.stdout and "Table IX" in res.stdout
    assert "test double" in res.stdout
    assert "produced by the scripted test double, not a model" in res.stdout
    assert "(test double, not a model)" in (env / "report.md").read_text()
    # resumed with the same command: nothing is asked again
    ok_json("run", "--out", str(out), "--draws", "2", "--name", "authored")
    assert len(model["backends"]) == 2 and model["backends"][1].calls == []


def test_label_run_on_a_subset(env: Path, model: dict[str, Any]) -> None:
    out = env / "subset"
    data = ok_json(
        "run",
        "--out",
        str(out),
        "--draws",
        "2",
        "--docs",
        "RMC-LAB-001, RMC-PUB-001",
        "--seed",
        "7",
    )
    assert data["folder"] == str(out)
    assert sorted((r["doc_id"], r["draw"]) for r in data["labels"]) == [
        ("RMC-LAB-001", 1),
        ("RMC-LAB-001", 2),
        ("RMC-PUB-001", 1),
        ("RMC-PUB-001", 2),
    ]
    assert all(r["label"] is not None for r in data["labels"])
    calls = model["backends"][0].calls
    assert sorted(doc_id_of(m) for m, _ in calls) == [
        "RMC-LAB-001",
        "RMC-LAB-001",
        "RMC-PUB-001",
        "RMC-PUB-001",
    ]
    assert sorted(s.seed for _, s in calls) == [7, 7, 10, 10]  # --seed, then seed + sample
    # a subset is unfinished: report refuses it, --partial analyses it
    assert "--partial" in error_line(invoke("report", str(out)))
    (conf,) = ok_json("report", str(out), "--partial")["configurations"]
    assert conf["table_vii"]["failures"] == 103
    # text output says how to analyse it
    res = invoke(
        "run", "--out", str(out), "--draws", "2", "--docs", "RMC-LAB-001,RMC-PUB-001", "--seed", "7"
    )
    assert res.exit_code == 0, res.output
    assert "4 of 4 labels" in res.stdout and "(0 new)" in res.stdout
    assert "label report --partial" in res.stdout


def test_label_run_records_failures_and_retries_them(
    env: Path, model: dict[str, Any], corpus: Corpus
) -> None:
    model["answer"] = lambda d: "no" if d == "RMC-PUB-001" else label_json(corpus.label(d))
    out = env / "r"
    args = ("run", "--out", str(out), "--draws", "1", "--docs", "RMC-LAB-001,RMC-PUB-001")
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    assert "FAILED RMC-PUB-001#1: output does not fit the label schema" in res.stdout
    model["answer"] = authored_answers(corpus)
    data = ok_json(*args, "--retry-failures")
    assert [doc_id_of(m) for m, _ in model["backends"][1].calls] == ["RMC-PUB-001"]
    assert all(r["label"] is not None for r in data["labels"])


def test_label_run_with_a_system_prompt_file(env: Path, model: dict[str, Any]) -> None:
    (env / "system.txt").write_text("Label the documents of Example Clinic.\n")
    ok_json(
        "run",
        "--out",
        str(env / "r"),
        "--draws",
        "1",
        "--docs",
        "RMC-LAB-001",
        "--system-prompt",
        str(env / "system.txt"),
    )
    ((messages, _),) = model["backends"][0].calls
    assert messages[0].content == "Label the documents of Example Clinic."
    manifest = json.loads((env / "r" / "manifest.json").read_text())
    assert manifest["identity"]["prompts"]["system"]["name"] == str(env / "system.txt")


def test_label_run_passes_the_configuration(env: Path, model: dict[str, Any]) -> None:
    ok_json(
        "run", "--out", str(env / "r"), "--draws", "1", "--docs", "RMC-LAB-001",
        "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--temperature", "0.5", "--max-tokens", "300",
    )  # fmt: skip
    (config,) = model["configs"]
    assert (config.provider, config.model, config.base_url) == (
        "openai-compatible",
        "m",
        "http://127.0.0.1:9/v1",
    )
    ((_, settings),) = model["backends"][0].calls
    assert (settings.temperature, settings.max_tokens) == (0.5, 300)


# -- bad input ------------------------------------------------------------------------------
def test_report_of_a_folder_that_does_not_exist(env: Path) -> None:
    line = error_line(invoke("report", str(env / "nowhere")))
    assert "not a labeling run (no manifest.json; `privacy-ci label run` makes one)" in line


def test_report_needs_something_to_report(env: Path) -> None:
    assert "give at least one run folder or --labels file" in error_line(invoke("report"))


def test_report_of_a_label_file_that_does_not_exist(env: Path) -> None:
    res = invoke("report", "--labels", str(env / "missing.yaml"))
    assert res.exit_code == 2 and "missing.yaml" in res.stderr


@pytest.mark.parametrize("flag", ["--draws", "--concurrency"])
def test_label_run_zero_is_an_error(env: Path, model: dict[str, Any], flag: str) -> None:
    line = error_line(invoke("run", "--out", str(env / "r"), flag, "0"))
    assert "--draws and --concurrency must be at least 1" in line
    assert model["backends"] == [] and not (env / "r").exists()


def test_label_run_unknown_document(env: Path, model: dict[str, Any]) -> None:
    line = error_line(invoke("run", "--out", str(env / "r"), "--docs", "RMC-LAB-001,RMC-NOPE"))
    assert "unknown document 'RMC-NOPE'" in line
    assert model["backends"][0].calls == []


def test_label_run_into_a_folder_of_another_run(env: Path, model: dict[str, Any]) -> None:
    ok_json("run", "--out", str(env / "r"), "--draws", "1", "--docs", "RMC-LAB-001")
    line = error_line(
        invoke("run", "--out", str(env / "r"), "--draws", "2", "--docs", "RMC-LAB-001")
    )
    assert "holds another labeling run" in line and "draws: 1 there, 2 now" in line


# -- export ---------------------------------------------------------------------------------
def test_export_writes_a_label_file_the_gate_adjudicates(
    model: dict[str, Any], corpus: Corpus, env: Path
) -> None:
    """A run's draw becomes a label file: the over-granted document releases exactly the
    flows the report counts, and a failed document is left out and named."""
    grant, broken = "RMC-LAB-001", "RMC-BIL-001"

    def answer(doc_id: str) -> str:
        if doc_id == broken:
            return "no label today"
        label = corpus.label(doc_id)
        if doc_id == grant:
            roles = sorted(label.permitted_receiver_roles | {"Billing Specialist"})
            return label_json(label, permitted_receiver_roles=roles)
        return label_json(label)

    model["answer"] = answer
    run_dir = env / "run"
    res = invoke("run", "--out", str(run_dir), "--draws", "1", "--json")
    assert res.exit_code == 0, res.output
    out = env / "model-labels.yaml"
    summary = ok_json("export", str(run_dir), "--out", str(out))
    assert summary == {"file": str(out), "labels": 104, "failed": [broken]}
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Labels written by scripted-test-double:scripted")
    flows = runner.invoke(app, ["conductor", "flows", "--labels", str(out), "--json"])
    assert flows.exit_code == 0, flows.output
    report = ok_json("report", str(run_dir))["configurations"][0]
    exported = json.loads(flows.stdout)
    # the file lacks the failed document: its authored permits are the report's over-blocks
    # that the label file cannot show; every permit the file grants matches the report
    authored_permits_of_broken = sum(
        1 for r in corpus.requesters() if _permits(corpus, r.id, broken)
    )
    assert exported["permit"] == 259 + report["table_vii"]["privacy_violations"] - (
        authored_permits_of_broken
    )
    assert report["table_vii"]["privacy_violations"] > 0
    bad = invoke("export", str(run_dir), "--out", str(out), "--draw", "2")
    assert "has draws 1-1, not 2" in error_line(bad)


def _permits(corpus: Corpus, agent_id: str, doc_id: str) -> bool:
    from privacy_ci.conductor import Gate

    return Gate(corpus.policy).decide(corpus.requester(agent_id), corpus.label(doc_id)).permitted
