"""The labeling report as tables (the paper's Tables VII-IX with a backend column,
attribution, controls) built once, rendered as Markdown here and as rich tables by
the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from privacy_ci.labeling._analysis import DRAFTED, LabelingReport


@dataclass(frozen=True)
class ReportTable:
    """One table: a title, column names and rows of display strings."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _rate(value: float, documents: int) -> str:
    # no authored label to compare with: a rate of nothing, not 0%
    return _pct(value) if documents else "—"


def authored_line(reports: Sequence[LabelingReport]) -> str:
    first = reports[0]
    return (
        f"Authored policy: {first.authored_permits} permit / {first.authored_denies} deny"
        f" of {first.flows:,} flows."
    )


def report_tables(reports: Sequence[LabelingReport]) -> list[ReportTable]:
    """Tables VII, VIII, IX (when a run has several draws), attribution and controls.

    Args:
        reports: one per configuration (`analyze_run`).

    Returns:
        The tables, in the paper's order.
    """
    tables = []
    rows7 = []
    for r in reports:
        c = r.conformance
        backend = r.backend + (" (test double, not a model)" if r.test_double else "")
        ratio = "—" if c.over_under is None else f"{c.over_under:.2f}"
        rows7.append(
            (
                r.name,
                backend,
                _rate(c.tier_rate, c.documents),
                _rate(c.acl_rate, c.documents),
                str(c.privacy_violations),
                str(c.over_blocks),
                ratio,
                str(c.failures),
            )
        )
    tables.append(
        ReportTable(
            "Table VII: label conformance against the authored policy (draw 1)",
            ("Configuration", "Backend", "Tier", "ACL", "PV", "OB", "O:U", "Failed"),
            tuple(rows7),
        )
    )
    multi = [r for r in reports if r.stability is not None]
    if multi:
        rows8, rows9 = [], []
        most = max(r.draws for r in multi)
        for r in multi:
            d = r.stability.as_dict() if r.stability else {}
            rows8.append(
                (
                    r.name,
                    str(d["draws"]),
                    _pct(d["tier_stability"]),
                    _pct(d["acl_stability"]),
                    _pct(d["all_stability"]),
                    str(d["unstable_flows"]),
                    str(d["unstable_unauthorized_disclosures"]),
                )
            )
            per = [str(v) for v in d["violations_per_draw"]] + [""] * (most - r.draws)
            spread = [str(d[k]) for k in ("violations_min", "violations_max", "violations_range")]
            vote = "—" if r.ensemble is None else str(r.ensemble.privacy_violations)
            rows9.append((r.name, *per, *spread, vote))
        tables.append(
            ReportTable(
                "Table VIII: self-consistency across draws",
                ("Configuration", "Draws", "Tier", "ACL", "All", "Unstable", "UUD"),
                tuple(rows8),
            )
        )
        draws = tuple(f"Draw {n}" for n in range(1, most + 1))
        tables.append(
            ReportTable(
                "Table IX: induced privacy violations per draw",
                ("Configuration", *draws, "Min", "Max", "Range", "Majority vote"),
                tuple(rows9),
            )
        )
    attribution = tuple(
        (
            r.name,
            kind.replace("_", " "),
            ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none induced",
        )
        for r in reports
        for kind, counts in r.attribution.items()
    )
    tables.append(
        ReportTable(
            "Attribution by counterfactual flip-back (draw 1)",
            ("Configuration", "Induced", "Field restored alone -> authored decision"),
            attribution,
        )
    )
    controls = []
    for r in reports:
        cue = ", ".join(
            f"{tier} {_pct(row['tier_conformance'])} of {row['documents']}"
            for tier, row in r.tier_cue.items()
        )
        inert = r.inert_field
        controls.append(
            (
                r.name,
                cue,
                f"{inert['decisions_changed']} of {inert['flows']:,} changed;"
                f" permits {inert['permits_before']} -> {inert['permits_after']}",
            )
        )
    tables.append(
        ReportTable(
            "Controls (draw 1)",
            (
                "Configuration",
                "Tier conformance by authored tier",
                "Inert field (extra_sensitive inverted)",
            ),
            tuple(controls),
        )
    )
    drafted = tuple(
        (r.name, entry["doc_id"], entry["status"], *_draft_cells(entry["labels"][0]))
        for r in reports
        for entry in r.unlabelled
    )
    if drafted:
        tables.append(
            ReportTable(
                "Documents without an authored label: nothing to compare (draw 1)",
                ("Configuration", "Document", "Status", "Tier", "Roles", "Extra-sensitive"),
                drafted,
            )
        )
    return tables


def _draft_cells(label: dict[str, object] | None) -> tuple[str, str, str]:
    if label is None:
        return ("—", "—", "—")
    roles = label["permitted_receiver_roles"]
    listed = ", ".join(str(r) for r in roles) if isinstance(roles, list) else str(roles)
    return (str(label["sensitivity_tier"]), listed or "none", str(label["extra_sensitive"]))


def report_notes(reports: Sequence[LabelingReport]) -> list[str]:
    """Lines a reader must not miss: failed labels, test-double runs."""
    notes = []
    for r in reports:
        if r.failures:
            first = r.failures[0]
            notes.append(
                f"{r.name}: {len(r.failures)} label(s) failed and deny every request for"
                f" their document; first: {first['doc_id']} draw {first['draw']}:"
                f" {first['failure']}"
            )
        if r.unlabelled:
            drafted = sum(entry["status"] == DRAFTED for entry in r.unlabelled)
            notes.append(
                f"{r.name}: {len(r.unlabelled)} document(s) have no authored label, so the"
                f" figures above leave them out ({drafted} drafted); `label export` writes"
                " the drafts for the Policy Authority to review"
            )
        if r.test_double:
            notes.append(f"{r.name}: produced by the scripted test double, not a model")
    return notes


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_report(reports: Sequence[LabelingReport]) -> str:
    """The report as Markdown.

    Args:
        reports: one per configuration (`analyze_run`).

    Returns:
        The document text.
    """
    if not reports:
        return "# Labeling experiment\n\nNo configurations.\n"
    lines = [
        "# Labeling experiment (Privacy Conductor, sections V-C to VI-D)",
        "",
        authored_line(reports) + " Every row names the backend that wrote its labels.",
    ]
    for table in report_tables(reports):
        lines += [
            "",
            f"## {table.title}",
            "",
            _row(table.headers),
            _row(["---"] * len(table.headers)),
        ]
        lines += [_row(row) for row in table.rows]
    notes = report_notes(reports)
    if notes:
        lines += ["", "## Notes", ""] + [f"* {note}" for note in notes]
    return "\n".join(lines) + "\n"
