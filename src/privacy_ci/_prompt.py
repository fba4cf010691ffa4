"""A prompt template: a named text with variables, its sha256 for run manifests,
and strict one-pass rendering. Each prompt family says how it writes variables.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import ClassVar

from privacy_ci.errors import PrivacyCIError


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt file.

    Args:
        name: the file stem (e.g. ``dp``) or the path of a user-supplied file.
        text: the template text.
    """

    name: str
    text: str

    variable: ClassVar[re.Pattern[str]] = re.compile(r"<([a-z_]+)>")
    """How a variable is written; group 1 is its name."""

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(self.variable.findall(self.text))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def render(self, **values: str) -> str:
        """Fill every variable in one pass (a value that itself looks like a variable
        is never substituted again).

        Raises:
            PrivacyCIError: a variable is missing or an unknown one is given.
        """
        missing = self.variables - set(values)
        unknown = set(values) - self.variables
        if missing or unknown:
            raise PrivacyCIError(
                f"prompt {self.name!r}: missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        return self.variable.sub(lambda m: values[m.group(1)], self.text)
