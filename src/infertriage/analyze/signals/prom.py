"""analyze.signals, level 1: the Prometheus math, pure.

Takes scraped values in time order (`(t, value)` points of a counter or a
gauge, cumulative bucket counts of a histogram) and gives what PromQL would:
counter increases and rates with reset handling (`increase`, `rate`), and
`histogram_quantile` over the bucket deltas of a window, with the bounds of
the bucket the quantile fell in. Coarse buckets make a p99 look exact; the
bounds say how far off it may be. Unlike Prometheus, `increase` does not
extrapolate to the window's edges: the collector scrapes at the edges.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CounterIncrease",
    "GaugeStats",
    "HistogramWindow",
    "QuantileEstimate",
    "counter_increase",
    "gauge_stats",
    "histogram_increase",
    "histogram_quantile",
]


@dataclass(frozen=True, slots=True)
class CounterIncrease:
    """How much a counter grew over `[start_ts, end_ts]`, counting through resets."""

    increase: float
    start_ts: float
    end_ts: float
    num_resets: int

    @property
    def duration_s(self) -> float:
        return self.end_ts - self.start_ts

    @property
    def rate_per_s(self) -> float | None:
        """Mean growth per second; None over a window of no length."""
        return self.increase / self.duration_s if self.duration_s > 0 else None


def counter_increase(points: Sequence[tuple[float, float]]) -> CounterIncrease | None:
    """PromQL `increase` without extrapolation; None with fewer than two points.

    A value below the previous one is a reset (the process restarted and the
    counter began again from zero), so the new value itself is the growth
    since the reset, as Prometheus counts it.
    """
    if len(points) < 2:
        return None
    total, resets = 0.0, 0
    for (_, previous), (_, current) in itertools.pairwise(points):
        if current < previous:
            resets += 1
            total += current
        else:
            total += current - previous
    return CounterIncrease(total, points[0][0], points[-1][0], resets)


@dataclass(frozen=True, slots=True)
class GaugeStats:
    """A gauge over a window: its last value and its spread over the scrapes."""

    last: float
    mean: float
    min: float
    max: float
    p95: float
    num_points: int


def gauge_stats(points: Sequence[tuple[float, float]]) -> GaugeStats | None:
    """Summary of a gauge's scraped values (each scrape weighs the same); None when empty."""
    if not points:
        return None
    import numpy as np  # noqa: PLC0415  # `metrics FILE` starts without numpy (issue 35)

    values = np.asarray([value for _, value in points], dtype=float)
    return GaugeStats(
        last=float(values[-1]),
        mean=float(values.mean()),
        min=float(values.min()),
        max=float(values.max()),
        p95=float(np.percentile(values, 95)),
        num_points=len(values),
    )


@dataclass(frozen=True, slots=True)
class HistogramWindow:
    """A histogram's observations over a window: cumulative counts per upper bound (`le`)."""

    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), +Inf last
    sum: float
    count: float
    num_resets: int = 0

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None


def _sorted_buckets(buckets: Mapping[float, float]) -> list[tuple[float, float]]:
    return sorted(buckets.items())


def histogram_increase(
    snapshots: Sequence[tuple[Mapping[float, float], float, float]],
) -> HistogramWindow | None:
    """Bucket deltas over consecutive scrapes of one histogram series.

    Each snapshot is `(cumulative count per le, sum, count)`. Between two
    scrapes, a count that went down is a reset: the later snapshot then is
    the whole growth of that step. None with fewer than two snapshots.
    """
    if len(snapshots) < 2:
        return None
    bounds = sorted(snapshots[-1][0])
    growth = dict.fromkeys(bounds, 0.0)
    total_sum, total_count, resets = 0.0, 0.0, 0
    for before, after in itertools.pairwise(snapshots):
        (prev_b, prev_sum, prev_count), (cur_b, cur_sum, cur_count) = before, after
        reset = cur_count < prev_count or any(
            cur_b.get(le, 0.0) < prev_b.get(le, 0.0) for le in bounds
        )
        resets += reset
        for le in bounds:
            base = 0.0 if reset else prev_b.get(le, 0.0)
            growth[le] += cur_b.get(le, 0.0) - base
        total_sum += cur_sum - (0.0 if reset else prev_sum)
        total_count += cur_count - (0.0 if reset else prev_count)
    return HistogramWindow(tuple(_sorted_buckets(growth)), total_sum, total_count, resets)


@dataclass(frozen=True, slots=True)
class QuantileEstimate:
    """`histogram_quantile(q)`: the interpolated value and the bucket it lies in.

    The true quantile is somewhere in `[lower, upper]`; `upper` is infinite
    when the rank fell in the `+Inf` bucket, and `value` is then the largest
    finite bound, as Prometheus reports it (a floor, not an estimate).
    """

    q: float
    value: float
    lower: float
    upper: float

    @property
    def error_bound(self) -> float:
        """The farthest the truth may lie from `value`: the distance to its bucket's far edge."""
        return max(self.value - self.lower, self.upper - self.value)

    @property
    def open_ended(self) -> bool:
        return math.isinf(self.upper)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> QuantileEstimate | None:
    """PromQL's `histogram_quantile` on cumulative `(le, count)` buckets.

    None where Prometheus gives NaN: no observations, fewer than two
    buckets, no `+Inf` bucket, or `q` outside 0..1. Bucket counts that
    decrease with `le` (scrape skew) are made monotonic first, as Prometheus does.
    """
    if not 0.0 <= q <= 1.0:
        return None
    ordered: list[tuple[float, float]] = []
    for le, count in sorted(buckets):
        if ordered and ordered[-1][0] == le:
            ordered[-1] = (le, ordered[-1][1] + count)
        else:
            ordered.append((le, max(count, ordered[-1][1]) if ordered else count))
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    observations = ordered[-1][1]
    if observations <= 0:
        return None
    rank = q * observations
    index = next((i for i, (_, count) in enumerate(ordered[:-1]) if count >= rank), None)
    if index is None:
        floor = ordered[-2][0]
        return QuantileEstimate(q, floor, floor, math.inf)
    upper, count = ordered[index]
    if index == 0 and upper <= 0:
        return QuantileEstimate(q, upper, -math.inf, upper)
    lower = 0.0 if index == 0 else ordered[index - 1][0]
    below = 0.0 if index == 0 else ordered[index - 1][1]
    in_bucket = count - below
    value = lower + (upper - lower) * ((rank - below) / in_bucket) if in_bucket > 0 else lower
    return QuantileEstimate(q, value, lower, upper)
