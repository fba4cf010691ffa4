"""KnowledgeBase: loading all three regulations, queries, stats and the paper's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.errors import DataMissingError, PrivacyCIError
from privacy_ci.knowledge import (
    KB_FILES,
    PAPER_STATS,
    PAPER_STATS_NOTES,
    KnowledgeBase,
    NormType,
    Reference,
    ReferenceKind,
    exact_resolver,
    load_knowledge_base,
)


@pytest.fixture(scope="module")
def hipaa(shared_data: Path) -> KnowledgeBase:
    return load_knowledge_base("hipaa", shared_data, hipaa_tree="published")


@pytest.fixture(scope="module")
def gdpr(shared_data: Path) -> KnowledgeBase:
    return load_knowledge_base("gdpr", shared_data)


@pytest.fixture(scope="module")
def ai_act(shared_data: Path) -> KnowledgeBase:
    return load_knowledge_base("ai_act", shared_data)


def test_hipaa_loads(shared_data: Path) -> None:
    # the load time is a benchmark figure, not a test assertion
    kb = load_knowledge_base("hipaa", shared_data)
    assert len(kb) == 591


def test_hipaa_bundle(hipaa: KnowledgeBase) -> None:
    assert hipaa.regulation == "hipaa" and hipaa.tree.root == "HIPAA"
    assert hipaa.definitions is not None and len(hipaa.definitions) == 54
    assert hipaa.role_graph is not None and len(hipaa.role_graph) == 211
    assert hipaa.attribute_graph is not None and len(hipaa.attribute_graph) == 296
    assert hipaa.norms_report is not None and hipaa.norms_report.strict
    assert hipaa.tree_report is not None and len(hipaa.tree_report.stubs) == 18
    assert hipaa.sources["tree"].endswith("hipaa/regulation_tree_goldcoin.graphml")
    assert set(hipaa.sources) == set(KB_FILES["hipaa"])


def test_hipaa_stats(hipaa: KnowledgeBase) -> None:
    assert hipaa.stats() == {
        "tree_internal_nodes": 642,
        "tree_leaves": 1632,
        "subsumption_edges": 2273,
        "cross_references": 761,
        "norms": 591,
        "positive_norms": 231,
        "negative_norms": 32,
        "general_definitions": 328,
        "annotated_references": 294,
        "definitions": 54,
        "role_graph_nodes": 211,
        "role_graph_edges": 485,
        "role_graph_subsumptions": 242,
        "attribute_graph_nodes": 296,
        "attribute_graph_edges": 318,
        "attribute_graph_subsumptions": 318,
    }


def test_paper_stats_as_printed(hipaa: KnowledgeBase) -> None:
    assert PAPER_STATS == {
        "tree_internal_nodes": 642,
        "tree_leaves": 1673,
        "subsumption_edges": 2098,
        "cross_references": 761,
        "positive_norms": 231,
        "negative_norms": 32,
        "general_definitions": 328,
        "role_graph_nodes": 296,
        "role_graph_edges": 318,
        "attribute_graph_nodes": 211,
        "attribute_graph_edges": 485,
        "definitions": 54,
    }
    assert "swap" in PAPER_STATS_NOTES["role_graph_nodes"]
    rows = {key: (paper, ours) for key, paper, ours, _ in hipaa.paper_comparison()}
    # the swap: the paper's role numbers are the released attribute graph's and vice versa
    assert rows["role_graph_nodes"] == (296, 211) and rows["attribute_graph_nodes"] == (211, 296)
    assert rows["role_graph_edges"] == (318, 485) and rows["attribute_graph_edges"] == (485, 318)
    agree = [k for k, (paper, ours) in rows.items() if paper == ours]
    assert agree == [
        "tree_internal_nodes",
        "cross_references",
        "positive_norms",
        "negative_norms",
        "general_definitions",
        "definitions",
    ]
    # every disagreement is explained
    assert all(PAPER_STATS_NOTES.get(k) for k, (p, o) in rows.items() if p != o)


def test_norm_lookup(hipaa: KnowledgeBase) -> None:
    norm = hipaa.norm("164.502(a)(1)(iv)")
    assert norm.norm_type is NormType.POSITIVE
    assert norm.consent_form == "authorization"
    assert "164.502(a)(5)(i)" in norm.text and "164.502(a)(1)(iv)" in hipaa
    with pytest.raises(KeyError, match="a tree node without a norm"):
        hipaa.norm("164.502")
    with pytest.raises(KeyError, match="not a tree node"):
        hipaa.norm("999.999")


def test_norms_of_type(hipaa: KnowledgeBase) -> None:
    assert len(hipaa.norms_of_type(NormType.POSITIVE)) == 231
    assert len(hipaa.norms_of_type("negative_norm")) == 32
    assert len(hipaa.norms_of_type("General Definition")) == 328
    assert hipaa.norms_of_type("Prohibit") == hipaa.norms_of_type(NormType.NEGATIVE)
    with pytest.raises(PrivacyCIError, match="unknown norm type"):
        hipaa.norms_of_type("maybe")


def test_references_paper_example(hipaa: KnowledgeBase) -> None:
    """Section 3.2: 164.502(a)(1)(iv) needs no 164.502(a)(5)(i) restriction and a valid
    authorization under 164.508."""
    assert hipaa.references("164.502(a)(1)(iv)") == (
        Reference("164.502(a)(5)(i)", ReferenceKind.EXCEPTION),
        Reference("164.508", ReferenceKind.SUPPORT),
    )
    assert hipaa.references("164.502") == ()  # a node without a norm
    with pytest.raises(KeyError):
        hipaa.references("999.999")


def test_referenced_by(hipaa: KnowledgeBase) -> None:
    citing = [n.id for n in hipaa.referenced_by("164.502(a)(5)(i)")]
    assert citing == ["164.502(a)(1)(iv)", "164.506(a)", "164.514(g)"]
    assert [n.id for n in hipaa.referenced_by("164.508")] == [
        "164.502(a)(1)(iv)",
        "164.502(b)(2)(iii)",
        "164.504(f)(1)(i)",
        "164.506(b)(2)",
        "164.528(a)(1)(iv)",
    ]
    assert len(hipaa.referenced_by("164.508", ReferenceKind.EXCEPTION)) == 1
    assert len(hipaa.referenced_by("164.530(j)")) == 9
    assert hipaa.referenced_by("164.502(a)(1)(iv)") == []
    with pytest.raises(KeyError):
        hipaa.referenced_by("999.999")


def test_full_specification(hipaa: KnowledgeBase) -> None:
    text = hipaa.full_specification("164.502(a)(1)(iv)")
    assert text.startswith("PART 164")
    assert text.endswith("valid authorization under § 164.508;")


def test_graph_queries_through_the_kb(hipaa: KnowledgeBase) -> None:
    assert hipaa.role_graph is not None and hipaa.attribute_graph is not None
    assert hipaa.role_graph.regulation_roles_of("surgeon") == [
        "health care provider",
        "cover entity",
    ]
    assert hipaa.attribute_graph.match("billing address")[0].term == "bill address"


def test_gdpr(gdpr: KnowledgeBase) -> None:
    stats = gdpr.stats()
    assert (stats["norms"], stats["positive_norms"], stats["negative_norms"]) == (679, 147, 31)
    assert stats["general_definitions"] == 501 and stats["definitions"] == 26
    assert stats["role_graph_nodes"] == stats["attribute_graph_nodes"] == 0
    assert gdpr.role_graph is None and gdpr.attribute_graph is None
    assert stats["tree_internal_nodes"] + stats["tree_leaves"] == 691
    report = gdpr.norms_report
    assert report is not None and not report.strict
    assert [d.target for d in report.dropped_references] == ["Directive 2002/58/EC"]
    assert gdpr.references("Article 9(2)") == (Reference("Article 89", ReferenceKind.SUPPORT),)
    assert [n.id for n in gdpr.referenced_by("Article 89")] == ["Article 9(2)"]
    assert gdpr.definitions is not None and "Personal Data" in gdpr.definitions


def test_ai_act(ai_act: KnowledgeBase) -> None:
    stats = ai_act.stats()
    assert (stats["norms"], stats["positive_norms"], stats["negative_norms"]) == (821, 361, 66)
    assert stats["general_definitions"] == 394 and stats["definitions"] == 68
    assert (stats["tree_internal_nodes"], stats["tree_leaves"]) == (225, 840)
    assert stats["subsumption_edges"] == 1064  # transitive reduction of the prefix closure
    report = ai_act.norms_report
    assert report is not None and len(report.skipped) == 21 and report.entries == 842
    assert "EU_AI_ACT.chapter13.article102.[*" not in ai_act.norms
    assert ai_act.role_graph is None


def test_exact_resolver_option(shared_data: Path) -> None:
    kb = load_knowledge_base("gdpr", shared_data, resolve=exact_resolver)
    assert kb.norms_report is not None and len(kb.norms_report.dropped_references) == 14
    assert kb.references("Article 9(2)") == ()


def test_data_dir_from_environment(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    assert len(load_knowledge_base("gdpr")) == 679


def test_missing_data_and_unknown_regulation(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError, match=r"5 data file\(s\) missing .*kb_annotated\.json"):
        load_knowledge_base("hipaa", tmp_path)
    with pytest.raises(ValueError, match="unknown regulation 'ccpa'"):
        load_knowledge_base("ccpa", tmp_path)
