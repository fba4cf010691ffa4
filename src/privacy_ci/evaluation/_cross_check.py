"""The metrics of a cross-checked run: the model's verdicts against the reasoner's.

A run made with ``--cross-check`` (`run_eval(..., cross_check=CrossChecker())`)
holds a ``cross_check`` entry in every record (`privacy_ci.judging.CrossCheck`);
`cross_check_metrics` sums them into the ``cross_check`` block of its metrics: the
agreement table (model verdict x reasoner verdict), the agreement rate and the
flagged cases. A run without it has no such entries and gets no such block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CROSS_CHECK_COLUMNS",
    "CROSS_CHECK_ROWS",
    "cross_check_metrics",
]

CROSS_CHECK_ROWS: tuple[str, ...] = ("permit", "prohibit", "not_applicable", "unparsed")
"""The agreement table's rows: the model's verdict (``unparsed``: none)."""

CROSS_CHECK_COLUMNS: tuple[str, ...] = ("permit", "prohibit", "not_applicable", "undetermined")
"""Its columns: the reasoner's verdict (``undetermined``: no norm applies, or it failed)."""


def cross_check_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The ``cross_check`` metrics block of a run's records.

    Args:
        records: the scored records (those without a ``cross_check`` entry are skipped).

    Returns:
        ``{reasoner, compared, rows, columns, counts, agreed, agreement, flagged,
        flagged_cases, reasoner_errors}``, or None when no record was cross-checked.
    """
    checked = [r for r in records if isinstance(r.get("cross_check"), Mapping)]
    if not checked:
        return None
    counts = [[0] * len(CROSS_CHECK_COLUMNS) for _ in CROSS_CHECK_ROWS]
    agreed = 0
    flagged: list[str] = []
    errors = 0
    for rec in checked:
        entry = rec["cross_check"]
        model = entry.get("model_verdict") or "unparsed"
        reasoner = entry.get("reasoner_verdict") or "undetermined"
        if model in CROSS_CHECK_ROWS and reasoner in CROSS_CHECK_COLUMNS:
            counts[CROSS_CHECK_ROWS.index(model)][CROSS_CHECK_COLUMNS.index(reasoner)] += 1
        agreed += bool(entry.get("agree"))
        errors += entry.get("error") is not None
        if entry.get("flagged"):
            flagged.append(str(rec.get("case_id")))
    return {
        "reasoner": str(checked[0]["cross_check"].get("reasoner") or "ci-reasoner"),
        "compared": len(checked),
        "rows": list(CROSS_CHECK_ROWS),
        "columns": list(CROSS_CHECK_COLUMNS),
        "counts": counts,
        "agreed": agreed,
        "agreement": round(agreed / len(checked), 4),
        "flagged": len(flagged),
        "flagged_cases": flagged,
        "reasoner_errors": errors,
    }
