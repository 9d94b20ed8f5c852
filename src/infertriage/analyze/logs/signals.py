"""analyze, level 1: a log's timeline under the signal names the diagnose rules read.

Takes a `LogTimeline`; gives `Signal`s with `source` "log" over the
timeline's window (seconds from its first record): the queue (`queue.*`,
with how fast the waiting line built up), the KV cache (`kv.usage_max` while
requests waited, see `timeline`), preemptions where the engine logs them,
out-of-memory errors, the longest stall (`log.engine_stuck_s`, when the lines
say their throughput), torch.compile recompilations when logged, the prefix
cache's hit rate, the speculative-decoding figures, the decode steps that ran
outside CUDA graphs (`log.eager_decode_*`, where the lines say it) and the
attention kernel the engine fell back from (`log.attention_*`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from infertriage.analyze.logs.events import EventSummary
from infertriage.analyze.logs.timeline import GraphUse, LogTimeline
from infertriage.analyze.signals.ranks import rank_signals
from infertriage.analyze.stats.distribution import describe
from infertriage.schemas import Sample, Signal
from infertriage.schemas.artefacts import (
    DUPLICATED_LINES,
    FRACTION_ABOVE_ONE,
    NEGATIVE_COUNTER,
    NEGATIVE_GAUGE,
    artefact_name,
)

__all__ = ["Make", "kernel_signals", "timeline_signals"]

_Row = tuple[float, float | None, float | None, float | None]  # at, running, waiting, kv


def _slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope (per second); None for fewer than two distinct times."""
    if len({t for t, _ in points}) < 2:
        return None
    n = len(points)
    mean_t, mean_v = sum(t for t, _ in points) / n, sum(v for _, v in points) / n
    num = sum((t - mean_t) * (v - mean_v) for t, v in points)
    den = sum((t - mean_t) ** 2 for t, _ in points)
    return num / den


def _build_up(rows: Sequence[_Row]) -> float | None:
    """How fast the waiting line grew: from its first waiting request to its peak."""
    waiting = [(at, w) for at, _, w, _ in rows if w is not None]
    first = next((i for i, (_, w) in enumerate(waiting) if w > 0), None)
    if first is None:
        return None
    peak = max(range(first, len(waiting)), key=lambda i: waiting[i][1])
    return _slope(waiting[max(0, first - 1) : peak + 1])


def _impossible_kind(kv: float | None) -> str | None:
    if kv is None or 0.0 <= kv <= 1.0:
        return None
    return FRACTION_ABOVE_ONE if kv > 1.0 else NEGATIVE_GAUGE


def _possible(rows: Sequence[_Row]) -> tuple[list[_Row], list[Signal]]:
    """The rows with a KV use no cache can have (below 0, above 100 %) set aside, and an
    artefact signal for each kind found (the most impossible value): the log is wrong there."""
    kept: list[_Row] = []
    worst: dict[str, float] = {}
    for at, running, waiting, kv in rows:
        kind = _impossible_kind(kv)
        if kind is not None and kv is not None:
            worst[kind] = max(worst.get(kind, kv), kv, key=abs)
        kept.append((at, running, waiting, None if kind else kv))
    return kept, [
        Signal(artefact_name(kind, "kv.usage"), value, "fraction", "log: a stats line's KV use")
        for kind, value in sorted(worst.items())
    ]


def _log_artefacts(timeline: LogTimeline) -> list[Signal]:
    """Records written twice; what the server's own metrics code said could not be."""
    said = timeline.events.metric_artefacts
    found = [
        (DUPLICATED_LINES, float(timeline.duplicated), "1", "log: records repeated verbatim"),
        (
            NEGATIVE_COUNTER,
            said.get("negative_counter"),
            "1",
            "log: 'Counters can only be incremented by non-negative amounts'",
        ),
        (NEGATIVE_GAUGE, said.get("negative_gauge"), "1", "log: a negative value reported"),
    ]
    return [
        Signal(artefact_name(kind), value, unit, source)
        for kind, value, unit, source in found
        if value  # no duplicate, no complaint: no signal
    ]


def _kv_when_waiting(rows: Sequence[_Row]) -> float | None:
    queued = [kv for _, _, w, kv in rows if kv is not None and w]
    every = [kv for _, _, _, kv in rows if kv is not None]
    return max(queued) if queued else max(every) if every else None


# a signal of the log, or none when its value is None
Make = Callable[[str, float | None, str], list[Signal]]


def _request_signals(events: EventSummary, signal: Make) -> list[Signal]:
    """The engine's own request timings (TGI's router, llama.cpp's print_timing) as server.*"""
    out: list[Signal] = []
    times = events.requests
    for name, samples in (("ttft", times.ttft_s), ("itl", times.tpot_s)):
        dist = describe(samples)
        if dist is not None:
            out += signal(f"server.{name}_mean_s", dist.mean, "s")
            out += signal(f"server.{name}_p50_s", dist.p50, "s")
            out += signal(f"server.{name}_p95_s", dist.p95, "s")
    for name, samples in (("queue_time", times.queue_s), ("prefill_time", times.prefill_s)):
        dist = describe(samples)
        out += signal(f"server.{name}_mean_s", None if dist is None else dist.mean, "s")
    if times.count:
        out += signal("log.requests", times.count, "requests")
    return out


def _event_signals(events: EventSummary, signal: Make) -> list[Signal]:
    """Counts of what the lines said happened; the configuration they stated."""
    started = max(events.seats_taken, events.requests.count)
    share = events.cache_misses / started if started else None
    transfer = describe(events.kv_transfer_s)
    counts = (
        ("log.cache_misses", events.cache_misses),
        ("log.context_shifts", events.context_shifts),
        ("log.collective_timeouts", events.collective_timeouts),
        ("log.engine_deaths", events.engine_deaths),
        ("log.rejected", events.rejected),
        ("log.aborted", events.aborted),
        ("log.aborted_burst", events.aborted_burst),
        ("log.prompts_over_limit", events.over_limit),
        ("log.deferred", events.deferred),
    )
    out = [s for name, n in counts if n for s in signal(name, n, "1")]
    if events.kv_transfers:  # a transfer seen: its failures are counted, zero included
        out += signal("pd.kv_transfer_failures", events.kv_transfer_failures, "1")
    if events.cache_misses:
        out += signal(
            "log.cache_miss_share", None if share is None else min(1.0, share), "fraction"
        )
        out += signal("log.cache_miss_tokens", events.cache_miss_tokens or None, "tokens")
    if transfer is not None:
        out += signal("pd.kv_transfer_mean_s", transfer.mean, "s")
        out += signal("pd.kv_transfer_p95_s", transfer.p95, "s")
    out += signal("log.prompt_limit_tokens", events.prompt_limit, "tokens")
    balance = [b for b in events.expert_balance if 0.0 < b <= 1.0]
    if balance:  # vLLM EPLB's per-step balancedness, as its metrics would say it
        mean = sum(balance) / len(balance)
        out += signal("ep.balancedness_mean", mean, "fraction")
        out += signal("ep.balancedness_worst", min(balance), "fraction")
        out += signal("ep.hot_rank_ratio", 1.0 / mean, "1")
    config = dict(events.config)
    kv, length = config.get("kv_cache_tokens"), config.get("max_model_len")
    below = kv is not None and length is not None and kv < length  # "concurrency 0.45x"
    if config.pop("kv_cache_short", 0.0) or below:
        out += signal("log.kv_cache_short", 1.0, "1")
    for key, value in sorted(config.items()):
        out += signal(f"config.{key}", value, "1")
    return out + _request_signals(events, signal)


def kernel_signals(
    graphs: GraphUse | None, fallbacks: int, fallback: Mapping[str, float], signal: Make
) -> list[Signal]:
    """The kernel layer's figures a log says: decode steps outside CUDA graphs, and the
    flash-attention kernel left at start-up (`fallback`: `events.attention_fallback`)."""
    out: list[Signal] = []
    if graphs is not None:
        out += signal("log.eager_decode_share", graphs.eager_share, "fraction")
        out += signal("log.eager_decode_batch", graphs.eager_batch, "requests")
        out += signal("log.eager_decode_token_s", graphs.eager_token_s, "s")
        out += signal("log.eager_decode_step_s", graphs.eager_step_s, "s")
        out += signal("log.eager_decode_lines", graphs.num_eager, "1")
        out += signal("log.eager_decode_ranked", float(graphs.ranked), "bool")
    if fallbacks:
        out += signal("log.attention_fallbacks", fallbacks, "1")
        out += signal("log.attention_fallback_reason", fallback.get("reason"), "code")
        out += signal("log.attention_kept_fused", fallback.get("kept_fused"), "bool")
        out += signal("log.gpu_capability", fallback.get("capability"), "1")
    return out


def _rank_signals(timeline: LogTimeline) -> list[Signal]:
    """The data-parallel engines apart (`dp.*`), by the same figures as a scrape's ranks."""
    if not timeline.rank_stats:
        return []
    labels = {rank: {"dp_rank": str(rank)} for _, rank, _, _, _ in timeline.rank_stats}
    samples = (  # streamed: a long log holds a stats line a second
        Sample(at, name, value, labels[rank])
        for at, rank, running, waiting, kv in timeline.rank_stats
        for name, value in (
            ("queue.running", running),
            ("queue.waiting", waiting),
            ("kv.usage", kv),
        )
        if value is not None
    )
    found = rank_signals(samples, timeline.start, timeline.end)
    window = (0.0, timeline.end - timeline.start)
    return [dataclasses.replace(s, source="log", window=window) for s in found]


def timeline_signals(timeline: LogTimeline) -> list[Signal]:
    window = (0.0, timeline.end - timeline.start)

    def signal(name: str, value: float | None, unit: str) -> list[Signal]:
        return [] if value is None else [Signal(name, float(value), unit, "log", window)]

    rows, impossible = _possible(timeline.stats)
    kv = [r[3] for r in rows if r[3] is not None]
    out = [
        *signal("log.oom_errors", timeline.oom_errors, "1"),
        *signal(
            "queue.running_max",
            max((r[1] for r in rows if r[1] is not None), default=None),
            "requests",
        ),
        *signal(
            "queue.waiting_max",
            max((r[2] for r in rows if r[2] is not None), default=None),
            "requests",
        ),
        *signal("queue.waiting_slope", _build_up(rows) if timeline.dated else None, "requests/s"),
        *signal("queue.waiting_share", timeline.waiting_share, "fraction"),
        *signal("log.prefill_only_share", timeline.prefill_only_share, "fraction"),
        *signal("kv.usage_max", _kv_when_waiting(rows), "fraction"),
        *signal("kv.usage_mean", sum(kv) / len(kv) if kv else None, "fraction"),
        *signal("preemptions.total", timeline.preemptions, "1"),
        *signal("prefix_cache.hit_rate", timeline.prefix_hit_rate, "fraction"),
    ]
    if (timeline.throughput_known and timeline.dated) or timeline.stalls:
        longest = max((s.duration_s for s in timeline.stalls), default=0.0)
        out += signal("log.engine_stuck_s", longest, "s")
    out += impossible + _log_artefacts(timeline)
    out += _event_signals(timeline.events, signal)
    out += _rank_signals(timeline)
    if timeline.recompilations:  # TORCH_LOGS=recompiles may be off: no line is no zero
        out += signal("trace.recompilations", timeline.recompilations, "1")
    events = timeline.events
    out += kernel_signals(
        timeline.graph_use, events.attention_fallbacks, events.attention_fallback, signal
    )
    spec = timeline.spec
    if spec is not None:
        out += signal("spec.acceptance_rate", spec.acceptance_rate, "fraction")
        out += signal("spec.mean_accepted_tokens", spec.mean_accepted_tokens, "tokens")
        if spec.per_position:
            out += signal("spec.num_draft_tokens", len(spec.per_position), "tokens")
        if len(spec.per_position) > 1 and spec.per_position[0] > 0:
            decay = spec.per_position[-1] / spec.per_position[0]
            out += signal("spec.acceptance_decay", decay, "fraction")
    return out
