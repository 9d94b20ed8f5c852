"""analyze.stats, level 1: the seeded percentile bootstrap, the project's only one.

Takes plain samples (or groups of them), a quantile (0..1, or None for the
mean), a confidence level, a number of resamples and a seed; gives the interval
as two floats. Of one sample (`bootstrap_quantile_ci`), of a difference between
two resampled apart (`bootstrap_diff_ci`), or of a quantile of pooled groups
resampled whole (`bootstrap_clustered_quantile_ci`, for per-token samples that
move together within a request). Pure: numpy only, every draw seeded.
Non-finite samples are dropped first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from infertriage.analyze.stats.samples import FloatArray, Samples, finite

__all__ = ["bootstrap_clustered_quantile_ci", "bootstrap_diff_ci", "bootstrap_quantile_ci"]

# Elements gathered per bootstrap block for the mean: bounds memory whatever the input size.
_BLOCK_ELEMENTS = 2_000_000


def _resampled_means(data: FloatArray, num: int, rng: np.random.Generator) -> FloatArray:
    means = np.empty(num)
    # Resample in blocks: a large run's index matrix would not fit in memory at once.
    block = max(1, _BLOCK_ELEMENTS // data.size)
    for start in range(0, num, block):
        stop = min(num, start + block)
        picks = rng.integers(0, data.size, (stop - start, data.size))
        means[start:stop] = data[picks].mean(axis=1)
    return means


def _resampled_quantiles(
    ordered: FloatArray, q: float, num: int, rng: np.random.Generator
) -> FloatArray:
    """The q-quantile (numpy's linear rule) of `num` bootstrap resamples of sorted data.

    A resample is `ordered[floor(n·U)]` for n uniforms U, so its k-th smallest
    value is `ordered[floor(n·U₍ₖ₎)]`, with U₍ₖ₎ ~ Beta(k, n − k + 1) and the
    next order statistic U₍ₖ₊₁₎ = U₍ₖ₎ + (1 − U₍ₖ₎)·Beta(1, n − k). Drawing those
    two is exactly the percentile bootstrap, in O(num) memory and time however
    large the input (the index-matrix way costs n per resample).
    """
    n = ordered.size
    position = (n - 1) * q
    lower = math.floor(position)
    frac = position - lower
    k = lower + 1  # the 1-based order statistic below the quantile
    u_low = rng.beta(k, n - k + 1, num)
    low = ordered[np.minimum((u_low * n).astype(np.int64), n - 1)]
    if frac == 0.0 or k >= n:
        return low
    u_high = u_low + (1.0 - u_low) * rng.beta(1, n - k, num)
    high = ordered[np.minimum((u_high * n).astype(np.int64), n - 1)]
    return low + frac * (high - low)


def _resampled(data: FloatArray, q: float | None, num: int, rng: np.random.Generator) -> FloatArray:
    if q is None:
        return _resampled_means(data, num, rng)
    return _resampled_quantiles(np.sort(data), q, num, rng)


def _check_quantile(q: float | None) -> None:
    if q is not None and not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is not within [0, 1]")


def _percentile_interval(stats: FloatArray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return float(low), float(high)


def _statistic(data: FloatArray, q: float | None) -> float:
    return float(data.mean()) if q is None else float(np.quantile(data, q))


def bootstrap_quantile_ci(
    values: Samples,
    q: float | None,
    *,
    level: float = 0.95,
    num_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A seeded percentile-bootstrap interval of the q-quantile (0..1; None: the mean).

    Quantiles use numpy's linear rule. No values give (nan, nan); one value, (v, v).
    """
    _check_quantile(q)
    data = finite(values)
    if data.size < 2:
        value = _statistic(data, q) if data.size else math.nan
        return value, value
    stats = _resampled(data, q, num_resamples, np.random.default_rng(seed))
    return _percentile_interval(stats, level)


def bootstrap_diff_ci(
    a: Samples,
    b: Samples,
    q: float | None,
    *,
    level: float = 0.95,
    num_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A seeded percentile-bootstrap interval of stat(b) − stat(a), a and b resampled apart.

    `stat` is the q-quantile (0..1) or, for None, the mean. Either side empty
    gives (nan, nan); a one-value side is taken as fixed.
    """
    _check_quantile(q)
    x, y = finite(a), finite(b)
    if x.size == 0 or y.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    stats_a = _resampled(x, q, num_resamples, rng) if x.size > 1 else _statistic(x, q)
    stats_b = _resampled(y, q, num_resamples, rng) if y.size > 1 else _statistic(y, q)
    diffs = np.broadcast_to(np.asarray(stats_b - stats_a, dtype=np.float64), (num_resamples,))
    return _percentile_interval(diffs, level)


def bootstrap_clustered_quantile_ci(
    groups: Sequence[Samples],
    q: float,
    *,
    level: float = 0.95,
    num_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A seeded percentile-bootstrap interval of the q-quantile of pooled groups.

    Whole groups (a request's per-token samples) are resampled, not single
    values, so samples that move together inside a group do not narrow the
    interval. No groups give (nan, nan).
    """
    _check_quantile(q)
    data = [np.asarray(group, dtype=np.float64) for group in groups]
    if not data:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    stats = np.empty(num_resamples)
    for i in range(num_resamples):
        picks = rng.integers(0, len(data), len(data))
        stats[i] = np.quantile(np.concatenate([data[j] for j in picks]), q)
    return _percentile_interval(stats, level)
