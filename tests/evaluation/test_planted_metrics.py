"""McNemar's test and the macro-F1 bootstrap interval, against values derived by hand.

* McNemar: the exact two-sided binomial p-value (``math.comb``) and the
  continuity-corrected chi-square (closed form), and where ``auto`` switches
  from one to the other: exact while b + c < 25, chi-square from 25 on (the usual
  rule: the chi-square approximation is poor below 25 discordant pairs);
* the bootstrap: on one class the resampled macro-F1 is a function of a binomial
  count, so its percentile interval follows from the binomial distribution; and
  on three classes the interval equals the documented procedure (resample cases
  with replacement from ``numpy.random.default_rng(seed)``, percentiles of the
  replicates) written out again here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from privacy_ci.evaluation import bootstrap_interval, macro_f1, mcnemar
from privacy_ci.retrieval import RetrievalResult, case_metrics, paired_difference


# -- McNemar -----------------------------------------------------------------------------
def _runs(b: int, c: int, both: int = 4, neither: int = 3) -> tuple[list[bool], list[bool]]:
    """Paired correctness with `b` cases only run A got right and `c` only run B."""
    a = [True] * b + [False] * c + [True] * both + [False] * neither
    other = [False] * b + [True] * c + [True] * both + [False] * neither
    return a, other


def _exact(b: int, c: int) -> float:
    """Two-sided exact binomial p-value of min(b, c) of b + c under p = 1/2."""
    n, k = b + c, min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / (1 << n))


def _chi2(b: int, c: int) -> tuple[float, float]:
    """The continuity-corrected statistic and its chi-square (1 df) p-value (the
    correction stops at 0: b = c is no evidence either way, p = 1)."""
    statistic = max(abs(b - c) - 1, 0) ** 2 / (b + c)
    # chi-square with 1 df is a squared standard normal: P(Z^2 > s) = erfc(sqrt(s / 2))
    return statistic, math.erfc(math.sqrt(statistic / 2))


def test_the_exact_p_value_by_hand() -> None:
    result = mcnemar(*_runs(3, 12))
    assert (result.b, result.c, result.method, result.statistic) == (3, 12, "exact", None)
    # 2 * (C(15,0) + C(15,1) + C(15,2) + C(15,3)) / 2^15 = 2 * 576 / 32768
    assert result.p_value == pytest.approx(1152 / 32768, rel=1e-12)
    assert result.p_value == pytest.approx(_exact(3, 12), rel=1e-12)
    # the runs swapped: b and c swap, the two-sided p-value does not move
    a, b = _runs(3, 12)
    swapped = mcnemar(b, a)
    assert (swapped.b, swapped.c) == (12, 3)
    assert swapped.p_value == pytest.approx(result.p_value, rel=1e-12)
    # even split: p = 1 (capped)
    assert mcnemar(*_runs(6, 6)).p_value == 1.0


@pytest.mark.parametrize(
    ("b", "c", "method"),
    [
        (17, 7, "exact"),  # b + c = 24: the last exact
        (12, 12, "exact"),
        (18, 7, "chi2"),  # b + c = 25: the first chi-square
        (5, 20, "chi2"),
        (18, 8, "chi2"),  # b + c = 26
        (40, 25, "chi2"),
    ],
)
def test_auto_switches_to_chi_square_at_25_discordant_pairs(b: int, c: int, method: str) -> None:
    result = mcnemar(*_runs(b, c))
    assert (result.b, result.c, result.method) == (b, c, method)
    if method == "exact":
        assert result.statistic is None
        assert result.p_value == pytest.approx(_exact(b, c), rel=1e-9)
    else:
        statistic, p = _chi2(b, c)
        assert result.statistic == pytest.approx(statistic, rel=1e-12)
        assert result.p_value == pytest.approx(p, rel=1e-9)
    # either method can be asked for by name, whatever b + c is
    exact = mcnemar(*_runs(b, c), method="exact")
    chi2 = mcnemar(*_runs(b, c), method="chi2")
    assert exact.method == "exact" and exact.p_value == pytest.approx(_exact(b, c), rel=1e-9)
    assert chi2.method == "chi2" and chi2.p_value == pytest.approx(_chi2(b, c)[1], rel=1e-9)


def test_the_boundary_changes_the_answer() -> None:
    """At b + c = 25 the two tests disagree enough to matter: the choice is visible."""
    # 18 vs 7: exact 2 * 726206 / 2^25 = 0.0433; chi-square (11 - 1)^2 / 25 = 4, p = 0.0455
    assert _exact(18, 7) == pytest.approx(2 * 726206 / 2**25, rel=1e-12)
    assert _chi2(18, 7) == pytest.approx((4.0, math.erfc(math.sqrt(2))), rel=1e-12)
    got = mcnemar(*_runs(18, 7))
    assert got.p_value == pytest.approx(0.04550, abs=1e-5)
    assert got.p_value != pytest.approx(_exact(18, 7), abs=1e-3)


# -- the bootstrap interval ------------------------------------------------------------
P, X, N = "permit", "prohibit", "not_applicable"


def _binomial_cdf(j: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(j + 1))


def _quantile_count(q: float, n: int, p: float) -> int:
    """The q-quantile of Binomial(n, p), asserting q is well away from a jump of its
    CDF (so that any fair resampling lands on it, whatever the draws)."""
    for j in range(n + 1):
        upper = _binomial_cdf(j, n, p)
        if upper >= q:
            lower = _binomial_cdf(j - 1, n, p) if j else 0.0
            assert min(q - lower, upper - q) > 0.014, (q, n, p, j)
            return j
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("n", "right", "level"), [(8, 4, 0.8), (9, 4, 0.95), (6, 3, 0.9)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_of_one_class_follows_the_binomial(
    n: int, right: int, level: float, seed: int
) -> None:
    """One class, every case gold ``permit``, `right` of `n` predicted right and the rest
    unparsed. A resample with j right cases has precision 1 (0 when j = 0) and recall
    j / n, so macro-F1 = 2j / (n + j), increasing in j, and j ~ Binomial(n, right / n)
    (cases drawn with replacement). So the percentile interval's bounds are F1 at the
    binomial's (1 - level) / 2 and (1 + level) / 2 quantiles."""
    pairs: list[tuple[str, str | None]] = [(P, P)] * right + [(P, None)] * (n - right)
    assert macro_f1(pairs, (P,)) == pytest.approx(2 * right / (n + right))
    tail = (1 - level) / 2
    low_j = _quantile_count(tail, n, right / n)
    high_j = _quantile_count(1 - tail, n, right / n)
    assert low_j < right < high_j  # a real interval around the estimate

    ci = bootstrap_interval(pairs, (P,), resamples=4000, seed=seed, level=level)
    assert (ci.low, ci.high) == pytest.approx(
        (2 * low_j / (n + low_j), 2 * high_j / (n + high_j)), abs=1e-12
    )
    assert ci.level == level


def test_bootstrap_of_identical_cases_has_zero_width() -> None:
    for pairs, value in (([(P, None)] * 7, 0.0), ([(P, P), (X, X)] * 4, 1.0)):
        ci = bootstrap_interval(pairs, (P, X), resamples=300, seed=5)
        assert (ci.low, ci.high) == (value, value)


def _f1s(sample: Sequence[tuple[str, str | None]], classes: Sequence[str]) -> float:
    """Macro-F1 written out: F1 = 2 tp / (predicted + gold), 0 when both are 0."""
    total = 0.0
    for label in classes:
        tp = sum(g == label and p == label for g, p in sample)
        predicted = sum(p == label for _, p in sample)
        gold = sum(g == label for g, _ in sample)
        total += 2 * tp / (predicted + gold) if predicted + gold else 0.0
    return total / len(classes)


@pytest.mark.parametrize(("resamples", "seed", "level"), [(200, 0, 0.95), (57, 3, 0.9)])
def test_bootstrap_is_the_documented_procedure(resamples: int, seed: int, level: float) -> None:
    """Resample the cases with replacement, from numpy.random.default_rng(seed), one
    row of len(pairs) indices per replicate; the interval is the replicates'
    (linear) percentiles at (1 -/+ level) / 2."""
    pairs: list[tuple[str, str | None]] = [
        (P, P),
        (P, P),
        (P, X),
        (P, None),
        (X, X),
        (X, P),
        (X, X),
        (N, N),
        (N, None),
        (N, P),
        (P, P),
        (X, None),
        (N, N),
    ]
    classes = (P, X, N)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(pairs), size=(resamples, len(pairs)))
    values = [_f1s([pairs[int(i)] for i in row], classes) for row in draws]
    assert len(set(values)) > 10  # distinct replicates: the percentiles interpolate
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])

    ci = bootstrap_interval(pairs, classes, resamples=resamples, seed=seed, level=level)
    assert (ci.low, ci.high) == pytest.approx((float(low), float(high)), rel=1e-12, abs=1e-12)
    assert ci.method == f"bootstrap percentile, {resamples} resamples, seed {seed}"


# -- the paired bootstrap of a retrieval difference --------------------------------------
def _retrieval(name: str, hits: Sequence[bool]) -> RetrievalResult:
    """A retriever's result on cases c0, c1, ...: each case's one gold id found at rank 1
    or not found."""
    per_case = [
        case_metrics(f"c{i}", (f"g{i}",), [f"g{i}" if hit else "miss"], lambda n: (n,))
        for i, hit in enumerate(hits)
    ]
    return RetrievalResult(
        name=name,
        dataset="toy",
        query="text",
        ks=(10,),
        n_cases=len(per_case),
        skipped=0,
        recall={},
        any_hit={},
        mrr=0.0,
        ndcg10=0.0,
        seconds=0.0,
        per_case=per_case,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_difference_follows_the_binomial(seed: int) -> None:
    """Eight cases: on four only the new retriever finds the gold id (difference 1),
    on four neither does (0). A resample's mean difference is j / 8 with
    j ~ Binomial(8, 1/2), so the 80 % interval is (2/8, 6/8)."""
    mine = _retrieval("mine", [True] * 4 + [False] * 4)
    base = _retrieval("base", [False] * 8)
    low_j, high_j = _quantile_count(0.1, 8, 0.5), _quantile_count(0.9, 8, 0.5)
    assert (low_j, high_j) == (2, 6)
    diff = paired_difference(mine, base, "recall@10", resamples=4000, level=0.8, seed=seed)
    assert diff.value == 0.5 and diff.cases == 8
    assert (diff.low, diff.high) == pytest.approx((low_j / 8, high_j / 8), abs=1e-12)
