"""`privacy-ci kb ...` on the real data for all three regulations."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from tests._raw import read_graphml, read_json, read_jsonl
from tests._shared import paper as paper_path

runner = CliRunner()


@pytest.fixture(autouse=True)
def _data(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))


def invoke(*args: str) -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)  # type: ignore[no-any-return]


def paper_figures() -> dict[str, int]:
    """Section 3.4 of the Privacy Checklist paper, read from the paper's text."""
    text = " ".join(paper_path("privacy-checklist.txt").read_text("utf-8").split())
    pattern = (
        r"includes (?P<tree_internal_nodes>[\d,]+) internal nodes, (?P<tree_leaves>[\d,]+) leaf"
        r" nodes, (?P<subsumption_edges>[\d,]+) edges for subsumption relationship and"
        r" (?P<cross_references>[\d,]+) cross references.*?we identify"
        r" (?P<positive_norms>[\d,]+) positive norms.*?(?P<negative_norms>[\d,]+) negative norms"
        r" as well as (?P<general_definitions>[\d,]+) general definitions.*?we collect"
        r" (?P<role_graph_nodes>[\d,]+) roles with (?P<role_graph_edges>[\d,]+) subsumption"
        r".*?we collect (?P<attribute_graph_nodes>[\d,]+) sensitive attributes with"
        r" (?P<attribute_graph_edges>[\d,]+) subsumption.*?encompasses"
        r" (?P<definitions>[\d,]+) definitions"
    )
    m = re.search(pattern, text)
    assert m, "section 3.4's figures were not found in the paper's text"
    return {k: int(v.replace(",", "")) for k, v in m.groupdict().items()}


def kb_norm_types(rows: list[dict[str, Any]], decode: bool) -> Counter[str]:
    """norm_type counts of KB rows (PrivaCI-Bench rows hold JSON-encoded strings)."""
    return Counter(json.loads(r["norm_type"]) if decode else r["norm_type"] for r in rows)


def test_stats_all_three_with_paper_comparison(shared_data: Path) -> None:
    data = invoke("kb", "stats")
    assert set(data) == {"hipaa", "gdpr", "ai_act"}
    hipaa = data["hipaa"]
    assert hipaa["paper"] == paper_figures()

    # HIPAA norms and definitions, from the annotated KB and the definition file
    kb = read_json(shared_data / "hipaa" / "kb_annotated.json")
    types = kb_norm_types(list(kb.values()), decode=False)
    ours = hipaa["ours"]
    assert ours["norms"] == len(kb)
    assert ours["positive_norms"] == types["positive_norm"]
    assert ours["negative_norms"] == types["negative_norm"]
    assert ours["general_definitions"] == types["general_definition"]
    assert ours["annotated_references"] == sum(
        len(e["refer_list"]) for e in kb.values() if isinstance(e["refer_list"], dict)
    )
    assert ours["definitions"] == len(read_json(shared_data / "hipaa" / "definitions.json"))
    # the paper's norm counts are the file's
    for key in ("positive_norms", "negative_norms", "general_definitions", "definitions"):
        assert hipaa["paper"][key] == ours[key], key

    # our eCFR tree (the default) has the shape of GoldCoin's tree built from the same pages
    goldcoin = read_graphml(shared_data / "hipaa" / "regulation_tree_goldcoin.graphml")
    internal, leaves = goldcoin.tree("HIPAA")
    assert (ours["tree_internal_nodes"], ours["tree_leaves"]) == (len(internal), len(leaves))
    assert ours["subsumption_edges"] == len(internal) + len(leaves) - 1
    # it also reads citations from the text: 911, more than the page's links (the
    # parser's own figure, checked link by link in tests/regulations/test_agreement.py)
    links = {(s, t) for s, t, a in goldcoin.edges if a["relation"] == "refer"}
    assert ours["cross_references"] == 911 > len(links)

    # the published tree (GoldCoin's file) as it is written
    published = invoke("kb", "stats", "-r", "hipaa", "--tree", "published")["hipaa"]["ours"]
    counts = goldcoin.relation_counts()
    assert published["cross_references"] == counts["refer"] == len(links)
    assert published["subsumption_edges"] == counts["subsume"]
    assert (published["tree_internal_nodes"], published["tree_leaves"]) == (
        len(internal),
        len(leaves),
    )

    # the graphs: raw nodes and edges; subsumptions merge reverse twins, drop self-loops
    roles = read_graphml(shared_data / "hipaa" / "role_graph.graphml")
    attributes = read_graphml(shared_data / "hipaa" / "attribute_graph.graphml")
    assert (ours["role_graph_nodes"], ours["role_graph_edges"]) == (
        len(roles.nodes),
        len(roles.edges),
    )
    assert (ours["attribute_graph_nodes"], ours["attribute_graph_edges"]) == (
        len(attributes.nodes),
        len(attributes.edges),
    )
    pairs = {(s, t) for s, t, a in roles.edges if a["relation"] == "subsume"}
    pairs |= {(t, s) for s, t, a in roles.edges if a["relation"] == "is subsumed by"}
    assert ours["role_graph_subsumptions"] == len({(s, t) for s, t in pairs if s != t})
    # the paper's graph sizes are swapped relative to the released files: both are printed
    assert (hipaa["paper"]["role_graph_nodes"], hipaa["paper"]["role_graph_edges"]) == (
        len(attributes.nodes),
        len(attributes.edges),
    )
    assert "swap" in hipaa["notes"]["role_graph_nodes"]
    assert hipaa["skipped_entries"] == 0

    # GDPR: every KB row is a norm
    gdpr_rows = read_jsonl(shared_data / "kb" / "privaci_bench" / "gdpr.jsonl")
    gdpr = data["gdpr"]
    assert gdpr["skipped_entries"] == 0 and gdpr["ours"]["norms"] == len(gdpr_rows)
    gdpr_types = kb_norm_types(gdpr_rows, decode=True)
    assert (gdpr["ours"]["positive_norms"], gdpr["ours"]["negative_norms"]) == (
        gdpr_types["Permit"],
        gdpr_types["Prohibit"],
    )
    assert gdpr["ours"]["general_definitions"] == gdpr_types["General Definition"]
    gdpr_defs = read_json(shared_data / "law_trees" / "definitions" / "gdpr.json")
    assert gdpr["ours"]["definitions"] == len(gdpr_defs)

    # AI Act: rows whose id is not a dotted name (a text fragment such as "[*" or a
    # curly quote leaked into it) are skipped; the rest are norms
    ai_rows = read_jsonl(shared_data / "kb" / "privaci_bench" / "ai_act.jsonl")
    well_formed = re.compile(r"EU_AI_ACT(?:\.[A-Za-z0-9-]+)+")
    kept = [r for r in ai_rows if well_formed.fullmatch(json.loads(r["regulation_id"]))]
    ai = data["ai_act"]
    assert ai["skipped_entries"] == len(ai_rows) - len(kept) == 21
    assert ai["ours"]["norms"] == len(kept)
    ai_types = kb_norm_types(kept, decode=True)
    assert (ai["ours"]["positive_norms"], ai["ours"]["negative_norms"]) == (
        ai_types["Permit"],
        ai_types["Prohibit"],
    )
    assert ai["ours"]["general_definitions"] == ai_types["General Definition"]
    ai_defs = read_json(shared_data / "law_trees" / "definitions" / "ai_act.json")
    assert ai["ours"]["definitions"] == len(ai_defs)


def test_stats_table() -> None:
    res = runner.invoke(app, ["kb", "stats", "-r", "hipaa"])
    assert res.exit_code == 0 and "paper (HIPAA)" in res.output and "swap" in res.output


def test_show_norm_with_references(shared_data: Path) -> None:
    kb = read_json(shared_data / "hipaa" / "kb_annotated.json")
    data = invoke("kb", "show", "164.502(a)(1)(iv)")
    assert kb["164.502(a)(1)(iv)"]["norm_type"] == "positive_norm"
    assert data["norm"]["norm_type"] == "positive"
    refs = {(r["target"], r["kind"]) for r in data["norm"]["references"]}
    assert refs == set(kb["164.502(a)(1)(iv)"]["refer_list"].items())
    assert refs == {("164.508", "support"), ("164.502(a)(5)(i)", "exception")}
    assert data["full_specification"].startswith("PART 164")
    # every annotated norm that cites 164.508, with the kind it cites it as
    citing = {
        (key, entry["refer_list"]["164.508"])
        for key, entry in kb.items()
        if isinstance(entry["refer_list"], dict) and "164.508" in entry["refer_list"]
    }
    shown = invoke("kb", "show", "164.508")["referenced_by_norms"]
    assert {(r["id"], r["kind"]) for r in shown} == citing
    assert ("164.502(a)(1)(iv)", "support") in citing


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
    pytest.importorskip("onnxruntime")
    spelled = invoke("kb", "attributes", "HIV status")
    assert spelled["matching"] == "spelling" and spelled["matches"][0]["term"] == "social status"
    meant = invoke("kb", "attributes", "HIV status", "--semantic")
    assert meant["matching"] == "embedding"
    assert meant["matches"][0]["term"] == "health status data"
    assert {m["method"] for m in meant["matches"]} == {"embedding"}
    roles = invoke("kb", "roles", "psychiatrist", "--semantic")
    assert roles["matches"] and roles["matching"] == "embedding"
