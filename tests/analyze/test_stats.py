"""The statistical helpers against reference values computed with scipy 1.17.1 (numpy 2.4.6).

The references were computed once in a throwaway environment and are hard-coded
here: scipy is not a dependency. Inputs are deterministic formulas, not seeded
draws, so the numbers do not depend on numpy's random streams.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest

from infertriage.analyze.stats.bootstrap import (
    bootstrap_clustered_quantile_ci,
    bootstrap_diff_ci,
    bootstrap_quantile_ci,
)
from infertriage.analyze.stats.significance import (
    fisher_exact,
    fisher_min_p,
    ks_two_sample,
    linear_trend,
    mann_whitney,
    min_attainable_p,
    normal_quantile,
    t_quantile,
    two_proportion_p,
    wilson_interval,
)

# Ties on both sides and across them.
TIES_A = ((np.arange(40) * 7919) % 101) / 10.0
TIES_B = ((np.arange(50) * 104729) % 97) / 10.0 + 1.0
# No ties at all.
SMOOTH_A = np.sin(np.arange(1, 61))
SMOOTH_B = np.sin(np.arange(1, 71) * 1.3) + 0.3


# --- Mann–Whitney --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "u", "p_value"),
    [
        # scipy 1.17.1: mannwhitneyu(a, b, method="asymptotic", use_continuity=True)
        (TIES_A, TIES_B, 849.5, 0.22319275880451606),
        (SMOOTH_A, SMOOTH_B, 1589.0, 0.017120538417315156),
    ],
)
def test_mann_whitney_matches_scipy(a: np.ndarray, b: np.ndarray, u: float, p_value: float) -> None:
    result = mann_whitney(a, b)
    assert result.u == u
    assert result.p_value == pytest.approx(p_value, rel=1e-9)
    assert result.prob_superiority == pytest.approx(1.0 - u / (a.size * b.size))


def test_mann_whitney_probability_of_superiority() -> None:
    assert mann_whitney([1.0, 2.0], [3.0, 4.0]).prob_superiority == 1.0
    assert mann_whitney([3.0, 4.0], [1.0, 2.0]).prob_superiority == 0.0
    # One tie among four pairs: b wins 1, ties 1 (half), loses 2.
    assert mann_whitney([1.0, 3.0], [1.0, 2.0]).prob_superiority == pytest.approx(0.375)


def test_mann_whitney_degenerate_inputs() -> None:
    assert mann_whitney([], [1.0, 2.0]).p_value == 1.0
    assert mann_whitney([], []).prob_superiority == 0.5
    same = mann_whitney([5.0] * 30, [5.0] * 40)
    assert same.p_value == 1.0 and same.prob_superiority == 0.5
    assert mann_whitney([1.0, math.nan, 2.0], [1.0, 2.0]).u == 2.0  # NaN is dropped


def test_mann_whitney_is_fast_on_100k_samples() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(0.0, 1.0, 100_000), rng.lognormal(0.02, 1.0, 100_000)
    b = np.round(b, 2)  # many ties
    start = time.perf_counter()
    result = mann_whitney(a, b)
    assert time.perf_counter() - start < 2.0
    assert 0.0 <= result.p_value <= 1.0
    assert result.prob_superiority > 0.5


# --- exact Mann–Whitney and Fisher -------------------------------------------------------


def _brute_force_p(a: np.ndarray, b: np.ndarray) -> float:
    """Every split of the pooled values into |a| and |b|: twice the observed side's tail share.

    Mid-ranks for ties, computed here without the code under test.
    """
    pooled = np.concatenate((a, b))
    order = np.sort(pooled)
    ranks = np.array([np.mean(np.flatnonzero(order == v)) + 1.0 for v in pooled])
    observed, mean = ranks[: a.size].sum(), a.size * (pooled.size + 1) / 2.0
    sums = np.array(
        [ranks[list(pick)].sum() for pick in itertools.combinations(range(pooled.size), a.size)]
    )
    tail = sums <= observed + 1e-9 if observed <= mean else sums >= observed - 1e-9
    return min(1.0, 2.0 * float(tail.mean()))


def _small_samples() -> list[tuple[np.ndarray, np.ndarray]]:
    """Deterministic pairs of 1–7 values: integers with ties within and across, and smooth ones."""
    pairs = []
    for i in range(1, 8):
        for j in range(1, 8):
            pairs.append((np.arange(i) * 37 % 5 * 1.0, np.arange(j) * 53 % 7 * 1.0 + (i + j) % 3))
            pairs.append((np.sin(np.arange(1, i + 1) * 2.1), np.cos(np.arange(1, j + 1)) + 0.4))
    return pairs


def test_exact_mann_whitney_equals_brute_force_enumeration() -> None:
    for a, b in _small_samples():
        exact = mann_whitney(a, b, method="exact")
        assert exact.exact and exact.p_value == pytest.approx(_brute_force_p(a, b), abs=1e-12)
        assert exact.u == mann_whitney(a, b).u  # the statistic does not depend on the method


@pytest.mark.parametrize(
    ("a", "b", "p_value"),
    [
        # scipy 1.17.1: mannwhitneyu(a, b, method="exact") (no ties)
        (SMOOTH_A[:15], SMOOTH_B[:35], 0.34466183040919074),
        (SMOOTH_A[:50], SMOOTH_B[:50], 0.015827494370231704),
        # scipy 1.17.1: permutation_test of the rankdata sum, n_resamples=inf, two-sided
        (
            np.arange(8) * 7919 % 11 / 2.0,
            np.arange(9) * 104729 % 7 / 2.0 + 1.0,
            0.18642533936651584,
        ),
    ],
)
def test_exact_mann_whitney_matches_scipy(a: np.ndarray, b: np.ndarray, p_value: float) -> None:
    assert mann_whitney(a, b, method="exact").p_value == pytest.approx(p_value, rel=1e-9)


def test_exact_mann_whitney_complete_separation_and_auto() -> None:
    low, high = np.arange(15.0), np.arange(35.0) + 100.0
    assert mann_whitney(high, low, method="exact").p_value == pytest.approx(2 / math.comb(50, 15))
    assert mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], method="exact").p_value == 0.1
    assert mann_whitney(low, high, method="auto").exact  # 15 against 35: exact
    big = mann_whitney(SMOOTH_A, np.tile(SMOOTH_B, 20), method="auto")  # 60 against 1,400
    assert not big.exact and big.p_value == mann_whitney(SMOOTH_A, np.tile(SMOOTH_B, 20)).p_value
    assert mann_whitney([5.0] * 4, [5.0] * 3, method="exact").p_value == 1.0


def test_exact_mann_whitney_is_fast_at_its_bound() -> None:
    start = time.perf_counter()
    result = mann_whitney(SMOOTH_A[:50], SMOOTH_B[:50], method="auto")
    assert result.exact and time.perf_counter() - start < 1.0


def test_fisher_matches_hand_computed_values() -> None:
    # 3/10 against 7/10: 10 events in 20, P(x in the first) = C(10, x)·C(10, 10 − x)/C(20, 10).
    # The tables no likelier than x = 3 are x = 0…3 and 7…10: 2·(1 + 100 + 2,025 + 14,400).
    assert fisher_exact(3, 10, 7, 10) == pytest.approx(2 * 16_526 / 184_756, rel=1e-12)
    # 0/35 against 13/15: every other split of the 13 events is likelier than all in the 15.
    assert fisher_exact(0, 35, 13, 15) == pytest.approx(105 / math.comb(50, 13), rel=1e-12)
    # 1/9 against 11/14; scipy 1.17.1 fisher_exact([[1, 8], [11, 3]]) as a cross-check.
    assert fisher_exact(1, 9, 11, 14) == pytest.approx(0.0027594561852200836, rel=1e-9)
    # scipy 1.17.1: fisher_exact([[12, 188], [20, 190]])
    assert fisher_exact(12, 200, 20, 210) == pytest.approx(0.20147288119145929, rel=1e-9)


def test_fisher_edges() -> None:
    assert fisher_exact(0, 100, 0, 100) == 1.0  # no event: one table
    assert fisher_exact(5, 5, 7, 7) == 1.0  # all events
    assert fisher_exact(0, 0, 3, 10) == 1.0
    assert fisher_exact(50, 100, 50, 100) == pytest.approx(1.0)
    assert fisher_exact(0, 100_000, 300, 100_000) < 1e-80  # large counts stay finite and fast
    with pytest.raises(ValueError, match="counts of trials"):
        fisher_exact(4, 3, 0, 3)


def test_least_attainable_p_values() -> None:
    assert min_attainable_p(3, 3) == pytest.approx(0.1)
    assert min_attainable_p(5, 5) == pytest.approx(2 / 252)  # above 0.05/12: no verdict at 5
    assert min_attainable_p(6, 6) == pytest.approx(2 / 924)  # below it: 6 against 6 can tell
    assert min_attainable_p(0, 10) == 1.0 and min_attainable_p(2000, 2000) == 0.0
    assert fisher_min_p(3, 3) == pytest.approx(0.1)
    assert fisher_min_p(2, 35) == pytest.approx(1 / math.comb(37, 2))  # unequal: one tail only
    assert fisher_min_p(0, 5) == 1.0


# --- Kolmogorov–Smirnov --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "d", "p_value", "scipy_asymp"),
    [
        # scipy 1.17.1: ks_2samp(a, b).statistic; kstwobign.sf((√nₑ + 0.12 + 0.11/√nₑ)·D);
        # ks_2samp(method="asymp").pvalue, which rounds nₑ and uses kstwo: close, not equal.
        (TIES_A, TIES_B, 0.125, 0.8546453884207719, 0.8403704369433029),
        (SMOOTH_A, SMOOTH_B, 0.24285714285714288, 0.03662572370196248, 0.03801102199208806),
    ],
)
def test_ks_matches_scipy(
    a: np.ndarray, b: np.ndarray, d: float, p_value: float, scipy_asymp: float
) -> None:
    got_d, got_p = ks_two_sample(a, b)
    assert got_d == pytest.approx(d, abs=1e-12)
    assert got_p == pytest.approx(p_value, rel=1e-9)
    assert got_p == pytest.approx(scipy_asymp, rel=0.05)


def test_ks_edges() -> None:
    assert ks_two_sample([], [1.0]) == (0.0, 1.0)
    d, p = ks_two_sample(np.arange(100.0), np.arange(100.0))
    assert d == 0.0 and p == 1.0
    d, p = ks_two_sample(np.arange(100.0), np.arange(100.0) + 1000.0)
    assert d == 1.0 and p < 1e-20


# --- quantile functions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("df", "expected"),
    [
        # scipy 1.17.1: t.ppf([0.9, 0.975, 0.995], df)
        (2, (1.88561808, 4.30265273, 9.9248432)),
        (3, (1.63774435, 3.18244631, 5.84090931)),
        (5, (1.47588405, 2.57058184, 4.03214298)),
        (10, (1.37218364, 2.22813885, 3.16927267)),
        (30, (1.31041503, 2.04227246, 2.74999565)),
        (120, (1.28864623, 1.97993041, 2.61742115)),
    ],
)
def test_t_quantile_matches_scipy(df: int, expected: tuple[float, float, float]) -> None:
    for p, value in zip((0.9, 0.975, 0.995), expected, strict=True):
        assert t_quantile(p, df) == pytest.approx(value, abs=1e-4)
        assert t_quantile(1.0 - p, df) == pytest.approx(-value, abs=1e-4)


def test_t_quantile_closed_forms_and_limits() -> None:
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.75, 1) == pytest.approx(1.0)  # Cauchy: tan(π/4)
    assert t_quantile(0.975, 1e6) == pytest.approx(normal_quantile(0.975), abs=1e-5)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.9, 0.5)
    with pytest.raises(ValueError, match="probability"):
        t_quantile(1.0, 5)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        # scipy 1.17.1: norm.ppf(p)
        (1e-10, -6.361340902404056),
        (0.001, -3.090232306167813),
        (0.02, -2.053748910631823),
        (0.5, 0.0),
        (0.8, 0.8416212335729143),
        (0.975, 1.959963984540054),
        (0.999, 3.090232306167813),
    ],
)
def test_normal_quantile_matches_scipy(p: float, expected: float) -> None:
    assert normal_quantile(p) == pytest.approx(expected, rel=1e-12, abs=1e-14)


def test_normal_quantile_rejects_the_ends() -> None:
    for p in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="probability"):
            normal_quantile(p)


# --- linear trend --------------------------------------------------------------------------


def test_linear_trend_matches_scipy_linregress() -> None:
    t = np.arange(20.0)
    y = 2.0 + 0.5 * t + np.sin(3.0 * t)
    trend = linear_trend(t, y)
    # scipy 1.17.1: linregress(t, y); slope ± t.ppf(0.975, 18)·stderr; rvalue²
    assert trend.slope == pytest.approx(0.5023179105624523, rel=1e-12)
    assert trend.intercept == pytest.approx(1.9890614917472735, rel=1e-12)
    assert trend.slope_ci == pytest.approx((0.4387287606017915, 0.5659070605231132), abs=1e-6)
    assert trend.r2 == pytest.approx(0.9386565685182071, rel=1e-12)
    assert trend.n == 20


def test_linear_trend_degenerate_cases() -> None:
    for t, y in (([0.0, 1.0], [1.0, 2.0]), ([3.0, 3.0, 3.0], [1.0, 2.0, 4.0]), ([], [])):
        trend = linear_trend(t, y)
        assert trend.slope == 0.0 and trend.slope_ci == (-math.inf, math.inf)
        assert trend.r2 == 0.0 and trend.n == len(t)
    assert linear_trend([3.0, 3.0, 3.0], [1.0, 2.0, 6.0]).intercept == 3.0
    flat = linear_trend([0.0, 1.0, 2.0, 3.0], [5.0, 5.0, 5.0, 5.0])
    assert flat.slope == 0.0 and flat.slope_ci == (0.0, 0.0) and flat.r2 == 0.0
    with pytest.raises(ValueError, match="t has 2 values"):
        linear_trend([0.0, 1.0], [1.0])


# --- proportions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # scipy 1.17.1: binomtest(k, n).proportion_ci(method="wilson")
        (0, 300, 0.0, 0.012642971224546036),
        (30, 300, 0.07094791459501534, 0.1391664623846215),
        (7, 20, 0.1811918241010821, 0.5671457233147637),
        (20, 20, 0.8388748419471808, 1.0),
    ],
)
def test_wilson_matches_scipy(k: int, n: int, low: float, high: float) -> None:
    assert wilson_interval(k, n) == pytest.approx((low, high), abs=1e-12)


def test_wilson_level_and_edges() -> None:
    # scipy 1.17.1: binomtest(30, 300).proportion_ci(0.99, method="wilson")
    expected = (0.06368500193113519, 0.15362521728935807)
    assert wilson_interval(30, 300, level=0.99) == pytest.approx(expected, abs=1e-12)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)


def test_two_proportion_matches_scipy() -> None:
    # scipy 1.17.1: chi2_contingency([[k1, n1 − k1], [k2, n2 − k2]], correction=False)[1]
    assert two_proportion_p(0, 300, 30, 300) == pytest.approx(1.9149439861918618e-08, rel=1e-9)
    assert two_proportion_p(12, 200, 20, 210) == pytest.approx(0.18366311445789052, rel=1e-9)
    assert two_proportion_p(0, 100, 0, 100) == 1.0
    assert two_proportion_p(3, 0, 1, 10) == 1.0


# --- bootstrap -----------------------------------------------------------------------------


def _naive_bootstrap(values: np.ndarray, q: float | None, num: int, seed: int) -> np.ndarray:
    picks = np.random.default_rng(seed).integers(0, values.size, (num, values.size))
    resamples = values[picks]
    stats = resamples.mean(axis=1) if q is None else np.quantile(resamples, q, axis=1)
    return np.asarray(stats, dtype=np.float64)


@pytest.mark.parametrize("q", [0.0, 0.37, 0.5, 0.95, 1.0, None])
def test_bootstrap_quantile_agrees_with_naive_resampling(q: float | None) -> None:
    values = np.random.default_rng(3).lognormal(0.0, 0.7, 200)
    low, high = bootstrap_quantile_ci(values, q, num_resamples=20_000, seed=1)
    naive = _naive_bootstrap(values, q, 20_000, seed=2)
    # Each end sits at its tail's rank of the index-matrix bootstrap. The bootstrap law of a
    # quantile has atoms (order statistics), so bracket the rank: below < share ≤ at-or-below.
    for end, share in ((low, 0.025), (high, 0.975)):
        assert float(np.mean(naive < end)) - 0.01 <= share <= float(np.mean(naive <= end)) + 0.01
    point = float(values.mean()) if q is None else float(np.quantile(values, q))
    assert low <= point <= high


def test_bootstrap_quantile_is_seeded_and_checks_its_input() -> None:
    values = np.arange(50.0)
    assert bootstrap_quantile_ci(values, 0.9, seed=4) == bootstrap_quantile_ci(values, 0.9, seed=4)
    assert bootstrap_quantile_ci([], 0.5) == pytest.approx((math.nan, math.nan), nan_ok=True)
    assert bootstrap_quantile_ci([2.5], 0.5) == (2.5, 2.5)
    with pytest.raises(ValueError, match="quantile"):
        bootstrap_quantile_ci(values, 95.0)


def test_bootstrap_handles_a_million_samples() -> None:
    big = np.random.default_rng(0).lognormal(0.0, 1.0, 1_000_000)
    start = time.perf_counter()
    low, high = bootstrap_quantile_ci(big, 0.95)
    diff_low, diff_high = bootstrap_diff_ci(big, big * 1.02, 0.5)
    assert time.perf_counter() - start < 5.0
    assert low <= float(np.quantile(big, 0.95)) <= high
    assert 0.0 < diff_low < 0.02 * float(np.median(big)) < diff_high


def test_bootstrap_diff_interval() -> None:
    rng = np.random.default_rng(5)
    a = rng.lognormal(np.log(0.2), 0.3, 300)
    b = rng.lognormal(np.log(0.2), 0.3, 300)
    low, high = bootstrap_diff_ci(a, b, 0.5)
    assert low < 0.0 < high  # same distribution: 0 is inside
    low, high = bootstrap_diff_ci(a, a * 1.3, 0.95)
    true_diff = 0.3 * float(np.quantile(a, 0.95))
    assert 0.0 < low <= true_diff <= high
    low, high = bootstrap_diff_ci(a, a + 1.0, None)
    assert low < 1.0 < high
    assert bootstrap_diff_ci([1.0], [3.0], 0.5) == (2.0, 2.0)
    assert bootstrap_diff_ci([], [3.0], 0.5) == pytest.approx((math.nan, math.nan), nan_ok=True)


def test_bootstrap_interval_covers_the_true_mean() -> None:
    # 200 seeded synthetic runs of 100 log-normal latencies: true mean exp(σ²/2)·median.
    sigma, median = 0.5, 0.2
    true_mean = median * np.exp(sigma**2 / 2)
    covered = 0
    for seed in range(200):
        sample = np.random.default_rng(seed).lognormal(np.log(median), sigma, 100)
        low, high = bootstrap_quantile_ci(sample, None, seed=seed, num_resamples=500)
        covered += low <= true_mean <= high
    assert covered / 200 >= 0.90


def test_a_clustered_bootstrap_resamples_whole_groups() -> None:
    # Each group's values move together: resampling groups, not values, keeps the interval wide.
    groups = [np.full(20, float(level)) for level in range(1, 21)]
    pooled = np.concatenate(groups)
    low, high = bootstrap_clustered_quantile_ci(groups, 0.5, num_resamples=2000, seed=3)
    plain_low, plain_high = bootstrap_quantile_ci(pooled, 0.5, num_resamples=2000, seed=3)
    assert low <= np.quantile(pooled, 0.5) <= high
    assert high - low > 2 * (plain_high - plain_low)
    assert bootstrap_clustered_quantile_ci(groups, 0.9, seed=1) == bootstrap_clustered_quantile_ci(
        groups, 0.9, seed=1
    )
    assert bootstrap_clustered_quantile_ci([], 0.5) == pytest.approx(
        (math.nan, math.nan), nan_ok=True
    )
