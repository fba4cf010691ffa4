"""The HTTP status of a user error, one table for the API (`_app`) and the review page
(`_review`); each adds the errors only it raises."""

from __future__ import annotations

from collections.abc import Sequence

from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.service._auth import AuthError, Forbidden
from privacy_ci.store import LabelConflict, StoreError, UnknownDocument

__all__ = ["StatusRule", "http_status"]

StatusRule = tuple[type[PrivacyCIError] | tuple[type[PrivacyCIError], ...], int]
"""An error class (or several) and its HTTP status."""

_SHARED: tuple[StatusRule, ...] = (
    (AuthError, 401),
    (Forbidden, 403),
    (UnknownDocument, 404),
    (LabelConflict, 409),
    (ValidationFailed, 422),
    (StoreError, 503),
)


def http_status(exc: PrivacyCIError, more: Sequence[StatusRule] = ()) -> int:
    """The status of `exc`: the first rule of `more`, then of the shared table, that it
    is an instance of; 400 for any other user error."""
    for kinds, status in (*more, *_SHARED):
        if isinstance(exc, kinds):
            return status
    return 400
