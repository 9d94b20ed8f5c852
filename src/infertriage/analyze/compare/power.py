"""analyze.compare, level 2: the requests per arm a comparison needs, from a pilot's spread.

Takes a pilot's records (both arms of an A/B pilot block, or a base run's)
and the verdict's parameters — the change that matters (`threshold`, default
10 %), the power asked (default 0.8) and the comparison's `alpha` (each
statistic tested at its Bonferroni share, the whole is the risk `miss` of
calling a regression "unchanged"); gives a `SamplePlan`: per metric the
requests per arm that would let `compare.verdict` decide it, and the most of
them. Pure: no clock, no I/O.

The latencies (TTFT, TPOT, ITL, E2E) and the throughput are judged on their
p50; on the log scale a relative change is a shift δ = ln(1 + threshold).
With σ the standard deviation of the pilot's log samples (arms pooled), the
normal approximation gives, per arm,

- to *detect* a change of δ at two-sided level α with power 1 − β:
  n = 2 (z₁₋α/₂ + z₁₋β)² σ² / δ² / e. A regression needs both the
  Mann–Whitney test (efficiency 3/π against the t test on normal data) and
  the bootstrap interval of the p50 difference (a sample median's efficiency
  is 2/π) to exclude no change, so e = 2/π, the smaller;
- to call "unchanged" (two one-sided tests of the p50 at `miss` each, the
  true change 0, both passing with probability 1 − β):
  n = 2 (z₁₋miss + z₁₋β/₂)² σ² / δ² / e, e = 2/π again.

A metric needs the larger of the two (`MetricNeed.needed`): then it is likely
decided either way. The power planned is the tests': a true change of exactly
the threshold must also pass the practical bar (an observed change beyond
it), which it does about half the time; twice the threshold nearly always.
Samples that are not requests are counted per request of the pilot: an ITL
sample is a token gap (tens per request), a throughput sample a second of
steady load. Each metric needs at least the 10 samples a side that
"unchanged" takes (`verdict.MIN_UNCHANGED`), in requests; a pilot too short
to show a metric's spread (one second of throughput) plans just that.

The error rate is planned apart (`error_needed`, not in the plan's total):
detecting a rise of max(threshold × rate, 0.5 points) by the two-proportion
normal approximation takes thousands of requests from a rate near 0, while
no failures on either side are "unchanged" at 10. The p95s are judged too,
by their tail test and their point change, and not planned for: a p95 within
the threshold, as on two like servers, needs no test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infertriage.analyze.compare.comparison import METRICS, statistic_alpha
from infertriage.analyze.compare.verdict import MIN_UNCHANGED
from infertriage.analyze.stats.outcomes import is_counted
from infertriage.analyze.stats.significance import normal_quantile
from infertriage.schemas import RequestRecord

__all__ = [
    "MEDIAN_EFFICIENCY",
    "MetricNeed",
    "SamplePlan",
    "detect_n",
    "equivalence_n",
    "plan_sample",
    "rate_detect_n",
]

MEDIAN_EFFICIENCY = 2.0 / math.pi  # a sample median's against the mean's, on normal data
_LABELS = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "E2E",
    "output_throughput": "throughput",
}


def _z(p: float) -> float:
    return normal_quantile(p)


def _shift(threshold: float) -> float:
    return math.log1p(threshold)


def detect_n(sigma: float, threshold: float, *, alpha: float, power: float) -> int:
    """Samples per arm to detect a p50 change of `threshold` (two-sided `alpha`, `power`)."""
    z = _z(1.0 - alpha / 2.0) + _z(power)
    return max(
        2, math.ceil(2.0 * z * z * sigma * sigma / _shift(threshold) ** 2 / MEDIAN_EFFICIENCY)
    )


def equivalence_n(sigma: float, threshold: float, *, miss: float, power: float) -> int:
    """Samples per arm for two one-sided tests at `miss` to bound an unchanged p50 within
    `threshold`, with probability `power`."""
    z = _z(1.0 - miss) + _z(1.0 - (1.0 - power) / 2.0)
    return max(
        2, math.ceil(2.0 * z * z * sigma * sigma / _shift(threshold) ** 2 / MEDIAN_EFFICIENCY)
    )


def rate_detect_n(rate: float, rise: float, *, alpha: float, power: float) -> int:
    """Requests per arm to detect an error rate going from `rate` to `rate + rise`."""
    high = min(rate + rise, 1.0)
    mean = (rate + high) / 2.0
    spread = _z(1.0 - alpha / 2.0) * math.sqrt(2.0 * mean * (1.0 - mean)) + _z(power) * math.sqrt(
        rate * (1.0 - rate) + high * (1.0 - high)
    )
    return max(2, math.ceil((spread / (high - rate)) ** 2))


@dataclass(frozen=True, slots=True)
class MetricNeed:
    """One p50-judged metric's requests per arm: to detect the change, to call it unchanged."""

    metric: str
    sigma: float | None  # of the pilot's log samples; None: too few to tell
    detect: int
    equivalent: int

    @property
    def needed(self) -> int:
        return max(self.detect, self.equivalent)

    @property
    def label(self) -> str:
        return _LABELS.get(self.metric, self.metric)


@dataclass(frozen=True, slots=True)
class SamplePlan:
    """The requests per arm that would likely decide every p50-judged metric."""

    threshold: float
    power: float
    alpha: float  # per statistic
    needs: tuple[MetricNeed, ...]
    error_needed: int | None  # to detect a rise of the error rate; not in `requests_per_arm`
    pilot_per_arm: int
    block: int = 1  # the sample is taken in blocks of this many requests per arm
    source: str = "pilot"  # whose spread: the A/B pilot block's, or the base run's

    @property
    def requests_per_arm(self) -> int:
        most = max([MIN_UNCHANGED, *(n.needed for n in self.needs)])
        return math.ceil(most / self.block) * self.block

    def describe(self) -> str:
        listed = ", ".join(f"p50 {n.label} needs {n.needed}" for n in self.needs)
        blocks = f", in blocks of {self.block}" if self.block > 1 else ""
        return (
            f"planned: ~{self.requests_per_arm} requests per arm to detect a "
            f"{self.threshold:.0%} change at {self.power:.0%} power ({listed}{blocks}; "
            f"from the {self.source}'s {self.pilot_per_arm} requests per arm)"
        )

    def enough(self, base_n: int, run_n: int) -> str:
        """Whether `base_n` and `run_n` requests reached the plan, in one sentence."""
        planned = self.requests_per_arm
        if min(base_n, run_n) >= planned:
            return f"the sample is big enough: {base_n} vs {run_n} requests, ~{planned} planned"
        return (
            f"the sample is too small to decide reliably: {base_n} vs {run_n} requests, "
            f"~{planned} per side planned"
        )


def _sigma(parts: Sequence[np.ndarray]) -> float | None:
    """The pooled standard deviation of the parts' log samples (positive samples only)."""
    variances, weights = [], []
    for part in parts:
        logs = np.log(part[part > 0.0])
        if logs.size >= 2:
            variances.append(float(np.var(logs, ddof=1)))
            weights.append(logs.size - 1)
    if not weights:
        return None
    return math.sqrt(sum(v * w for v, w in zip(variances, weights, strict=True)) / sum(weights))


def plan_sample(
    pilot: Sequence[Sequence[RequestRecord]],
    *,
    threshold: float = 0.10,
    power: float = 0.8,
    alpha: float = 0.05,
    block: int = 1,
    source: str = "pilot",
) -> SamplePlan:
    """The plan (see the module) from `pilot`: one or two arms' records, pooled for σ.
    `alpha` is the comparison's (its Bonferroni share per statistic, the whole as `miss`);
    `block`: the sample comes in blocks of this many requests per arm, the plan in whole
    blocks."""
    miss, alpha = alpha, statistic_alpha(alpha)
    requests = [sum(1 for r in arm if r.ok) for arm in pilot]
    per_arm = min(requests, default=0)
    needs = []
    for metric in METRICS:
        if metric.rate:
            continue
        samples = [metric.samples(arm) for arm in pilot]
        if not any(part.size for part in samples):
            continue
        # samples per request (token gaps, seconds of load), the fewest of the arms
        per_request = min(s.size / n if n else 1.0 for s, n in zip(samples, requests, strict=True))
        scale = 1.0 / per_request if per_request > 0.0 else 1.0
        least = math.ceil(MIN_UNCHANGED * scale)  # "unchanged" takes 10 samples a side
        if (sigma := _sigma(samples)) is None:  # too few to see a spread: the least it takes
            needs.append(MetricNeed(metric.name, None, least, least))
            continue
        detect = math.ceil(detect_n(sigma, threshold, alpha=alpha, power=power) * scale)
        same = math.ceil(equivalence_n(sigma, threshold, miss=miss, power=power) * scale)
        needs.append(MetricNeed(metric.name, sigma, max(least, detect), max(least, same)))
    counted = [r for arm in pilot for r in arm if is_counted(r)]
    error_needed = None
    if counted:
        rate = sum(1 for r in counted if not r.ok) / len(counted)
        rise = max(threshold * rate, _error_floor())
        error_needed = rate_detect_n(rate, rise, alpha=alpha, power=power)
    return SamplePlan(threshold, power, alpha, tuple(needs), error_needed, per_arm, block, source)


def _error_floor() -> float:
    """The smallest error-rate change that matters: the error rate metric's `min_abs`."""
    return next(m.min_abs for m in METRICS if m.rate)
