"""analyze, level 1: did a candidate run regress against a baseline?

Takes the `RequestRecord`s of a baseline ("base") and a candidate ("run") and
their configs; gives one `MetricComparison` per metric of `METRICS`, warnings
when the traffic was not like for like (`traffic_shape`) and the config keys
that differ (`config_diff`). Pure: no clock, no I/O; the bootstrap is seeded.

Samples per metric: `ttft`, `tpot` and `e2e` one per ok request; `itl` every
per-token gap of the ok requests; `output_throughput` the output tokens in each
bin of about one second of the base's or run's own steady window (the window
cut into ⌊duration⌋ equal bins); `error_rate` one 0/1 per answered request
(not those the run's end cut, nor those rejected as invalid or refused with a
429: `traffic_shape` names those apart), summarised by the rate (its p50, p95 and mean
are all the rate, so one rule fits all).

The verdict, per metric, is made on its p50 and its p95 (for `error_rate` both
are the rate). A statistic's change is

- *practical* when |run/base − 1| > `threshold` (default 10 %; any change from
  a base of 0 counts) AND |run − base| > the metric's `min_abs` (1 ms for the
  latencies, 1 token/s for throughput, 0.005 for the error rate);
- *significant* when the bootstrap interval of that statistic's difference
  (run − base) excludes 0 AND, for the p50 and the error rate, the p-value
  (Mann–Whitney U over the samples; the two-proportion z test for
  `error_rate`) is below `alpha` (default 0.05). A p95 is judged by its
  interval and `tail_p_value` (the shares of samples above the pooled p95):
  a rank test sees the middle of a distribution, and a tail that grew 100×
  with the median unchanged is still a regression.
  Each statistic of each metric is judged at `alpha` / 12 (two statistics of
  six metrics, Bonferroni; its interval at that level), so a whole comparison
  of two runs of the same server raises a false alarm at most `alpha` of the
  time, as a CI gate must.

A practical and significant change makes the metric a "regression" or an
"improvement", by its direction and the metric's `lower_is_better`. When p50
and p95 both qualify and point opposite ways the metric is a "regression":
one of them got worse, and the reason says they disagree. Fewer than
`min_samples` (default 20) samples on either side, or a practical change
that is not significant, is "inconclusive"; anything else is "unchanged".
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from infertriage.analyze.latency import (
    describe,
    e2e_s,
    itl_samples,
    steady_window,
    tpot_s,
)
from infertriage.analyze.outcomes import is_counted, is_refused, rejections_of
from infertriage.analyze.stats import (
    bootstrap_diff_ci,
    ks_two_sample,
    mann_whitney,
    two_proportion_p,
)
from infertriage.schemas import RequestRecord

__all__ = [
    "DEFAULT_IGNORED",
    "METRICS",
    "Comparison",
    "ConfigChange",
    "Metric",
    "MetricComparison",
    "SampleStats",
    "compare_records",
    "config_diff",
    "tail_p_value",
    "traffic_shape",
]

FloatArray = npt.NDArray[np.float64]
Verdict = Literal["regression", "improvement", "unchanged", "inconclusive"]
_RESAMPLES = 4000  # the intervals sit at the 0.4 % level: enough resamples in each tail

# --- samples -------------------------------------------------------------------------------


def _per_request(
    metric: Callable[[RequestRecord], float | None],
) -> Callable[[Sequence[RequestRecord]], FloatArray]:
    def samples(records: Sequence[RequestRecord]) -> FloatArray:
        values = [v for r in records if r.ok and (v := metric(r)) is not None]
        return np.asarray(values, dtype=np.float64)

    return samples


def _itl(records: Sequence[RequestRecord]) -> FloatArray:
    parts = [itl_samples(r) for r in records if r.ok]
    return np.concatenate(parts) if parts else np.zeros(0)


def _output_throughput(records: Sequence[RequestRecord]) -> FloatArray:
    """Output tokens per second in each ~1 s bin of the steady window."""
    window = steady_window(records)
    times: list[float] = []
    tokens: list[float] = []
    for r in records:
        total = sum(c.num_tokens for c in r.chunks)
        scale = (r.output_tokens or total) / total if total else 0.0
        times.extend(c.ts for c in r.chunks)
        tokens.extend(c.num_tokens * scale for c in r.chunks)
    if not times:
        return np.zeros(0)
    num_bins = max(1, math.floor(window.duration_s))
    counts, _ = np.histogram(
        times, bins=num_bins, range=(window.start_ts, window.end_ts), weights=tokens
    )
    return np.asarray(counts, dtype=np.float64) / (window.duration_s / num_bins)


def _failed(records: Sequence[RequestRecord]) -> FloatArray:
    """One 0/1 per request the server was validly asked to serve (`outcomes.is_counted`).

    Requests cut by the run's end, rejected as invalid (4xx) or refused for load
    (429) do not count; `traffic_shape` names the rejected and refused apart.
    """
    counted = [r for r in records if is_counted(r)]
    return np.asarray([0.0 if r.ok else 1.0 for r in counted], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Metric:
    """One compared metric. `rate` metrics are 0/1 samples judged by their rate."""

    name: str
    unit: str
    lower_is_better: bool
    min_abs: float  # the smallest absolute change that matters, in `unit`
    samples: Callable[[Sequence[RequestRecord]], FloatArray] = field(repr=False, compare=False)
    rate: bool = False


METRICS: tuple[Metric, ...] = (
    Metric("ttft", "s", True, 0.001, _per_request(lambda r: r.ttft_s)),
    Metric("tpot", "s", True, 0.001, _per_request(tpot_s)),
    Metric("itl", "s", True, 0.001, _itl),
    Metric("e2e", "s", True, 0.001, _per_request(e2e_s)),
    Metric("output_throughput", "tokens/s", False, 1.0, _output_throughput),
    Metric("error_rate", "fraction", True, 0.005, _failed, rate=True),
)

# --- the comparison ------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every metric's comparison and the traffic-shape warnings."""

    metrics: tuple[MetricComparison, ...]
    shape: tuple[str, ...]

    @property
    def regressions(self) -> tuple[MetricComparison, ...]:
        return tuple(m for m in self.metrics if m.verdict == "regression")

    @property
    def improvements(self) -> tuple[MetricComparison, ...]:
        return tuple(m for m in self.metrics if m.verdict == "improvement")


def _stats(samples: FloatArray, rate: bool) -> SampleStats | None:
    if rate:
        value = float(samples.mean()) if samples.size else None
        return None if value is None else SampleStats(value, value, value)
    dist = describe(samples)
    return None if dist is None else SampleStats(dist.p50, dist.p95, dist.mean)


def _relative(base: float, run: float) -> float | None:
    return None if base == 0.0 else run / base - 1.0


def tail_p_value(base: FloatArray, run: FloatArray) -> float:
    """Two-proportion test of the shares of base and run samples above their pooled p95.

    Under no change both are about 5 %; a tail that grew puts far more of the
    run above it. It holds at small samples, where a bootstrap of a p95 is too
    narrow, and sees a tail that a rank test of the whole distribution misses.
    """
    if base.size == 0 or run.size == 0:
        return 1.0
    cut = float(np.percentile(np.concatenate([base, run]), 95))
    above_base, above_run = int((base > cut).sum()), int((run > cut).sum())
    return two_proportion_p(above_base, base.size, above_run, run.size)


def _p_value(metric: Metric, base: FloatArray, run: FloatArray) -> float:
    if metric.rate:
        return two_proportion_p(int(base.sum()), base.size, int(run.sum()), run.size)
    return mann_whitney(base, run).p_value


def _diff_cis(
    metric: Metric, base: FloatArray, run: FloatArray, seed: int, level: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    if metric.rate:
        ci = bootstrap_diff_ci(base, run, None, level=level, num_resamples=_RESAMPLES, seed=seed)
        return ci, ci
    return (
        bootstrap_diff_ci(base, run, 0.5, level=level, num_resamples=_RESAMPLES, seed=seed),
        bootstrap_diff_ci(base, run, 0.95, level=level, num_resamples=_RESAMPLES, seed=seed + 1),
    )


@dataclass(frozen=True, slots=True)
class _Rule:
    """The verdict rule's parameters, and one metric's p-value."""

    metric: Metric
    p_value: float
    threshold: float
    alpha: float
    tail_p_value: float = 1.0


@dataclass(frozen=True, slots=True)
class _Check:
    """One statistic's change, judged."""

    name: str
    rel: float | None
    practical: bool
    significant: bool
    worse: bool

    def describe(self) -> str:
        return f"{self.name} {'from 0' if self.rel is None else f'{self.rel:+.1%}'}"


def _check(
    name: str,
    base: float,
    run: float,
    ci: tuple[float, float],
    rule: _Rule,
    *,
    tail: bool = False,
) -> _Check:
    """`tail`: a p95, tested by the share of samples above the pooled p95, not by ranks."""
    diff = run - base
    rel = _relative(base, run)
    large = diff != 0.0 if rel is None else abs(rel) > rule.threshold
    practical = large and abs(diff) > rule.metric.min_abs
    tested = (rule.tail_p_value if tail else rule.p_value) < rule.alpha
    significant = tested and (ci[0] > 0.0 or ci[1] < 0.0)
    worse = (diff > 0.0) == rule.metric.lower_is_better
    return _Check(name, rel, practical, significant, worse)


def _verdict(checks: Sequence[_Check], rule: _Rule) -> tuple[Verdict, str]:
    confirmed = [c for c in checks if c.practical and c.significant]
    worse = any(c.worse for c in confirmed)
    better = any(not c.worse for c in confirmed)
    listed = ", ".join(c.describe() for c in confirmed)
    p = f"p = {rule.p_value:.2g}"
    if worse and better:
        return "regression", f"p50 and p95 disagree ({listed}, {p}): one of them got worse"
    if confirmed:
        return ("regression" if worse else "improvement"), f"{listed} ({p})"
    if unsure := [c.describe() for c in checks if c.practical]:
        return "inconclusive", f"{', '.join(unsure)} but not significant ({p})"
    changes = ", ".join(c.describe() for c in checks)
    return "unchanged", f"{changes}: within {rule.threshold:.0%} or the minimum change"


def _compare_metric(
    metric: Metric,
    base_samples: FloatArray,
    run_samples: FloatArray,
    *,
    rule: _Rule,
    min_samples: int,
    seed: int,
) -> MetricComparison:
    base, run = _stats(base_samples, metric.rate), _stats(run_samples, metric.rate)
    cis: tuple[tuple[float, float], tuple[float, float]] | None = None
    verdict: Verdict = "inconclusive"
    reason = "no samples on one side"
    if base is not None and run is not None:
        cis = _diff_cis(metric, base_samples, run_samples, seed, 1.0 - rule.alpha)
        checks = (
            (_check("rate", base.mean, run.mean, cis[0], rule),)
            if metric.rate
            else (
                _check("p50", base.p50, run.p50, cis[0], rule),
                _check("p95", base.p95, run.p95, cis[1], rule, tail=True),
            )
        )
        verdict, reason = _verdict(checks, rule)
    if 0 < min(base_samples.size, run_samples.size) < min_samples:
        verdict = "inconclusive"
        reason = f"too few samples ({base_samples.size} vs {run_samples.size}; need {min_samples})"
    return MetricComparison(
        metric=metric.name,
        unit=metric.unit,
        lower_is_better=metric.lower_is_better,
        base_n=int(base_samples.size),
        run_n=int(run_samples.size),
        base=base,
        run=run,
        change_p50=None if base is None or run is None else _relative(base.p50, run.p50),
        change_p95=None if base is None or run is None else _relative(base.p95, run.p95),
        p50_diff_ci=None if cis is None else cis[0],
        p95_diff_ci=None if cis is None else cis[1],
        p_value=rule.p_value,
        tail_p_value=rule.tail_p_value,
        verdict=verdict,
        reason=reason,
    )


def compare_records(
    base: Sequence[RequestRecord],
    run: Sequence[RequestRecord],
    *,
    threshold: float = 0.10,
    alpha: float = 0.05,
    min_samples: int = 20,
    seed: int = 0,
) -> Comparison:
    """Compare every metric of `METRICS`, run against base (see the module for the rule)."""
    compared = []
    for i, metric in enumerate(METRICS):
        base_samples, run_samples = metric.samples(base), metric.samples(run)
        # Bonferroni: each statistic of each metric at its share of the comparison's alpha.
        each = alpha / (2 * len(METRICS))
        rule = _Rule(
            metric, _p_value(metric, base_samples, run_samples), threshold, each,
            tail_p_value=tail_p_value(base_samples, run_samples),
        )  # fmt: skip
        compared.append(
            _compare_metric(
                metric,
                base_samples,
                run_samples,
                rule=rule,
                min_samples=min_samples,
                seed=seed + 2 * i,
            )
        )
    return Comparison(metrics=tuple(compared), shape=traffic_shape(base, run))


# --- traffic shape -------------------------------------------------------------------------

# Like-for-like limits: a KS D above this with p below the next is a different distribution.
_SHAPE_KS_D = 0.1
_SHAPE_KS_P = 0.01
_SHAPE_MEDIAN = 0.10  # relative change of a token-count median
_SHAPE_RATE = 0.10  # relative change of the offered request rate
_SHAPE_COUNT = 2.0  # ratio of request counts


def _tokens_warning(name: str, base: list[int], run: list[int]) -> str | None:
    if not base or not run:
        return None
    d, p = ks_two_sample(np.asarray(base, dtype=np.float64), np.asarray(run, dtype=np.float64))
    base_median, run_median = float(np.median(base)), float(np.median(run))
    rel = _relative(base_median, run_median)
    moved = run_median != base_median if rel is None else abs(rel) > _SHAPE_MEDIAN
    if not (moved or (d > _SHAPE_KS_D and p < _SHAPE_KS_P)):
        return None
    return f"{name} differ: median {base_median:g} → {run_median:g} (KS D {d:.2f}, p = {p:.2g})."


def _offered_rate(records: Sequence[RequestRecord]) -> float | None:
    if len(records) < 2:
        return None
    span = max(r.sent_ts for r in records) - min(r.sent_ts for r in records)
    return len(records) / span if span > 0.0 else None


def _rate_warning(base: Sequence[RequestRecord], run: Sequence[RequestRecord]) -> str | None:
    base_rate, run_rate = _offered_rate(base), _offered_rate(run)
    if base_rate is None or run_rate is None:
        return None
    rel = run_rate / base_rate - 1.0
    if abs(rel) <= _SHAPE_RATE:
        return None
    return (
        f"Offered request rate differs: {base_rate:.3g} → {run_rate:.3g} requests/s ({rel:+.0%})."
    )


def _count_warning(num_base: int, num_run: int) -> str | None:
    low, high = sorted((num_base, num_run))
    if high <= _SHAPE_COUNT * low:  # also when both are 0
        return None
    return f"Request counts differ more than {_SHAPE_COUNT:g}×: {num_base} → {num_run}."


def traffic_shape(base: Sequence[RequestRecord], run: Sequence[RequestRecord]) -> tuple[str, ...]:
    """One-sentence warnings where base and run did not see like-for-like traffic.

    Prompt or output token counts (of the records that have them) differ: KS D
    > 0.1 with p < 0.01, or medians > 10 % apart; the offered request rate
    (requests over the span of send times) differs by > 10 %; or one run has
    more than twice the other's requests. Also, per side, the requests the
    server rejected as invalid or refused for load: not in the error rate.
    """
    warnings = (
        _tokens_warning(
            "Prompt tokens",
            [r.prompt_tokens for r in base if r.prompt_tokens is not None],
            [r.prompt_tokens for r in run if r.prompt_tokens is not None],
        ),
        _tokens_warning(
            "Output tokens",
            [r.output_tokens for r in base if r.output_tokens is not None],
            [r.output_tokens for r in run if r.output_tokens is not None],
        ),
        _rate_warning(base, run),
        _count_warning(len(base), len(run)),
        *(_not_served_warning(name, side) for name, side in (("base", base), ("run", run))),
    )
    return tuple(w for w in warnings if w is not None)


def _not_served_warning(name: str, records: Sequence[RequestRecord]) -> str | None:
    """Requests rejected as invalid or refused for load: not in the error rate, named here."""
    parts = [line] if (line := rejections_of(records).line()) else []
    if refused := sum(1 for r in records if is_refused(r)):
        parts.append(f"{refused} refused for load (HTTP 429)")
    if not parts:
        return None
    return f"The {name}: {'; '.join(parts)}; not counted in its error rate."


# --- config --------------------------------------------------------------------------------

# Volatile keys, matched (fnmatch) against a dotted key or its last part.
DEFAULT_IGNORED: tuple[str, ...] = (
    "perf_counter_start_ns",
    "pid",
    "created",  # /v1/models' card time stamp: when the server started
    "*_ts",
    "*started_at",
    "*captured_at",
)


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A config key whose value differs; None on the side that lacks it (or holds None)."""

    key: str
    base: Any
    run: Any


def _flatten(config: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _flatten(value, f"{dotted}.")
        else:
            yield dotted, value


def _ignored(key: str, patterns: Sequence[str]) -> bool:
    leaf = key.rpartition(".")[2]
    return any(fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(leaf, p) for p in patterns)


def config_diff(
    base: Mapping[str, Any],
    run: Mapping[str, Any],
    *,
    ignore: Sequence[str] = DEFAULT_IGNORED,
) -> tuple[ConfigChange, ...]:
    """The keys that differ between two configs, sorted, nested mappings as dotted keys.

    Lists (and other values) are compared whole; a key on one side only is a
    change with None on the other. Keys matching `ignore` are skipped.
    """
    flat_base, flat_run = dict(_flatten(base)), dict(_flatten(run))
    missing = object()
    changes = []
    for key in sorted(flat_base.keys() | flat_run.keys()):
        old, new = flat_base.get(key, missing), flat_run.get(key, missing)
        if _ignored(key, ignore) or (old is not missing and new is not missing and old == new):
            continue
        changes.append(
            ConfigChange(key, None if old is missing else old, None if new is missing else new)
        )
    return _without_echoes(changes)


def _without_echoes(changes: Sequence[ConfigChange]) -> tuple[ConfigChange, ...]:
    """Drop a nested key that repeats a top-level change (`details.x.gpu_memory_utilization`)."""
    top = {(c.key, repr(c.base), repr(c.run)) for c in changes if "." not in c.key}
    return tuple(
        c
        for c in changes
        if "." not in c.key or (c.key.rsplit(".", 1)[1], repr(c.base), repr(c.run)) not in top
    )
