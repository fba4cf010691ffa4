"""The labeler's prompts (Appendix C): template files with ``{name}`` variables."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from privacy_ci._prompt import PromptTemplate
from privacy_ci.errors import PrivacyCIError

SYSTEM_PROMPT = "labeler_system"
USER_PROMPT = "labeler_user"
DRAFT_USER_PROMPT = "labeler_draft_user"
"""A user's corpus: a document with no label (the paper's prompts stay as they are)."""


class LabelerPrompt(PromptTemplate):
    """A labeling prompt (variables written ``{name}``, as in Appendix C)."""

    variable = re.compile(r"\{([a-z_]+)\}")


def load_labeler_prompt(name: str) -> LabelerPrompt:
    """A packaged prompt, ``labeler_system`` or ``labeler_user``."""
    path = resources.files("privacy_ci.labeling") / "prompts" / f"{name}.txt"
    if not path.is_file():
        raise PrivacyCIError(f"no labeling prompt {name!r}")
    return LabelerPrompt(name, path.read_text(encoding="utf-8").rstrip("\n"))


def prompt_from_file(path: Path) -> LabelerPrompt:
    """A user-supplied prompt file (e.g. a system prompt for another organisation)."""
    try:
        text = path.read_text(encoding="utf-8").rstrip("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise PrivacyCIError(f"{path}: cannot read the prompt ({exc})") from None
    if not text.strip():
        raise PrivacyCIError(f"{path}: the prompt is empty")
    return LabelerPrompt(str(path), text)
