"""The labeler's prompts (Appendix C): template files with ``{name}`` variables."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from privacy_ci.errors import PrivacyCIError

_VARIABLE = re.compile(r"\{([a-z_]+)\}")

SYSTEM_PROMPT = "labeler_system"
USER_PROMPT = "labeler_user"


@dataclass(frozen=True)
class LabelerPrompt:
    """One prompt template.

    Args:
        name: the file stem, or the path of a user-supplied file.
        text: the template text.
    """

    name: str
    text: str

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(_VARIABLE.findall(self.text))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def render(self, **values: str) -> str:
        """Fill every variable in one pass (a value containing ``{x}`` stays as is).

        Raises:
            PrivacyCIError: a variable is missing or an unknown one is given.
        """
        missing, unknown = self.variables - set(values), set(values) - self.variables
        if missing or unknown:
            raise PrivacyCIError(
                f"prompt {self.name!r}: missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        return _VARIABLE.sub(lambda m: values[m.group(1)], self.text)


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
