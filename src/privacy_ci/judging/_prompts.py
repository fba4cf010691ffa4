"""Prompt templates: files under `prompts/`, loaded by name, hashed into run manifests.

Variables are written ``<name>`` as in the paper's "<>" blocks; `render` replaces
exactly the variables the template declares and refuses unknown or missing ones.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from privacy_ci.errors import PrivacyCIError

_VARIABLE = re.compile(r"<([a-z_]+|Regulation ID|Regulation Content|Regulation Reference List)>")


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt file.

    Args:
        name: the file stem (e.g. ``dp``).
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
        """Fill every variable.

        Raises:
            PrivacyCIError: a variable is missing or an unknown one is given.
        """
        missing = self.variables - set(values)
        unknown = set(values) - self.variables
        if missing or unknown:
            raise PrivacyCIError(
                f"prompt {self.name!r}: missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        # One pass, so a value that itself contains "<event>" is never re-substituted.
        return _VARIABLE.sub(lambda m: values[m.group(1)], self.text)


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
