"""Metrics on toy data, computed by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privacy_ci.evaluation import (
    UNPARSED,
    accuracy,
    applicability,
    binary_compliance,
    bootstrap_interval,
    confusion_matrix,
    macro_f1,
    mcnemar,
    per_class,
    score,
    score_run,
    wilson_interval,
)
from privacy_ci.evaluation._metrics import _chi2_p_python, _exact_p_python

P, X, N = "permit", "prohibit", "not_applicable"
CLASSES = (P, X, N)

# gold permit 4, prohibit 2, not applicable 2; 4 right, 2 unparsed
PAIRS: list[tuple[str, str | None]] = [
    (P, P),
    (P, P),
    (P, X),
    (P, None),
    (X, X),
    (X, P),
    (N, N),
    (N, None),
]


def test_accuracy_counts_unparsed_as_wrong() -> None:
    assert accuracy(PAIRS) == 0.5
    assert accuracy([]) == 0.0
    assert accuracy([(P, None)]) == 0.0


def test_per_class_by_hand() -> None:
    pc = per_class(PAIRS, CLASSES)
    # permit: predicted 3 (2 right), support 4
    assert pc[P].precision == pytest.approx(2 / 3)
    assert pc[P].recall == pytest.approx(1 / 2)
    assert pc[P].f1 == pytest.approx(4 / 7)
    assert (pc[P].support, pc[P].predicted, pc[P].true_positives) == (4, 3, 2)
    # prohibit: predicted 2 (1 right), support 2
    assert (pc[X].precision, pc[X].recall, pc[X].f1) == pytest.approx((0.5, 0.5, 0.5))
    # not applicable: predicted 1 (right), support 2 (the other is unparsed)
    assert (pc[N].precision, pc[N].recall, pc[N].f1) == pytest.approx((1.0, 0.5, 2 / 3))
    assert macro_f1(PAIRS, CLASSES) == pytest.approx(float(Fraction(73, 126)))


def test_zero_division_is_zero() -> None:
    pc = per_class([(P, P), (P, None)], CLASSES)
    assert pc[X].precision == pc[X].recall == pc[X].f1 == 0.0  # never gold, never predicted
    assert pc[P].precision == 1.0 and pc[P].recall == 0.5
    # macro-F1 averages over every listed class, present or not
    assert macro_f1([(P, P), (P, None)], CLASSES) == pytest.approx((2 / 3) / 3)


def test_confusion_matrix_has_unparsed_column() -> None:
    cm = confusion_matrix(PAIRS, CLASSES)
    assert cm.rows == CLASSES
    assert cm.columns == (*CLASSES, UNPARSED)
    assert cm.counts == ((2, 1, 0, 1), (1, 1, 0, 0), (0, 0, 1, 1))
    assert cm.count(P, None) == 1 and cm.count(X, P) == 1
    assert sum(map(sum, cm.counts)) == len(PAIRS)


def test_confusion_keeps_predictions_outside_the_classes() -> None:
    cm = confusion_matrix([(P, N), (X, X), (X, None)], (P, X))
    assert cm.columns == (P, X, N, UNPARSED)
    assert cm.counts == ((0, 0, 1, 0), (0, 1, 0, 1))


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="not among the classes"):
        per_class([("maybe", P)], CLASSES)
    with pytest.raises(ValueError, match="reserved"):
        confusion_matrix([], (P, UNPARSED))
    with pytest.raises(ValueError, match="repeat"):
        macro_f1([], (P, P))


def test_wilson_interval_known_values() -> None:
    ci = wilson_interval(4, 8)
    assert (ci.low, ci.high) == pytest.approx((0.2152, 0.7848), abs=1e-4)
    ci = wilson_interval(0, 10)
    assert ci.low == 0.0 and ci.high == pytest.approx(0.2775, abs=1e-4)
    ci = wilson_interval(10, 10)
    assert ci.high == 1.0 and ci.low == pytest.approx(0.7225, abs=1e-4)
    assert (wilson_interval(0, 0).low, wilson_interval(0, 0).high) == (0.0, 1.0)
    assert wilson_interval(4, 8, level=0.99).low < 0.2152
    with pytest.raises(ValueError):
        wilson_interval(9, 8)


def test_bootstrap_is_seeded_and_sensible() -> None:
    pairs = PAIRS * 10
    a = bootstrap_interval(pairs, CLASSES, resamples=500, seed=0)
    b = bootstrap_interval(pairs, CLASSES, resamples=500, seed=0)
    c = bootstrap_interval(pairs, CLASSES, resamples=500, seed=1)
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low <= macro_f1(pairs, CLASSES) <= a.high
    assert "seed 0" in a.method and "500 resamples" in a.method
    perfect = bootstrap_interval([(P, P), (X, X), (N, N)] * 5, CLASSES, resamples=200)
    assert (perfect.low, perfect.high) == (1.0, 1.0)


def test_score_bundles_everything() -> None:
    s = score(PAIRS, CLASSES, task="three_way", bootstrap=100)
    assert (s.n, s.correct, s.unparsed) == (8, 4, 2)
    assert s.accuracy == 0.5
    assert s.macro_f1 == pytest.approx(73 / 126)
    # the interval is the bootstrap of these pairs with the resamples asked for, seed 0
    assert s.macro_f1_ci == bootstrap_interval(PAIRS, CLASSES, resamples=100, seed=0)
    assert s.macro_f1_ci.low <= s.macro_f1 <= s.macro_f1_ci.high
    d = s.as_dict()
    assert d["confusion"]["columns"][-1] == UNPARSED
    assert d["per_class"][P]["f1"] == pytest.approx(4 / 7, abs=1e-6)
    assert score(PAIRS, CLASSES, bootstrap=0).macro_f1_ci is None


def test_binary_compliance_on_applicable_cases() -> None:
    pairs = [*PAIRS, (N, P)]  # a not-applicable case predicted permit: ignored here
    s = binary_compliance(pairs, bootstrap=0)
    assert s.classes == (P, X) and s.n == 6 and s.correct == 3
    assert s.per_class[P].precision == pytest.approx(2 / 3)
    assert s.per_class[P].f1 == pytest.approx(4 / 7)
    assert s.per_class[X].f1 == pytest.approx(0.5)
    assert s.macro_f1 == pytest.approx(float(Fraction(15, 28)))
    # a not-applicable prediction on an applicable case is wrong, in its own column
    s2 = binary_compliance([(P, N), (X, X)], bootstrap=0)
    assert s2.accuracy == 0.5 and s2.per_class[P].recall == 0.0
    assert s2.confusion.columns == (P, X, N, UNPARSED)


def _f1(pairs: list[tuple[str, str | None]], label: str) -> float:
    tp = sum(g == p == label for g, p in pairs)
    predicted = sum(p == label for _, p in pairs)
    gold = sum(g == label for g, _ in pairs)
    return 2 * tp / (predicted + gold) if predicted + gold else 0.0


def test_binary_compliance_as_the_paper_prints_it() -> None:
    pairs = [*PAIRS, (N, P)]
    s = binary_compliance(pairs, scope="all", bootstrap=50)
    # over all cases the extra (N, P) lowers permit precision: 2 right of 4 predicted
    assert s.per_class[P].precision == pytest.approx(0.5)
    three = per_class(pairs, CLASSES)
    assert s.per_class[P] == three[P] and s.per_class[X] == three[X]
    assert s.macro_f1 == pytest.approx((three[P].f1 + three[X].f1) / 2)
    # its interval: the mean of the two F1s over 50 resamples of all cases, seed 0
    rng = np.random.default_rng(0)
    values = []
    for _ in range(50):
        sample = [pairs[int(j)] for j in rng.integers(0, len(pairs), size=len(pairs))]
        values.append((_f1(sample, P) + _f1(sample, X)) / 2)
    low, high = np.quantile(values, [0.025, 0.975])
    ci = s.macro_f1_ci
    assert ci is not None and (ci.level, ci.method) == (
        0.95,
        "bootstrap percentile, 50 resamples, seed 0",
    )
    assert (ci.low, ci.high) == pytest.approx((low, high))
    with pytest.raises(ValueError):
        binary_compliance(pairs, scope="some")  # type: ignore[arg-type]


def test_applicability() -> None:
    s = applicability(PAIRS, bootstrap=0)
    assert s.classes == ("applicable", "not_applicable")
    assert (s.n, s.correct, s.unparsed) == (8, 6, 2)
    assert s.per_class["applicable"].recall == pytest.approx(5 / 6)
    assert s.per_class["applicable"].f1 == pytest.approx(10 / 11)
    assert s.per_class["not_applicable"].f1 == pytest.approx(2 / 3)


def test_score_run_by_task() -> None:
    three = score_run(PAIRS, "three_way", bootstrap=0)
    assert three.main.task == "three_way" and three.main.accuracy == 0.5
    assert three.compliance is not None and three.compliance.n == 6
    assert three.applicability is not None and three.applicability.correct == 6
    comp = score_run([(P, P), (X, N)], "compliance", bootstrap=0)
    assert comp.main.classes == (P, X) and comp.compliance is None
    app = score_run(PAIRS, "applicability", bootstrap=0)
    assert app.main.task == "applicability" and app.compliance is not None
    assert score_run([(N, N)], "three_way", bootstrap=0).compliance is None
    with pytest.raises(ValueError):
        score_run(PAIRS, "ranking")


def test_mcnemar_by_hand() -> None:
    # b = 5 (only A right), c = 1 (only B right), 4 concordant
    a = [True] * 5 + [False] + [True, True, False, False]
    b = [False] * 5 + [True] + [True, True, False, False]
    exact = mcnemar(a, b)
    assert (exact.n, exact.b, exact.c, exact.method) == (10, 5, 1, "exact")
    assert exact.p_value == pytest.approx(14 / 64)  # 2 * (C(6,0) + C(6,1)) / 2^6
    chi = mcnemar(a, b, method="chi2")
    assert chi.statistic == pytest.approx(1.5)  # (|5 - 1| - 1)^2 / 6
    assert chi.p_value == pytest.approx(math.erfc(math.sqrt(0.75)))
    assert chi.p_value == pytest.approx(0.2207, abs=1e-4)
    same = mcnemar([True, False], [True, False])
    assert (same.b, same.c, same.p_value) == (0, 0, 1.0)
    assert mcnemar([True, False], [True, False], method="chi2").p_value == 1.0
    with pytest.raises(ValueError):
        mcnemar([True], [True, False])
    with pytest.raises(ValueError):
        mcnemar([True], [True], method="bayes")  # type: ignore[arg-type]


def test_mcnemar_auto_switches_to_chi2() -> None:
    a = [True] * 20 + [False] * 10
    b = [False] * 20 + [True] * 10
    r = mcnemar(a, b)
    assert r.method == "chi2" and (r.b, r.c) == (20, 10)
    assert r.statistic == pytest.approx(81 / 30)


@pytest.mark.parametrize("b,c", [(0, 0), (5, 1), (1, 5), (3, 3), (12, 2), (40, 25)])
def test_pure_python_fallbacks_match_scipy(b: int, c: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    n = b + c
    if n:
        assert _exact_p_python(min(b, c), n) == pytest.approx(
            min(1.0, stats.binomtest(min(b, c), n, 0.5).pvalue)
        )
    stat = max(abs(b - c) - 1, 0) ** 2 / n if n else 0.0
    assert _chi2_p_python(stat) == pytest.approx(stats.chi2.sf(stat, 1))
