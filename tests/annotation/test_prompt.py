"""The annotation prompt is Table 5 word for word; its rendering fills every variable."""

from __future__ import annotations

from pathlib import Path

from privacy_ci.annotation import (
    ANNOTATION_PROMPT,
    load_annotation_prompt,
    render_annotation_prompt,
)
from privacy_ci.regulations import load_regulation_tree
from tests._shared import paper


def _words(text: str) -> str:
    return " ".join(text.split())


def test_table5_is_in_the_paper_word_for_word() -> None:
    text = paper("privacy-checklist.txt").read_text(encoding="utf-8")
    start = text.index(
        "As a legal expert specializing in the HIPAA Privacy Rule, your task is to read a"
    )
    table5 = text[start : text.index("Table 5:", start)]
    ours = load_annotation_prompt(ANNOTATION_PROMPT).text
    assert _words(ours) == _words(table5)


def test_rendering_fills_table5_for_any_regulation(shared_data: Path) -> None:
    tree, _ = load_regulation_tree("gdpr", shared_data)
    prompt = render_annotation_prompt(tree, "Article 6(1)", ("Article 9",))
    assert "<Regulation" not in prompt
    assert prompt.startswith("As a legal expert specializing in the GDPR,")
    assert "Article 6(1): " + tree.full_specification("Article 6(1)") in prompt
    assert "referred [Article 9]. For each reference in [Article 9]," in prompt
    assert prompt.rstrip().endswith("{} when the list is empty).")
