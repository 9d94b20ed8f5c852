"""loadgen, level 2: sweeps — which rates to probe and where the server saturates.

Takes a throughput probe's result and each probed rate's records; gives the
rates to try and the `Knee`. Pure functions: the API runs the levels.

A rate is *stable* when the server keeps up: in the steady window it
completes at least 90 % as many requests as were sent, and TTFT measured
from the intended start does not grow without bound — its least-squares
slope against the scheduled time stays under 0.05 s per s, or the last
quarter's median TTFT stays under 1.5× the first quarter's. The knee is the
highest stable rate below the trailing run of unstable rates (saturation
persists above it; one spurious verdict lower down does not move it). A level
stopped early as over-saturated (`saturation`) is unstable, whatever its records.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infertriage.analyze.stats.latency import Window
from infertriage.loadgen.results import Knee, LevelResult
from infertriage.loadgen.saturation import Saturation
from infertriage.schemas import RequestRecord

__all__ = [
    "MIN_GROWTH_POINTS",
    "SWEEP_FRACTIONS",
    "find_knee",
    "judge_stable",
    "sweep_rates",
    "ttft_bounded",
    "ttft_growth",
]

SWEEP_FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25)
_MIN_COMPLETION = 0.9
_MAX_SLOPE = 0.05
_MAX_LATE_RATIO = 1.5
MIN_GROWTH_POINTS = 8  # first tokens `ttft_growth` needs; fewer: no growth measured
CRITERION = (
    "stable while completions (any outcome) reach 90 % of sends in the window and TTFT "
    "from the intended start does not grow (slope < 0.05 s/s or last-quarter median "
    "< 1.5× the first quarter's); knee = highest stable rate below the trailing run of "
    "unstable rates"
)


def sweep_rates(max_throughput: float) -> list[float]:
    """Rates below and above the probe's maximum throughput."""
    return [round(f * max_throughput, 6) for f in SWEEP_FRACTIONS if f * max_throughput > 0]


def ttft_growth(records: Sequence[RequestRecord]) -> tuple[float, float]:
    """(slope of TTFT-from-intended-start against scheduled time, late/early median ratio)."""
    points = sorted(
        (r.scheduled_ts, r.first_token_ts - r.scheduled_ts)
        for r in records
        if r.first_token_ts is not None
    )
    if len(points) < MIN_GROWTH_POINTS:
        return 0.0, 1.0
    x = np.asarray([p[0] for p in points])
    y = np.asarray([p[1] for p in points])
    slope = float(np.polyfit(x, y, 1)[0]) if np.ptp(x) > 0 else 0.0
    quarter = len(y) // 4
    early, late = float(np.median(y[:quarter])), float(np.median(y[-quarter:]))
    return slope, late / max(early, 1e-9)


def judge_stable(
    records: Sequence[RequestRecord], window: Window, saturation: Saturation | None = None
) -> bool:
    """Did the server keep up? Completions (any outcome) against the sends of the window;
    never, when the level was stopped as over-saturated."""
    if saturation is not None:
        return False
    sent = sum(1 for r in records if r.sent_ts in window)
    done = sum(1 for r in records if r.end_ts is not None and r.end_ts in window)
    if sent and done < _MIN_COMPLETION * sent:
        return False
    return ttft_bounded(records)


def ttft_bounded(records: Sequence[RequestRecord]) -> bool:
    """Does TTFT from the intended start stay bounded (`ttft_growth` within its limits)?"""
    slope, ratio = ttft_growth(records)
    return slope < _MAX_SLOPE or ratio < _MAX_LATE_RATIO


def find_knee(max_throughput: float, levels: Sequence[LevelResult]) -> Knee:
    """The knee: the highest stable rate below the trailing run of unstable rates.

    Saturation persists: every rate above the knee is unstable. One unstable verdict
    lower down (a host's hiccup in a short level) does not move the knee.
    """
    ordered = sorted(levels, key=lambda lv: lv.value)
    start = len(ordered)
    while start > 0 and ordered[start - 1].stable is False:
        start -= 1
    stable = [lv.value for lv in ordered[:start] if lv.stable is not False]
    if not stable:
        return Knee(max_throughput, None, "unstable at every probed rate; " + CRITERION)
    if start == len(ordered):
        return Knee(max_throughput, stable[-1], "no probed rate saturated; " + CRITERION)
    return Knee(max_throughput, stable[-1], CRITERION)
