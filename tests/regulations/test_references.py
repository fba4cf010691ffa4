"""`resolve_references`: every citation style, on the real pages and on synthetic text."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.regulations import (
    ECFR_FILES,
    NodeKind,
    RegulationTree,
    TreeBuilder,
    find_citations,
    parse_ecfr_html,
    resolve_references,
)


@pytest.fixture(scope="module")
def tree(shared_data: Path) -> RegulationTree:
    return parse_ecfr_html([shared_data / f for f in ECFR_FILES])


def own(tree: RegulationTree, node_id: str) -> list[str]:
    """What the resolver reads from a node's own text."""
    return resolve_references(tree[node_id].text, node_id, tree)


_ROMANS_1_16 = [
    "i", "ii", "iii", "iv", "v", "vi", "vii", "viii",
    "ix", "x", "xi", "xii", "xiii", "xiv", "xv", "xvi",
]  # fmt: skip

# --------------------------------------------------------------------------------------
# each pattern where it occurs in the regulation (the node text, and the parsed tree)

REAL = [
    # § 164.506
    ("164.502(a)(1)(ii)", "§ 164.506", ["164.506"]),
    # §§ 164.502(b), 164.514(d), and 164.530(c)
    (
        "164.502(a)(1)(iii)",
        "§§ 164.502(b), 164.514(d), and 164.530(c)",
        ["164.502(b)", "164.514(d)", "164.530(c)"],
    ),
    # paragraph (a)(2) of this section
    ("164.508(b)(4)(ii)(B)", "paragraph (a)(2) of this section", ["164.508(a)(2)"]),
    # paragraphs (a)(2) or (3) of this section: the bare (3) means (a)(3)
    (
        "164.510(a)(1)",
        "paragraphs (a)(2) or (3) of this section",
        ["164.510(a)(2)", "164.510(a)(3)"],
    ),
    # § 164.514(e), (f), or (g)
    (
        "164.502(a)(1)(vi)",
        "§ 164.512, § 164.514(e), (f), or (g)",
        ["164.512", "164.514(e)", "164.514(f)", "164.514(g)"],
    ),
    # (g)(3)(i)(A), (B), or (C)
    (
        "164.502(g)(3)(ii)(C)",
        "paragraphs (g)(3)(i)(A), (B), or (C) of this section",
        ["164.502(g)(3)(i)(A)", "164.502(g)(3)(i)(B)", "164.502(g)(3)(i)(C)", "164.524"],
    ),
    # ranges: (a)(2) through (a)(5), expanded
    (
        "162.410(a)(6)",
        "paragraphs (a)(2) through (a)(5) of this section",
        ["162.410(a)(2)", "162.410(a)(3)", "162.410(a)(4)", "162.410(a)(5)"],
    ),
    (
        "164.506(a)",
        "§ 164.508(a)(2) through (4)",
        ["164.508(a)(2)", "164.508(a)(3)", "164.508(a)(4)", "164.502(a)(5)(i)", "164.506(c)"],
    ),
    (
        "164.530(i)(4)(ii)(A)",
        "paragraphs (i)(4)(i)(A)–(C) of this section",
        ["164.530(i)(4)(i)(A)", "164.530(i)(4)(i)(B)", "164.530(i)(4)(i)(C)"],
    ),
    ("160.534(b)(1)(ii)", "§§ 160.404–160.408 of this part", ["160.404", "160.406", "160.408"]),
    (
        "164.530(k)(1)",
        "paragraphs (a) through (f) and (i) of this section",
        [f"164.530({x})" for x in "abcdefi"],
    ),
    # paragraph (4) of this definition
    (
        "160.103(Business associate)(1)",
        "paragraph (4) of this definition",
        ["160.103(Business associate)(4)"],
    ),
    (
        "160.103(Health plan)(2)(ii)",
        "paragraph (1)(i)–(xvi) of this definition",
        [f"160.103(Health plan)(1)({r})" for r in _ROMANS_1_16],
    ),
    # of the definition of X (and "at § N")
    (
        "164.506(c)(4)(i)",
        "paragraph (1) or (2) of the definition of health care operations",
        ["164.501(Health care operations)(1)", "164.501(Health care operations)(2)"],
    ),
    (
        "160.103(Electronic protected health information)",
        "paragraphs (1)(i) or (1)(ii) of the definition of protected health information",
        [
            "160.103(Protected health information)(1)(i)",
            "160.103(Protected health information)(1)(ii)",
        ],
    ),
    (
        "162.103(Covered health care provider)",
        "paragraph (3) of the definition of “covered entity” at § 160.103",
        ["160.103(Covered entity)(3)"],
    ),
    # subpart C of part 160 of this subchapter, and the other part/subpart forms
    ("164.105(a)(2)(iii)(A)", "subpart C of part 160 of this subchapter", ["Part160SubpartC"]),
    ("164.306(a)(3)", "subpart E of this part", ["Part164SubpartE"]),
    ("164.304(Access)", "subparts D or E of this part", ["Part164SubpartD", "Part164SubpartE"]),
    ("164.106", "parts 160 and 162 of this subchapter", ["Part160", "Part162"]),
    (
        "164.532(e)(3)",
        "part 160, subpart C of this subchapter and §§ 164.524, 164.526, 164.528, and 164.530(f)",
        ["Part160SubpartC", "164.524", "164.526", "164.528", "164.530(f)"],
    ),
    # "paragraph (a) or paragraph (b) of this section"
    (
        "162.1301(c)",
        "paragraph (a) or paragraph (b) of this section",
        ["162.1301(a)", "162.1301(b)"],
    ),
    # a § citation followed by a paragraph citation of this section is two groups
    (
        "164.530(e)(1)",
        "§ 164.502(j) or paragraph (g)(2) of this section",
        ["Part164SubpartD", "164.502(j)", "164.530(g)(2)"],
    ),
    # continuation letters: (i) after (h) is a letter, not a roman numeral
    (
        "164.414(a)",
        "§ 164.530(b), (d), (e), (g), (h), (i), and (j)",
        [f"164.530({x})" for x in "bdeghij"],
    ),
    # (3)(ii) after (c)(2)(ii) continues at the second level (the page's link is broken)
    (
        "164.502(a)(4)(ii)",
        "§ 164.524(c)(2)(ii) and (3)(ii)",
        ["164.524(c)(2)(ii)", "164.524(c)(3)(ii)"],
    ),
]


@pytest.mark.parametrize(("node_id", "words", "expected"), REAL, ids=[r[0] for r in REAL])
def test_real_citations(
    tree: RegulationTree, node_id: str, words: str, expected: list[str]
) -> None:
    assert words in tree[node_id].text
    assert own(tree, node_id) == expected
    # the parsed tree holds the same references (links first, then text)
    assert set(expected) <= set(tree.refs(node_id))


def test_other_titles_are_not_resolved(tree: RegulationTree) -> None:
    node_id = (
        "164.512(i)(2)(iv)(A)"  # "(7 CFR 1c.108(b), 10 CFR 745.108(b), ..., 45 CFR 46.108(b))"
    )
    assert own(tree, node_id) == []
    cites = find_citations(tree[node_id].text, node_id, tree)
    assert len(cites) == 32 and all(c.target is None for c in cites)  # two lists of 16
    assert cites[0].wanted == "7 CFR 1c.108(b)"
    assert "46.108(b)" in [c.wanted for c in cites]  # 45 CFR part 46: not in the tree
    # "45 CFR part 102" (another part of this title) is not a node either
    assert all(not t.startswith("Part") for t in own(tree, "160.404(a)"))


def test_missing_paragraph_falls_back_to_nearest_ancestor(tree: RegulationTree) -> None:
    # (d)(1)(i) and (ii) are inline in paragraph (d)(1), not nodes
    cites = find_citations(tree["164.404(d)(2)"].text, "164.404(d)(2)", tree)
    inexact = [(c.wanted, c.target) for c in cites if not c.exact]
    assert inexact == [
        ("164.404(d)(1)(i)", "164.404(d)(1)"),
        ("164.404(d)(1)(ii)", "164.404(d)(1)"),
    ]
    assert own(tree, "164.404(d)(2)") == ["164.404(d)(1)"]


# --------------------------------------------------------------------------------------
# synthetic strings against the real tree

SYNTHETIC = [
    ("164.502(a)(1)", "as required by § 164.506.", ["164.506"]),
    (
        "164.502(a)(1)",
        "see 45 CFR 164.501 and 45 CFR 164.512(f)(1)(ii)(A).",
        ["164.501", "164.512(f)(1)(ii)(A)"],
    ),
    (
        "164.502(a)(1)",
        "§§ 164.502(b), 164.514(d), and 164.530(c)",
        ["164.502(b)", "164.514(d)", "164.530(c)"],
    ),
    ("164.510(b)(1)", "under paragraph (a)(2) of this section", ["164.510(a)(2)"]),
    (
        "164.510(b)(1)",
        "under paragraphs (a)(2) or (3) of this section",
        ["164.510(a)(2)", "164.510(a)(3)"],
    ),
    ("164.502(a)(1)", "§ 164.514(e), (f), or (g)", ["164.514(e)", "164.514(f)", "164.514(g)"]),
    (
        "164.502(g)(1)",
        "paragraph (g)(3)(i)(A), (B), or (C)",
        ["164.502(g)(3)(i)(A)", "164.502(g)(3)(i)(B)", "164.502(g)(3)(i)(C)"],
    ),
    (
        "164.512(a)",
        "paragraphs (f)(2) through (f)(4) of this section",
        ["164.512(f)(2)", "164.512(f)(3)", "164.512(f)(4)"],
    ),
    ("164.512(a)", "(f)(2) to be ignored without the word paragraph", []),
    ("164.512(a)", "paragraph (f)(2)–(4)", ["164.512(f)(2)", "164.512(f)(3)", "164.512(f)(4)"]),
    (
        "164.500",
        "§§ 164.502 through 164.506",
        ["164.502", "164.504", "164.506"],
    ),
    (
        "160.103(Business associate)(4)(iv)",
        "paragraph (1)(i) of this definition",
        ["160.103(Business associate)(1)(i)"],
    ),
    (
        "160.103(Business associate)(4)(iv)",
        "paragraph (4) of this definition",
        ["160.103(Business associate)(4)"],
    ),
    # a bare numbered paragraph in a definition means the definition's paragraph
    ("164.501(Payment)(2)", "the activities in paragraph (1)", ["164.501(Payment)(1)"]),
    ("164.502(a)", "subpart C of part 160 of this subchapter", ["Part160SubpartC"]),
    ("164.502(a)", "subpart E of part 164", ["Part164SubpartE"]),
    (
        "164.502(a)",
        "subparts C through E of this part",
        ["Part164SubpartC", "Part164SubpartD", "Part164SubpartE"],
    ),
    ("162.100", "subpart B of this part", ["Part162SubpartB-C"]),  # combined reserved subparts
    ("164.502(a)", "parts 160, 162, and 164 of this subchapter", ["Part160", "Part162", "Part164"]),
    ("164.502(a)", "the paragraph (b)(1) of § 164.508", ["164.508(b)(1)"]),
    (
        "164.502(a)",
        "paragraph (2) of the definition of marketing at § 164.501",
        ["164.501(Marketing)(2)"],
    ),
    (
        "164.502(a)",
        "paragraph (3) of the definition of “health care operations”",
        ["164.501(Health care operations)(3)"],
    ),
    (
        "164.502(a)",
        "paragraph (c), (e), or (f) of this section",
        ["164.502(c)", "164.502(e)", "164.502(f)"],
    ),
    ("164.502(a)", "paragraphs (h) or (i) of this section", ["164.502(h)", "164.502(i)"]),
    (
        "164.502(a)",
        "paragraph (a)(1)(i) or (ii) of this section",
        ["164.502(a)(1)(i)", "164.502(a)(1)(ii)"],
    ),
    # not citations of this tree
    ("164.502(a)", "section 1171(5) of the Act and section 2791(b)(2) of the PHS Act", []),
    ("162.1102", "Version 5.1 (August 2003) and Version 1.2", []),
    ("164.502(a)", "29 CFR parts 1904 and 45 CFR part 102", []),
    ("164.502(a)", "the requirements of this section and this subpart", []),
    # the context node itself is dropped
    ("164.502(a)", "paragraph (a) of this section", []),
    # a paragraph that does not exist: its nearest ancestor
    ("164.502(a)", "paragraph (b)(9)(iv) of this section", ["164.502(b)"]),
    ("164.502(a)", "§ 164.999(a)", []),
]


@pytest.mark.parametrize(
    ("context", "text", "expected"), SYNTHETIC, ids=[s[1][:40] for s in SYNTHETIC]
)
def test_synthetic(tree: RegulationTree, context: str, text: str, expected: list[str]) -> None:
    assert resolve_references(text, context, tree) == expected


def test_citation_details(tree: RegulationTree) -> None:
    text = "under paragraphs (a)(2) or (3) of this section and  § 164.508"
    cites = find_citations(text, "164.510(b)(1)", tree)
    assert [(c.wanted, c.target, c.exact) for c in cites] == [
        ("164.510(a)(2)", "164.510(a)(2)", True),
        ("164.510(a)(3)", "164.510(a)(3)", True),
        ("164.508", "164.508", True),
    ]
    normalised = " ".join(text.split())
    assert normalised[cites[0].start : cites[0].end] == cites[0].text == "(a)(2)"
    assert cites[2].text == "164.508"
    ranged = find_citations(
        "paragraphs (a)(2) through (a)(5) of this section", "162.410(a)(6)", tree
    )
    assert [c.wanted for c in ranged] == [
        "162.410(a)(2)",
        "162.410(a)(3)",
        "162.410(a)(4)",
        "162.410(a)(5)",
    ]
    missing = find_citations("§ 164.999", "164.502", tree)
    assert [(c.wanted, c.target) for c in missing] == [("164.999", None)]
    unknown = find_citations("paragraph (2) of the definition of gizmo", "164.502", tree)
    assert [(c.wanted, c.target) for c in unknown] == [("(2)", None)]
    assert resolve_references("paragraph (2) of the definition of gizmo", "164.502(a)", tree) == []
    assert find_citations("   ", "164.502", tree) == []


def test_resolution_is_pure(tree: RegulationTree) -> None:
    before = tree.content_hash()
    text = tree["164.506(a)"].text
    first = resolve_references(text, "164.506(a)", tree)
    assert resolve_references(text, "164.506(a)", tree) == first
    assert tree.content_hash() == before


def test_resolver_on_a_small_tree() -> None:
    """The resolver needs nothing HIPAA-specific beyond CFR-style ids."""
    b = TreeBuilder("toy", "ROOT")
    b.add("Part1", "ROOT", "PART 1", NodeKind.PART)
    b.add("Part1SubpartA", "Part1", "Subpart A", NodeKind.SUBPART)
    b.add("1.1", "Part1SubpartA", "§ 1.1", NodeKind.SECTION)
    for p in ("a", "b", "c"):
        b.add(f"1.1({p})", "1.1", f"({p})")
        for n in ("1", "2", "3"):
            b.add(f"1.1({p})({n})", f"1.1({p})", f"({n})")
    b.add("1.1(Thing)", "1.1", "Thing means", NodeKind.DEFINITION)
    b.add("1.1(Thing)(1)", "1.1(Thing)", "(1)", NodeKind.DEFINITION)
    b.add("1.1(Thing)(2)", "1.1(Thing)", "(2)", NodeKind.DEFINITION)
    toy = b.build()
    assert resolve_references("§ 1.1(a)(1) through (3)", "1.1(c)", toy) == [
        "1.1(a)(1)",
        "1.1(a)(2)",
        "1.1(a)(3)",
    ]
    assert resolve_references("paragraphs (a) through (c)", "1.1(Thing)", toy) == [
        "1.1(a)",
        "1.1(b)",
        "1.1(c)",
    ]
    assert resolve_references("paragraph (2) of this definition", "1.1(Thing)(1)", toy) == [
        "1.1(Thing)(2)"
    ]
    assert resolve_references("paragraph (b)(1) and (c)(2)", "1.1(a)", toy) == [
        "1.1(b)(1)",
        "1.1(c)(2)",
    ]
    assert resolve_references("subpart A of this part", "1.1(a)", toy) == ["Part1SubpartA"]
    assert resolve_references("§ 1.1(a)(1)–(b)(2)", "1.1(c)", toy) == [
        "1.1(a)(1)",
        "1.1(a)(2)",
        "1.1(a)(3)",
        "1.1(b)(1)",
        "1.1(b)(2)",
    ]
