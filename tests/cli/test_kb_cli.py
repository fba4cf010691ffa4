"""`privacy-ci kb ...` on the real data for all three regulations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _data(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))


def invoke(*args: str) -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)  # type: ignore[no-any-return]


def test_stats_all_three_with_paper_comparison() -> None:
    data = invoke("kb", "stats")
    assert set(data) == {"hipaa", "gdpr", "ai_act"}
    hipaa = data["hipaa"]
    assert hipaa["paper"]["positive_norms"] == hipaa["ours"]["positive_norms"] == 231
    assert hipaa["ours"]["negative_norms"] == 32 and hipaa["ours"]["general_definitions"] == 328
    # our eCFR tree (default) reads references from the text too; the published one has 761
    assert hipaa["ours"]["cross_references"] == 911 and hipaa["ours"]["tree_internal_nodes"] == 642
    published = invoke("kb", "stats", "-r", "hipaa", "--tree", "published")["hipaa"]
    assert published["ours"]["cross_references"] == 761
    assert hipaa["ours"]["definitions"] == 54
    # the paper's graph sizes are swapped relative to the released files: both are printed
    assert hipaa["paper"]["role_graph_nodes"] == 296 and hipaa["ours"]["role_graph_nodes"] == 211
    assert "swap" in hipaa["notes"]["role_graph_nodes"]
    assert data["gdpr"]["ours"]["norms"] == 679
    assert data["ai_act"]["skipped_entries"] == 21


def test_stats_table() -> None:
    res = runner.invoke(app, ["kb", "stats", "-r", "hipaa"])
    assert res.exit_code == 0 and "paper (HIPAA)" in res.output and "swap" in res.output


def test_show_norm_with_references() -> None:
    data = invoke("kb", "show", "164.502(a)(1)(iv)")
    assert data["norm"]["norm_type"] == "positive"
    assert {"target": "164.508", "kind": "support"} in data["norm"]["references"]
    assert {"target": "164.502(a)(5)(i)", "kind": "exception"} in data["norm"]["references"]
    assert data["full_specification"].startswith("PART 164")
    assert "164.502(a)(1)(iv)" in [
        r["id"] for r in invoke("kb", "show", "164.508")["referenced_by_norms"]
    ]


def test_show_gdpr_and_ai_act_nodes() -> None:
    gdpr = invoke("kb", "show", "Article 6", "-r", "gdpr")
    assert gdpr["kind"] == "article"
    ai = invoke("kb", "show", "EU_AI_ACT.chapter1.article1.1", "-r", "ai_act")
    assert "purpose of this Regulation" in ai["text"]


def test_refs_and_unknown_ids() -> None:
    data = invoke("kb", "refs", "164.508")
    assert "164.502(a)(1)(iv)" in data["tree_referenced_by"]
    res = runner.invoke(app, ["kb", "show", "999.999"])
    assert res.exit_code == 2 and "no node '999.999'" in res.output
    res = runner.invoke(app, ["kb", "stats", "-r", "ccpa"])
    assert res.exit_code == 2 and "unknown regulation" in res.output


def test_roles_surgeon_and_physician_reach_covered_entity() -> None:
    surgeon = invoke("kb", "roles", "surgeon")
    assert surgeon["matches"][0]["term"] == "surgeon" and surgeon["matches"][0]["score"] == 1.0
    assert "cover entity" in surgeon["regulation_roles"]["surgeon"]
    physician = invoke("kb", "roles", "physician")
    assert "health care provider" in physician["matches"][0]["ancestors"]


def test_roles_unknown_term_is_matched_with_scores() -> None:
    data = invoke("kb", "roles", "orthopedic surgeons")
    assert data["matches"] and all(0 < m["score"] <= 1 for m in data["matches"])


def test_attributes_nearest_terms_reported() -> None:
    data = invoke("kb", "attributes", "HIV status")
    assert data["matches"] and all(m["score"] < 1.0 for m in data["matches"])
    data = invoke("kb", "attributes", "health record")
    assert data["matches"][0]["score"] == 1.0 and data["matches"][0]["ancestors"]


def test_define_three_regulations() -> None:
    hipaa = invoke("kb", "define", "covered entity")
    assert hipaa["matches"][0]["term"].lower() == "covered entity"
    gdpr = invoke("kb", "define", "Personal Data", "-r", "gdpr")
    assert gdpr["matches"][0]["term"] == "personal_data"
    ai = invoke("kb", "define", "deployer", "-r", "ai_act")
    assert ai["matches"][0]["score"] == 1.0


def test_agreement_numbers_printed() -> None:
    data = invoke("kb", "agreement")
    text = json.dumps(data)
    assert "ids" in data and "references" in data and "explained" in data
    assert "erratum" in text  # the ANSI id the page itself mislabels
    res = runner.invoke(app, ["kb", "agreement", "--against", "checklist"])
    assert res.exit_code == 0 and "Jaccard" in res.output


def test_kb_show_accepts_goldcoin_spellings() -> None:
    data = invoke("kb", "show", "164.504(a)Planadministrationfunctions")
    assert data["id"] == "164.504(a)(Plan administration functions)"
    assert data["norm"]["norm_type"] == "general_definition"
    data = invoke("kb", "show", "160.103(Business%20associate)(1)")
    assert data["id"] == "160.103(Business associate)(1)"


def test_attributes_by_meaning_find_health_terms() -> None:
    """`--semantic` (packaged MiniLM) puts HIV status under health data, where
    spelling alone lands on `social status`."""
    pytest.importorskip("sentence_transformers")
    spelled = invoke("kb", "attributes", "HIV status")
    assert spelled["matching"] == "spelling" and spelled["matches"][0]["term"] == "social status"
    meant = invoke("kb", "attributes", "HIV status", "--semantic")
    assert meant["matching"] == "embedding"
    assert meant["matches"][0]["term"] == "health status data"
    assert {m["method"] for m in meant["matches"]} == {"embedding"}
    roles = invoke("kb", "roles", "psychiatrist", "--semantic")
    assert roles["matches"] and roles["matching"] == "embedding"
