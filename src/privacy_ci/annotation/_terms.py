"""Splitting annotated values into terms (roles, information types) for the graphs."""

from __future__ import annotations

import re
from collections.abc import Iterable

from privacy_ci.ci import is_placeholder
from privacy_ci.knowledge import clean_text

__all__ = ["head_phrase", "split_terms"]

_SPLIT = re.compile(r"\s*(?:;|,|\bor\b|\band/or\b|\band\b|/)\s*")
_DETERMINER = re.compile(r"^(?:a|an|the|any|each|such|other|all|another)\s+")
_PARENTHESES = re.compile(r"\([^()]*\)?|\be\.g\..*$|\bi\.e\..*$")
_QUALIFIER = re.compile(r"\s+(?:of|who|that|which|with|for|in|to|under|as|whose|from)\s+.*$")


def split_terms(values: Iterable[str | None]) -> list[str]:
    """The distinct terms of annotated values, cleaned, placeholders dropped, in order.

    ``"Court or Administrative Tribunal"`` gives ``court`` and ``administrative
    tribunal``; ``"None"`` gives nothing.
    """
    out: list[str] = []
    for value in values:
        if not value:
            continue
        for piece in _SPLIT.split(_PARENTHESES.sub(" ", clean_text(value))):
            term = _DETERMINER.sub("", piece.strip(" .:-()'\"")).strip()
            if term and not is_placeholder(term) and len(term.split()) <= 8 and term not in out:
                out.append(term)
    return out


def head_phrase(term: str) -> str:
    """The term without its qualifying clause (``provider of health care`` -> ``provider``)."""
    return _QUALIFIER.sub("", term).strip() or term
