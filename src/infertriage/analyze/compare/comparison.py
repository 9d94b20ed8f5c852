"""analyze.compare, level 1: did a candidate run regress against a baseline?

Takes the `RequestRecord`s of a baseline ("base") and a candidate ("run") and
their configs; gives one `MetricComparison` per metric of `METRICS`, warnings
when the traffic was not like for like (`traffic_shape`) and the config keys
that differ (`config_diff`). Pure: no clock, no I/O; the bootstrap is seeded.

Samples per metric: `ttft`, `tpot` and `e2e` one per ok request; `itl` every
per-token gap of the ok requests; `output_throughput` the output tokens in each
bin of about one second of the base's or run's own steady window (the window
cut into ⌊duration⌋ equal bins; an A/B arm's blocks each apart); `error_rate`
one 0/1 per answered request (not those the run's end cut, nor those rejected
as invalid or refused with a 429: `traffic_shape` names those apart),
summarised by the rate (its p50, p95 and mean are all the rate, so one rule
fits all).

Each metric is judged by `compare.verdict` on its p50 and p95 (for
`error_rate` both are the rate): regression, improvement, unchanged, or
inconclusive when the data cannot tell (the module says how). Each statistic
of each metric is tested at `alpha` / 12 (two statistics of six metrics,
Bonferroni), so a whole comparison of two runs of the same server raises a
false alarm at most `alpha` of the time, as a CI gate must.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from infertriage.analyze.compare.verdict import (
    Metric,
    MetricComparison,
    SampleStats,
    judge_metric,
    relative_change,
    tail_min_p,
    tail_p_value,
)
from infertriage.analyze.stats.latency import (
    e2e_s,
    itl_samples,
    steady_window,
    tpot_s,
)
from infertriage.analyze.stats.outcomes import is_counted, is_refused, rejections_of
from infertriage.analyze.stats.significance import ks_two_sample
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
    "statistic_alpha",
    "tail_min_p",
    "tail_p_value",
    "traffic_shape",
]

FloatArray = npt.NDArray[np.float64]

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
    """Output tokens per second in each ~1 s bin of the steady window — of each A/B block
    apart (records labelled `block`): between its blocks an arm is idle, not slow."""
    blocks: dict[str, list[RequestRecord]] = {}
    for r in records:
        blocks.setdefault(r.labels.get("block", ""), []).append(r)
    if len(blocks) > 1:
        return np.concatenate([_window_throughput(part) for part in blocks.values()])
    return _window_throughput(records)


def _window_throughput(records: Sequence[RequestRecord]) -> FloatArray:
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


METRICS: tuple[Metric, ...] = (
    Metric("ttft", "s", True, 0.001, _per_request(lambda r: r.ttft_s)),
    Metric("tpot", "s", True, 0.001, _per_request(tpot_s)),
    Metric("itl", "s", True, 0.001, _itl, sample_unit="token gaps"),
    Metric("e2e", "s", True, 0.001, _per_request(e2e_s)),
    Metric(
        "output_throughput",
        "tokens/s",
        False,
        1.0,
        _output_throughput,
        sample_unit="seconds of steady load",
    ),
    Metric("error_rate", "fraction", True, 0.005, _failed, rate=True),
)

# --- the comparison ------------------------------------------------------------------------


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

    @property
    def inconclusive(self) -> tuple[MetricComparison, ...]:
        return tuple(m for m in self.metrics if m.verdict == "inconclusive")


def statistic_alpha(alpha: float) -> float:
    """Bonferroni: each statistic of each metric at its share of the comparison's alpha."""
    return alpha / (2 * len(METRICS))


def compare_records(
    base: Sequence[RequestRecord],
    run: Sequence[RequestRecord],
    *,
    threshold: float = 0.10,
    alpha: float = 0.05,
    seed: int = 0,
) -> Comparison:
    """Compare every metric of `METRICS`, run against base (`compare.verdict` has the rule)."""
    each = statistic_alpha(alpha)
    compared = tuple(
        judge_metric(
            metric,
            metric.samples(base),
            metric.samples(run),
            threshold=threshold,
            alpha=each,
            miss=alpha,
            seed=seed + 2 * i,
        )
        for i, metric in enumerate(METRICS)
    )
    return Comparison(metrics=compared, shape=traffic_shape(base, run))


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
    rel = relative_change(base_median, run_median)
    moved = run_median != base_median if rel is None else abs(rel) > _SHAPE_MEDIAN
    if not (moved or (d > _SHAPE_KS_D and p < _SHAPE_KS_P)):
        return None
    return f"{name} differ: median {base_median:g} → {run_median:g} (KS D {d:.2f}, p = {p:.2g})."


def _offered_rate(records: Sequence[RequestRecord]) -> float | None:
    """Requests over the span of their send times — of each A/B block apart, summed (between
    its blocks an arm is sent nothing)."""
    if len(records) < 2:
        return None
    sends: dict[str, list[float]] = {}
    for r in records:
        sends.setdefault(r.labels.get("block", ""), []).append(r.sent_ts)
    span = sum(max(times) - min(times) for times in sends.values())
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
    (requests over the span of send times, an A/B block's each apart) differs by > 10 %; or
    one run has more than twice the other's requests. Also, per side, the requests the
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
