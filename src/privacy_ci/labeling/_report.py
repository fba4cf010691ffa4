"""Markdown for labeling reports: the paper's Tables VII-IX with a backend column."""

from __future__ import annotations

from collections.abc import Sequence

from privacy_ci.labeling._analysis import LabelingReport


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_report(reports: Sequence[LabelingReport]) -> str:
    """Tables VII, VIII, IX, attribution and controls as Markdown.

    Args:
        reports: one per configuration (`analyze_run`).

    Returns:
        The document text.
    """
    if not reports:
        return "# Labeling experiment\n\nNo configurations.\n"
    first = reports[0]
    lines = [
        "# Labeling experiment (Privacy Conductor, sections V-C to VI-D)",
        "",
        f"Authored policy: {first.authored_permits} permit / {first.authored_denies} deny"
        f" of {first.flows:,} flows. Every row names the backend that wrote its labels.",
        "",
        "## Table VII: label conformance against the authored policy (draw 1)",
        "",
        _row(["Configuration", "Backend", "Tier", "ACL", "PV", "OB", "O:U", "Failed"]),
        _row(["---"] * 8),
    ]
    for r in reports:
        c = r.conformance
        backend = r.backend + (" (test double, not a model)" if r.test_double else "")
        ratio = "—" if c.over_under is None else f"{c.over_under:.2f}"
        lines.append(
            _row(
                [
                    r.name,
                    backend,
                    _pct(c.tier_rate),
                    _pct(c.acl_rate),
                    c.privacy_violations,
                    c.over_blocks,
                    ratio,
                    c.failures,
                ]
            )
        )
    multi = [r for r in reports if r.stability is not None]
    if multi:
        lines += [
            "",
            "## Table VIII: self-consistency across draws",
            "",
            _row(["Configuration", "Draws", "Tier", "ACL", "All", "Unstable", "UUD"]),
            _row(["---"] * 7),
        ]
        for r in multi:
            d = r.stability.as_dict() if r.stability else {}
            lines.append(
                _row(
                    [
                        r.name,
                        d["draws"],
                        _pct(d["tier_stability"]),
                        _pct(d["acl_stability"]),
                        _pct(d["all_stability"]),
                        d["unstable_flows"],
                        d["unstable_unauthorized_disclosures"],
                    ]
                )
            )
        most = max(r.draws for r in multi)
        head = ["Configuration"] + [f"Draw {n}" for n in range(1, most + 1)]
        head += ["Min", "Max", "Range", "Majority vote"]
        lines += [
            "",
            "## Table IX: induced privacy violations per draw",
            "",
            _row(head),
            _row(["---"] * len(head)),
        ]
        for r in multi:
            d = r.stability.as_dict() if r.stability else {}
            per = list(d["violations_per_draw"]) + [""] * (most - r.draws)
            vote = "—" if r.ensemble is None else r.ensemble.privacy_violations
            lines.append(
                _row(
                    [
                        r.name,
                        *per,
                        d["violations_min"],
                        d["violations_max"],
                        d["violations_range"],
                        vote,
                    ]
                )
            )
    lines += ["", "## Attribution (counterfactual flip-back, draw 1)", ""]
    for r in reports:
        for kind, counts in r.attribution.items():
            text = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none induced"
            lines.append(f"* {r.name}, {kind.replace('_', ' ')}: {text}")
    lines += ["", "## Controls (draw 1)", ""]
    for r in reports:
        cue = "; ".join(
            f"{tier} {_pct(row['tier_conformance'])} of {row['documents']}"
            for tier, row in r.tier_cue.items()
        )
        inert = r.inert_field
        lines.append(f"* {r.name}: tier conformance by authored tier: {cue}")
        lines.append(
            f"* {r.name}: extra_sensitive inverted on every label: {inert['decisions_changed']}"
            f" of {inert['flows']:,} decisions changed (permits {inert['permits_before']} ->"
            f" {inert['permits_after']})"
        )
        if r.failures:
            lines.append(
                f"* {r.name}: {len(r.failures)} label(s) failed (every request for the document"
                " is denied)"
            )
    return "\n".join(lines) + "\n"
