"""analyze.compare, level 1: one metric's verdict, base against run, from their samples.

Takes a `Metric` and the base's and the run's samples of it (floats: seconds,
tokens per second, 0/1 failures); gives a `MetricComparison`: both sides' p50,
p95 and mean, the changes, the tests' p-values, the intervals, the verdict and
its reason. Pure: no clock, no I/O; the bootstrap is seeded. `compare.comparison`
draws the samples of every metric from the records and judges each here.
Below, `alpha` is the whole comparison's (default 0.05): `judge_metric` takes
its Bonferroni share as `alpha` and the whole as `miss`.

The verdict, per metric, is made on its p50 and its p95 (for `error_rate` both
are the rate). A statistic's change is

- *practical* when |run/base − 1| > `threshold` (default 10 %; any change from
  a base of 0 counts) AND |run − base| > the metric's `min_abs` (1 ms for the
  latencies, 1 token/s for throughput, 0.005 for the error rate);
- *significant* when the bootstrap interval of that statistic's difference
  (run − base) excludes 0 AND its test's p-value is below `alpha` (default
  0.05) shared out by Bonferroni. The tests are valid at any sample size: the
  p50 by the exact Mann–Whitney test (the exact permutation distribution of
  the mid-rank sum, ties included, while that costs little: about 50 against
  50 samples, or 2 against 2,000; the normal approximation with the tie
  correction above), the error rate by Fisher's exact test. A p95 is judged
  by its interval and `tail_p_value` (Fisher's test of the shares of samples
  above the pooled p95): a rank test sees the middle of a distribution, and a
  tail that grew 100× with the median unchanged is still a regression.
  Each statistic of each metric is judged at `alpha` / 12 (two statistics of
  six metrics, Bonferroni; its interval at that level), so a whole comparison
  of two runs of the same server raises a false alarm at most `alpha` of the
  time, as a CI gate must.

A practical and significant change makes the metric a "regression" or an
"improvement", by its direction and the metric's `lower_is_better`. When p50
and p95 both qualify and point opposite ways the metric is a "regression":
one of them got worse, and the reason says they disagree.

Otherwise the metric is "inconclusive" — the data cannot tell, and a verdict
of "unchanged" would be a guess — when

1. a side has no samples;
2. the samples are too few: for any outcome to be significant — the smallest
   p the test can give at these sizes (every run value beyond every base
   value: 2/C(n + m, n) for Mann–Whitney; the all-on-one-side table for
   Fisher) is not below `alpha` / 12, so at the default 0.05 a regression
   takes 6 samples on each side (3 against 15, 2 against 35) and 3 against 3
   is inconclusive whatever the change, a 400× TTFT jump included — or, short
   of a confirmed change, for "unchanged": that takes `MIN_UNCHANGED` (10)
   on each side, since a bootstrap of a handful of values is far too narrow;
3. a practical change for the worse is not significant (the effect is large,
   the test cannot tell it from noise). A p95's test needs ~80 samples a side
   before it can reach `alpha` / 12 at all (`tail_min_p`): below that, a p95
   that moved more than the threshold for the worse is always undecided;
4. a p50 (latencies, throughput) within the threshold whose one-sided
   (1 − `alpha`) bootstrap bound reaches past a practical worsening: a
   regression is not ruled out. This is the equivalence rule of two one-sided
   tests; each metric's risk of calling a regression "unchanged" is `alpha`
   (not shared out: that would make healthy comparisons inconclusive). The
   p95 and the error rate are not held to it: at the sizes of a CI run (tens
   to hundreds of requests) no data can bound a p95 to 10 % or an error rate
   to 0.5 points (a bootstrap of no failures is the point 0), and they are
   judged by their point change and their tests (case 3);

and "unchanged" when none of this applies — a practical change for the
better that is not significant included: it is no regression, and its reason
says it was not confirmed. An inconclusive metric carries the
samples on each side that would likely settle it (`settle_n`): the fewest for
a verdict in case 2; in cases 3 and 4 the current sizes scaled by the square
of the ratio of the z (or interval half-width) needed to the one observed —
an estimate, at least 2× and not given past 100×.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np
import numpy.typing as npt

from infertriage.analyze.stats.bootstrap import bootstrap_diff_ci
from infertriage.analyze.stats.distribution import describe
from infertriage.analyze.stats.significance import (
    fisher_exact,
    fisher_min_p,
    mann_whitney,
    min_attainable_p,
    normal_quantile,
)
from infertriage.schemas import RequestRecord

__all__ = [
    "MIN_UNCHANGED",
    "Metric",
    "MetricComparison",
    "SampleStats",
    "Settle",
    "Verdict",
    "judge_metric",
    "relative_change",
    "tail_min_p",
    "tail_p_value",
]

FloatArray = npt.NDArray[np.float64]
Verdict = Literal["regression", "improvement", "unchanged", "inconclusive"]
Settle = tuple[int, int] | None  # the samples (base, run) that would settle a metric
_Cis = tuple[tuple[float, float], tuple[float, float]]
_RESAMPLES = 4000  # the intervals sit at the 0.4 % level: enough resamples in each tail
# How many more samples would settle an inconclusive metric is an estimate from √n scaling:
# at least this many times the samples (a p just short of its level needs more than a few),
# and past the cap it is not worth a number.
_SCALE_FLOOR = 2.0
_SCALE_CAP = 100.0
_TAIL_QUANTILE = 0.95  # the tail test counts the samples above the pooled p95
# "Unchanged" takes this many samples a side: below it a bootstrap interval is too narrow to
# trust (two values resample to two values), and no error in a handful of requests says little.
# A regression can be shown with fewer (the exact tests: 6 a side at the default alpha).
MIN_UNCHANGED = 10


@dataclass(frozen=True, slots=True)
class Metric:
    """One compared metric. `rate` metrics are 0/1 samples judged by their rate."""

    name: str
    unit: str
    lower_is_better: bool
    min_abs: float  # the smallest absolute change that matters, in `unit`
    samples: Callable[[Sequence[RequestRecord]], FloatArray] = field(repr=False, compare=False)
    rate: bool = False
    sample_unit: str = "requests"  # what one sample is, to say how many more would settle it


@dataclass(frozen=True, slots=True)
class SampleStats:
    """p50, p95 and mean of one side's samples (for a rate metric, all three are the rate)."""

    p50: float
    p95: float
    mean: float


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric, base against run. Changes are relative (run/base − 1), None from a base of 0.

    The intervals are bootstrap intervals of run − base for the p50 and p95 (for
    a rate metric both are the rate's); None, like `base` or `run`, without samples.
    """

    metric: str
    unit: str
    lower_is_better: bool
    base_n: int
    run_n: int
    base: SampleStats | None
    run: SampleStats | None
    change_p50: float | None
    change_p95: float | None
    p50_diff_ci: tuple[float, float] | None
    p95_diff_ci: tuple[float, float] | None
    p_value: float
    tail_p_value: float  # the p95's test: the share of samples above the pooled p95
    verdict: Verdict
    reason: str
    # Inconclusive: the samples (base, run) that would likely settle it; None when it is
    # settled, or when the samples needed are past estimating.
    settle_n: tuple[int, int] | None = None
    sample_unit: str = "requests"


def _stats(samples: FloatArray, rate: bool) -> SampleStats | None:
    if rate:
        value = float(samples.mean()) if samples.size else None
        return None if value is None else SampleStats(value, value, value)
    dist = describe(samples)
    return None if dist is None else SampleStats(dist.p50, dist.p95, dist.mean)


def relative_change(base: float, run: float) -> float | None:
    """run/base − 1; None from a base of 0."""
    return None if base == 0.0 else run / base - 1.0


def tail_p_value(base: FloatArray, run: FloatArray) -> float:
    """Fisher's exact test of the shares of base and run samples above their pooled p95.

    Under no change both are about 5 %; a tail that grew puts far more of the
    run above it. It holds at small samples, where a bootstrap of a p95 is too
    narrow, and sees a tail that a rank test of the whole distribution misses.
    """
    if base.size == 0 or run.size == 0:
        return 1.0
    cut = float(np.percentile(np.concatenate([base, run]), 100.0 * _TAIL_QUANTILE))
    above_base, above_run = int((base > cut).sum()), int((run > cut).sum())
    return fisher_exact(above_base, base.size, above_run, run.size)


def tail_min_p(num_base: int, num_run: int) -> float:
    """The smallest p `tail_p_value` can give at these sizes: every value above the cut on one side.

    Above numpy's linear p95 of n pooled values lie the n − 1 − ⌊0.95·(n − 1)⌋
    largest (distinct values); below ~85 samples on each side no split of them
    reaches the default 0.05/12.
    """
    total = num_base + num_run
    above = total - 1 - math.floor(_TAIL_QUANTILE * (total - 1)) if total else 0
    if num_base == 0 or num_run == 0 or above == 0:
        return 1.0
    extremes = [fisher_exact(0, num_base, above, num_run)] if above <= num_run else []
    if above <= num_base:
        extremes.append(fisher_exact(above, num_base, 0, num_run))
    return min(extremes, default=1.0)


def _p_value(metric: Metric, base: FloatArray, run: FloatArray) -> float:
    if metric.rate:
        return fisher_exact(int(base.sum()), base.size, int(run.sum()), run.size)
    return mann_whitney(base, run, method="auto").p_value


def _min_p(metric: Metric, num_base: int, num_run: int) -> float:
    """The smallest p the metric's test can give at these sizes."""
    return (fisher_min_p if metric.rate else min_attainable_p)(num_base, num_run)


def _diff_cis(
    metric: Metric, base: FloatArray, run: FloatArray, seed: int, levels: tuple[float, float]
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float] | None]:
    """The p50 (or rate) and p95 intervals at `levels[0]`; the p50's at `levels[1]` (no rate)."""

    def interval(q: float | None, level: float, offset: int = 0) -> tuple[float, float]:
        return bootstrap_diff_ci(
            base, run, q, level=level, num_resamples=_RESAMPLES, seed=seed + offset
        )

    if metric.rate:
        rate = interval(None, levels[0])
        return rate, rate, None
    # The same seed for both levels of the p50: one set of resamples, two pairs of percentiles.
    return interval(0.5, levels[0]), interval(0.95, levels[0], 1), interval(0.5, levels[1])


@dataclass(frozen=True, slots=True)
class _Rule:
    """The verdict rule's parameters, one metric's p-values and the least its test can give."""

    metric: Metric
    p_value: float
    threshold: float
    alpha: float
    miss: float  # the comparison's alpha: each metric's risk of calling a regression unchanged
    tail_p_value: float = 1.0
    min_p: float = 0.0
    tail_scale: float = 0.0  # samples × this let the p95's test reach `alpha` (0: it can)


@dataclass(frozen=True, slots=True)
class _Change:
    """One statistic's change, judged.

    `p` is its test's p-value. `open` when the change is no practical worsening
    but the worse end of its one-sided bound, `reach` (relative, None from a
    base of 0), lies beyond one: the data cannot rule a regression out.
    `scale` is how many times the samples would likely settle it.
    """

    name: str
    rel: float | None
    practical: bool
    significant: bool
    worse: bool
    p: float = 1.0
    open: bool = False
    reach: float | None = None
    scale: float = 1.0

    def describe(self, *, with_p: bool = False) -> str:
        p = f" (p = {self.p:.2g})" if with_p else ""
        return f"{self.name} {_percent(self.rel)}{p}"


def _percent(rel: float | None) -> str:
    return "from 0" if rel is None else f"{rel:+.1%}"


def _bound_scale(diff: float, bound: float, limit: float) -> float | None:
    """Samples × this bring the worse-side `bound` of `diff` within `limit`; None if it is.

    All three are signed so that worse is positive; an interval narrows as 1/√n.
    """
    if bound <= limit:
        return None
    margin = limit - diff
    return math.inf if margin <= 0.0 else ((bound - diff) / margin) ** 2


def _check(
    name: str,
    stats: tuple[float, float],
    cis: tuple[tuple[float, float], tuple[float, float] | None],
    rule: _Rule,
    *,
    tail: bool = False,
) -> _Change:
    """`cis`: the interval its significance needs, and the one-sided bound's (or None).

    `tail`: a p95, tested by the share of samples above the pooled p95, not by ranks.
    """
    base, run = stats
    diff = run - base
    rel = 0.0 if diff == 0.0 else relative_change(base, run)  # 0 → 0 is no change, not one "from 0"
    large = diff != 0.0 if rel is None else abs(rel) > rule.threshold
    practical = large and abs(diff) > rule.metric.min_abs
    p = rule.tail_p_value if tail else rule.p_value
    significant = p < rule.alpha and (cis[0][0] > 0.0 or cis[0][1] < 0.0)
    worse = (diff > 0.0) == rule.metric.lower_is_better
    sign = 1.0 if rule.metric.lower_is_better else -1.0
    scale = _test_scale(p, rule.alpha)
    if tail:
        scale = max(scale, rule.tail_scale)
    judged = _Change(name, rel, practical, significant, worse, p, scale=scale)
    if cis[1] is None or (practical and worse):  # a practical worsening is judged by its test
        return judged
    bound = max(sign * cis[1][0], sign * cis[1][1])
    limit = max(rule.threshold * abs(base), rule.metric.min_abs)
    if (bound_scale := _bound_scale(sign * diff, bound, limit)) is None:
        return judged
    reach = relative_change(base, base + sign * bound)
    return dataclasses.replace(judged, open=True, reach=reach, scale=bound_scale)


def _test_scale(p: float, alpha: float) -> float:
    """Samples × this would bring a p-value of `p` to `alpha`: z grows as √n."""
    if p <= 0.0 or p < alpha:
        return _SCALE_FLOOR
    if p >= 1.0:
        return math.inf
    # From the lower tail: 1 − p/2 rounds to 1 for a tiny p.
    z_needed, z_seen = -normal_quantile(alpha / 2.0), -normal_quantile(p / 2.0)
    return max(_SCALE_FLOOR, (z_needed / z_seen) ** 2)


def _least_size(
    min_p: Callable[[int, int], float], num_base: int, num_run: int, alpha: float
) -> int:
    """The fewest samples on each side at which a test whose best p is `min_p` can reach `alpha`.

    Doubling, then bisection: a best p falls with the sizes (the tail test's in
    small steps up and down, so its answer is within a few samples of the least).
    """

    def reaches(size: int) -> bool:
        return min_p(max(num_base, size), max(num_run, size)) < alpha

    low, high = 0, 1
    while not reaches(high):
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def _tail_scale(num_base: int, num_run: int, alpha: float) -> float:
    """Samples × this let `tail_p_value` reach `alpha` at all; 0 when it already can."""
    smaller = min(num_base, num_run)
    if smaller == 0:
        return 0.0
    least = _least_size(tail_min_p, num_base, num_run, alpha)
    return least / smaller if least > smaller else 0.0


@dataclass(frozen=True, slots=True)
class _Sizes:
    """The samples on each side and what they are (`Metric.sample_unit`)."""

    base: int
    run: int
    unit: str

    def floored(self, least: int) -> tuple[int, int]:
        """Each side grown to at least `least` (and to `MIN_UNCHANGED`)."""
        least = max(least, MIN_UNCHANGED)
        return max(self.base, least), max(self.run, least)

    def scaled(self, scale: float) -> tuple[int, int] | None:
        if scale > _SCALE_CAP:
            return None
        needed = (math.ceil(self.base * scale), math.ceil(self.run * scale))
        return max(MIN_UNCHANGED, needed[0]), max(MIN_UNCHANGED, needed[1])

    def settle(self, scale: float) -> str:
        needed = self.scaled(scale)
        if needed is None:
            return f"settling it would take over {_SCALE_CAP:g}× these {self.unit}"
        return f"about {needed[0]} vs {needed[1]} {self.unit} would settle it"


def _too_few(rule: _Rule, sizes: _Sizes) -> tuple[str, Settle] | None:
    """Too few samples for any verdict, or for "unchanged"; None when there are enough."""
    if rule.min_p >= rule.alpha:
        least = _least_size(partial(_min_p, rule.metric), sizes.base, sizes.run, rule.alpha)
        return (
            f"too few {sizes.unit} for any verdict: {sizes.base} vs {sizes.run} can reach "
            f"p = {rule.min_p:.2g} at best, not the {rule.alpha:.2g} a verdict needs; a "
            f"regression takes at least {least} on each side, no regression {MIN_UNCHANGED}"
        ), sizes.floored(least)
    if min(sizes.base, sizes.run) < MIN_UNCHANGED:
        return (
            f"too few {sizes.unit} to rule a regression out: {sizes.base} vs {sizes.run}; "
            f"it takes at least {MIN_UNCHANGED} on each side"
        ), sizes.floored(MIN_UNCHANGED)
    return None


def _inconclusive(
    checks: Sequence[_Change], rule: _Rule, sizes: _Sizes
) -> tuple[str, Settle] | None:
    """Why the metric cannot be judged either way, and the sizes that would settle it."""
    if rule.min_p >= rule.alpha:
        return _too_few(rule, sizes)
    if unsure := [c for c in checks if c.practical and c.worse]:
        # One of them turning significant settles the metric as a regression.
        scale = min(c.scale for c in unsure)
        listed = ", ".join(c.describe(with_p=True) for c in unsure)
        return f"{listed} but not significant; {sizes.settle(scale)}", sizes.scaled(scale)
    if (few := _too_few(rule, sizes)) is not None:
        return few
    if unruled := [c for c in checks if c.open]:
        scale = max(c.scale for c in unruled)
        listed = ", ".join(f"{c.describe()} but could be {_percent(c.reach)}" for c in unruled)
        return (
            f"{listed} (one-sided {1.0 - rule.miss:.0%} bound): a regression over "
            f"{rule.threshold:.0%} is not ruled out; {sizes.settle(scale)}"
        ), sizes.scaled(scale)
    return None


def _verdict(checks: Sequence[_Change], rule: _Rule, sizes: _Sizes) -> tuple[Verdict, str, Settle]:
    confirmed = [c for c in checks if c.practical and c.significant]
    worse = any(c.worse for c in confirmed)
    better = any(not c.worse for c in confirmed)
    listed = ", ".join(c.describe() for c in confirmed)
    p = f"p = {rule.p_value:.2g}"
    if worse and better:
        return "regression", f"p50 and p95 disagree ({listed}, {p}): one of them got worse", None
    if worse:
        return "regression", f"{listed} ({p})", None
    if confirmed and not any(c.practical and c.worse for c in checks):
        return "improvement", f"{listed} ({p})", None
    # Not confirmed either way, or better in one statistic and worse, unconfirmed, in the other.
    if (unsure := _inconclusive(checks, rule, sizes)) is not None:
        return "inconclusive", unsure[0], unsure[1]
    if better_maybe := [c.describe(with_p=True) for c in checks if c.practical]:
        # Only a change for the better is left unconfirmed: no regression either way.
        return "unchanged", f"{', '.join(better_maybe)} better but not significant", None
    changes = ", ".join(c.describe() for c in checks)
    return "unchanged", f"{changes}: within {rule.threshold:.0%} or the minimum change", None


def _judge(
    metric: Metric, samples: tuple[FloatArray, FloatArray], rule: _Rule, seed: int
) -> tuple[tuple[SampleStats, SampleStats] | None, _Cis | None, tuple[Verdict, str, Settle]]:
    """Both sides' statistics, the intervals and the verdict of one metric."""
    base_samples, run_samples = samples
    base, run = _stats(base_samples, metric.rate), _stats(run_samples, metric.rate)
    if base is None or run is None:
        return None, None, ("inconclusive", "no samples on one side", None)
    # Significance at the statistic's (Bonferroni) level; "not ruled out" at the metric's.
    levels = (1.0 - rule.alpha, 1.0 - 2.0 * rule.miss)
    p50, p95, bound = _diff_cis(metric, base_samples, run_samples, seed, levels)
    checks = (
        (_check("rate", (base.mean, run.mean), (p50, None), rule),)
        if metric.rate
        else (
            _check("p50", (base.p50, run.p50), (p50, bound), rule),
            _check("p95", (base.p95, run.p95), (p95, None), rule, tail=True),
        )
    )
    sizes = _Sizes(base_samples.size, run_samples.size, metric.sample_unit)
    return (base, run), (p50, p95), _verdict(checks, rule, sizes)


def _compare_metric(
    metric: Metric, base_samples: FloatArray, run_samples: FloatArray, *, rule: _Rule, seed: int
) -> MetricComparison:
    stats, cis, (verdict, reason, settle) = _judge(metric, (base_samples, run_samples), rule, seed)
    base, run = (None, None) if stats is None else stats
    return MetricComparison(
        metric=metric.name,
        unit=metric.unit,
        lower_is_better=metric.lower_is_better,
        base_n=int(base_samples.size),
        run_n=int(run_samples.size),
        base=base,
        run=run,
        change_p50=None if stats is None else relative_change(stats[0].p50, stats[1].p50),
        change_p95=None if stats is None else relative_change(stats[0].p95, stats[1].p95),
        p50_diff_ci=None if cis is None else cis[0],
        p95_diff_ci=None if cis is None else cis[1],
        p_value=rule.p_value,
        tail_p_value=rule.tail_p_value,
        verdict=verdict,
        reason=reason,
        settle_n=settle,
        sample_unit=metric.sample_unit,
    )


def judge_metric(
    metric: Metric,
    base_samples: FloatArray,
    run_samples: FloatArray,
    *,
    threshold: float,
    alpha: float,
    miss: float,
    seed: int,
) -> MetricComparison:
    """One metric's verdict (see the module): each statistic tested at `alpha` (a share of the
    comparison's, Bonferroni), a regression ruled out at a risk of `miss` (the comparison's)."""
    rule = _Rule(
        metric,
        _p_value(metric, base_samples, run_samples),
        threshold,
        alpha,
        miss=miss,
        tail_p_value=tail_p_value(base_samples, run_samples),
        min_p=_min_p(metric, base_samples.size, run_samples.size),
        tail_scale=_tail_scale(base_samples.size, run_samples.size, alpha),
    )
    return _compare_metric(metric, base_samples, run_samples, rule=rule, seed=seed)
