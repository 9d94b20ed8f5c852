"""analyze.signals, level 1: the signals the diagnosis reads from the load client's records.

Takes the `RequestRecord`s of the measured load level and the client's own
health verdict; gives `client.*` signals: TTFT and ITL percentiles over the
steady window (`latency.steady_requests`, which `validate` judges too: no
closed loop's first burst), output throughput, error and timeout rates over
the whole level, streams cut at a consistent elapsed
time (a gateway timeout), prompt length and the concurrency reached. The
error rate comes with its counts (`client.num_requests`, `client.num_errors`)
so a rule can judge it with its interval; requests rejected as invalid and
refused for load (429) are their own rates (`client.rejected_rate`,
`client.admission_rate`), never errors; requests cut by the run's own end
are neither (see `outcomes`). The prefix reuse of the prompts sent
(`workload.prefix_reuse`…) comes with them (`reuse`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from infertriage.analyze.signals.reuse import reuse_signals
from infertriage.analyze.stats.latency import steady_requests, summarize
from infertriage.analyze.stats.outcomes import is_incomplete
from infertriage.schemas import ErrorKind, JudgedWindow, RequestRecord, Signal

__all__ = ["client_signals", "consistent_stream_cuts", "judged_window", "measured_records"]

_CUT_SPREAD = 0.1  # cut streams end within ±10 % of one elapsed time


def consistent_stream_cuts(records: Sequence[RequestRecord]) -> tuple[float, float]:
    """(share of streams cut mid-way at one consistent elapsed time, that time in seconds)."""
    cut = [
        r.end_ts - r.sent_ts
        for r in records
        if r.error_kind is ErrorKind.STREAM and r.first_token_ts is not None and r.end_ts
    ]
    if len(cut) < 2 or not records:
        return 0.0, 0.0
    median = float(np.median(cut))
    consistent = [d for d in cut if abs(d - median) <= _CUT_SPREAD * median]
    return len(consistent) / len(records), median


def _max_concurrency(records: Sequence[RequestRecord]) -> float:
    events = sorted(
        [(r.sent_ts, 1) for r in records if r.end_ts is not None]
        + [(r.end_ts, -1) for r in records if r.end_ts is not None]
    )
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return float(peak)


def _mean_concurrency(records: Sequence[RequestRecord], start: float, end: float) -> float:
    """Requests in flight over [start, end], on average: the batch the throughput was served
    at. A short level's window holds its drain, the streams ending one by one: a third of the
    peak on average where the outputs outlast the sends."""
    span = end - start
    if span <= 0:
        return 0.0
    held = sum(
        max(0.0, min(r.end_ts, end) - max(r.sent_ts, start))
        for r in records
        if r.end_ts is not None
    )
    return held / span


def _as_measured(record: RequestRecord) -> RequestRecord | None:
    """A stream the client cut at its own deadline still measured TTFT and ITL; keep those.

    One cut before its first token measured nothing and is dropped: never an error.
    """
    if not is_incomplete(record):
        return record
    if record.first_token_ts is None:
        return None
    return dataclasses.replace(record, error_kind=ErrorKind.NONE, fault="")


def measured_records(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The records `client_signals` judges: a stream cut by the run's end keeps its TTFT."""
    return [m for m in (_as_measured(r) for r in records) if m is not None]


def judged_window(records: Sequence[RequestRecord]) -> JudgedWindow:
    """The window `client_signals` judges the measured level's latency over, to report it."""
    return steady_requests(measured_records(records))[1]


def client_signals(
    records: Sequence[RequestRecord],
    *,
    client_bound: bool,
    run: Sequence[RequestRecord] = (),
) -> list[Signal]:
    """`records` are the measured level's; `run`, every record of the run (other levels'
    prompts, sent before, count as prefixes a cache could hold: `reuse`)."""
    sent = records
    records = [m for m in (_as_measured(r) for r in records) if m is not None]
    if not records:
        return []
    level = summarize(records)
    window = (level.window.start_ts, level.window.end_ts)
    # Throughput counts every stream's tokens within the window, the first burst's too; a
    # failure counts whenever it happened. Latency is judged over the steady window, as
    # `validate` judges it (`steady_requests`): no closed loop's first burst.
    throughput = level.output_throughput
    steady, judged = steady_requests(records)
    # The server's prefix-cache counters are read over the same window (`load_phases`): the
    # reuse sent is counted over its requests, the first burst's prompts among those a cache
    # could hold. Counted over the whole level, a first burst that resends the warm-up's
    # prompts (long ones fill the window's opening seconds) reads as hits the server missed.
    judged_ids = {r.id for r in steady}
    reuse = reuse_signals([r for r in sent if r.id in judged_ids], run=run or sent)
    summary = summarize(steady) if judged.basis == "steady" else level

    def signal(name: str, value: float, unit: str) -> Signal:
        return Signal(name=name, value=float(value), unit=unit, source="client", window=window)

    out = [
        signal("client.throughput_tok_s", throughput, "tokens/s"),
        signal("client.error_rate", level.error_rate, "fraction"),
        signal("client.num_requests", level.num_counted, "requests"),
        signal("client.num_errors", level.num_failed, "requests"),
        signal("client.rejected_rate", level.rejections.share, "fraction"),
        signal("client.admission_rate", level.admission_rate, "fraction"),
        signal("client.bound", 1.0 if client_bound else 0.0, "bool"),
        signal("client.max_concurrency", _max_concurrency(records), "requests"),
        signal("client.mean_concurrency", _mean_concurrency(records, *window), "requests"),
    ]
    # the run's own cuts are gone by now: a timeout here is the server's
    timeouts = sum(1 for r in records if r.error_kind is ErrorKind.TIMEOUT)
    out.append(signal("client.timeout_rate", timeouts / len(records), "fraction"))
    share, at = consistent_stream_cuts(records)
    out += [
        signal("client.stream_cut_fraction", share, "fraction"),
        signal("client.stream_cut_at_s", at, "s"),
    ]
    for name, dist in (("ttft", summary.ttft), ("itl", summary.itl)):
        if dist is not None and dist.count:
            out += [
                signal(f"client.{name}_p50_s", dist.p50, "s"),
                signal(f"client.{name}_p95_s", dist.p95, "s"),
            ]
    if summary.itl is not None and summary.itl.count and summary.itl.mean > 0:
        out.append(signal("client.itl_cv", summary.itl.std / summary.itl.mean, "1"))
    ok = [r for r in records if r.ok and r.prompt_tokens]
    if ok:
        mean_prompt = sum(r.prompt_tokens or 0 for r in ok) / len(ok)
        out.append(signal("client.mean_prompt_tokens", mean_prompt, "tokens"))
        mean_output = sum(r.output_tokens or 0 for r in ok) / len(ok)
        out.append(signal("client.mean_output_tokens", mean_output, "tokens"))
    return out + [dataclasses.replace(s, window=window) for s in reuse]
