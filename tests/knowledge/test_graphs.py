"""Role and attribute graphs: the real files, queries, matching and validation."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

import pytest

from privacy_ci.errors import ValidationFailed
from privacy_ci.knowledge import (
    AttributeGraph,
    RoleGraph,
    load_attribute_graph,
    load_role_graph,
    similarity,
    term_key,
)

_HEAD = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
    '<key id="d0" for="edge" attr.name="relation" attr.type="string"/>'
    '<key id="d1" for="edge" attr.name="source" attr.type="string"/>'
    '<key id="d2" for="edge" attr.name="label" attr.type="string"/>'
    '<key id="d3" for="node" attr.name="domain" attr.type="string"/>'
    '<graph edgedefault="directed">'
)


def _graphml(tmp_path: Path, nodes: list[str], edges: list[tuple[str, str, str, str]]) -> Path:
    """Write a GraphML file; edges are (source, target, key, value)."""
    body = "".join(f'<node id="{n}"/>' for n in nodes)
    body += "".join(
        f'<edge source="{s}" target="{t}"><data key="{k}">{v}</data></edge>' for s, t, k, v in edges
    )
    path = tmp_path / "g.graphml"
    path.write_text(_HEAD + body + "</graph></graphml>", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def roles(shared_data: Path) -> RoleGraph:
    return load_role_graph(shared_data / "hipaa/role_graph.graphml")


@pytest.fixture(scope="module")
def attributes(shared_data: Path) -> AttributeGraph:
    return load_attribute_graph(shared_data / "hipaa/attribute_graph.graphml")


# -- matching helpers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("covered entity", "cover entity"),
        ("Covered Entities", "cover entity"),
        ("billing address", "bill address"),
        ("credit rating", "credit rat"),
        ("social media", "social medium"),
        ("health care clearinghouses", "health care clearinghouse"),
        ("surgeons", "surgeon"),
        ("email addresses", "email address"),
        ("operating system", "operate system"),
    ],
)
def test_term_key_matches_lemmatised_names(a: str, b: str) -> None:
    assert term_key(a) == term_key(b)


def test_term_key_keeps_distinct_words_apart() -> None:
    assert term_key("status") != term_key("state")
    assert term_key("nurse") != term_key("nursing home")


def test_similarity_methods() -> None:
    assert similarity("Surgeons", "surgeon") == (1.0, "normalised")
    score, method = similarity("pediatric surgeon", "surgeon")
    assert method == "token" and score == pytest.approx(0.7)
    score, method = similarity("xyz", "surgeon")
    assert method == "fuzzy" and score < 0.3


# -- role graph -------------------------------------------------------------------


def test_role_graph_shape(roles: RoleGraph) -> None:
    assert len(roles) == 211
    assert roles.report.raw_edges == 485
    assert roles.number_of_edges == 242
    assert roles.report.relation_counts == {"subsume": 242, "is subsumed by": 243}
    assert roles.report.dropped_self_loops == [("health plan", "is subsumed by")]
    assert roles.report.merged_reverse_edges == 242 and not roles.report.reverse_only_edges
    assert roles.roots == sorted(
        [
            "person",
            "cover entity",
            "business associate",
            "court order",
            "notice",
            "certain insurance entity",
            "health care clearinghouse",
            "common identifier",
            "health care operation",
            "workforce member",
            "privacy rule",
        ]
    )
    stats = roles.stats()
    assert (stats["leaves"], stats["multi_parent_nodes"], stats["longest_path"]) == (95, 31, 9)
    assert roles.report.empty_names == [""]  # a nameless child of "health plan"
    assert roles.report.lemma_variants == [
        ("health care clearinghouse", "health care clearinghouses")
    ]


def test_role_edges_keep_their_sources(roles: RoleGraph) -> None:
    assert roles.edge_sources("person", "relative") == ("wordnet",)
    assert roles.edge_sources("cover entity", "health care provider") == (
        "Who Must Follow These Laws",
    )
    assert "health care provider" in roles.regulation_roles
    assert "person" not in roles.regulation_roles


def test_surgeon_falls_under_covered_entity(roles: RoleGraph) -> None:
    """Figure 1 of the paper: Alice the surgeon is a covered entity."""
    assert roles.match("surgeon") == [roles.match("surgeon")[0]]
    assert roles.match("surgeon")[0].method == "exact"
    assert roles.parents("surgeon") == ["doctor"]
    assert roles.ancestors("surgeon") == [
        "doctor",
        "health care provider",
        "medical practitioner",
        "scholar",
        "cover entity",
        "health professional",
        "intellectual",
        "person",
        "professional",
        "adult",
    ]
    assert roles.path_to_root("surgeon") == [
        "surgeon",
        "doctor",
        "health care provider",
        "cover entity",
    ]
    assert roles.regulation_roles_of("surgeon") == ["health care provider", "cover entity"]
    assert roles.regulation_roles_of("Surgeons") == ["health care provider", "cover entity"]


def test_physician_falls_under_covered_entity(roles: RoleGraph) -> None:
    # WordNet's "provider" sense also brings benefactor / good person
    assert roles.ancestors("physician") == [
        "provider",
        "benefactor",
        "health care provider",
        "cover entity",
        "good person",
        "person",
    ]
    assert roles.path_to_root("physician") == [
        "physician",
        "provider",
        "health care provider",
        "cover entity",
    ]
    assert roles.regulation_roles_of("physician") == [
        "provider",
        "health care provider",
        "cover entity",
    ]


def test_covered_entity_descendants(roles: RoleGraph) -> None:
    assert roles.children("covered entity") == [
        "health care clearinghouses",
        "health care provider",
        "health plan",
    ]
    below = roles.descendants("cover entity")
    assert {"surgeon", "physician", "hospital", "hmo", "dentist"} <= set(below)
    assert below[:3] == ["health care clearinghouses", "health care provider", "health plan"]
    assert roles.ancestors("cover entity") == []
    assert roles.path_to_root("person") == ["person"]


def test_unknown_role_is_matched_not_dropped(roles: RoleGraph) -> None:
    matches = roles.match("pediatric surgeon")
    assert matches[0].term == "surgeon" and matches[0].method == "token"
    # one side's stems all in the other: 0.5 + 0.4 x shared (1) / longer (2)
    assert matches[0].score == 0.5 + 0.4 * 1 / 2 and len(matches) == 5
    (best, *_) = roles.classify("pediatric surgeon")
    assert best.match.term == "surgeon" and "cover entity" in best.ancestors
    with pytest.raises(KeyError, match="no term 'pediatric surgeon'; nearest: surgeon"):
        roles.ancestors("pediatric surgeon")
    assert "pediatric surgeon" not in roles
    assert "" not in [m.term for m in roles.match("zzz", limit=300)]


# -- attribute graph --------------------------------------------------------------


def test_attribute_graph_shape(attributes: AttributeGraph) -> None:
    assert len(attributes) == 296
    assert attributes.number_of_edges == attributes.report.raw_edges == 318
    assert attributes.report.unquoted_labels == 318
    assert attributes.report.relation_counts == {'"has subclass"': 235, '"has individual"': 83}
    assert attributes.roots == ["data item", "owl thing"]
    stats = attributes.stats()
    assert (stats["leaves"], stats["multi_parent_nodes"], stats["longest_path"]) == (225, 24, 6)
    assert attributes.edge_label("biometric personal data", "digital signature") == "has individual"
    assert attributes.domains("age") == (
        "http://umaine.edu/oppo/core/v1#Age",
        "https://w3id.org/dpv/dpv-owl/dpv-pd#Age",
    )
    assert attributes.domains("digital signature") == (
        "http://umaine.edu/oppo/core/v1#DigitalSignature",
    )
    assert attributes.domains("owl thing") == ()
    assert attributes.report.notes == ["5 node(s) without a domain IRI"]


def test_attribute_paths(attributes: AttributeGraph) -> None:
    # biometric personal data has two parents; path_to_root takes the shortest route
    assert attributes.parents("biometric personal data") == ["gdpr health data", "personal data"]
    assert attributes.path_to_root("digital signature") == [
        "digital signature",
        "biometric personal data",
        "personal data",
        "individual data",
        "data item",
    ]
    assert attributes.ancestors("digital signature") == [
        "biometric personal data",
        "gdpr health data",
        "personal data",
        "individual data",
        "sensitive personal data",
        "data item",
    ]


def test_surgery_operative_report_is_not_in_the_graph(attributes: AttributeGraph) -> None:
    """The paper's example attribute has no node; the nearest terms are lexical guesses."""
    assert "surgery operative report" not in attributes
    results = attributes.classify("surgery operative report", limit=5)
    assert [c.match.term for c in results] == [
        "survey response",
        "general reputation",
        "device operate system",
        "credit record",
        "health record",
    ]
    assert all(c.match.method == "fuzzy" and c.match.score < 0.5 for c in results)
    assert results[-1].ancestors == ("medical health", "external", "owl thing")


def test_hiv_status_nearest_terms(attributes: AttributeGraph) -> None:
    assert "HIV status" not in attributes
    results = attributes.classify("HIV status", limit=4)
    assert [c.match.term for c in results] == [
        "social status",
        "marital status",
        "financial status",
        "health status data",
    ]
    health = results[3]
    # stems "hiv status" / "health status data": Jaccard 1/4 loses to 0.9 x the difflib ratio
    ratio = difflib.SequenceMatcher(None, "hiv status", "health status data", autojunk=False)
    assert health.match.method == "fuzzy"
    assert health.match.score == round(0.9 * ratio.ratio(), 4) == 0.5143
    assert health.ancestors == (
        "gdpr health data",
        "sensitive personal data",
        "personal data",
        "individual data",
        "data item",
    )


def test_attribute_normalised_match(attributes: AttributeGraph) -> None:
    assert attributes.match("billing address")[0].term == "bill address"
    assert attributes.ancestors("health records") == ["medical health", "external", "owl thing"]
    assert attributes.descendants("gdpr health data")[:1] == ["biometric personal data"]


# -- validation -------------------------------------------------------------------


def test_role_cycle_is_rejected(tmp_path: Path) -> None:
    path = _graphml(
        tmp_path,
        ["a", "b", "c"],
        [
            ("a", "b", "d0", "subsume"),
            ("b", "c", "d0", "subsume"),
            ("a", "c", "d0", "is subsumed by"),
        ],
    )
    with pytest.raises(ValidationFailed, match=r"g\.graphml: the subsumption edges form a cycle"):
        load_role_graph(path)


def test_attribute_cycle_is_rejected(tmp_path: Path) -> None:
    path = _graphml(
        tmp_path,
        ["a", "b"],
        [("a", "b", "d2", '"has subclass"'), ("b", "a", "d2", "has individual")],
    )
    with pytest.raises(ValidationFailed) as info:
        load_attribute_graph(path)
    assert str(path) in str(info.value) and "cycle: " in str(info.value)


def test_self_loop_dropped_and_reverse_edges_merged(tmp_path: Path) -> None:
    path = _graphml(
        tmp_path,
        ["a", "b", "c"],
        [
            ("a", "b", "d0", "subsume"),
            ("b", "a", "d0", "is subsumed by"),
            ("c", "a", "d0", "is subsumed by"),
            ("b", "b", "d0", "subsume"),
        ],
    )
    graph = load_role_graph(path)
    assert graph.number_of_edges == 2
    assert graph.report.dropped_self_loops == [("b", "subsume")]
    assert graph.report.merged_reverse_edges == 1
    assert graph.report.reverse_only_edges == [("a", "c")]
    assert graph.children("a") == ["b", "c"]


def test_unknown_relation_and_label(tmp_path: Path) -> None:
    path = _graphml(tmp_path, ["a", "b"], [("a", "b", "d0", "likes")])
    with pytest.raises(ValidationFailed, match="has relation 'likes'"):
        load_role_graph(path)
    path = _graphml(tmp_path, ["a", "b"], [("a", "b", "d2", '"has part"')])
    with pytest.raises(ValidationFailed, match="has label 'has part'"):
        load_attribute_graph(path)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed, match="file not found"):
        load_role_graph(tmp_path / "absent.graphml")
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml>", encoding="utf-8")
    with pytest.raises(ValidationFailed, match=r"bad\.graphml: not valid GraphML"):
        load_attribute_graph(bad)
    undeclared = tmp_path / "u.graphml"
    undeclared.write_text(
        _HEAD + '<node id="a"/><edge source="a" target="zz"/></graph></graphml>', encoding="utf-8"
    )
    with pytest.raises(ValidationFailed, match="undeclared node 'zz'"):
        load_role_graph(undeclared)


def test_a_scorer_ranks_by_meaning(attributes: AttributeGraph) -> None:
    """With a scorer, unknown terms are ranked by it (method ``embedding``), clipped
    to [0, 1]; exact and normalised matches still win outright."""
    favourite = "health status data"
    calls: list[tuple[str, int]] = []

    def scorer(query: str, terms: Sequence[str]) -> list[float]:
        calls.append((query, len(terms)))
        return [1.7 if t == favourite else (-0.2 if t == "social status" else 0.1) for t in terms]

    matches = attributes.match("HIV status", limit=3, scorer=scorer)
    assert matches[0].term == favourite
    assert matches[0].score == 1.0 and matches[0].method == "embedding"
    assert all(0.0 <= m.score <= 1.0 for m in matches)
    assert "social status" not in [m.term for m in attributes.match("HIV status", 5, 0.05, scorer)]
    assert calls and calls[0][1] == len([n for n in attributes.graph.nodes if n.strip()])
    calls.clear()
    exact = attributes.classify("health record", scorer=scorer)
    assert exact[0].match.method == "exact" and calls == []
    spelled = attributes.match("HIV status", limit=1)
    assert spelled[0].method != "embedding"
