"""analyze, level 1: what a log's lines say happened, beyond its stats lines, summed up.

Takes `LogRecord`s (their `LogEvent`s, read by the engines' adapters); gives an
`EventSummary`: the requests the engine timed itself (TGI's router, llama.cpp's
`print_timing`), how often prompts were processed again from scratch or the
context shifted, collectives that timed out, engine deaths, refusals, KV
transfers between prefill and decode instances, preemptions an engine states
as a count, the configuration its start-up lines state, and the attention
kernel it fell back from (the most specific reason the lines of its last start
give). It also turns seat events (llama.cpp's slots taken and freed, tasks
deferred) into the stats lines such an engine never prints (`seat_stats`), so
that its queue is read like every other engine's.

Choices the figures rest on:
- llama.cpp prints a request's prompt and generation timings on separate
  lines: a prompt-only event followed by a decode-only one is one request;
- a seat freed that was never seen taken (the excerpt began mid-run) counts
  for nothing; a deferred task waits until the next seat is taken.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from infertriage.analyze.logs.records import LogRecord, last_start
from infertriage.engines import EventKind, LogEvent, StatsLine

__all__ = [
    "EventSummary",
    "RequestTimes",
    "attention_fallback",
    "seat_stats",
    "summarise_events",
]

_CONFIG_KEYS = (
    "max_num_seqs",
    "max_model_len",
    "max_num_batched_tokens",
    "num_gpu_blocks",
    "block_size",
    "gpu_memory_utilization",
    "tensor_parallel",
    "data_parallel",
    "pipeline_parallel",
    "kv_cache_tokens",
    "cuda_graphs",
    "cuda_graph_max_batch",
    "kv_cache_short",
)


@dataclass(frozen=True, slots=True)
class RequestTimes:
    """The engine's own timings of the requests it logged, one list per figure."""

    queue_s: tuple[float, ...] = ()
    ttft_s: tuple[float, ...] = ()
    prefill_s: tuple[float, ...] = ()
    tpot_s: tuple[float, ...] = ()
    e2e_s: tuple[float, ...] = ()
    prefill_tok_s: tuple[float, ...] = ()
    decode_tok_s: tuple[float, ...] = ()
    prompt_tokens: tuple[float, ...] = ()
    output_tokens: tuple[float, ...] = ()

    @property
    def count(self) -> int:
        return max(len(getattr(self, f.name)) for f in dataclasses.fields(self))


@dataclass(frozen=True, slots=True)
class EventSummary:
    requests: RequestTimes = RequestTimes()
    seats_taken: int = 0
    deferred: int = 0
    cache_misses: int = 0
    cache_miss_tokens: float = 0.0
    context_shifts: int = 0
    collective_timeouts: int = 0
    engine_deaths: int = 0
    rejected: int = 0
    aborted: int = 0  # requests the client left before they finished
    aborted_burst: int = 0  # the most of them in one second (a time-out aborts many at once)
    over_limit: int = 0  # of them, prompts over the scheduler's own limit
    prompt_limit: float | None = None  # that limit, in tokens (the least stated)
    preempted: int = 0  # preemptions the lines state as a count (SGLang's retractions, …)
    kv_transfers: int = 0
    kv_transfer_failures: int = 0
    kv_transfer_s: tuple[float, ...] = ()
    expert_balance: tuple[float, ...] = ()  # EPLB's balancedness, step by step
    config: dict[str, float] = field(default_factory=dict)
    # values the server's own metrics code met that no state can have: kind → the worst
    metric_artefacts: dict[str, float] = field(default_factory=dict)
    attention_fallbacks: int = 0  # lines saying the flash-attention kernel was left
    # what they say together: the most specific reason, the capability, whether a fused
    # kernel is kept (none kept if any line says so)
    attention_fallback: dict[str, float] = field(default_factory=dict)


def _merged_requests(events: Iterable[LogEvent]) -> list[dict[str, float]]:
    """Request events, a prompt-only one joined to the decode-only one that follows it."""
    out: list[dict[str, float]] = []
    pending: dict[str, float] | None = None
    for event in events:
        values = dict(event.values)
        decode_only = "decode_s" in values or "tpot_s" in values or "decode_tok_s" in values
        prompt_only = not decode_only and ("prefill_s" in values or "prefill_tok_s" in values)
        if pending is not None and decode_only and not (pending.keys() & values.keys()):
            out.append({**pending, **values})
            pending = None
            continue
        if pending is not None:
            out.append(pending)
            pending = None
        if prompt_only and "e2e_s" not in values:
            pending = values
        else:
            out.append(values)
    return out + ([pending] if pending is not None else [])


def _request_times(events: Iterable[LogEvent]) -> RequestTimes:
    merged = _merged_requests(events)

    def column(key: str) -> tuple[float, ...]:
        return tuple(r[key] for r in merged if key in r and r[key] >= 0)

    return RequestTimes(**{f.name: column(f.name) for f in dataclasses.fields(RequestTimes)})


def attention_fallback(events: Sequence[LogEvent]) -> dict[str, float]:
    """The attention fallbacks' lines said together (see `EventKind.ATTENTION_FALLBACK`)."""
    said: dict[str, float] = {}
    for event in sorted(events, key=lambda e: -(e.get("reason") or 0.0)):  # specific last
        said.update(event.values)
    kept = [k for e in events if (k := e.get("kept_fused")) is not None]
    if kept:
        said["kept_fused"] = min(kept)
    return said


def summarise_events(records: Sequence[LogRecord]) -> EventSummary:
    """Every event of the records, counted and summed (see the module docstring)."""
    events = [e for r in records for e in r.events]

    def count(kind: EventKind) -> int:
        return sum(1 for e in events if e.kind is kind)

    def of(kind: EventKind) -> list[LogEvent]:
        return [e for e in events if e.kind is kind]

    config: dict[str, float] = {}
    for event in of(EventKind.CONFIG):  # a restart's lines replace the first start's
        config.update({k: v for k, v in event.values.items() if k in _CONFIG_KEYS})
    artefacts: dict[str, float] = {}
    for event in of(EventKind.METRIC_ARTEFACT):
        for key, value in event.values.items():
            artefacts[key] = min(artefacts.get(key, value), value)  # the most negative
    transfers = of(EventKind.KV_TRANSFER)
    # what the last start said (an earlier start's kernel no longer serves)
    fallbacks = [
        e
        for r in records[last_start([r.text for r in records])]
        for e in r.events
        if e.kind is EventKind.ATTENTION_FALLBACK
    ]
    misses = of(EventKind.CACHE_MISS)
    limits = [limit for e in of(EventKind.REJECTED) if (limit := e.get("limit")) is not None]
    return EventSummary(
        requests=_request_times(of(EventKind.REQUEST)),
        seats_taken=count(EventKind.SEAT_TAKEN),
        deferred=count(EventKind.DEFERRED),
        cache_misses=len(misses),
        cache_miss_tokens=sum(e.get("prompt_tokens") or 0.0 for e in misses),
        context_shifts=count(EventKind.CONTEXT_SHIFT),
        collective_timeouts=count(EventKind.COLLECTIVE_TIMEOUT),
        engine_deaths=count(EventKind.ENGINE_DEAD),
        rejected=count(EventKind.REJECTED),
        aborted=count(EventKind.ABORTED),
        aborted_burst=max(
            Counter(
                r.at for r in records for e in r.events if e.kind is EventKind.ABORTED
            ).values(),
            default=0,
        ),
        over_limit=len(limits),
        prompt_limit=min(limits, default=None),
        preempted=int(sum(e.get("count") or 1.0 for e in of(EventKind.PREEMPTED))),
        kv_transfers=len(transfers),
        kv_transfer_failures=sum(1 for e in transfers if (e.get("failed") or 0) > 0),
        kv_transfer_s=tuple(t for e in transfers if (t := e.get("transfer_s")) is not None),
        expert_balance=tuple(
            b for e in of(EventKind.EXPERT_BALANCE) if (b := e.get("balancedness")) is not None
        ),
        config=config,
        metric_artefacts=artefacts,
        attention_fallbacks=len(fallbacks),
        attention_fallback=attention_fallback(fallbacks),
    )


def seat_stats(records: Sequence[LogRecord], engine: str) -> list[LogRecord]:
    """The records, each seat event given the stats line it implies: seats busy, tasks waiting.

    For an engine that logs seats, not stats (llama.cpp): a record that takes or frees a
    seat, or defers a task, carries `StatsLine(engine, None, running, waiting)` after it.
    Records that already carry a stats line, and logs without seat events, are unchanged.
    """
    seat_kinds = {EventKind.SEAT_TAKEN, EventKind.SEAT_FREED, EventKind.DEFERRED}
    if not any(e.kind in seat_kinds for r in records for e in r.events):
        return list(records)
    busy: set[float] = set()
    waiting = 0
    out: list[LogRecord] = []
    for record in records:
        kinds = [e for e in record.events if e.kind in seat_kinds]
        for event in kinds:
            seat = event.get("seat")
            key = float(len(busy)) if seat is None else seat
            if event.kind is EventKind.SEAT_TAKEN:
                busy.add(key)
                waiting = max(0, waiting - 1)
            elif event.kind is EventKind.SEAT_FREED:
                busy.discard(key)
            else:
                waiting += 1
        if kinds and record.stats is None:
            stats = StatsLine(engine, None, float(len(busy)), float(waiting))
            out.append(dataclasses.replace(record, stats=stats))
            continue
        if record.stats is not None and record.stats.running == 0:
            busy.clear()  # "all slots are idle"
            waiting = 0
        out.append(record)
    return out
