"""analyze.stats, level 1: small statistical tests and intervals, numpy only.

Takes plain samples (sequences or float arrays); gives p-values, confidence
intervals and fits as floats and frozen dataclasses. Pure: no I/O, no clock;
every random step takes an explicit seed.

What each function reproduces (checked against scipy in the tests):

- `mann_whitney`: `scipy.stats.mannwhitneyu(a, b, method="asymptotic",
  use_continuity=True)`, two-sided, with the tie correction; with
  `method="exact"` (or `"auto"` on small samples) the exact permutation test
  of the mid-rank sum, which without ties is `method="exact"`.
- `fisher_exact`: `scipy.stats.fisher_exact` of the 2×2 table, two-sided.
- `min_attainable_p`, `fisher_min_p`: the smallest two-sided p the exact
  Mann–Whitney and Fisher tests can give two samples of those sizes: below
  a test's level, no outcome of that size can be significant.
- `ks_two_sample`: the statistic of `scipy.stats.ks_2samp`; the p-value is the
  classic asymptotic one, the Kolmogorov distribution's tail at
  (√nₑ + 0.12 + 0.11/√nₑ)·D with nₑ = n·m/(n + m) (Stephens 1970).
- `normal_quantile`: Acklam's rational approximation, polished by one Halley step.
- `t_quantile`: exact for df 1 and 2, Hill (1970, CACM algorithm 396) above.
- `wilson_interval`: the Wilson score interval without continuity correction.
- `two_proportion_p`: the pooled two-sided z test (the uncorrected 2×2 χ² test).

Non-finite samples (NaN, ±inf) are dropped before any computation (`samples.finite`).
The bootstrap intervals are `stats.bootstrap`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from infertriage.analyze.stats.samples import FloatArray, Samples, finite

__all__ = [
    "MannWhitney",
    "Trend",
    "fisher_exact",
    "fisher_min_p",
    "ks_two_sample",
    "linear_trend",
    "mann_whitney",
    "min_attainable_p",
    "normal_quantile",
    "t_quantile",
    "two_proportion_p",
    "wilson_interval",
]

# Cells the exact rank-sum recursion may touch (subset sizes × rank sums × values, ~0.1 s);
# above it `method="auto"` takes the normal approximation, which is close at such sizes.
_EXACT_MAX_CELLS = 30_000_000
# Fisher's two-sided p sums the tables no likelier than the observed one, up to this relative
# slack, so that float rounding does not drop a table exactly as likely (scipy and R do the same).
_FISHER_RELATIVE_TIE = 1e-7


def _normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


# --- Mann–Whitney U ------------------------------------------------------------------------


MannWhitneyMethod = Literal["asymptotic", "exact", "auto"]


@dataclass(frozen=True, slots=True)
class MannWhitney:
    """The U test of `a` against `b`.

    `u` is U of `a` (scipy's statistic): the pairs with a > b, ties counting ½.
    `prob_superiority` is P(b > a) + ½·P(b = a) = 1 − u/(n·m): above ½ when
    `b` tends to be larger. `p_value` is two-sided; `exact` says whether it
    comes from the exact permutation distribution or the normal approximation.
    """

    u: float
    p_value: float
    prob_superiority: float
    exact: bool = False


def _average_ranks(data: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """1-based ranks, ties given their average, and the size of each tie group."""
    _, inverse, counts = np.unique(data, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    average = ends - (counts - 1) / 2.0
    return average[inverse].astype(np.float64), counts.astype(np.int64)


def _asymptotic_p(u1: float, n1: int, n2: int, ties: npt.NDArray[np.int64]) -> float:
    pairs = float(n1) * float(n2)
    n = n1 + n2
    tie_term = float(np.sum(ties.astype(np.float64) ** 3 - ties))
    variance = pairs / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0.0:
        return 1.0
    z = (max(u1, pairs - u1) - pairs / 2.0 - 0.5) / math.sqrt(variance)
    return min(1.0, 2.0 * _normal_sf(z))


def _exact_cells(n1: int, n2: int) -> int:
    """What `_exact_p` costs: subset sizes × doubled rank sums × values."""
    small, n = min(n1, n2), n1 + n2
    return (small + 1) * (small * (n + 1) + 1) * n


def _exact_p(ranks: FloatArray, n1: int) -> float:
    """Two-sided exact p of the rank sum of the first `n1` of `ranks` (mid-ranks for ties).

    Under the null every n1-subset of the pooled values is equally likely to
    be the first sample: the p-value is twice the share of subsets whose rank
    sum lies as far out as the observed one, on the observed side (the smaller
    tail, as scipy's permutation tests double it). The counts come from a 0/1
    knapsack over the values: `table[k, s]` is the number of k-subsets of the
    values seen so far with doubled rank sum s, so mid-ranks (halves) stay
    integers and ties are counted exactly. Only sums up to the observed one are
    kept. The sample with fewer values is counted; a rank sum above its mean
    is mirrored (rank → n + 1 − rank) into the lower tail.
    """
    n = ranks.size
    small = n1 if 2 * n1 <= n else n - n1
    doubled = np.rint(2.0 * ranks).astype(np.int64)
    chosen = doubled[:n1] if small == n1 else doubled[n1:]
    if int(chosen.sum()) > small * (n + 1):  # above the mean (doubled) rank sum: mirror
        doubled, chosen = 2 * (n + 1) - doubled, 2 * (n + 1) - chosen
    limit = int(chosen.sum())
    table = np.zeros((small + 1, limit + 1))
    table[0, 0] = 1.0
    for rank in np.sort(doubled):
        if rank > limit:
            break  # sorted: no later value fits under the limit either
        # numpy reads both sides before writing: each value joins a subset at most once.
        table[1:, rank:] += table[:-1, : limit + 1 - rank]
    return min(1.0, 2.0 * float(table[small].sum()) / math.comb(n, small))


def mann_whitney(
    a: Samples, b: Samples, *, method: MannWhitneyMethod = "asymptotic"
) -> MannWhitney:
    """Two-sided Mann–Whitney U test.

    `"asymptotic"`: the normal approximation with the tie correction and the
    continuity correction, as scipy's `method="asymptotic", use_continuity=True`;
    O((n + m) log(n + m)), ranks from one sort. `"exact"`: the exact
    permutation distribution of the mid-rank sum (`_exact_p`), valid at any
    sample size, ties included. `"auto"`: exact while it costs at most
    `_EXACT_MAX_CELLS` (two samples of 50, or 2 against 2,000), the
    approximation above. Empty inputs, or all values equal, give p 1.0 (and
    `prob_superiority` ½ when either side is empty).
    """
    x, y = finite(a), finite(b)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return MannWhitney(u=0.0, p_value=1.0, prob_superiority=0.5)
    ranks, ties = _average_ranks(np.concatenate((x, y)))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    superiority = 1.0 - u1 / (float(n1) * float(n2))
    exact = method == "exact" or (method == "auto" and _exact_cells(n1, n2) <= _EXACT_MAX_CELLS)
    if ties.size == 1:  # all values equal: nothing to rank
        return MannWhitney(u=u1, p_value=1.0, prob_superiority=superiority, exact=exact)
    p_value = _exact_p(ranks, n1) if exact else _asymptotic_p(u1, n1, n2, ties)
    return MannWhitney(u=u1, p_value=p_value, prob_superiority=superiority, exact=exact)


def min_attainable_p(n1: int, n2: int) -> float:
    """The smallest two-sided p of a permutation test of samples of n1 and n2 values.

    Every value of one sample above every value of the other is one of the
    C(n1 + n2, n1) equally likely splits, and its mirror another: p = 2/C(n1 + n2, n1).
    It is the exact Mann–Whitney p of that split (`fisher_min_p` is Fisher's
    counterpart). Below `alpha` no outcome of that size can be significant:
    1.0 when either side is empty.
    """
    if n1 <= 0 or n2 <= 0:
        return 1.0
    return min(1.0, 2 / math.comb(n1 + n2, n1))  # int / int: exact, 0.0 past float range


# --- Kolmogorov–Smirnov --------------------------------------------------------------------


def _kolmogorov_sf(lam: float) -> float:
    """P(K > λ) for the Kolmogorov distribution; each series is used where it converges fast."""
    if lam <= 0.0:
        return 1.0
    if lam < 1.18:
        # The Jacobi-theta form of the CDF: √(2π)/λ · Σ exp(−(2j − 1)²π²/(8λ²)).
        y = math.exp(-(math.pi**2) / (8.0 * lam * lam))
        terms = (y ** float((2 * j - 1) ** 2) for j in range(1, 6))
        cdf = math.sqrt(2.0 * math.pi) / lam * math.fsum(terms)
        return min(1.0, max(0.0, 1.0 - cdf))
    signs = (1.0 if j % 2 else -1.0 for j in range(1, 101))
    tail = 2.0 * sum(s * math.exp(-2.0 * j * j * lam * lam) for j, s in enumerate(signs, 1))
    return min(1.0, max(0.0, tail))


def ks_two_sample(a: Samples, b: Samples) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov D and its asymptotic two-sided p-value.

    D is the largest gap between the two empirical CDFs. Either side empty
    gives (0.0, 1.0).
    """
    x, y = np.sort(finite(a)), np.sort(finite(b))
    if x.size == 0 or y.size == 0:
        return 0.0, 1.0
    points = np.concatenate((x, y))
    cdf_x = np.searchsorted(x, points, side="right") / x.size
    cdf_y = np.searchsorted(y, points, side="right") / y.size
    d = float(np.max(np.abs(cdf_x - cdf_y)))
    root = math.sqrt(x.size * y.size / (x.size + y.size))
    return d, _kolmogorov_sf((root + 0.12 + 0.11 / root) * d)


# --- linear trend --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trend:
    """An ordinary-least-squares line y = intercept + slope·t.

    `slope_ci` is the slope's Student-t interval at the asked level, on n − 2
    degrees of freedom. With fewer than 3 points, or all t equal, there is no
    slope to estimate: `slope` is 0, `intercept` the mean of y (nan without
    points), `slope_ci` (−inf, inf) and `r2` 0. `r2` is also 0 when y is constant.
    """

    slope: float
    intercept: float
    slope_ci: tuple[float, float]
    n: int
    r2: float


def _finite_pairs(t: Samples, y: Samples) -> tuple[FloatArray, FloatArray]:
    tt = np.asarray(t, dtype=np.float64).ravel()
    yy = np.asarray(y, dtype=np.float64).ravel()
    if tt.size != yy.size:
        raise ValueError(f"t has {tt.size} values but y has {yy.size}")
    keep = np.isfinite(tt) & np.isfinite(yy)
    return tt[keep], yy[keep]


def linear_trend(t: Samples, y: Samples, *, level: float = 0.95) -> Trend:
    """OLS fit of y on t with the slope's t interval (see `Trend` for the degenerate cases)."""
    tt, yy = _finite_pairs(t, y)
    n = int(tt.size)
    t_dev = tt - tt.mean() if n else tt
    sxx = float(np.dot(t_dev, t_dev))
    if n < 3 or sxx <= 0.0:
        intercept = float(yy.mean()) if n else math.nan
        return Trend(0.0, intercept, (-math.inf, math.inf), n, 0.0)
    y_dev = yy - yy.mean()
    slope = float(np.dot(t_dev, y_dev)) / sxx
    intercept = float(yy.mean()) - slope * float(tt.mean())
    residuals = y_dev - slope * t_dev
    sse = float(np.dot(residuals, residuals))
    sst = float(np.dot(y_dev, y_dev))
    half = t_quantile(0.5 + level / 2.0, n - 2) * math.sqrt(sse / (n - 2) / sxx)
    r2 = 1.0 - sse / sst if sst > 0.0 else 0.0
    return Trend(slope, intercept, (slope - half, slope + half), n, r2)


# --- quantile functions --------------------------------------------------------------------

# Acklam's coefficients: central region, then the tails.
_ACKLAM_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_ACKLAM_B = (
    -5.447609879822406e01,
    1.615858368580409e02,
    -1.556989798598866e02,
    6.680131188771972e01,
    -1.328068155288572e01,
)
_ACKLAM_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_ACKLAM_D = (
    7.784695709041462e-03,
    3.224671290700398e-01,
    2.445134137142996e00,
    3.754408661907416e00,
)
_ACKLAM_P_LOW = 0.02425


def _horner(coefficients: Sequence[float], x: float) -> float:
    out = 0.0
    for c in coefficients:
        out = out * x + c
    return out


def _acklam(p: float) -> float:
    if p < _ACKLAM_P_LOW:
        q = math.sqrt(-2.0 * math.log(p))
        return _horner(_ACKLAM_C, q) / (_horner(_ACKLAM_D, q) * q + 1.0)
    if p > 1.0 - _ACKLAM_P_LOW:
        return -_acklam(1.0 - p)
    q = p - 0.5
    r = q * q
    return _horner(_ACKLAM_A, r) * q / (_horner(_ACKLAM_B, r) * r + 1.0)


def normal_quantile(p: float) -> float:
    """The standard normal quantile Φ⁻¹(p), p in (0, 1).

    Acklam's rational approximation (relative error < 1.2e-9), refined by one
    Halley step on `math.erfc`, which brings it to about machine precision.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability {p} is not within (0, 1)")
    x = _acklam(p)
    error = 0.5 * math.erfc(-x / math.sqrt(2.0)) - p
    step = error * math.sqrt(2.0 * math.pi) * math.exp(x * x / 2.0)
    return x - step / (1.0 + x * step / 2.0)


def _hill_upper(two_tailed: float, df: float) -> float:
    """Hill's algorithm 396: the t with P(|T| > t) = `two_tailed`, df > 2."""
    a = 1.0 / (df - 0.5)
    b = 48.0 / (a * a)
    c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36
    d = ((94.5 / (b + c) - 3.0) / b + 1.0) * math.sqrt(a * math.pi / 2.0) * df
    y = (d * two_tailed) ** (2.0 / df)
    if y > 0.05 + a:
        # The asymptotic inverse expansion about the normal quantile.
        x = normal_quantile(0.5 * two_tailed)
        y = x * x
        if df < 5:
            c += 0.3 * (df - 4.5) * (x + 0.6)
        c = (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b + c
        y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b + 1.0) * x
        y = math.expm1(a * y * y)
    else:
        inner = 1.0 / (((df + 6.0) / (df * y) - 0.089 * d - 0.822) * (df + 2.0) * 3.0)
        y = ((inner + 0.5 / (df + 4.0)) * y - 1.0) * (df + 1.0) / (df + 2.0) + 1.0 / y
    return math.sqrt(df * y)


def t_quantile(p: float, df: float) -> float:
    """The Student-t quantile: the t with P(T ≤ t) = p on `df` ≥ 1 degrees of freedom.

    Exact in closed form for df 1 and 2; otherwise Hill (1970), "Algorithm 396:
    Student's t-quantiles", CACM 13(10): within a relative 3e-5 of the exact
    value for df ≥ 2 and p from 1e-5 to 1 − 1e-5. Non-integer df is allowed,
    but strictly between 1 and 2 Hill's approximation is off by up to ~1 %.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability {p} is not within (0, 1)")
    if not df >= 1.0:
        raise ValueError(f"degrees of freedom {df} is below 1")
    if p == 0.5:
        return 0.0
    two_tailed = 2.0 * min(p, 1.0 - p)
    if df == 1.0:
        upper = math.tan(math.pi / 2.0 * (1.0 - two_tailed))
    elif df == 2.0:
        upper = math.sqrt(2.0 / (two_tailed * (2.0 - two_tailed)) - 2.0)
    else:
        upper = _hill_upper(two_tailed, df)
    return upper if p > 0.5 else -upper


# --- proportions ---------------------------------------------------------------------------


def wilson_interval(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion k/n; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"{k} successes out of {n} trials")
    z = normal_quantile(0.5 + level / 2.0)
    share = k / n
    z2n = z * z / n
    centre = (share + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(share * (1.0 - share) / n + z2n / (4.0 * n)) / (1.0 + z2n)
    return max(0.0, centre - half), min(1.0, centre + half)


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled z test that k1/n1 and k2/n2 are equal.

    1.0 when it is undefined: a side without trials, or a pooled rate of 0 or 1.
    """
    if n1 <= 0 or n2 <= 0:
        return 1.0
    pooled = (k1 + k2) / (n1 + n2)
    variance = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    if variance <= 0.0:
        return 1.0
    z = abs(k1 / n1 - k2 / n2) / math.sqrt(variance)
    return min(1.0, math.erfc(z / math.sqrt(2.0)))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p of Fisher's exact test that k1/n1 and k2/n2 are equal.

    Given the margins (n1, n2 and k1 + k2 events), the events in the first
    sample are hypergeometric; the p-value sums the probabilities of every
    table no likelier than the observed one (`_FISHER_RELATIVE_TIE` slack).
    Exact at any size, where the z test is not. The probabilities come from
    log-gamma at the lowest feasible count and ratios of neighbours above it,
    O(min(k1 + k2, n1)). 1.0 when there is one table only (a side without
    trials, no events, or all events).
    """
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"{k1} of {n1} and {k2} of {n2} are not counts of trials")
    events, n = k1 + k2, n1 + n2
    if n1 == 0 or n2 == 0 or events in (0, n):
        return 1.0
    low, high = max(0, events - n2), min(events, n1)
    x = np.arange(low, high, dtype=np.float64)
    # P(x + 1) / P(x) for the hypergeometric count of events in the first sample.
    ratios = (n1 - x) * (events - x) / ((x + 1.0) * (n2 - events + x + 1.0))
    first = _log_comb(n1, low) + _log_comb(n2, events - low) - _log_comb(n, events)
    log_pmf = first + np.concatenate(([0.0], np.cumsum(np.log(ratios))))
    observed = log_pmf[k1 - low] + math.log1p(_FISHER_RELATIVE_TIE)
    return min(1.0, float(np.exp(log_pmf[log_pmf <= observed]).sum()))


def fisher_min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p Fisher's exact test can give two samples of n1 and n2 trials.

    The extreme tables put every event in one sample; 1.0 when either side is empty.
    """
    if n1 <= 0 or n2 <= 0:
        return 1.0
    return min(fisher_exact(0, n1, n2, n2), fisher_exact(n1, n1, 0, n2))
