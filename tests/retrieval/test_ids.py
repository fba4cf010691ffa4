"""`verify_ids`: every id spelling an LLM writes, on the real trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.knowledge import load_knowledge_base
from privacy_ci.regulations import RegulationTree
from privacy_ci.retrieval import extract_citations, verify_ids


@pytest.fixture(scope="module")
def trees(shared_data: Path) -> dict[str, RegulationTree]:
    return {
        r: load_knowledge_base(r, data_dir=shared_data).tree for r in ("hipaa", "gdpr", "ai_act")
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("164.512(e)", ["164.512(e)"]),
        ("45 CFR 164.512(e)(1)(ii)", ["164.512(e)(1)(ii)"]),
        ("45 C.F.R. § 164.512", ["164.512"]),
        ("Section 164.508", ["164.508"]),
        ("§164.502 (a)", ["164.502(a)"]),
        ("§ 164.502(a)", ["164.502(a)"]),
        ("§§ 164.502(b) and 164.514(d)", ["164.502(b)", "164.514(d)"]),
        ("Part 164 Subpart E", ["Part164SubpartE"]),
        ("160.103(Business%20associate)(1)", ["160.103(Business associate)(1)"]),
    ],
)
def test_hipaa_spellings(trees: dict[str, RegulationTree], raw: str, expected: list[str]) -> None:
    result = verify_ids([raw], trees["hipaa"])
    assert list(result.valid) == expected
    assert result.rejected == ()


def test_hipaa_ids_in_free_text(trees: dict[str, RegulationTree]) -> None:
    text = (
        "The disclosure is permitted under 164.512(e)(1)(ii) once the provider has satisfactory "
        "assurances; see also §§ 164.502(b) and 164.514(d), and 45 CFR 164.512(e)(1)(ii) again. "
        "The fee was $100.00 and the form is 164.999(a)."
    )
    result = verify_ids(text, trees["hipaa"])
    assert result.valid == ("164.512(e)(1)(ii)", "164.502(b)", "164.514(d)")
    assert result.written["164.512(e)(1)(ii)"] == "164.512(e)(1)(ii)"
    assert [(r.normalised, r.reason) for r in result.rejected] == [
        ("164.999(a)", "no section 164.999 in the hipaa tree")
    ]
    assert ("hipaa-section", "164.502(b)") in extract_citations(text)


def test_hipaa_rejections_say_why(trees: dict[str, RegulationTree]) -> None:
    result = verify_ids(
        ["164.512(e)(1)(ix)", "164.999", "Article 9", "the privacy rule", "  "], trees["hipaa"]
    )
    assert result.valid == ()
    reasons = {r.raw: r.reason for r in result.rejected}
    assert reasons["164.512(e)(1)(ix)"] == "no paragraph (ix) under 164.512(e)(1)"
    assert "no section 164.999" in reasons["164.999"]
    assert "not HIPAA ids" in reasons["Article 9"]
    assert reasons["the privacy rule"] == "not a hipaa id"
    assert len(result.rejected) == 4  # blank items are ignored
    assert not result


def test_gdpr_spellings(trees: dict[str, RegulationTree]) -> None:
    tree = trees["gdpr"]
    result = verify_ids(
        [
            "Art. 6(1)(a)",
            "Article 9",
            "Article 6 - Lawfulness of processing",
            "Art. 5 (1) e) GDPR",
            "Articles 12 and 13",
            "Recital 39",
            "Chapter III",
            "Article 120",
        ],
        tree,
    )
    assert result.valid == (
        "Article 6(1)",
        "Article 9",
        "Article 6",
        "Article 5(1)",
        "Article 12",
        "Article 13",
        "Recital 39",
        "Chapter 3",
    )
    # points (a), (e) are below the tree's paragraphs: kept as the paragraph, and listed
    assert ("Art. 6(1)(a)", "Article 6(1)") in result.coarsened
    assert [r.reason for r in result.rejected] == ["no Article 120 in the gdpr tree"]
    assert verify_ids(["164.512"], tree).rejected[0].reason.startswith("164.512 is a CFR section")


def test_ai_act_spellings(trees: dict[str, RegulationTree]) -> None:
    tree = trees["ai_act"]
    result = verify_ids(
        ["Article 5", "Art. 50", "Article 5(1)(a)", "Annex III", "Article 5(9)"], tree
    )
    assert result.valid == (
        "EU_AI_ACT.chapter2.article5",
        "EU_AI_ACT.chapter4.article50",
        "EU_AI_ACT.chapter2.article5.1.a",
    )
    reasons = [r.reason for r in result.rejected]
    assert reasons == ["annexes are not in the ai_act tree", "no paragraph (9) under Article 5"]
    assert verify_ids("Under Article 5 of the AI Act", tree).valid == (
        "EU_AI_ACT.chapter2.article5",
    )


def test_duplicates_are_reported_once(trees: dict[str, RegulationTree]) -> None:
    result = verify_ids(["164.512(e)", "§ 164.512(e)", "45 CFR 164.512(e)"], trees["hipaa"])
    assert result.valid == ("164.512(e)",) and result.written["164.512(e)"] == "164.512(e)"
