"""The error for a framework that is not installed: it names the extra to install."""

from __future__ import annotations

from privacy_ci.errors import PrivacyCIError


class MissingExtra(PrivacyCIError, ImportError):
    """A framework adapter's package is not installed (``pip install 'privacy-ci[EXTRA]'``)."""


def missing_extra(framework: str, extra: str, exc: ImportError) -> MissingExtra:
    """The error to raise from a framework module whose import failed with `exc`."""
    return MissingExtra(
        f"the {framework} adapter needs {exc.name or 'its package'}: pip install"
        f" 'privacy-ci[{extra}]'"
    )
