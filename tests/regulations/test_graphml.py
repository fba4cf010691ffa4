"""Loaders of the published trees: real files, known defects, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.regulations import TreeError, load_hipaa_graphml, load_privaci_law_tree

HEADER = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
    '<key id="d0" for="node" attr.name="text" attr.type="string"/>'
    '<key id="d1" for="edge" attr.name="relation" attr.type="string"/>'
    '<graph edgedefault="directed">'
)


def write(tmp_path: Path, body: str, name: str = "t.graphml") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + body + "</graph></graphml>")
    return path


def node(nid: str, text: str = "x") -> str:
    return f'<node id="{nid}"><data key="d0">{text}</data></node>'


def edge(a: str, b: str, rel: str = "subsume") -> str:
    return f'<edge source="{a}" target="{b}"><data key="d1">{rel}</data></edge>'


def test_goldcoin_tree(shared_data: Path) -> None:
    tree, report = load_hipaa_graphml(shared_data / "hipaa/regulation_tree_goldcoin.graphml")
    s = tree.stats()
    assert (s["tree_nodes"], s["internal_nodes"], s["leaves"]) == (2274, 642, 1632)
    assert s["references"] == 761 and len(report.stubs) == 18 and not report.orphans
    assert tree.full_specification("164.502(a)(1)(i)").startswith("PART 164")


def test_checklist_tree_orphans_are_reported_not_hidden(shared_data: Path) -> None:
    tree, report = load_hipaa_graphml(shared_data / "hipaa/regulation_tree.graphml")
    assert tree.stats()["tree_nodes"] == 2197
    assert len(report.orphans) == 77  # real paragraphs under curly-quoted text-less parents
    assert any("164.501“Payment”" in o for o in report.orphans + report.stubs)
    assert not tree.in_tree(report.orphans[0])


def test_ai_act_prefix_closure_is_reduced(shared_data: Path) -> None:
    tree, report = load_privaci_law_tree(shared_data / "law_trees/ai_act.graphml", "ai_act")
    assert tree.stats()["subsumption_edges"] == 1064
    assert tree.parent("EU_AI_ACT.chapter10") == "EU_AI_ACT"  # not chapter1
    assert tree.parent("EU_AI_ACT.chapter1.article1.1") == "EU_AI_ACT.chapter1.article1"
    # contents repeated every ancestor: each node keeps only its own text
    assert not tree["EU_AI_ACT.chapter1.article1.1"].text.startswith("EU Artificial")
    assert any("prefix closure" in n for n in report.notes)


def test_gdpr_recitals_with_several_parents(shared_data: Path) -> None:
    tree, report = load_privaci_law_tree(shared_data / "law_trees/gdpr.graphml", "gdpr")
    assert len(report.extra_parents) == 46 and report.orphans == ["Recital 172"]
    assert tree.parent("Recital 172") == "GDPR"
    some, parents = next(iter(report.extra_parents.items()))
    assert some in tree.refs(parents[0])  # the extra parent now cites the recital


def test_cycle_is_an_error(tmp_path: Path) -> None:
    body = node("HIPAA") + node("A") + node("B") + node("C") + edge("HIPAA", "C")
    body += edge("A", "B") + edge("B", "A")
    with pytest.raises(TreeError, match="cycle"):
        load_hipaa_graphml(write(tmp_path, body))
    body = (
        node("HIPAA") + node("A") + node("B") + edge("HIPAA", "A") + edge("A", "B") + edge("B", "A")
    )
    with pytest.raises(TreeError, match="node 'A' has several parents"):
        load_hipaa_graphml(write(tmp_path, body))


def test_truncated_and_rootless_files(tmp_path: Path) -> None:
    path = tmp_path / "cut.graphml"
    path.write_text((HEADER + node("HIPAA") + node("A"))[:-20])
    with pytest.raises(TreeError, match=r"cut.graphml: not valid GraphML"):
        load_hipaa_graphml(path)
    with pytest.raises(TreeError, match="no root node 'HIPAA'"):
        load_hipaa_graphml(write(tmp_path, node("A")))
    with pytest.raises(TreeError, match="file not found"):
        load_hipaa_graphml(tmp_path / "missing.graphml")


def test_bad_privaci_payload(tmp_path: Path) -> None:
    body = (
        '<node id="GDPR"><data key="d0">{"content": "GDPR"}</data></node>'
        '<node id="Article 1"><data key="d0">{not json</data></node>' + edge("GDPR", "Article 1")
    )
    path = tmp_path / "g.graphml"
    path.write_text(
        HEADER.replace('attr.name="text"', 'attr.name="data"') + body + "</graph></graphml>"
    )
    with pytest.raises(TreeError, match=r"node 'Article 1': attribute 'data' is not JSON"):
        load_privaci_law_tree(path, "gdpr")
