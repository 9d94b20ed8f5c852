"""analyze.golive, level 1: the performance and stability halves of the go-live checklist.

Takes the records of the performance level and of the soak, the scraped
samples and the phase times; gives `Check`s. Pure: no clock, no I/O.

Performance: each SLO of `Thresholds` is judged on its point estimate and its
95 % interval — TTFT p95 (bootstrap over requests), ITL p95 (bootstrap over
requests, since one request's token gaps are not independent), the error
rate (exact Clopper–Pearson interval, over the requests the server was
validly asked to serve: those rejected as invalid, refused with a 429 or cut
by the run's end are named apart) and, when the SLO sets one, output
throughput (the mean of 1-second bins). The point within the limit and the whole interval
too is `pass`; the point within but the interval across is `marginal`: the
run was too small or too close to the limit to prove the SLO. TTFT and ITL
are judged over the requests sent within the steady window (first completion →
last send, `latency.steady_requests`, as `diagnose` judges them): a closed
loop's first burst, every stream sending at once, is not a steady load.

Stability, over the soak's steady window (first completion → last send):

- a resource leaks when its least-squares slope is positive with the whole
  95 % interval above zero and the growth over the window is practical: KV
  usage ≥ 5 points of the cache, GPU memory ≥ 1 % of its mean, server RSS ≥
  5 % of its mean and ≥ 32 MiB. The check names when it would be full.
- latency drifts when the median TTFT (or TPOT) of the window's last third is
  above that of its first third by ≥ 20 % and ≥ 10 % of the SLO (TTFT p95
  for TTFT, ITL p95 for TPOT) — a drift the SLO would feel — and a
  Mann–Whitney test of the two thirds gives p < 0.01. Medians, not a
  regression line: single long prompts make TTFT heavy-tailed, and a few of
  them late in a short soak tilt a least-squares slope.
- errors accumulate when the soak breaks the error-rate SLO, or when the
  second half of the soak fails significantly more often than the first
  (two-proportion test, p < 0.05).
- the drain: after the load, running and waiting are 0 and KV usage is back
  within 2 points of its idle value before the load.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from infertriage.analyze.stats.binomial import exact_interval, requests_to_settle
from infertriage.analyze.stats.bootstrap import (
    bootstrap_clustered_quantile_ci,
    bootstrap_quantile_ci,
)
from infertriage.analyze.stats.latency import (
    Window,
    is_incomplete,
    itl_samples,
    steady_requests,
    steady_window,
    tpot_s,
)
from infertriage.analyze.stats.outcomes import is_counted, is_refused, rejections_of
from infertriage.analyze.stats.significance import linear_trend, mann_whitney, two_proportion_p
from infertriage.schemas import (
    MIB,
    Check,
    CheckGroup,
    CheckStatus,
    RequestRecord,
    Sample,
    Thresholds,
    format_bytes,
)

__all__ = ["Phase", "drain_check", "performance_checks", "stability_checks"]

_P, _S = CheckGroup.PERFORMANCE, CheckGroup.STABILITY
_RESAMPLES = 400
_DRIFT_SHARE, _DRIFT_SLO_SHARE, _DRIFT_P = 0.20, 0.10, 0.01
_DRAIN_RESIDUE = 0.02
_SIGNIFICANT_P = 0.05


@dataclass(frozen=True, slots=True)
class Phase:
    """When the soak ran and when its drain ended; `idle_end_ts` ends the idle reading before it."""

    idle_end_ts: float
    load_end_ts: float
    drain_end_ts: float


# --- performance ---------------------------------------------------------------------------


def _judge(
    point: float, interval: tuple[float, float], limit: float, *, upper: bool
) -> CheckStatus:
    """`upper`: the value must stay at or below `limit` (a latency), else at or above it."""
    within = point <= limit if upper else point >= limit
    proven = interval[1] <= limit if upper else interval[0] >= limit
    if not within:
        return CheckStatus.FAIL
    return CheckStatus.PASS if proven else CheckStatus.MARGINAL


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _latency_check(
    name: str, values: Sequence[float], interval: tuple[float, float], limit: float, label: str
) -> Check:
    if not values:
        return Check(_P, name, CheckStatus.FAIL, f"no successful request gave a {label}.")
    point = float(np.percentile(values, 95))
    status = _judge(point, interval, limit, upper=True)
    ci = f"95 % interval {_ms(interval[0])}–{_ms(interval[1])}"
    verdict = {
        CheckStatus.PASS: "within",
        CheckStatus.MARGINAL: "within on the estimate, but its interval crosses",
        CheckStatus.FAIL: "over",
    }[status]
    detail = f"{label} p95 {_ms(point)} ({ci}) is {verdict} the SLO of {_ms(limit)}."
    figures = {"p95_s": point, "ci_low_s": interval[0], "ci_high_s": interval[1], "limit_s": limit}
    return Check(_P, name, status, detail, figures)


def _not_counted(records: Sequence[RequestRecord]) -> str:
    """What the error rate leaves out: cut by the run, refused for load, rejected as invalid."""
    parts = []
    if cut := sum(1 for r in records if is_incomplete(r)):
        parts.append(f"{cut} cut by the end of the run")
    if refused := sum(1 for r in records if is_refused(r)):
        parts.append(f"{refused} refused for load (HTTP 429)")
    if line := rejections_of(records).line():
        parts.append(line)
    return "; not counted: " + "; ".join(parts) if parts else ""


def _error_check(records: Sequence[RequestRecord], limit: float, name: str) -> Check:
    counted = [r for r in records if is_counted(r)]
    failed, total = sum(1 for r in counted if not r.ok), len(counted)
    if total == 0:
        what = "sent" if not records else "served"
        return Check(_P, name, CheckStatus.FAIL, f"no request was {what}{_not_counted(records)}.")
    rate = failed / total
    low, high = exact_interval(failed, total)
    status = _judge(rate, (low, high), limit, upper=True)
    detail = (
        f"{failed} of {total} requests failed ({rate:.2%}; 95 % interval "
        f"{low:.2%}–{high:.2%}) against an SLO of {limit:.2%}"
    )
    if status is CheckStatus.MARGINAL and (needed := requests_to_settle(rate, limit)):
        detail += f": {total} requests cannot prove it (about {needed:,} at this rate would)"
    detail += _not_counted(records)
    return Check(_P, name, status, detail + ".", {"rate": rate, "ci_high": high, "limit": limit})


def _throughput_bins(records: Sequence[RequestRecord], window: Window) -> list[float]:
    bins = max(1, int(window.duration_s))
    counts = np.zeros(bins)
    for record in records:
        for chunk in record.chunks:
            if chunk.ts in window:
                index = min(bins - 1, int(chunk.ts - window.start_ts))
                counts[index] += chunk.num_tokens
    return [float(c) for c in counts]


def _throughput_check(records: Sequence[RequestRecord], limit: float, seed: int) -> Check:
    window = steady_window(records)
    bins = _throughput_bins(records, window)
    mean = float(np.mean(bins))
    interval = bootstrap_quantile_ci(bins, None, num_resamples=_RESAMPLES, seed=seed)
    status = _judge(mean, interval, limit, upper=False)
    detail = (
        f"output throughput {mean:,.0f} tokens/s (95 % interval {interval[0]:,.0f}–"
        f"{interval[1]:,.0f}) against an SLO of at least {limit:,.0f} tokens/s."
    )
    return Check(_P, "performance.throughput", status, detail, {"tokens_per_s": mean})


def performance_checks(
    records: Sequence[RequestRecord], thresholds: Thresholds, *, seed: int = 0
) -> list[Check]:
    """TTFT p95, ITL p95, error rate and (when set) throughput against the SLOs.

    Latency is judged over the steady window (`steady_requests`, as `diagnose`
    judges it); a failure counts whenever it happened, so the error rate is over
    every request of the level.
    """
    steady, _ = steady_requests(records)
    ok = [r for r in steady if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    per_request = [s for r in ok if (s := itl_samples(r)).size]
    ttft_ci = (
        bootstrap_quantile_ci(ttft, 0.95, num_resamples=_RESAMPLES, seed=seed)
        if ttft
        else (0.0, 0.0)
    )
    itl_ci = (
        bootstrap_clustered_quantile_ci(per_request, 0.95, num_resamples=_RESAMPLES, seed=seed + 1)
        if per_request
        else (0.0, 0.0)
    )
    itl = np.concatenate(per_request).tolist() if per_request else []
    checks = [
        _latency_check("performance.ttft_p95", ttft, ttft_ci, thresholds.ttft_p95_s, "TTFT"),
        _latency_check("performance.itl_p95", itl, itl_ci, thresholds.itl_p95_s, "ITL"),
        _error_check(records, thresholds.error_rate, "performance.error_rate"),
    ]
    if thresholds.min_throughput_tok_s > 0:
        checks.append(_throughput_check(records, thresholds.min_throughput_tok_s, seed + 2))
    return checks


# --- stability -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Resource:
    metric: str
    label: str
    collect_hint: str
    practical: Callable[[float, float], bool]  # (growth over the window, mean) → material?
    show: Callable[[float], str]
    limit: str  # the `practical` growth, in words
    capacity: float | None = None  # the value at which it is full, when known


_RESOURCES = (
    _Resource(
        "kv.usage",
        "KV-cache usage",
        "scrape the engine's /metrics (--metrics-url)",
        lambda growth, _mean: growth >= 0.05,
        lambda v: f"{v:.1%}",
        "5 points",
        capacity=1.0,
    ),
    _Resource(
        "gpu.fb_used_bytes",
        "GPU memory",
        "scrape dcgm-exporter (--dcgm-url) or install nvidia-ml-py",
        lambda growth, mean: growth >= 0.01 * mean,
        format_bytes,
        "1 % of its mean",
    ),
    _Resource(
        "proc.rss_bytes",
        "server RSS",
        "give the server's process (--server-pid) on this host",
        lambda growth, mean: growth >= max(0.05 * mean, 32 * MIB),
        format_bytes,
        "5 % of its mean and 32 MiB",
    ),
)


def _series(
    samples: Sequence[Sample], name: str, start: float, end: float
) -> list[list[tuple[float, float]]]:
    """Each label set's (t, value) points of `name` in [start, end]."""
    by_labels: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = defaultdict(list)
    for s in samples:
        if s.name == name and start <= s.t <= end:
            by_labels[tuple(sorted(s.labels.items()))].append((s.t, s.value))
    return list(by_labels.values())


def _leak_check(resource: _Resource, samples: Sequence[Sample], window: Window) -> Check:
    name = f"stability.leak.{resource.metric.split('.')[0]}"
    series = [
        s for s in _series(samples, resource.metric, window.start_ts, window.end_ts) if len(s) >= 3
    ]
    if not series:
        detail = f"no {resource.label} samples during the soak: {resource.collect_hint}."
        return Check(_S, name, CheckStatus.SKIP, detail)
    worst: Check | None = None
    for points in series:
        t, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
        trend = linear_trend(t, y)
        growth = trend.slope * window.duration_s
        leaking = trend.slope_ci[0] > 0 and resource.practical(growth, float(y.mean()))
        low, high = (resource.show(v * 60) for v in trend.slope_ci)
        rate = f"{resource.show(trend.slope * 60)}/min, 95 % interval {low}–{high}"
        figures = {"slope_per_s": trend.slope, "slope_ci_low": trend.slope_ci[0], "growth": growth}
        if leaking:
            span = f"{window.duration_s:.0f} s of steady load"
            detail = f"{resource.label} grew {resource.show(growth)} over {span}, {rate}"
            if resource.capacity is not None and trend.slope > 0:
                left_s = (resource.capacity - float(y[-1])) / trend.slope
                detail += f": full in about {left_s / 60:.1f} min"
                figures["full_in_s"] = left_s
            check = Check(_S, name, CheckStatus.FAIL, detail + " — a leak.", figures)
        else:
            detail = (
                f"{resource.label} changed {resource.show(growth)} over "
                f"{window.duration_s:.0f} s of steady load ({rate}): a leak would need a "
                f"significant rise of {resource.limit}."
            )
            check = Check(_S, name, CheckStatus.PASS, detail, figures)
        if worst is None or (check.failed and not worst.failed):
            worst = check
    assert worst is not None
    return worst


def _drift_check(
    name: str, label: str, points: Sequence[tuple[float, float]], window: Window, slo_s: float
) -> Check:
    if len(points) < 15:
        return Check(
            _S, name, CheckStatus.SKIP, f"too few requests in the soak to judge {label} drift."
        )
    third = window.duration_s / 3
    early = [v for t, v in points if t < window.start_ts + third]
    late = [v for t, v in points if t > window.end_ts - third]
    if len(early) < 5 or len(late) < 5:
        return Check(_S, name, CheckStatus.SKIP, f"too few requests to compare {label} in time.")
    first, last = float(np.median(early)), float(np.median(late))
    rise, p = last - first, mann_whitney(early, late).p_value
    drifting = p < _DRIFT_P and rise >= max(_DRIFT_SHARE * first, _DRIFT_SLO_SHARE * slo_s)
    detail = (
        f"median {label} {_ms(first)} in the first third of {window.duration_s:.0f} s of "
        f"steady load, {_ms(last)} in the last (p = {p:.2g})"
    )
    figures = {"early_median_s": first, "late_median_s": last, "p_value": p}
    if drifting:
        detail += ": latency drifts — a queue or a leak is growing."
        return Check(_S, name, CheckStatus.FAIL, detail, figures)
    return Check(_S, name, CheckStatus.PASS, f"no material {label} drift: {detail}.", figures)


def _error_trend_check(records: Sequence[RequestRecord], window: Window, limit: float) -> Check:
    name = "stability.errors"
    records = [r for r in records if is_counted(r)]  # not cut, rejected or refused
    middle = (window.start_ts + window.end_ts) / 2
    first = [r for r in records if r.sent_ts < middle]
    second = [r for r in records if r.sent_ts >= middle]
    k1, k2 = sum(not r.ok for r in first), sum(not r.ok for r in second)
    total = len(records)
    rate = (k1 + k2) / total if total else 0.0
    kinds = sorted({r.error_kind.value for r in records if not r.ok})
    kinds_text = "; " + ", ".join(kinds) if kinds else ""
    seen = f"{k1 + k2} of {total} soak requests failed ({rate:.2%}{kinds_text})"
    figures = {"rate": rate, "first_half_failed": float(k1), "second_half_failed": float(k2)}
    if rate > limit:
        return Check(
            _S, name, CheckStatus.FAIL, f"{seen}: over the error-rate SLO of {limit:.2%}.", figures
        )
    p = two_proportion_p(k1, len(first), k2, len(second))
    if k2 > k1 and p < _SIGNIFICANT_P:
        detail = (
            f"{seen}, {k1} in the first half and {k2} in the second (p = {p:.3f}): "
            "errors accumulate over time."
        )
        return Check(_S, name, CheckStatus.FAIL, detail, figures)
    return Check(_S, name, CheckStatus.PASS, f"{seen}; no growth over time.", figures)


def _last(samples: Sequence[Sample], name: str, start: float, end: float) -> float | None:
    """The sum over label sets of each one's last value in [start, end]."""
    series = _series(samples, name, start, end)
    return sum(points[-1][1] for points in series) if series else None


def drain_check(samples: Sequence[Sample], phase: Phase) -> Check:
    name = "stability.drain"
    start, end = phase.load_end_ts, phase.drain_end_ts
    running = _last(samples, "queue.running", start, end)
    waiting = _last(samples, "queue.waiting", start, end)
    usage = _last(samples, "kv.usage", start, end)
    idle = _last(samples, "kv.usage", 0.0, phase.idle_end_ts)
    if running is None and usage is None:
        return Check(
            _S,
            name,
            CheckStatus.SKIP,
            "no engine metrics after the load: scrape /metrics (--metrics-url).",
        )
    after = f"{end - start:.1f} s after the load"
    busy = (running or 0.0) + (waiting or 0.0)
    if busy > 0:
        detail = (
            f"{after}, {running or 0:.0f} requests still run and {waiting or 0:.0f} wait: "
            "the engine did not drain."
        )
        return Check(
            _S,
            name,
            CheckStatus.FAIL,
            detail,
            {"running": running or 0.0, "waiting": waiting or 0.0},
        )
    if usage is not None and idle is not None and usage - idle > _DRAIN_RESIDUE:
        detail = (
            f"{after}, with nothing running, KV usage is {usage:.1%} against {idle:.1%} "
            "before the load: blocks were not returned — a KV leak."
        )
        return Check(_S, name, CheckStatus.FAIL, detail, {"kv_usage": usage, "kv_usage_idle": idle})
    shown = f", KV usage {usage:.1%}" if usage is not None else ""
    return Check(
        _S, name, CheckStatus.PASS, f"{after}, nothing runs or waits{shown}: back to idle."
    )


def stability_checks(
    records: Sequence[RequestRecord],
    samples: Sequence[Sample],
    phase: Phase,
    thresholds: Thresholds,
) -> list[Check]:
    """Leaks, latency drift, errors over time and the drain, over one soak."""
    window = steady_window(records)
    ok = [r for r in records if r.ok and r.sent_ts in window]
    ttft = [(r.sent_ts, v) for r in ok if (v := r.ttft_s) is not None]
    tpot = [(r.sent_ts, v) for r in ok if (v := tpot_s(r)) is not None]
    return [
        *(_leak_check(resource, samples, window) for resource in _RESOURCES),
        _drift_check("stability.drift.ttft", "TTFT", ttft, window, thresholds.ttft_p95_s),
        _drift_check("stability.drift.tpot", "TPOT", tpot, window, thresholds.itl_p95_s),
        _error_trend_check(records, window, thresholds.error_rate),
        drain_check(samples, phase),
    ]
