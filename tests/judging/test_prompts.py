"""The prompt files: word-for-word paper text, variables, hashes."""

from __future__ import annotations

import re

import pytest

from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging import load_prompt, prompt_hashes
from tests._shared import paper as paper_path

PAPER = "privacy-checklist.txt"
NAMES = [
    "dp",
    "cot_auto",
    "cot_manual",
    "agent_id_generate",
    "law_filter",
    "agent_id_decide",
    "explain",
    "content_decide",
    "ci_extract",
]


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "ci_extract"])
def test_prompt_is_in_the_paper_word_for_word(name: str) -> None:
    paper = squash(paper_path(PAPER).read_text(encoding="utf-8"))
    text = load_prompt(name).text
    # documented deviations (prompts/README.md): one variable syntax, one filter spelling
    text = text.replace("<generated_num>", "{generated_num}")
    assert squash(text) in paper


def test_variables_and_rendering() -> None:
    dp = load_prompt("dp")
    assert dp.variables == {"event"}
    out = dp.render(event="A nurse emails <event> records.")
    assert "A nurse emails <event> records." in out  # values are not re-substituted
    assert load_prompt("content_decide").variables == {"event", "reference_regulations"}
    assert load_prompt("law_filter").variables == {"event", "candidates"}
    assert load_prompt("agent_id_generate").variables == {"event", "generated_num"}
    with pytest.raises(PrivacyCIError, match="missing"):
        dp.render()
    with pytest.raises(PrivacyCIError, match="unknown"):
        dp.render(event="x", extra="y")
    with pytest.raises(PrivacyCIError, match="available"):
        load_prompt("nope")


def test_hashes_are_stable() -> None:
    h = prompt_hashes(NAMES)
    assert len(set(h.values())) == len(NAMES) and all(len(v) == 64 for v in h.values())
    assert prompt_hashes(["dp"])["dp"] == h["dp"]
