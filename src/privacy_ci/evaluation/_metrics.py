"""Scores of a judging run: pure functions over ``(gold, predicted | None)`` pairs.

Every function takes pairs of class labels (plain strings such as ``permit``)
where the prediction is None when the model's answer could not be parsed or the
call failed. Such an *unparsed* prediction is always wrong: it is its own column
of the confusion matrix, it lowers accuracy and the recall of its gold class, and
it counts towards no class's precision (the paper: "All parsing failures are
regarded as incorrect predictions").

Conventions, fixed here so numbers stay comparable:

* precision of a class nobody predicted, recall of a class with no gold case and
  F1 when both are 0 are 0.0 (scikit-learn's ``zero_division=0``);
* macro-F1 is the unweighted mean of the F1 of every class in ``classes``,
  present or not;
* a prediction outside ``classes`` (``not_applicable`` in the compliance task) is
  kept in its own confusion column and is wrong for every gold class;
* intervals are 95 %: Wilson score for proportions (accuracy), percentile
  bootstrap over cases with a fixed seed for macro-F1;
* McNemar's test pairs two runs case by case: ``b`` = cases only run A got right,
  ``c`` = cases only run B got right;
* minimal pairs (`pair_scores`): cases that share a pair id differ in the one fact
  that decides them. *Pair accuracy* is the share of pairs whose every member is
  right; the *flip rate* the share of pairs whose members got different verdicts
  (an unparsed member never counts as a flip). Both are scored over complete
  pairs only, with percentile bootstrap intervals resampling pairs (seed fixed).

Table 4 of the Privacy Checklist paper ("binary compliance, Permit vs Forbid")
prints exactly the permit and prohibit columns of Table 3, which were computed
over all 214 three-way cases. `binary_compliance` follows GoldCoin's compliance
setting instead: only the applicable cases (gold permit or prohibit) are scored,
and a ``not_applicable`` or unparsed prediction on them is wrong. Pass
``scope="all"`` to reproduce the paper's printed figures.
"""

from __future__ import annotations

import importlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

__all__ = [
    "APPLICABILITY_CLASSES",
    "COMPLIANCE_CLASSES",
    "THREE_WAY_CLASSES",
    "UNPARSED",
    "ClassScores",
    "ConfusionMatrix",
    "Interval",
    "McNemarResult",
    "Pair",
    "PairScores",
    "RunScores",
    "Scores",
    "accuracy",
    "applicability",
    "binary_compliance",
    "bootstrap_interval",
    "confusion_matrix",
    "macro_f1",
    "mcnemar",
    "pair_scores",
    "per_class",
    "proportion_bootstrap",
    "score",
    "score_run",
    "wilson_interval",
]

UNPARSED = "unparsed"
"""The confusion-matrix column of predictions that could not be parsed."""

THREE_WAY_CLASSES: tuple[str, ...] = ("permit", "prohibit", "not_applicable")
COMPLIANCE_CLASSES: tuple[str, ...] = ("permit", "prohibit")
APPLICABILITY_CLASSES: tuple[str, ...] = ("applicable", "not_applicable")

Pair = tuple[str, str | None]
"""(gold class, predicted class or None for an unparsed answer)."""


# ---------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval.

    Args:
        low / high: the bounds.
        level: the coverage, e.g. 0.95.
        method: how it was computed (``wilson``, ``bootstrap percentile, 1000 resamples,
            seed 0``).
    """

    low: float
    high: float
    level: float
    method: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "level": self.level,
            "method": self.method,
        }


@dataclass(frozen=True, slots=True)
class ClassScores:
    """Precision, recall and F1 of one class.

    Args:
        label: the class.
        precision / recall / f1: the scores (0.0 when undefined, see the module notes).
        support: gold cases of the class.
        predicted: cases predicted as the class.
        true_positives: cases both gold and predicted as the class.
    """

    label: str
    precision: float
    recall: float
    f1: float
    support: int
    predicted: int
    true_positives: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": round(self.precision, 6),
            "recall": round(self.recall, 6),
            "f1": round(self.f1, 6),
            "support": self.support,
            "predicted": self.predicted,
            "true_positives": self.true_positives,
        }


@dataclass(frozen=True, slots=True)
class ConfusionMatrix:
    """Counts of gold (rows) against predicted (columns) classes.

    Args:
        rows: the gold classes.
        columns: the classes, then any other predicted label seen (in order of first
            appearance), then `UNPARSED` (always present).
        counts: ``counts[i][j]`` = cases of gold ``rows[i]`` predicted ``columns[j]``.
    """

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]

    def count(self, gold: str, predicted: str | None) -> int:
        """The count of one cell (`predicted` None means unparsed)."""
        column = UNPARSED if predicted is None else predicted
        return self.counts[self.rows.index(gold)][self.columns.index(column)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": list(self.rows),
            "columns": list(self.columns),
            "counts": [list(r) for r in self.counts],
        }


@dataclass(frozen=True)
class Scores:
    """Everything computed on one set of pairs under one class list.

    Args:
        task: what was scored (``three_way``, ``compliance``, ``applicability``).
        classes: the classes, in order.
        n: scored cases.
        correct: cases predicted right.
        unparsed: cases whose prediction is None.
        accuracy: correct / n (0.0 when n is 0).
        accuracy_ci: Wilson interval of the accuracy.
        per_class: class -> `ClassScores`.
        macro_f1: mean F1 over `classes`.
        macro_f1_ci: bootstrap interval of the macro-F1 (None when not computed).
        confusion: the confusion matrix.
        note: how the cases were selected, when not all were scored.
    """

    task: str
    classes: tuple[str, ...]
    n: int
    correct: int
    unparsed: int
    accuracy: float
    accuracy_ci: Interval
    per_class: dict[str, ClassScores]
    macro_f1: float
    macro_f1_ci: Interval | None
    confusion: ConfusionMatrix
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "classes": list(self.classes),
            "n": self.n,
            "correct": self.correct,
            "unparsed": self.unparsed,
            "accuracy": round(self.accuracy, 6),
            "accuracy_ci": self.accuracy_ci.as_dict(),
            "per_class": {k: v.as_dict() for k, v in self.per_class.items()},
            "macro_f1": round(self.macro_f1, 6),
            "macro_f1_ci": None if self.macro_f1_ci is None else self.macro_f1_ci.as_dict(),
            "confusion": self.confusion.as_dict(),
            "note": self.note,
        }


@dataclass(frozen=True)
class RunScores:
    """The scores of a run: its protocol's task, plus the two binary views.

    Args:
        main: scored under the dataset's own task.
        compliance: permit vs prohibit on the applicable cases (GoldCoin's
            compliance task, Table 4); None when no case is applicable or the main
            task already is compliance.
        applicability: applicable vs not applicable; None unless the main task is
            three-way.
    """

    main: Scores
    compliance: Scores | None = None
    applicability: Scores | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "main": self.main.as_dict(),
            "compliance": None if self.compliance is None else self.compliance.as_dict(),
            "applicability": None if self.applicability is None else self.applicability.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class McNemarResult:
    """McNemar's paired test between two runs on the same cases.

    Args:
        n: paired cases.
        b: cases run A got right and run B wrong.
        c: cases run A got wrong and run B right.
        statistic: the chi-square statistic (continuity-corrected), None for the exact test.
        p_value: two-sided p-value.
        method: ``exact`` (binomial, b ~ Bin(b + c, 1/2)) or ``chi2`` (with continuity
            correction, 1 degree of freedom).
        library: ``scipy`` or ``python`` (the pure-Python fallback; same numbers).
    """

    n: int
    b: int
    c: int
    statistic: float | None
    p_value: float
    method: str
    library: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "b": self.b,
            "c": self.c,
            "statistic": None if self.statistic is None else round(self.statistic, 6),
            "p_value": self.p_value,
            "method": self.method,
            "library": self.library,
        }


# ---------------------------------------------------------------------------------
# the basic scores
# ---------------------------------------------------------------------------------
def _check(pairs: Sequence[Pair], classes: Sequence[str]) -> None:
    if not classes:
        raise ValueError("at least one class is needed")
    if len(set(classes)) != len(classes):
        raise ValueError(f"classes repeat: {list(classes)}")
    if UNPARSED in classes:
        raise ValueError(f"{UNPARSED!r} is reserved for unparsed predictions")
    known = set(classes)
    unknown = sorted({g for g, _ in pairs if g not in known})
    if unknown:
        raise ValueError(f"gold label(s) {unknown} are not among the classes {list(classes)}")


def accuracy(pairs: Sequence[Pair]) -> float:
    """Share of pairs whose prediction equals the gold label (unparsed is wrong).

    Args:
        pairs: (gold, predicted or None).

    Returns:
        The accuracy; 0.0 for no pairs.
    """
    if not pairs:
        return 0.0
    return sum(1 for g, p in pairs if p is not None and p == g) / len(pairs)


def confusion_matrix(pairs: Sequence[Pair], classes: Sequence[str]) -> ConfusionMatrix:
    """Gold x predicted counts with an explicit `UNPARSED` column.

    Args:
        pairs: (gold, predicted or None); every gold label must be in `classes`.
        classes: the classes (rows, and the first columns).

    Returns:
        The matrix.

    Raises:
        ValueError: a gold label outside `classes`, or a bad class list.
    """
    _check(pairs, classes)
    columns = list(classes)
    for _, p in pairs:
        if p is not None and p not in columns:
            columns.append(p)
    columns.append(UNPARSED)
    index = {c: i for i, c in enumerate(columns)}
    rows = {c: i for i, c in enumerate(classes)}
    table = [[0] * len(columns) for _ in classes]
    for g, p in pairs:
        table[rows[g]][index[UNPARSED if p is None else p]] += 1
    return ConfusionMatrix(tuple(classes), tuple(columns), tuple(tuple(r) for r in table))


def _prf(tp: int, predicted: int, support: int) -> tuple[float, float, float]:
    precision = tp / predicted if predicted else 0.0
    recall = tp / support if support else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def per_class(pairs: Sequence[Pair], classes: Sequence[str]) -> dict[str, ClassScores]:
    """Precision, recall and F1 of each class.

    Args:
        pairs: (gold, predicted or None).
        classes: the classes, in order.

    Returns:
        class -> `ClassScores`, in `classes` order.
    """
    _check(pairs, classes)
    support = Counter(g for g, _ in pairs)
    predicted = Counter(p for _, p in pairs if p is not None)
    tp = Counter(g for g, p in pairs if p == g)
    out: dict[str, ClassScores] = {}
    for c in classes:
        precision, recall, f1 = _prf(tp[c], predicted[c], support[c])
        out[c] = ClassScores(c, precision, recall, f1, support[c], predicted[c], tp[c])
    return out


def macro_f1(pairs: Sequence[Pair], classes: Sequence[str]) -> float:
    """Unweighted mean of the per-class F1 over every class in `classes`.

    Args:
        pairs: (gold, predicted or None).
        classes: the classes.

    Returns:
        The macro-F1.
    """
    scores = per_class(pairs, classes)
    return sum(s.f1 for s in scores.values()) / len(classes)


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def wilson_interval(successes: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval of a proportion.

    Args:
        successes: e.g. correct cases.
        n: trials; 0 gives the uninformative (0, 1).
        level: coverage.

    Returns:
        The interval.
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return Interval(0.0, 1.0, level, "wilson")
    z = _z(level)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high, level, "wilson")


def bootstrap_interval(
    pairs: Sequence[Pair],
    classes: Sequence[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of the macro-F1, resampling cases.

    Resamples are drawn with ``numpy.random.default_rng(seed)``, so the interval
    is a function of the pairs, the seed and the resample count only.

    Args:
        pairs: (gold, predicted or None).
        classes: the classes.
        resamples: bootstrap replicates.
        seed: the generator seed.
        level: coverage.

    Returns:
        The interval (a point interval at 0 for no pairs).
    """
    _check(pairs, classes)
    _z(level)
    method = f"bootstrap percentile, {resamples} resamples, seed {seed}"
    if not pairs:
        return Interval(0.0, 0.0, level, method)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    code = {c: i for i, c in enumerate(classes)}
    gold = np.array([code[g] for g, _ in pairs], dtype=np.int64)
    pred = np.array([code.get(p, -1) if p is not None else -1 for _, p in pairs], dtype=np.int64)
    rng = np.random.default_rng(seed)
    f1s = np.zeros(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // len(pairs))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, len(pairs), size=(stop - start, len(pairs)))
        g, p = gold[idx], pred[idx]
        total = np.zeros(stop - start, dtype=np.float64)
        for c in range(len(classes)):
            tp = ((g == c) & (p == c)).sum(axis=1)
            support = (g == c).sum(axis=1)
            predicted = (p == c).sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                precision = np.where(predicted > 0, tp / np.maximum(predicted, 1), 0.0)
                recall = np.where(support > 0, tp / np.maximum(support, 1), 0.0)
                s = precision + recall
                total += np.where(s > 0, 2 * precision * recall / np.where(s > 0, s, 1), 0.0)
        f1s[start:stop] = total / len(classes)
    alpha = (1 - level) / 2
    low, high = np.quantile(f1s, [alpha, 1 - alpha])
    return Interval(float(low), float(high), level, method)


def score(
    pairs: Sequence[Pair],
    classes: Sequence[str],
    *,
    task: str = "",
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    note: str = "",
) -> Scores:
    """Every score of one set of pairs.

    Args:
        pairs: (gold, predicted or None).
        classes: the classes.
        task: a name for what is scored.
        bootstrap: macro-F1 bootstrap resamples (0: no interval).
        seed: the bootstrap seed.
        level: interval coverage.
        note: how the cases were selected.

    Returns:
        The `Scores`.
    """
    confusion = confusion_matrix(pairs, classes)
    correct = sum(1 for g, p in pairs if p is not None and p == g)
    return Scores(
        task=task,
        classes=tuple(classes),
        n=len(pairs),
        correct=correct,
        unparsed=sum(1 for _, p in pairs if p is None),
        accuracy=accuracy(pairs),
        accuracy_ci=wilson_interval(correct, len(pairs), level),
        per_class=per_class(pairs, classes),
        macro_f1=macro_f1(pairs, classes),
        macro_f1_ci=(
            bootstrap_interval(pairs, classes, resamples=bootstrap, seed=seed, level=level)
            if bootstrap
            else None
        ),
        confusion=confusion,
        note=note,
    )


# ---------------------------------------------------------------------------------
# the binary views of a three-way run
# ---------------------------------------------------------------------------------
def binary_compliance(
    pairs: Sequence[Pair],
    *,
    scope: Literal["applicable", "all"] = "applicable",
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Scores:
    """Permit vs prohibit (GoldCoin's compliance task; the paper's Table 4).

    Args:
        pairs: (gold verdict, predicted verdict or None) as verdict values
            (``permit``, ``prohibit``, ``not_applicable``).
        scope: ``applicable`` (default, GoldCoin's setting): only cases whose gold is
            permit or prohibit are scored; a ``not_applicable`` or unparsed prediction
            on them is wrong. ``all``: every case is kept and permit/prohibit
            precision, recall and F1 are those of the three-way confusion matrix; this
            is how the paper's Table 4 figures were computed (they equal Table 3's
            permit and prohibit columns). Accuracy under ``all`` is three-way accuracy.
        bootstrap / seed / level: as in `score`.

    Returns:
        Scores over the classes ``permit``, ``prohibit``; macro-F1 is their mean.
    """
    if scope == "applicable":
        kept = [(g, p) for g, p in pairs if g in COMPLIANCE_CLASSES]
        return score(
            kept,
            COMPLIANCE_CLASSES,
            task="compliance",
            bootstrap=bootstrap,
            seed=seed,
            level=level,
            note="applicable cases (gold permit or prohibit)",
        )
    if scope != "all":
        raise ValueError(f"scope must be 'applicable' or 'all', not {scope!r}")
    full = score(pairs, THREE_WAY_CLASSES, task="compliance", bootstrap=0, level=level)
    per = {c: full.per_class[c] for c in COMPLIANCE_CLASSES}
    f1 = sum(s.f1 for s in per.values()) / len(per)
    ci = None
    if bootstrap:
        ci = _bootstrap_sub(pairs, bootstrap, seed, level)
    return Scores(
        task="compliance",
        classes=COMPLIANCE_CLASSES,
        n=full.n,
        correct=full.correct,
        unparsed=full.unparsed,
        accuracy=full.accuracy,
        accuracy_ci=full.accuracy_ci,
        per_class=per,
        macro_f1=f1,
        macro_f1_ci=ci,
        confusion=full.confusion,
        note="all cases, three-way confusion (as the paper's Table 4 prints)",
    )


def _bootstrap_sub(pairs: Sequence[Pair], resamples: int, seed: int, level: float) -> Interval:
    """Bootstrap of mean(F1 permit, F1 prohibit) over all three-way pairs."""
    rng = np.random.default_rng(seed)
    values = np.zeros(resamples)
    items = list(pairs)
    for i in range(resamples):
        idx = rng.integers(0, len(items), size=len(items))
        sample = [items[j] for j in idx]
        per = per_class(sample, THREE_WAY_CLASSES)
        values[i] = (per["permit"].f1 + per["prohibit"].f1) / 2
    alpha = (1 - level) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    method = f"bootstrap percentile, {resamples} resamples, seed {seed}"
    return Interval(float(low), float(high), level, method)


def applicability(
    pairs: Sequence[Pair], *, bootstrap: int = 1000, seed: int = 0, level: float = 0.95
) -> Scores:
    """Applicable vs not applicable (GoldCoin's applicability task).

    Args:
        pairs: (gold verdict, predicted verdict or None) as verdict values; permit and
            prohibit both count as ``applicable``; an unparsed prediction stays unparsed.
        bootstrap / seed / level: as in `score`.

    Returns:
        Scores over ``applicable``, ``not_applicable``.
    """

    def to(v: str) -> str:
        return "not_applicable" if v == "not_applicable" else "applicable"

    mapped = [(to(g), None if p is None else to(p)) for g, p in pairs]
    return score(
        mapped,
        APPLICABILITY_CLASSES,
        task="applicability",
        bootstrap=bootstrap,
        seed=seed,
        level=level,
    )


def score_run(
    pairs: Sequence[Pair],
    task: str,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> RunScores:
    """Score a run's verdicts under its dataset's task, plus the binary views.

    Args:
        pairs: (gold verdict, predicted verdict or None) as verdict values.
        task: the protocol's task: ``three_way``, ``compliance`` or ``applicability``.
        bootstrap / seed / level: as in `score`.

    Returns:
        The `RunScores`: ``main`` under the task; ``compliance`` (applicable cases) when
        the task is not already compliance and some gold is applicable;
        ``applicability`` when the task is three-way.
    """
    kw: dict[str, Any] = {"bootstrap": bootstrap, "seed": seed, "level": level}
    if task == "three_way":
        main = score(pairs, THREE_WAY_CLASSES, task=task, **kw)
        has_applicable = any(g in COMPLIANCE_CLASSES for g, _ in pairs)
        return RunScores(
            main=main,
            compliance=binary_compliance(pairs, **kw) if has_applicable else None,
            applicability=applicability(pairs, **kw),
        )
    if task == "compliance":
        return RunScores(main=binary_compliance(pairs, **kw))
    if task == "applicability":
        has_applicable = any(g in COMPLIANCE_CLASSES for g, _ in pairs)
        return RunScores(
            main=applicability(pairs, **kw),
            compliance=binary_compliance(pairs, **kw) if has_applicable else None,
        )
    raise ValueError(f"unknown task {task!r}")


# ---------------------------------------------------------------------------------
# minimal pairs
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairScores:
    """Pair accuracy and flip rate over minimal pairs (see the module notes).

    Args:
        pairs: complete pairs scored (every member judged).
        incomplete: pair ids with a member missing from the scored cases (a sample,
            an unfinished run), not scored.
        both_right: pairs whose every member is right.
        flipped: pairs whose members got different verdicts (all parsed).
        pair_accuracy: both_right / pairs (0.0 for no pairs).
        pair_accuracy_ci: its bootstrap interval (None when not computed).
        flip_rate: flipped / pairs (0.0 for no pairs).
        flip_rate_ci: its bootstrap interval (None when not computed).
    """

    pairs: int
    incomplete: int
    both_right: int
    flipped: int
    pair_accuracy: float
    pair_accuracy_ci: Interval | None
    flip_rate: float
    flip_rate_ci: Interval | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "incomplete": self.incomplete,
            "both_right": self.both_right,
            "flipped": self.flipped,
            "pair_accuracy": round(self.pair_accuracy, 6),
            "pair_accuracy_ci": None
            if self.pair_accuracy_ci is None
            else self.pair_accuracy_ci.as_dict(),
            "flip_rate": round(self.flip_rate, 6),
            "flip_rate_ci": None if self.flip_rate_ci is None else self.flip_rate_ci.as_dict(),
        }


def proportion_bootstrap(
    hits: Sequence[bool],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap interval of a share, resampling the items.

    Args:
        hits: one boolean per item (a pair right, a pair flipped).
        resamples / seed / level: as in `bootstrap_interval`.

    Returns:
        The interval (a point interval at 0 for no items).
    """
    _z(level)
    method = f"bootstrap percentile, {resamples} resamples, seed {seed}"
    if not hits:
        return Interval(0.0, 0.0, level, method)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    values = np.array([1.0 if h else 0.0 for h in hits], dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[idx].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(low), float(high), level, method)


def pair_scores(
    groups: Sequence[Sequence[Pair]],
    *,
    incomplete: int = 0,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> PairScores:
    """Pair accuracy and flip rate of complete minimal pairs.

    Args:
        groups: per pair, its members' (gold, predicted or None), at least two each
            (a group of one is not a pair and is counted as incomplete). A group of
            three or more is scored as one: right when every member is, a flip when
            its parsed verdicts are not all the same.
        incomplete: pairs already left out by the caller (a member not judged).
        bootstrap / seed / level: resamples of the intervals (0: no intervals).

    Returns:
        The `PairScores`.
    """
    complete = [list(g) for g in groups if len(g) >= 2]
    incomplete += len(groups) - len(complete)
    right = [all(p is not None and p == g for g, p in members) for members in complete]
    flipped = [
        all(p is not None for _, p in members) and len({p for _, p in members}) > 1
        for members in complete
    ]
    n = len(complete)

    def ci(hits: list[bool]) -> Interval | None:
        if not bootstrap:
            return None
        return proportion_bootstrap(hits, resamples=bootstrap, seed=seed, level=level)

    return PairScores(
        pairs=n,
        incomplete=incomplete,
        both_right=sum(right),
        flipped=sum(flipped),
        pair_accuracy=sum(right) / n if n else 0.0,
        pair_accuracy_ci=ci(right),
        flip_rate=sum(flipped) / n if n else 0.0,
        flip_rate_ci=ci(flipped),
    )


# ---------------------------------------------------------------------------------
# McNemar
# ---------------------------------------------------------------------------------
def _scipy_stats() -> Any:
    """``scipy.stats`` when installed (imported untyped), else None."""
    try:
        return importlib.import_module("scipy.stats")
    except ImportError:  # pragma: no cover - scipy is usually present
        return None


def _exact_p(b: int, c: int) -> tuple[float, str]:
    n = b + c
    if n == 0:
        return 1.0, "python"
    k = min(b, c)
    stats = _scipy_stats()
    if stats is None:  # pragma: no cover
        return _exact_p_python(k, n), "python"
    return float(min(1.0, stats.binomtest(k, n, 0.5).pvalue)), "scipy"


def _exact_p_python(k: int, n: int) -> float:
    """Two-sided exact binomial p-value of k <= n/2 successes under p = 1/2."""
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, float(2 * tail / 2**n))


def _chi2_p_python(statistic: float) -> float:
    """Survival function of chi-square with 1 degree of freedom."""
    return math.erfc(math.sqrt(statistic / 2))


def _chi2_p(statistic: float) -> tuple[float, str]:
    stats = _scipy_stats()
    if stats is None:  # pragma: no cover
        return _chi2_p_python(statistic), "python"
    return float(stats.chi2.sf(statistic, 1)), "scipy"


def mcnemar(
    correct_a: Sequence[bool],
    correct_b: Sequence[bool],
    *,
    method: Literal["auto", "exact", "chi2"] = "auto",
) -> McNemarResult:
    """McNemar's test on paired correctness of two runs over the same cases.

    Args:
        correct_a / correct_b: whether each run got each case right, same order.
        method: ``exact`` (binomial), ``chi2`` (continuity-corrected,
            ``max(|b - c| - 1, 0)^2 / (b + c)``), or ``auto``: exact when b + c < 25.

    Returns:
        The `McNemarResult` (p = 1 when there is no discordant case).

    Raises:
        ValueError: the sequences differ in length or the method is unknown.
    """
    if len(correct_a) != len(correct_b):
        raise ValueError(f"paired runs differ in length: {len(correct_a)} vs {len(correct_b)}")
    b = sum(1 for x, y in zip(correct_a, correct_b, strict=True) if x and not y)
    c = sum(1 for x, y in zip(correct_a, correct_b, strict=True) if y and not x)
    if method == "auto":
        method = "exact" if b + c < 25 else "chi2"
    if method == "exact":
        p, lib = _exact_p(b, c)
        return McNemarResult(len(correct_a), b, c, None, p, "exact", lib)
    if method == "chi2":
        if b + c == 0:
            return McNemarResult(len(correct_a), b, c, 0.0, 1.0, "chi2", "python")
        stat = max(abs(b - c) - 1, 0) ** 2 / (b + c)
        p, lib = _chi2_p(stat)
        return McNemarResult(len(correct_a), b, c, stat, p, "chi2", lib)
    raise ValueError(f"unknown McNemar method {method!r}")
