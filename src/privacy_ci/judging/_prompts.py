"""Prompt templates: files under `prompts/`, loaded by name, hashed into run manifests.

Variables are written ``<name>`` as in the paper's "<>" blocks; `render` replaces
exactly the variables the template declares and refuses unknown or missing ones.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from privacy_ci._prompt import PromptTemplate as BasePrompt
from privacy_ci.errors import PrivacyCIError


class PromptTemplate(BasePrompt):
    """A judging prompt (variables written ``<name>``, as in the paper's tables)."""

    variable = re.compile(r"<([a-z_]+|Regulation ID|Regulation Content|Regulation Reference List)>")


@cache
def load_prompt(name: str) -> PromptTemplate:
    """Load `prompts/<name>.txt` from the package.

    Raises:
        PrivacyCIError: no such prompt (the message lists the available ones).
    """
    folder = resources.files("privacy_ci.judging") / "prompts"
    path = folder / f"{name}.txt"
    if not path.is_file():
        known = sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))
        raise PrivacyCIError(f"no prompt {name!r}; available: {', '.join(known)}")
    return PromptTemplate(name, path.read_text(encoding="utf-8").rstrip("\n"))


def prompt_hashes(names: list[str]) -> dict[str, str]:
    """sha256 of each named prompt (for run manifests)."""
    return {n: load_prompt(n).sha256 for n in names}
