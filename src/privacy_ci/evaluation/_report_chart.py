"""The headline chart: accuracy and macro-F1 per run, with whiskers and baselines.

Drawn in HTML and CSS rather than as an image, so its labels keep their size on a
phone and wrap like text: one block per run, one bar per metric (a colour of the
Okabe-Ito palette, which stays distinct under the common colour-vision deficiencies,
and its own hatch direction), the 95% interval as a whisker, and each model-free
baseline as a reference line of its own colour and dash. A bar of zero is drawn as
a visible stub, an undefined score as the word "undefined". The whole graphic is
one ``role="img"`` whose label states every number it shows.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["CHART_CSS", "METRIC_STYLES", "REFERENCE_STYLES", "ChartRun", "ChartValue", "chart"]

# metric name -> CSS class (colour and hatch); reference name -> CSS class (colour, dash)
METRIC_STYLES = {"accuracy": "m0", "macro-F1": "m1"}
REFERENCE_STYLES = {"majority baseline": "r0", "health-rule baseline": "r1"}

CHART_CSS = (
    ".chart{margin:.5em 0 1em;max-width:52em}"
    ".chart figcaption{font-weight:bold;margin:.25em 0}"
    ".chart-legend{display:flex;flex-wrap:wrap;gap:.25em 1.25em;font-size:.85em;"
    "margin:.25em 0 .5em}"
    ".chart-legend span{display:inline-flex;align-items:center;gap:.35em}"
    ".chart-key{display:inline-block;width:1.6em;height:.9em;border:1px solid #000}"
    ".chart-key.line{border:0;height:1em;width:0;margin:0 .75em}"
    ".chart-key.line.r0{border-left:2px dashed #D55E00}"
    ".chart-key.line.r1{border-left:3px dotted #009E73}"
    ".chart-key.ci{border:0;border-top:2px solid #000;height:0;width:1.4em;position:relative}"
    ".chart-run{margin:.35em 0 .6em}"
    ".chart-label{font-size:.9em;overflow-wrap:anywhere}"
    ".chart-metric,.chart-axis{display:grid;grid-template-columns:5.5em minmax(0,1fr) "
    "5.5em;align-items:center;column-gap:.6em}"
    ".chart-name{font-size:.85em}"
    ".chart-track{position:relative;height:1.15em;border-left:1px solid #333;"
    "background:linear-gradient(to right,#d0d0d0 1px,transparent 1px) 0 0/25% 100%}"
    ".chart-bar{position:absolute;left:0;top:.12em;bottom:.12em;min-width:3px;"
    "box-sizing:border-box;border:1px solid #000}"
    ".m0{background:repeating-linear-gradient(45deg,#0072B2 0 2px,#cde3f2 2px 6px)}"
    ".m1{background:repeating-linear-gradient(-45deg,#E69F00 0 2px,#fbe9c6 2px 6px)}"
    ".chart-ci{position:absolute;top:50%;height:0;border-top:2px solid #000}"
    ".chart-ci::before,.chart-ci::after{content:'';position:absolute;top:-.4em;"
    "height:.7em;border-left:2px solid #000}"
    ".chart-ci::before{left:-1px}.chart-ci::after{right:-1px}"
    # the two baselines take the upper and the lower half: both show where they coincide
    ".chart-ref{position:absolute;width:0}"
    ".chart-ref.r0{top:-.3em;bottom:50%;border-left:2px dashed #D55E00}"
    ".chart-ref.r1{top:50%;bottom:-.3em;border-left:3px dotted #009E73}"
    ".chart-value{text-align:right;font-variant-numeric:tabular-nums;font-size:.85em;"
    "white-space:nowrap}"
    ".chart-ticks{position:relative;height:1.2em;font-size:.75em;color:#444}"
    ".chart-ticks span{position:absolute;transform:translateX(-50%)}"
)


@dataclass(frozen=True)
class ChartValue:
    """One bar: a metric's value, its interval and the baselines beside it.

    Args:
        metric: a key of `METRIC_STYLES`.
        value / low / high: proportions in [0, 1]; None when undefined.
        references: (a key of `REFERENCE_STYLES`, its value) pairs.
        digits: decimals of the percentages shown.
    """

    metric: str
    value: float | None
    low: float | None = None
    high: float | None = None
    references: tuple[tuple[str, float], ...] = ()
    digits: int = 1


@dataclass(frozen=True)
class ChartRun:
    """One run's block: its name, what it is, its bars."""

    name: str
    detail: str
    values: tuple[ChartValue, ...] = field(default_factory=tuple)


def _num(value: float | None, digits: int) -> str:
    return "undefined" if value is None else f"{100 * value:.{digits}f}"


def _pos(value: float) -> str:
    return f"{100 * min(1.0, max(0.0, value)):.2f}%"


def _describe(runs: Sequence[ChartRun]) -> str:
    """The data the chart shows, in words (its accessible label)."""
    parts = []
    for run in runs:
        bits = []
        for v in run.values:
            text = f"{v.metric} {_num(v.value, v.digits)}"
            if v.value is not None and v.low is not None and v.high is not None:
                text += f" (95% interval {_num(v.low, v.digits)} to {_num(v.high, v.digits)})"
            refs = ", ".join(f"{name} {_num(x, v.digits)}" for name, x in v.references)
            if refs:
                text += f", against {refs}"
            bits.append(text)
        parts.append(f"{run.name} ({run.detail}): " + "; ".join(bits))
    return "Percent, 0 to 100. " + ". ".join(parts) + "."


def _bar(v: ChartValue) -> str:
    e = html.escape
    cls = METRIC_STYLES.get(v.metric, "m0")
    inner = []
    if v.value is not None:
        inner.append(f'<span class="chart-bar {cls}" style="width:{_pos(v.value)}"></span>')
        if v.low is not None and v.high is not None:
            inner.append(
                f'<span class="chart-ci" style="left:{_pos(v.low)};'
                f'width:{_pos(max(0.0, v.high - v.low))}"></span>'
            )
    for name, x in v.references:
        title = f"{name}: {_num(x, v.digits)}"
        inner.append(
            f'<span class="chart-ref {REFERENCE_STYLES.get(name, "r0")}" '
            f'style="left:{_pos(x)}" title="{e(title)}"></span>'
        )
    return (
        f'<div class="chart-metric"><span class="chart-name">{e(v.metric)}</span>'
        f'<span class="chart-track">{"".join(inner)}</span>'
        f'<span class="chart-value">{_num(v.value, v.digits)}</span></div>'
    )


def chart(runs: Sequence[ChartRun], caption: str, chart_id: str = "headline-chart") -> str:
    """The chart as an HTML fragment ("" without runs).

    Args:
        runs: the runs, in the headline table's order.
        caption: the figure's caption.
        chart_id: the figure's element id.

    Returns:
        A ``<figure>`` with a legend and one ``role="img"`` graphic.
    """
    if not runs:
        return ""
    e = html.escape
    used_refs = list(
        dict.fromkeys(name for r in runs for v in r.values for name, _ in v.references)
    )
    used_metrics = list(dict.fromkeys(v.metric for r in runs for v in r.values))
    legend = [
        f'<span><i class="chart-key {METRIC_STYLES.get(m, "m0")}"></i>{e(m)}</span>'
        for m in used_metrics
    ]
    legend.append('<span><i class="chart-key ci"></i>95% interval</span>')
    legend += [
        f'<span><i class="chart-key line {REFERENCE_STYLES.get(n, "r0")}"></i>{e(n)}</span>'
        for n in used_refs
    ]
    blocks = []
    for run in runs:
        bars = "".join(_bar(v) for v in run.values)
        blocks.append(
            f'<div class="chart-run"><div class="chart-label"><strong>{e(run.name)}</strong> '
            f"{e(run.detail)}</div>{bars}</div>"
        )
    ticks = "".join(f'<span style="left:{t}%">{t}</span>' for t in (0, 25, 50, 75, 100))
    axis = (
        '<div class="chart-axis" aria-hidden="true"><span></span>'
        f'<span class="chart-ticks">{ticks}</span><span class="chart-value">%</span></div>'
    )
    return (
        f'<figure class="chart" id="{e(chart_id)}">'
        f'<figcaption id="{e(chart_id)}-caption">{e(caption)}</figcaption>'
        f'<div class="chart-legend" aria-hidden="true">{"".join(legend)}</div>'
        f'<div class="chart-body" role="img" aria-label="{e(_describe(runs))}">'
        f"{''.join(blocks)}{axis}</div></figure>"
    )
