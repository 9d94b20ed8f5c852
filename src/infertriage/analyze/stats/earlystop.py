"""analyze.stats, level 1: LoadGen's early-stopping rule — the sample a percentile claim needs.

Takes a percentile (0.95, 0.99), the count of requests over the latency limit
and the count judged; gives the fewest requests at which a claim "the p-th
percentile is within the limit" holds at `confidence` (LoadGen's 0.99), and
the percentile estimate such a sample supports. Pure: no I/O, no clock.

LoadGen (mlcommons/inference, loadgen/early_stopping.cc and results.cc, the
Server scenario) counts t overlatency queries and asks for the least h such
that the odds of t or fewer overlatency queries in h + t, were the true
overlatency rate 1 − p, are at most 1 − confidence: P(X ≤ t) for
X ~ Binomial(h + t, 1 − p), which is the regularized incomplete beta
I_p(h, t + 1). The run is valid when it processed at least h + t queries. At
confidence 0.99 a p99 claim needs 459 requests with none over the limit, 662
with one, 838 with two; a p95 claim 90, 130; a p90 claim 44, 64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infertriage.analyze.stats.binomial import regularized_beta

__all__ = ["EarlyStop", "early_stop", "percentile_estimate", "requests_needed"]

LOADGEN_CONFIDENCE = 0.99  # LoadGen's `confidence` (early_stopping.cc callers); tolerance 0


def _odds(h: int, t: int, p: float) -> float:
    """P(≤ t overlatency in h + t queries), each over the limit with probability 1 − p."""
    return regularized_beta(float(h), float(t + 1), p)


def requests_needed(percentile: float, over: int, *, confidence: float = LOADGEN_CONFIDENCE) -> int:
    """The fewest requests (h + t) for a `percentile` claim with `over` of them over the limit."""
    if not 0.0 < percentile < 1.0:
        raise ValueError(f"a percentile is a fraction in (0, 1), not {percentile}")
    if over < 0:
        raise ValueError(f"{over} requests over the limit")
    low = max(1, math.ceil(math.log(1.0 - confidence) / math.log(percentile)))
    high = low
    while _odds(high, over, percentile) > 1.0 - confidence:  # grow until it passes
        low, high = high, high * 2
    while low < high:  # the least passing h in (low, high]
        mid = (low + high) // 2
        if _odds(mid, over, percentile) <= 1.0 - confidence:
            high = mid
        else:
            low = mid + 1
    return high + over


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """One percentile claim against a limit, judged as LoadGen's Server scenario judges it."""

    percentile: float  # 0.99: the p99
    limit: float  # the latency limit, in the samples' unit
    num_judged: int
    num_over: int  # samples strictly over the limit
    needed: int  # requests the claim needs with `num_over` over the limit
    confidence: float

    @property
    def met(self) -> bool:
        return self.num_judged >= self.needed

    @property
    def more(self) -> int:
        """Requests still to run, every one of them within the limit, for the claim to hold."""
        return max(0, self.needed - self.num_judged)

    def describe(self) -> str:
        """'p95 claim: needs ≥ 130 requests with 1 over the limit; 36 were judged'."""
        name = f"p{self.percentile * 100:g}"
        over = "none" if self.num_over == 0 else str(self.num_over)
        head = f"{name} claim at {self.confidence:.0%} confidence: needs ≥ {self.needed} requests"
        tail = f"with {over} over the limit; {self.num_judged} were judged"
        return f"{head} {tail}"


def early_stop(
    samples: Sequence[float],
    limit: float,
    percentile: float,
    *,
    confidence: float = LOADGEN_CONFIDENCE,
) -> EarlyStop:
    """LoadGen's Server-scenario early stopping for `samples` against `limit`."""
    over = sum(1 for x in samples if x > limit)
    needed = requests_needed(percentile, over, confidence=confidence)
    return EarlyStop(percentile, limit, len(samples), over, needed, confidence)


def percentile_estimate(
    samples: Sequence[float], percentile: float, *, confidence: float = LOADGEN_CONFIDENCE
) -> float | None:
    """The `percentile` bound the sample supports at `confidence` (LoadGen's estimate).

    The largest t with h(t) + t ≤ n: discarding the t − 1 highest samples, the
    t-th highest is, with `confidence`, at or above the true percentile. None
    when the sample is too small for any estimate (fewer than h(1) + 1).
    """
    n = len(samples)
    if n < requests_needed(percentile, 1, confidence=confidence):
        return None
    t = 1
    while requests_needed(percentile, t + 1, confidence=confidence) <= n:
        t += 1
    return sorted(samples)[n - t]
