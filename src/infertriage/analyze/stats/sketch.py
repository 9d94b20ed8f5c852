"""analyze.stats, level 1: quantiles of a stream in bounded memory (a log-bucket sketch).

Takes non-negative values (seconds, mostly) one at a time or as arrays, with
optional integer weights; gives their count, exact mean, min and max, and
quantiles within a stated relative error, without keeping the values.
`simulate` folds every finished request into these, so its memory does not
grow with the number of requests.

How (DDSketch's log buckets, Masson et al., VLDB 2019): with
γ = (1 + α)/(1 − α), bucket k holds the values in (γ^(k−1), γ^k] and reports
2γ^k/(γ + 1), which is within α of every value in it. A quantile is numpy's
linear one (`np.percentile`'s default) over the reported values: the two
order statistics around rank q·(n − 1), each within α, interpolated — so it
is within α (relative) of numpy's answer on the same values; the first and
last order statistics are the exact min and max. Values below `min_value`
(1 ns by default) share one bucket that reports 0. With α = 0.5 % a span of
1 ns to 10⁴ s takes at most about 3,000 buckets (24 KiB); only the buckets
between the smallest and the largest value seen are held.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_RELATIVE_ERROR", "QuantileSketch"]

DEFAULT_RELATIVE_ERROR = 0.005
_MIN_VALUE = 1e-9


class QuantileSketch:
    """Count, exact mean/min/max and quantiles within `relative_error` of a value stream."""

    __slots__ = (
        "_counts",
        "_log_gamma",
        "_offset",
        "_zero",
        "count",
        "max",
        "min",
        "min_value",
        "relative_error",
        "total",
    )

    def __init__(
        self, relative_error: float = DEFAULT_RELATIVE_ERROR, min_value: float = _MIN_VALUE
    ) -> None:
        if not 0 < relative_error < 1:
            raise ValueError(f"relative_error must be in (0, 1), not {relative_error}")
        self.relative_error = relative_error
        self.min_value = min_value
        self._log_gamma = math.log((1 + relative_error) / (1 - relative_error))
        self._counts: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._offset = 0  # the bucket key of _counts[0]
        self._zero = 0  # values below min_value
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    # ------------------------------------------------------------------ adding
    def _key(self, value: float) -> int:
        return math.ceil(math.log(value) / self._log_gamma)

    def _reserve(self, low: int, high: int) -> None:
        """Make keys `low..high` addressable (the array grows to cover them)."""
        size = len(self._counts)
        if size == 0:
            self._counts = np.zeros(high - low + 1, dtype=np.int64)
            self._offset = low
            return
        start, end = min(low, self._offset), max(high, self._offset + size - 1)
        if start == self._offset and end == self._offset + size - 1:
            return
        grown = np.zeros(end - start + 1, dtype=np.int64)
        grown[self._offset - start : self._offset - start + size] = self._counts
        self._counts, self._offset = grown, start

    def add(self, value: float, weight: int = 1) -> None:
        """One value (counted `weight` times)."""
        if weight <= 0:
            return
        self.count += weight
        self.total += value * weight
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        if value < self.min_value:
            self._zero += weight
            return
        key = self._key(value)
        self._reserve(key, key)
        self._counts[key - self._offset] += weight

    def add_many(self, values: npt.ArrayLike, weights: npt.NDArray[np.int64] | None = None) -> None:
        """Many values at once (each counted its `weights` entry times, 1 by default)."""
        data = np.asarray(values, dtype=np.float64).ravel()
        if data.size == 0:
            return
        counts = np.ones(data.size, dtype=np.int64) if weights is None else weights.ravel()
        self.count += data.size if weights is None else int(counts.sum())
        self.total += float(np.dot(data, counts))
        lowest = float(data.min())
        self.min = min(self.min, lowest)
        self.max = max(self.max, float(data.max()))
        if not lowest >= self.min_value:  # (a NaN goes this way too, as before)
            small = data < self.min_value
            self._zero += int(counts[small].sum())
            data, counts = data[~small], counts[~small]
            if data.size == 0:
                return
        keys = np.ceil(np.log(data) / self._log_gamma).astype(np.int64)
        low, high = int(keys.min()), int(keys.max())
        self._reserve(low, high)
        # unweighted, the counts come as integers already (the same counts)
        binned = np.bincount(
            keys - low, weights=None if weights is None else counts, minlength=high - low + 1
        )
        start = low - self._offset
        self._counts[start : start + len(binned)] += binned.astype(np.int64)

    def merge(self, other: QuantileSketch) -> None:
        """Fold `other` (of the same relative error) into this sketch."""
        if other.relative_error != self.relative_error or other.min_value != self.min_value:
            raise ValueError("only sketches of the same relative error and min_value merge")
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self._zero += other._zero
        if len(other._counts):
            low = other._offset
            self._reserve(low, low + len(other._counts) - 1)
            start = low - self._offset
            self._counts[start : start + len(other._counts)] += other._counts

    # ------------------------------------------------------------------ reading
    @property
    def mean(self) -> float:
        """Exact; 0 without values."""
        return self.total / self.count if self.count else 0.0

    def _order_statistics(self, ranks: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The reported value of the 0-based order statistics `ranks`."""
        cumulative = self._zero + np.cumsum(self._counts)
        index = np.searchsorted(cumulative, ranks, side="right")
        keys = (index + self._offset).astype(np.float64)
        gamma = math.exp(self._log_gamma)
        values = 2.0 * np.exp(keys * self._log_gamma) / (gamma + 1.0)
        values = np.where(ranks < self._zero, 0.0, values)
        values = np.where(ranks == 0, self.min, values)  # the ends are known exactly
        values = np.where(ranks == self.count - 1, self.max, values)
        return np.clip(values, self.min, self.max)

    def quantile(self, q: float) -> float:
        """numpy's linear quantile (`q` in 0..1) within the relative error; 0 without values."""
        return float(self.quantiles([q])[0])

    def quantiles(self, qs: list[float]) -> npt.NDArray[np.float64]:
        """`quantile` of each of `qs`, in one pass."""
        if self.count == 0:
            return np.zeros(len(qs))
        ranks = np.asarray(qs, dtype=np.float64) * (self.count - 1)
        below = np.floor(ranks).astype(np.int64)
        above = np.minimum(below + 1, self.count - 1)
        low, high = self._order_statistics(below), self._order_statistics(above)
        return low + (high - low) * (ranks - below)
