"""analyze.stats, level 1: the summary of one metric's distribution.

Takes plain samples (seconds, tokens, anything); gives a `Distribution`: count,
mean, std, min, max, p50/p90/p95/p99/p99.9 (numpy's linear percentiles) and, where
asked, the seeded bootstrap interval of the mean (`bootstrap`). The one summary
of a distribution: `bench`'s level summary and `simulate`'s result both use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infertriage.analyze.stats.bootstrap import bootstrap_quantile_ci
from infertriage.analyze.stats.samples import FloatArray

__all__ = ["Distribution", "describe"]

_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary statistics of one metric; `mean_ci` is the bootstrap interval of the mean."""

    count: int
    mean: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    p999: float
    mean_ci: tuple[float, float] | None = None


def describe(
    values: Sequence[float] | FloatArray, *, ci: bool = False, seed: int = 0
) -> Distribution | None:
    """Mean, std, min, max and p50/p90/p95/p99/p99.9; None for no values."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return None
    p50, p90, p95, p99, p999 = (float(v) for v in np.percentile(data, _PERCENTILES))
    return Distribution(
        count=int(data.size),
        mean=float(data.mean()),
        std=float(data.std()),
        min=float(data.min()),
        max=float(data.max()),
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        p999=p999,
        mean_ci=bootstrap_quantile_ci(data, None, seed=seed) if ci else None,
    )
