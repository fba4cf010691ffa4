"""The metrics of a cross-checked run: the model's verdicts against the reasoner's.

A run made with ``--cross-check`` (`run_eval(..., cross_check=CrossChecker())`)
holds a ``cross_check`` entry in every record (`privacy_ci.judging.CrossCheck`);
`cross_check_metrics` sums them into the ``cross_check`` block of its metrics: the
agreement table (model verdict x the law's verdict on the facts read), the agreement
rate, how many of the law's verdicts rest on presumptions, and the flagged cases (by
kind). A run without it has no such entries and gets no such block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CROSS_CHECK_COLUMNS",
    "CROSS_CHECK_FLAGS",
    "CROSS_CHECK_ROWS",
    "cross_check_metrics",
]

CROSS_CHECK_ROWS: tuple[str, ...] = ("permit", "prohibit", "not_applicable", "unparsed")
"""The agreement table's rows: the model's verdict (``unparsed``: none)."""

CROSS_CHECK_COLUMNS: tuple[str, ...] = ("permit", "prohibit", "not_applicable", "failed")
"""Its columns: the reasoner's verdict (the law always gives one; ``failed``: the
reasoner raised an error, e.g. its NLP model is missing)."""

CROSS_CHECK_FLAGS: tuple[str, ...] = ("permit-unsupported", "prohibit-despite-permission")
"""The kinds of flag (`privacy_ci.judging.CrossCheck`), in the order they are counted."""


def cross_check_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The ``cross_check`` metrics block of a run's records.

    Args:
        records: the scored records (those without a ``cross_check`` entry are skipped).

    Returns:
        ``{reasoner, compared, rows, columns, counts, agreed, agreement,
        on_presumptions, flagged, flags, flagged_cases, reasoner_errors}``, or None
        when no record was cross-checked. ``on_presumptions``: the reasoner's
        verdicts that rest on presumed facts (``reasoner_determined`` false); ``flags``:
        the flagged cases per kind (`CROSS_CHECK_FLAGS`).
    """
    checked = [r for r in records if isinstance(r.get("cross_check"), Mapping)]
    if not checked:
        return None
    counts = [[0] * len(CROSS_CHECK_COLUMNS) for _ in CROSS_CHECK_ROWS]
    agreed = 0
    flagged: list[str] = []
    kinds = dict.fromkeys(CROSS_CHECK_FLAGS, 0)
    errors = presumed = 0
    for rec in checked:
        entry = rec["cross_check"]
        model = entry.get("model_verdict") or "unparsed"
        reasoner = entry.get("reasoner_verdict") or "failed"
        if model in CROSS_CHECK_ROWS and reasoner in CROSS_CHECK_COLUMNS:
            counts[CROSS_CHECK_ROWS.index(model)][CROSS_CHECK_COLUMNS.index(reasoner)] += 1
        agreed += bool(entry.get("agree"))
        errors += entry.get("error") is not None
        presumed += entry.get("reasoner_verdict") is not None and not entry.get(
            "reasoner_determined", True
        )
        if entry.get("flagged"):
            flagged.append(str(rec.get("case_id")))
            kind = (entry.get("flag") or {}).get("kind")
            if kind in kinds:
                kinds[kind] += 1
    return {
        "reasoner": str(checked[0]["cross_check"].get("reasoner") or "ci-reasoner"),
        "compared": len(checked),
        "rows": list(CROSS_CHECK_ROWS),
        "columns": list(CROSS_CHECK_COLUMNS),
        "counts": counts,
        "agreed": agreed,
        "agreement": round(agreed / len(checked), 4),
        "on_presumptions": presumed,
        "flagged": len(flagged),
        "flags": kinds,
        "flagged_cases": flagged,
        "reasoner_errors": errors,
    }
