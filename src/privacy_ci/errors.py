"""Errors a user can cause. Each names the file, the entry and what was expected.

The CLI turns any `PrivacyCIError` into one line on stderr and a non-zero exit;
the service turns it into a 4xx with the same message.
"""

from __future__ import annotations


class PrivacyCIError(Exception):
    """Base class of every error caused by user input or missing data."""


class DataMissingError(PrivacyCIError):
    """A data file the command needs is not in the data directory."""


class DataIntegrityError(PrivacyCIError):
    """A downloaded or stored data file does not match its pinned sha256."""


class ValidationFailed(PrivacyCIError):
    """A user file (labels, policy, requesters, assignments) failed validation.

    Args:
        problems: one precise message per problem (file, entry, field, expected).
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        head = f"{len(self.problems)} problem(s):\n" if len(self.problems) > 1 else ""
        super().__init__(head + "\n".join(self.problems))
