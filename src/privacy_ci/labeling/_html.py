"""The labeling report as one self-contained HTML page, with the Conductor paper's
Figures 2 and 3 drawn for the runs given.

* Fig. 2, direction of role-grant error against the authored policy: per draw, the
  roles a model's ACLs grant beyond the authored ones (over-granting: it releases
  records the policy withholds) and the authored roles they omit (under-granting:
  it withholds records the policy permits), with O:U.
* Fig. 3, (a) the share of the corpus's access decisions (2,520 on Riverside) that
  change between draws; (b) the subset the authored policy denies, where a re-roll
  decides whether a record is released. The panels have their own scales: they are
  not proportional.

Each figure is a PNG embedded in the page, with alt text stating its data and a
table of the same numbers under it; then the report's tables (Tables VII-IX,
attribution, controls). The page structure and its HTML (no external resource) are
the evaluation report's (`privacy_ci.evaluation._report`).
"""

from __future__ import annotations

import datetime as _dt
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling._analysis import LabelingReport
from privacy_ci.labeling._report import authored_line, report_notes, report_tables

if TYPE_CHECKING:
    from privacy_ci.evaluation._report import Figure, Report

OVER_COLOUR = "#D55E00"  # Okabe-Ito vermillion: roles granted beyond the authored ACL
UNDER_COLOUR = "#0072B2"  # Okabe-Ito blue: authored roles left out
SHARE_COLOUR = "#009E73"
DENIED_COLOUR = "#CC79A7"

FIG2_TITLE = "Fig. 2: Direction of role-grant error against the authored policy"
FIG2_CAPTION = (
    "Over-granting releases records the policy withholds; under-granting withholds records"
    " it permits. One bar pair per draw: roles granted beyond the authored ACLs (right) and"
    " authored roles omitted (left), summed over the documents; O:U is their ratio."
)
FIG3_TITLE = "Fig. 3: Access decisions that change between draws"
FIG3_CAPTION = (
    "(a) Left: share of the {flows} access decisions that change between draws. (b) Right:"
    " the subset the authored policy denies, where a re-roll decides whether the record is"
    " released. The two panels are not proportional."
)


def _name(report: LabelingReport) -> str:
    return report.name + (" (TEST DOUBLE)" if report.test_double else "")


def _ratio(added: int, omitted: int) -> str:
    return "—" if not omitted else f"{added / omitted:.2f}"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "—"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def figure2_rows(reports: Sequence[LabelingReport]) -> list[dict[str, Any]]:
    """Fig. 2's data: per configuration and draw, roles over- and under-granted."""
    return [
        {
            "configuration": r.name,
            "draw": n,
            "over_granted": c.roles_added,
            "under_granted": c.roles_omitted,
            "over_under": c.over_under,
            "privacy_violations": c.privacy_violations,
            "over_blocks": c.over_blocks,
            "failures": c.failures,
        }
        for r in reports
        for n, c in enumerate(r.per_draw, start=1)
    ]


def figure3_rows(reports: Sequence[LabelingReport]) -> list[dict[str, Any]]:
    """Fig. 3's data: per configuration with two draws or more."""
    return [
        {
            "configuration": r.name,
            "draws": r.stability.draws,
            "flows": r.flows,
            "unstable": r.stability.unstable_flows,
            "unstable_denied": r.stability.unstable_denied,
            "authored_denies": r.authored_denies,
        }
        for r in reports
        if r.stability is not None
    ]


def figure2(reports: Sequence[LabelingReport]) -> Figure:
    """Fig. 2 for the runs: diverging bars, one pair per draw."""
    from privacy_ci.evaluation._report import Figure

    plt = _plt()
    rows = figure2_rows(reports)
    test = {r.name for r in reports if r.test_double}
    labels = [
        f"{row['configuration']}{' (TEST DOUBLE)' if row['configuration'] in test else ''}"
        f" · draw {row['draw']}"
        for row in rows
    ]
    over = [row["over_granted"] for row in rows]
    under = [row["under_granted"] for row in rows]
    span = max([1, *over, *under])
    fig, ax = plt.subplots(figsize=(8.0, 1.2 + 0.42 * len(rows)))
    ys = list(range(len(rows)))[::-1]
    bars = {"height": 0.6, "edgecolor": "black", "lw": 0.6}
    ax.barh(ys, over, color=OVER_COLOUR, hatch="//", label="roles added", **bars)
    ax.barh(ys, [-u for u in under], color=UNDER_COLOUR, hatch="\\\\", label="omitted", **bars)
    for y, o, u, row in zip(ys, over, under, rows, strict=True):
        ax.annotate(str(o), (o, y), xytext=(3, 0), textcoords="offset points", va="center")
        ax.annotate(
            str(u), (-u, y), xytext=(-3, 0), textcoords="offset points", va="center", ha="right"
        )
        ax.annotate(
            f"O:U {_ratio(row['over_granted'], row['under_granted'])}",
            (1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.axvline(0, color="black", lw=0.8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlim(-1.25 * span, 1.25 * span)
    ticks = ax.get_xticks()
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{abs(t):g}" for t in ticks])
    ax.set_xlabel("← authored roles omitted (under-granting)   |   roles added (over-granting) →")
    ax.set_title(FIG2_TITLE + ("\nincludes TEST DOUBLE runs: not a model" if test else ""))
    described = "; ".join(
        f"{label}: {row['over_granted']} role(s) over-granted, {row['under_granted']}"
        f" under-granted ("
        + (
            f"O:U {_ratio(row['over_granted'], row['under_granted'])}"
            if row["under_granted"]
            else "O:U undefined, no role omitted"
        )
        + ")"
        for label, row in zip(labels, rows, strict=True)
    )
    return Figure(
        FIG2_TITLE,
        "figure2_role_grant_direction.png",
        _png(fig),
        FIG2_CAPTION,
        alt=f"{FIG2_TITLE}. Diverging bar chart of roles over- and under-granted against the"
        " authored ACLs, per draw."
        f" {described}.",
    )


def figure3(reports: Sequence[LabelingReport]) -> Figure | None:
    """Fig. 3 for the runs with two draws or more (None when there is none)."""
    from privacy_ci.evaluation._report import Figure

    rows = figure3_rows(reports)
    if not rows:
        return None
    plt = _plt()
    test = {r.name for r in reports if r.test_double}
    names = [
        f"{row['configuration']}{' (TEST DOUBLE)' if row['configuration'] in test else ''}"
        f" ({row['draws']} draws)"
        for row in rows
    ]
    ys = list(range(len(rows)))[::-1]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(10.0, 1.4 + 0.45 * len(rows)), sharey=True, gridspec_kw={"wspace": 0.35}
    )
    shares = [100 * row["unstable"] / row["flows"] if row["flows"] else 0.0 for row in rows]
    bars = {"height": 0.6, "edgecolor": "black", "lw": 0.6}
    left.barh(ys, shares, color=SHARE_COLOUR, hatch="..", **bars)
    for y, share, row in zip(ys, shares, rows, strict=True):
        left.annotate(
            f"{row['unstable']:,} of {row['flows']:,} ({share:.1f}%)",
            (share, y),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    left.set_xlim(0, max(1.0, *shares) * 1.6)
    left.set_xlabel("(a) decisions that change between draws (% of all)")
    denied = [row["unstable_denied"] for row in rows]
    right.barh(ys, denied, color=DENIED_COLOUR, hatch="xx", **bars)
    for y, n, row in zip(ys, denied, rows, strict=True):
        right.annotate(
            f"{n:,} ({_pct(n, row['unstable'])} of unstable)",
            (n, y),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    right.set_xlim(0, max(1, *denied) * 1.7)
    right.set_xlabel("(b) of those, denied by the authored policy (count)")
    left.set_ylim(-0.7, len(rows) - 0.3)
    left.set_yticks(ys)
    left.set_yticklabels(names, fontsize=8)
    flows = rows[0]["flows"] if len({row["flows"] for row in rows}) == 1 else None
    what = f"{flows:,}" if flows is not None else "corpus's"
    fig.suptitle(FIG3_TITLE + ("\nincludes TEST DOUBLE runs: not a model" if test else ""))
    described = "; ".join(
        f"{name}: {row['unstable']:,} of {row['flows']:,} decisions change"
        f" ({_pct(row['unstable'], row['flows'])}), {row['unstable_denied']:,} of them on flows"
        f" the authored policy denies"
        for name, row in zip(names, rows, strict=True)
    )
    return Figure(
        FIG3_TITLE,
        "figure3_unstable_decisions.png",
        _png(fig),
        FIG3_CAPTION.format(flows=what),
        alt=f"{FIG3_TITLE}. Two bar charts with separate scales. (a) share of the access"
        " decisions that change between draws; (b) the unstable decisions the authored policy"
        " denies."
        f" {described}.",
    )


def _glance(r: LabelingReport) -> str:
    c = r.conformance
    text = (
        f"{_name(r)}, {r.backend}, {r.draws} draw(s): in draw 1 its ACLs grant"
        f" {c.roles_added} role(s) beyond the authored ones and omit {c.roles_omitted}"
        f" (O:U {_ratio(c.roles_added, c.roles_omitted)}), which releases"
        f" {c.privacy_violations} flow(s) the policy denies and refuses {c.over_blocks} it"
        f" permits, of {r.flows:,}."
    )
    if r.stability is not None:
        s = r.stability
        text += (
            f" {s.unstable_flows:,} of {r.flows:,} decisions ({_pct(s.unstable_flows, r.flows)})"
            f" change between draws, {s.unstable_denied:,} of them on flows the policy"
            f" denies; induced violations range {min(s.violations_per_draw)}"
            f"-{max(s.violations_per_draw)} by draw."
        )
    return text


def html_report(
    reports: Sequence[LabelingReport], *, generated_at: str | None = None, plots: bool = True
) -> str:
    """The labeling report as one self-contained HTML page.

    Args:
        reports: one per configuration (`analyze_run`).
        generated_at: the time shown (default: now, UTC).
        plots: draw the figures (their data tables are always there).

    Returns:
        The page: figures as embedded PNG with alt text, no external resource.
    """
    return build_html_report(reports, generated_at=generated_at, plots=plots).html()


def build_html_report(
    reports: Sequence[LabelingReport], *, generated_at: str | None = None, plots: bool = True
) -> Report:
    """The report's structure (`privacy_ci.evaluation.Report`): sections, tables, figures."""
    from privacy_ci.evaluation._report import Report, Section, Table

    if not reports:
        raise PrivacyCIError("no configuration to report")
    when = generated_at or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    glance = Section(
        "At a glance: how far these drafts can be trusted",
        [authored_line(reports), *(_glance(r) for r in reports)],
    )
    fig2 = Section(
        FIG2_TITLE,
        [] if plots else [FIG2_CAPTION],
        tables=[
            Table(
                "Fig. 2 data: role grants against the authored ACLs, per draw",
                ["Configuration", "Draw", "Over-granted", "Under-granted", "O:U", "PV", "OB"],
                [
                    [
                        row["configuration"],
                        str(row["draw"]),
                        str(row["over_granted"]),
                        str(row["under_granted"]),
                        _ratio(row["over_granted"], row["under_granted"]),
                        str(row["privacy_violations"]),
                        str(row["over_blocks"]),
                    ]
                    for row in figure2_rows(reports)
                ],
                notes=[
                    "Roles summed over the documents with an authored label; PV and OB are the"
                    " flows each draw releases against, and refuses against, the authored policy."
                ],
            )
        ],
    )
    rows3 = figure3_rows(reports)
    fig3 = Section(
        FIG3_TITLE, [] if plots else [FIG3_CAPTION.format(flows=f"{reports[0].flows:,}")]
    )
    if rows3:
        fig3.tables.append(
            Table(
                "Fig. 3 data: decisions that change between draws",
                ["Configuration", "Draws", "Decisions", "Unstable", "Share", "UUD", "UUD share"],
                [
                    [
                        row["configuration"],
                        str(row["draws"]),
                        f"{row['flows']:,}",
                        f"{row['unstable']:,}",
                        _pct(row["unstable"], row["flows"]),
                        f"{row['unstable_denied']:,}",
                        _pct(row["unstable_denied"], row["unstable"]),
                    ]
                    for row in rows3
                ],
                notes=[
                    "UUD: unstable decisions on flows the authored policy denies (unstable"
                    " unauthorized disclosures); UUD share is of the unstable decisions."
                ],
            )
        )
    else:
        fig3.paragraphs.append(
            "Not drawn: Fig. 3 compares draws with one another, and every run here has one"
            " draw (`privacy-ci label run --draws 5` makes the paper's five)."
        )
    if plots:
        fig2.figures.append(figure2(reports))
        drawn = figure3(reports)
        if drawn is not None:
            fig3.figures.append(drawn)
    tables = Section(
        "Tables VII-IX, attribution and controls",
        tables=[
            Table(t.title, list(t.headers), [list(row) for row in t.rows])
            for t in report_tables(reports)
        ],
    )
    return Report(
        title="Labeling report: model-written labels against the authored policy",
        generated_at=when,
        warnings=report_notes(reports),
        sections=[glance, fig2, fig3, tables],
    )
