"""The eCFR HTML parser, node-id canonicalisation and the parsed-tree cache."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from privacy_ci.errors import DataMissingError
from privacy_ci.regulations import (
    ECFR_FILES,
    PARSER_VERSION,
    EcfrReport,
    NodeKind,
    RegulationTree,
    TreeError,
    load_ecfr,
    load_ecfr_tree,
    parse_ecfr,
    parse_ecfr_html,
)
from privacy_ci.regulations._ids import (
    PRINTED_ID_ERRATA,
    AliasIndex,
    alias_key,
    canonical_id,
    id_spellings,
    resolve_id,
    split_id,
    to_goldcoin_id,
)
from tests._raw import read_graphml

# --------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def ecfr_files(shared_data: Path) -> list[Path]:
    return [shared_data / f for f in ECFR_FILES]


@pytest.fixture(scope="module")
def parsed(ecfr_files: list[Path]) -> tuple[RegulationTree, EcfrReport]:
    return parse_ecfr(ecfr_files)


@pytest.fixture(scope="module")
def tree(parsed: tuple[RegulationTree, EcfrReport]) -> RegulationTree:
    return parsed[0]


@pytest.fixture(scope="module")
def report(parsed: tuple[RegulationTree, EcfrReport]) -> EcfrReport:
    return parsed[1]


# --------------------------------------------------------------------------------------
# structure


def test_root_parts_and_subparts(tree: RegulationTree) -> None:
    assert tree.regulation == "hipaa"
    assert tree.root == "HIPAA"
    assert tree.children("HIPAA") == ("Part160", "Part162", "Part164")
    assert tree.children("Part164") == tuple(f"Part164Subpart{x}" for x in "ABCDE")
    assert "Part162SubpartB-C" in tree.children("Part162")
    assert "Part162SubpartG-H" in tree.children("Part162")
    assert tree["Part164SubpartB"].children == ()
    assert tree["Part164SubpartE"].kind is NodeKind.SUBPART
    assert tree["Part164"].kind is NodeKind.PART
    assert tree["Part164"].text == "PART 164—SECURITY AND PRIVACY"


def test_counts_match_the_page_structure(tree: RegulationTree) -> None:
    stats = tree.stats()
    assert stats["tree_nodes"] == stats["nodes"] == 2274  # no stubs, every node reachable
    assert stats["leaves"] == 1632 and stats["internal_nodes"] == 642
    sections = [n for n in tree if n.kind is NodeKind.SECTION]
    assert len(sections) == 144  # 61 + 44 + 39
    by_part = {p: sum(1 for s in sections if s.id.startswith(p)) for p in ("160", "162", "164")}
    assert by_part == {"160": 61, "162": 44, "164": 39}


def test_sections_have_heading_title_and_own_text(tree: RegulationTree) -> None:
    sec = tree["164.502"]
    assert sec.kind is NodeKind.SECTION
    assert sec.parent == "Part164SubpartE"
    assert sec.title == "Uses and disclosures of protected health information: General rules."
    assert (
        sec.text == "§ 164.502 Uses and disclosures of protected health information: General rules."
    )
    assert sec.children[:2] == ("164.502(a)", "164.502(b)")
    # a section with introductory text keeps it after the heading
    assert tree["164.102"].text.startswith("§ 164.102 Statutory basis. The provisions of this part")


def test_paragraphs_nest_six_levels(tree: RegulationTree) -> None:
    assert tree.path("164.512(f)(1)(ii)(A)") == [
        "HIPAA",
        "Part164",
        "Part164SubpartE",
        "164.512",
        "164.512(f)",
        "164.512(f)(1)",
        "164.512(f)(1)(ii)",
        "164.512(f)(1)(ii)(A)",
    ]
    deep = "164.502(a)(5)(ii)(B)(2)(iv)"  # (a) (5) (ii) (B) (2) (iv): six levels
    assert tree[deep].parent == "164.502(a)(5)(ii)(B)(2)"
    assert len(tree.ancestors(deep)) == 9
    assert tree["164.502(a)(1)(i)"].text == "(i) To the individual;"


def test_node_text_is_own_and_whitespace_normalised(tree: RegulationTree) -> None:
    for node in tree:
        assert node.text == " ".join(node.text.split()), node.id
        parent = tree.nodes[node.parent] if node.parent else None
        if parent is not None and parent.text and node.kind is NodeKind.PARAGRAPH:
            assert not node.text.startswith(parent.text), node.id
    assert tree["164.103(Common control)"].text.startswith("Common control exists if")


def test_definition_ids_are_readable(tree: RegulationTree) -> None:
    for node_id in (
        "160.103(Business associate)(1)(i)",
        "164.501(Payment)(2)(vi)(A)",
        "164.504(a)(Plan administration functions)",
        "164.304(Access)",
        "160.103(Act)",
        "162.103(Designated standard maintenance organization (DSMO))",
        "160.103(Civil money penalty or penalty)",  # term printed as <em>..</em> or <em>..</em>
        "160.202(Contrary)",  # printed "Contrary," with a comma
    ):
        assert node_id in tree, node_id
        assert tree[node_id].kind is NodeKind.DEFINITION
    assert tree["164.504(a)(Plan administration functions)"].parent == "164.504(a)"
    assert tree["164.501(Payment)"].parent == "164.501"
    # definitions with lettered sub-paragraphs (§ 162.408)
    assert (
        tree["162.408(National Provider System)(g)"].parent == "162.408(National Provider System)"
    )


def test_ansi_mislabel_follows_the_html_nesting(tree: RegulationTree, report: EcfrReport) -> None:
    node = tree["160.103(Business associate)(1)"]
    assert node.parent == "160.103(Business associate)"
    assert node.text.startswith("(1) Except as provided in paragraph (4) of this definition")
    assert node.children == (
        "160.103(Business associate)(1)(i)",
        "160.103(Business associate)(1)(ii)",
    )
    assert "160.103(ANSI)(1)" not in tree
    assert tree["160.103(ANSI)"].children == ()
    assert report.relabelled == {"160.103(ANSI)(1)": "160.103(Business associate)(1)"}
    assert report.anchors["160.103(ANSI)(1)"] == "160.103(Business associate)(1)"


def test_unlabelled_blocks_are_appended_and_reported(
    tree: RegulationTree, report: EcfrReport
) -> None:
    # p.no-hierarchy "$(1) ..." paragraphs inside the (B) wrapper
    text = tree["164.306(d)(3)(ii)(B)"].text
    assert "$(1) Document why it would not be reasonable" in text
    assert tree["164.306(d)(3)(ii)(B)"].children == ()
    # div.extract: the required header statement of a notice
    assert "THIS NOTICE DESCRIBES HOW MEDICAL INFORMATION" in tree["164.520(b)(1)(i)"].text
    assert report.appended == {
        "164.306(d)(3)(ii)(B)": 2,
        "164.404(d)(1)": 1,
        "164.404(d)(2)": 2,
        "164.520(b)(1)(i)": 1,
    }


def test_combined_reserved_paragraph(tree: RegulationTree, report: EcfrReport) -> None:
    assert tree["164.504(b)"].text == "(b)–(d) [Reserved]"
    assert any("(b)–(d) is one node" in w for w in report.warnings)


def test_appendix(tree: RegulationTree) -> None:
    app = tree["Appendix A to Subpart C of Part 164"]
    assert app.kind is NodeKind.APPENDIX
    assert app.parent == "Part164SubpartC"
    assert app.text.startswith("Appendix A to Subpart C of Part 164—Security Standards: Matrix")
    assert "Security Management Process | 164.308(a)(1)" in app.text
    assert "164.308(a)(1)" in tree.refs(app.id)


def test_references_from_links_and_text(tree: RegulationTree) -> None:
    # the paper's example: 164.502(a)(1)(iv) cites 164.502(a)(5)(i) and 164.508
    refs = tree.refs("164.502(a)(1)(iv)")
    assert refs[:2] == ("164.502(a)(5)(i)", "164.508")
    # a link inside a definition is attributed to the definition node itself
    assert tree.refs("164.103(Health care component)") == ("164.105(a)(2)(iii)(D)",)
    # every reference is an existing node, and no node cites itself
    for src, targets in tree.references.items():
        assert src not in targets
        assert len(set(targets)) == len(targets)
        assert all(t in tree for t in targets)
    # 807 from the pages' links and 104 read from the text (see the report)
    assert sum(len(v) for v in tree.references.values()) == 911


def test_broken_links_fall_back_to_the_text(tree: RegulationTree, report: EcfrReport) -> None:
    broken = dict(report.broken_links)
    # "§ 164.504(g)" is linked to the non-existent #p-164.504(a)(4)(ii)(g)
    assert broken["164.105(b)(2)(ii)"].endswith("#p-164.504(a)(4)(ii)(g)")
    assert "164.504(g)" in tree.refs("164.105(b)(2)(ii)")
    # "§ 164.524(c)(2)(ii) and (3)(ii)" is linked to #p-164.524(3)(ii)
    assert broken["164.502(a)(4)(ii)"].endswith("#p-164.524(3)(ii)")
    assert "164.524(c)(3)(ii)" in tree.refs("164.502(a)(4)(ii)")
    assert len(report.broken_links) == 5
    # citations of paragraphs that are not nodes fall back to the nearest ancestor
    assert ("164.404(d)(2)", "164.404(d)(1)(i)", "164.404(d)(1)") in report.fallbacks
    assert ("164.314(a)(2)(iii)", "164.308(b)(4)", "164.308(b)") in report.fallbacks
    # citations of other titles are reported, not resolved
    assert all(not re.match(r"Part16[024]|16[024]\.", t) for _, t in report.unresolved)


def test_report_as_dict_is_json(report: EcfrReport) -> None:
    import json

    data = json.loads(json.dumps(report.as_dict()))
    assert (data["link_references"], data["text_references"]) == (807, 104)
    assert data["relabelled"] == {"160.103(ANSI)(1)": "160.103(Business associate)(1)"}


def test_page_order_does_not_matter(ecfr_files: list[Path], tree: RegulationTree) -> None:
    again = parse_ecfr_html(list(reversed(ecfr_files)))
    assert again.content_hash() == tree.content_hash()


# plain ids: the root, parts, subparts, sections and lettered/numbered paragraphs
_PLAIN_ID = re.compile(
    r"HIPAA|Part\d{3}(?:Subpart[A-Z](?:-[A-Z])?)?|\d{3}\.\d+(?:\((?:[a-z]{1,5}|\d{1,2}|[A-Z])\))*"
)


def test_parsing_agrees_with_goldcoins_tree_of_the_same_pages(
    ecfr_files: list[Path], shared_data: Path
) -> None:
    """GoldCoin built its published tree from these three pages: read straight from
    its GraphML, it gives the shape and the parent of every plain id."""
    tree = parse_ecfr_html(ecfr_files)
    ref = read_graphml(shared_data / "hipaa" / "regulation_tree_goldcoin.graphml")
    internal, leaves = ref.tree("HIPAA")
    assert len(tree) == len(internal | leaves) == 2274
    assert sum(1 for n in tree if n.children) == len(internal)
    assert sum(1 for n in tree if not n.children) == len(leaves)
    reachable = internal | leaves
    parent = {
        t: s
        for s, t, a in ref.edges
        if a["relation"] == "subsume" and s in reachable and t in reachable
    }
    ref_plain = {n for n in reachable if _PLAIN_ID.fullmatch(n)}
    ours_plain = {n.id for n in tree if _PLAIN_ID.fullmatch(n.id)}
    assert ours_plain == ref_plain and len(ours_plain) == 1963  # of 2274 nodes
    # the one id GoldCoin keeps and we re-parent: the page's own mislabelled paragraph
    assert "160.103(ANSI)(1)" in reachable and "160.103(ANSI)(1)" not in tree
    wrong = [
        (n, parent.get(n), tree[n].parent) for n in ours_plain if parent.get(n) != tree[n].parent
    ]
    assert wrong == []


# --------------------------------------------------------------------------------------
# cache


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(cache))
    return cache


def _copy_data(shared_data: Path, dest: Path) -> Path:
    for rel in ECFR_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data / rel, dest / rel)
    return dest


def test_cache_warm_load_is_fast_and_equal(
    shared_data: Path, cache_env: Path, tree: RegulationTree
) -> None:
    cold = load_ecfr_tree(shared_data)
    files = list((cache_env / "regulations").glob("ecfr-hipaa-*.pickle"))
    assert len(files) == 1
    warm, warm_report = load_ecfr(shared_data)
    assert warm.content_hash() == cold.content_hash() == tree.content_hash()
    assert warm_report.relabelled == {"160.103(ANSI)(1)": "160.103(Business associate)(1)"}
    # nothing was written next to the data
    assert not list(shared_data.glob("**/*.pickle"))


def test_cache_is_invalidated_by_a_changed_page(
    shared_data: Path, cache_env: Path, tmp_path: Path
) -> None:
    data = _copy_data(shared_data, tmp_path / "data")
    first = load_ecfr_tree(data)
    page = data / ECFR_FILES[2]
    html = page.read_text(encoding="utf-8")
    page.write_text(
        html.replace("</span></span> To the individual;", "</span></span> To the patient;", 1),
        "utf-8",
    )
    second = load_ecfr_tree(data)
    assert second["164.502(a)(1)(i)"].text == "(i) To the patient;"
    assert first.content_hash() != second.content_hash()
    assert len(list((cache_env / "regulations").glob("ecfr-hipaa-*.pickle"))) == 1


def test_cached_tree_names_the_pages_read_now(
    shared_data: Path, cache_env: Path, tmp_path: Path
) -> None:
    # the cache is keyed by content: the same pages in another folder hit it, and the
    # tree and report must then name that folder, not the one that filled the cache
    first = _copy_data(shared_data, tmp_path / "first")
    second = _copy_data(shared_data, tmp_path / "second")
    load_ecfr_tree(first)
    tree, report = load_ecfr(second)
    assert len(list((cache_env / "regulations").glob("ecfr-hipaa-*.pickle"))) == 1
    assert report.sources == [str(second / rel) for rel in ECFR_FILES]
    assert str(first) not in tree.source
    assert tree.source == "; ".join(str(second / rel) for rel in ECFR_FILES)


def test_cache_damaged_file_is_rebuilt(shared_data: Path, cache_env: Path) -> None:
    load_ecfr_tree(shared_data)
    (cached,) = (cache_env / "regulations").glob("ecfr-hipaa-*.pickle")
    cached.write_bytes(b"not a pickle")
    tree = load_ecfr_tree(shared_data)
    assert len(tree) == 2274
    assert cached.read_bytes() != b"not a pickle"


def test_cache_key_includes_parser_version(
    shared_data: Path, cache_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_ecfr_tree(shared_data)
    (before,) = (cache_env / "regulations").glob("ecfr-hipaa-*.pickle")
    monkeypatch.setattr("privacy_ci.regulations._ecfr.PARSER_VERSION", PARSER_VERSION + "-next")
    load_ecfr_tree(shared_data)
    (after,) = (cache_env / "regulations").glob("ecfr-hipaa-*.pickle")
    assert before.name != after.name


def test_load_without_cache_and_default_data_dir(
    shared_data: Path, cache_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    tree = load_ecfr_tree(cache=False)
    assert len(tree) == 2274
    assert not (cache_env / "regulations").exists()


def test_missing_pages_raise_data_missing(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError, match=r"subchapter-C_part-160\.html"):
        load_ecfr_tree(tmp_path, cache=False)


# --------------------------------------------------------------------------------------
# bad input


def test_truncated_page_mid_paragraph(shared_data: Path, tmp_path: Path) -> None:
    data = _copy_data(shared_data, tmp_path)
    page = data / ECFR_FILES[2]
    raw = page.read_bytes()
    page.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TreeError, match=r"subchapter-C_part-164\.html.*truncated"):
        parse_ecfr_html([data / f for f in ECFR_FILES])


def test_truncated_page_at_a_clean_section_boundary(shared_data: Path, tmp_path: Path) -> None:
    """A cut right after a section's closing tag is still an error (decision: a part
    page always ends with </html>, so a half-built tree is never returned)."""
    data = _copy_data(shared_data, tmp_path)
    page = data / ECFR_FILES[2]
    html = page.read_text(encoding="utf-8")
    cut = html.index('<div class="section" id="164.502">')
    page.write_text(html[:cut], encoding="utf-8")
    with pytest.raises(TreeError, match=r"subchapter-C_part-164\.html.*truncated"):
        parse_ecfr_html([data / f for f in ECFR_FILES])


def test_page_without_sections(tmp_path: Path) -> None:
    page = tmp_path / "subchapter-C_part-999.html"
    page.write_text(
        '<!DOCTYPE html><html><body><div class="part" id="part-999">'
        '<h1 data-hierarchy-metadata=\'{"citation":"45 CFR Part 999"}\'>PART 999—EMPTY</h1>'
        "</div></body></html>",
        encoding="utf-8",
    )
    with pytest.raises(TreeError, match=r"subchapter-C_part-999\.html: no sections"):
        parse_ecfr_html([page])


def test_not_an_ecfr_page(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_text("<html><body><p>Hello</p></body></html>\n", encoding="utf-8")
    with pytest.raises(TreeError, match=r"index\.html: no part"):
        parse_ecfr_html([page])


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage"])
def test_empty_or_binary_page(tmp_path: Path, content: bytes) -> None:
    page = tmp_path / "part.html"
    page.write_bytes(content)
    with pytest.raises(TreeError, match=r"part\.html"):
        parse_ecfr_html([page])


def test_missing_page(tmp_path: Path) -> None:
    with pytest.raises(TreeError, match="file not found"):
        parse_ecfr_html([tmp_path / "nope.html"])
    with pytest.raises(TreeError, match="no eCFR pages"):
        parse_ecfr_html([])


def test_duplicate_page(ecfr_files: list[Path]) -> None:
    with pytest.raises(TreeError, match="appears twice"):
        parse_ecfr_html([ecfr_files[0], ecfr_files[0]])


def test_small_synthetic_page(tmp_path: Path) -> None:
    """Flat indent-N paragraphs (no wrappers), a definition and a mislabelled id."""
    page = tmp_path / "part-900.html"
    page.write_text(
        """<html><body><div class="part" id="part-900">
<h1 data-hierarchy-metadata='{"citation":"45 CFR Part 900"}'>PART 900—TEST</h1>
<div class="subpart" id="subpart-A">
<h2 data-hierarchy-metadata='{"citation":"45 CFR Part 900 Subpart A"}'>Subpart A—General</h2>
<div class="section" id="900.1">
<h4 data-hierarchy-metadata='{"citation":"45 CFR 900.1"}'>§ 900.1 Definitions.</h4>
<p>Terms:</p>
<p class="indent-1" id="p-900.1(Thing)"><em class="paragraph-hierarchy">Thing</em> means:</p>
<p class="indent-2" id="p-900.1(Other)(1)"><span class="paragraph-hierarchy">(1)</span> a stone; see paragraph (2) of this definition;</p>
<p class="indent-2" id="p-900.1(Thing)(2)"><span class="paragraph-hierarchy">(2)</span> a   tree.</p>
<p class="citation">[1 FR 1]</p>
</div>
<div class="section" id="900.2">
<h4 data-hierarchy-metadata='{"citation":"45 CFR 900.2"}'>§ 900.2 Rules.</h4>
<div id="p-900.2(a)"><p class="indent-1" data-title="900.2(a)"><span class="paragraph-hierarchy">(a)</span> See <a class="cfr external" href="/current/title-45/section-900.1#p-900.1(Other)(1)">§ 900.1</a> and paragraph (b) of this section.</p></div>
<div id="p-900.2(b)"><p class="indent-1" data-title="900.2(b)"><span class="paragraph-hierarchy">(b)</span> Other.</p></div>
</div></div></div></body></html>
""",
        encoding="utf-8",
    )
    tree, report = parse_ecfr([page])
    assert tree.children("900.1") == ("900.1(Thing)",)
    assert tree.children("900.1(Thing)") == ("900.1(Thing)(1)", "900.1(Thing)(2)")
    assert tree["900.1(Thing)(2)"].text == "(2) a tree."
    assert tree["900.1"].text == "§ 900.1 Definitions. Terms:"
    assert report.relabelled == {"900.1(Other)(1)": "900.1(Thing)(1)"}
    assert tree.refs("900.1(Thing)(1)") == ("900.1(Thing)(2)",)
    # the link's printed anchor is mapped onto the corrected node
    assert tree.refs("900.2(a)") == ("900.1(Thing)(1)", "900.1", "900.2(b)")


# --------------------------------------------------------------------------------------
# ids


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("160.103(Business%20associate)(1)(i)", "160.103(Business associate)(1)(i)"),
        ("164.501Payment(2)(vi)(A)", "164.501(Payment)(2)(vi)(A)"),
        ("164.304Access", "164.304(Access)"),
        ("164.501“Payment”(2)", "164.501(Payment)(2)"),
        ("164.501 “Payment” (1)(i)", "164.501(Payment)(1)(i)"),
        (
            "164.504(a) “Summary health information” (2)",
            "164.504(a)(Summary health information)(2)",
        ),
        ("45 CFR 164.512", "164.512"),
        ("§ 164.502(a)", "164.502(a)"),
        ("164.512(f)(1)(ii)(A)", "164.512(f)(1)(ii)(A)"),
        ("45 CFR Part 164 Subpart A", "Part164SubpartA"),
        ("Part162SubpartB-C", "Part162SubpartB-C"),
        ("AppendixAtoSubpartCofPart164,Title45", "Appendix A to Subpart C of Part 164"),
        ("HIPAA", "HIPAA"),
        (
            "162.103 “Designated standard maintenance organization (DSMO)”",
            "162.103(Designated standard maintenance organization (DSMO))",
        ),
    ],
)
def test_canonical_id(raw: str, canonical: str) -> None:
    assert canonical_id(raw) == canonical


def test_canonical_id_cannot_restore_stripped_spaces_but_alias_key_matches() -> None:
    assert canonical_id("164.504(a)Planadministrationfunctions") == (
        "164.504(a)(Planadministrationfunctions)"
    )
    assert alias_key("164.504(a)Planadministrationfunctions") == alias_key(
        "164.504(a)(Plan administration functions)"
    )
    assert alias_key("164.502(a)") != alias_key("164.502(A)")


@pytest.mark.parametrize(
    ("canonical", "goldcoin"),
    [
        ("160.103(Business associate)(1)", "160.103(Business%20associate)(1)"),
        ("160.103(Act)", "160.103(Act)"),
        ("164.501(Payment)(2)(vi)(A)", "164.501Payment(2)(vi)(A)"),
        ("164.504(a)(Plan administration functions)", "164.504(a)Planadministrationfunctions"),
        ("164.304(Access)", "164.304Access"),
        (
            "162.103(Designated standard maintenance organization (DSMO))",
            "162.103Designatedstandardmaintenanceorganization(DSMO)",
        ),
        ("Appendix A to Subpart C of Part 164", "AppendixAtoSubpartCofPart164,Title45"),
        ("164.502(a)(1)", "164.502(a)(1)"),
    ],
)
def test_to_goldcoin_id(canonical: str, goldcoin: str) -> None:
    assert to_goldcoin_id(canonical) == goldcoin
    assert alias_key(goldcoin) == alias_key(canonical)


def test_split_id() -> None:
    parts = split_id("164.504(a)(Summary health information)(2)")
    assert parts is not None
    assert (parts.section, parts.before, parts.term, parts.after) == (
        "164.504",
        ("a",),
        "Summary health information",
        ("2",),
    )
    assert parts.labels == ("a", "2")
    assert split_id("Part164") is None


def test_id_spellings() -> None:
    assert id_spellings("164.501(Payment)(2)") == [
        "164.501(Payment)(2)",
        "164.501Payment(2)",
        "164.501“Payment”(2)",
        "164.501 “Payment” (2)",
    ]
    assert id_spellings("164.512") == ["164.512", "45 CFR 164.512"]


def test_alias_index_resolves_every_published_spelling(tree: RegulationTree) -> None:
    index = AliasIndex.from_tree(tree)
    assert not index.collisions
    cases = {
        "160.103(Business%20associate)(1)(i)": "160.103(Business associate)(1)(i)",
        "164.501Payment(2)(vi)(A)": "164.501(Payment)(2)(vi)(A)",
        "164.504(a)Planadministrationfunctions": "164.504(a)(Plan administration functions)",
        "164.304Access": "164.304(Access)",
        "164.501“Payment”(2)": "164.501(Payment)(2)",
        "164.501 “Payment” (1)(i)": "164.501(Payment)(1)(i)",
        "45 CFR 164.512": "164.512",
        "160.103(ANSI)(1)": "160.103(Business associate)(1)",  # the printed erratum
        "160.103(ANSI)": "160.103(ANSI)",
        "AppendixAtoSubpartCofPart164,Title45": "Appendix A to Subpart C of Part 164",
        "162.103Designatedstandardmaintenanceorganization(DSMO)": (
            "162.103(Designated standard maintenance organization (DSMO))"
        ),
    }
    for raw, expected in cases.items():
        assert index.resolve(raw) == expected, raw
        assert resolve_id(tree, raw) == expected, raw
    for unknown in ("164.502(z)", "164.501Paymentx", "999.1", "", "Part999"):
        assert index.resolve(unknown) is None
        assert unknown not in index
    assert PRINTED_ID_ERRATA["160.103(ANSI)(1)"] in tree
    aliases = index.aliases()
    assert aliases["164.501Payment(2)(vi)(A)"] == "164.501(Payment)(2)(vi)(A)"
    assert aliases["160.103(ANSI)(1)"] == "160.103(Business associate)(1)"
    assert all(v in tree for v in aliases.values())


def test_every_goldcoin_spelling_round_trips(tree: RegulationTree) -> None:
    index = AliasIndex.from_tree(tree)
    for node in tree:
        assert index.resolve(to_goldcoin_id(node.id)) == node.id
        for spelling in id_spellings(node.id):
            assert index.resolve(spelling) == node.id, spelling


def test_alias_resolution_of_every_node(tree: RegulationTree) -> None:
    resolve_id(tree, "164.502")  # builds and caches the index
    for node in tree:
        assert resolve_id(tree, to_goldcoin_id(node.id)) == node.id
