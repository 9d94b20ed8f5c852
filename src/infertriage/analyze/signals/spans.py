"""analyze, level 1: the server's request spans joined to the client's requests, as signals.

Takes the run's `RequestRecord`s (each with the W3C trace id its
`traceparent` carried) and the `ServerSpan`s a server exported (vLLM's
`llm_request`, `engines.vllm_spans`); gives, per request, the server's queue,
prefill and decode time beside the client's TTFT (`JoinedRequest`), the
join's summary for diagnosis.json (`SpanJoin`) and signals: `spans.*`
(per-request percentiles, the share joined, the client's TTFT less the
server's) and, from the same spans, the `server.ttft_p50_s`,
`server.ttft_p95_s` and `server.queue_time_mean_s` the rules read, for a
server whose /metrics did not give them (`merge_span_signals`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infertriage.engines.vllm_spans import REQUEST_SPAN, VllmSpan
from infertriage.schemas import RequestRecord, Signal
from infertriage.schemas.spans import JoinedRequest, ServerSpan, SpanJoin

__all__ = [
    "SpanJoinResult",
    "join_spans",
    "merge_span_signals",
    "request_spans",
    "span_signals",
]

SOURCE = "otlp spans"
_SLOWEST = 10


@dataclass(frozen=True, slots=True)
class SpanJoinResult:
    """The requests that sent a trace id and met a server span of it, in record order."""

    joined: tuple[JoinedRequest, ...]
    num_requests: int  # the records that sent a trace id and succeeded or have a span
    num_spans: int  # request spans received, joined or not

    def summary(self, source: Literal["otlp-listen", "spans-file"]) -> SpanJoin:
        joined = self.joined
        slowest = sorted(joined, key=lambda r: -(r.client_ttft_s or 0.0))[:_SLOWEST]
        return SpanJoin(
            source=source,
            num_requests=self.num_requests,
            num_joined=len(joined),
            num_spans=self.num_spans,
            slowest=tuple(slowest),
        )


def request_spans(spans: Sequence[ServerSpan]) -> dict[str, ServerSpan]:
    """vLLM's request spans by trace id: `llm_request`, or any span with its latencies (a
    vLLM with journey tracing adds an `llm_core` span to the trace); of two with one id,
    the one with the latencies, then the later (a resend)."""
    by_trace: dict[str, ServerSpan] = {}
    for span in spans:
        if span.name != REQUEST_SPAN and not _timed(span):
            continue
        kept = by_trace.get(span.trace_id)
        if kept is None or (_timed(span), span.end_ns) >= (_timed(kept), kept.end_ns):
            by_trace[span.trace_id] = span
    return by_trace


def _timed(span: ServerSpan) -> bool:
    return _seconds(span, VllmSpan.TIME_IN_QUEUE) is not None


def _seconds(span: ServerSpan, key: str) -> float | None:
    """A latency attribute in seconds; a negative one (a broken exporter) is no measure."""
    value = span.number(key)
    return value if value is not None and value >= 0 else None


def _joined(record: RequestRecord, span: ServerSpan) -> JoinedRequest:
    client_ttft = record.ttft_s
    client_e2e = None if record.end_ts is None else record.end_ts - record.sent_ts
    server_ttft = _seconds(span, VllmSpan.TIME_TO_FIRST_TOKEN)
    gap = None if client_ttft is None or server_ttft is None else client_ttft - server_ttft
    request_id = span.attributes.get(VllmSpan.REQUEST_ID)
    return JoinedRequest(
        id=record.id,
        trace_id=record.trace_id,
        client_ttft_s=client_ttft,
        client_e2e_s=client_e2e,
        server_request_id=str(request_id) if request_id is not None else "",
        queue_s=_seconds(span, VllmSpan.TIME_IN_QUEUE),
        prefill_s=_seconds(span, VllmSpan.TIME_IN_MODEL_PREFILL),
        decode_s=_seconds(span, VllmSpan.TIME_IN_MODEL_DECODE),
        server_ttft_s=server_ttft,
        server_e2e_s=_seconds(span, VllmSpan.E2E),
        ttft_gap_s=gap,
    )


def join_spans(records: Sequence[RequestRecord], spans: Sequence[ServerSpan]) -> SpanJoinResult:
    """Each record that sent a trace id beside the server's span of that trace (if any).

    The share joined counts the requests the engine could have traced: those that succeeded
    or whose span came. A request refused in front of the engine (a gateway's 429, a refused
    connection) has no span to join and would read as a span lost."""
    by_trace = request_spans(spans)
    traced = [r for r in records if r.trace_id]
    joined = tuple(_joined(r, by_trace[r.trace_id]) for r in traced if r.trace_id in by_trace)
    reached = sum(1 for r in traced if r.ok or r.trace_id in by_trace)
    return SpanJoinResult(joined, reached, len(by_trace))


def _window(records: Sequence[RequestRecord]) -> tuple[float, float] | None:
    if not records:
        return None
    ends = [r.end_ts if r.end_ts is not None else r.sent_ts for r in records]
    return (min(r.sent_ts for r in records), max(ends))


def _percentiles(
    name: str, values: Sequence[float], window: tuple[float, float] | None
) -> list[Signal]:
    if not values:
        return []
    p50, p95 = (float(v) for v in np.percentile(np.asarray(values), [50, 95]))
    return [
        Signal(f"{name}_p50_s", p50, "s", SOURCE, window),
        Signal(f"{name}_p95_s", p95, "s", SOURCE, window),
    ]


def _values(
    joined: Sequence[JoinedRequest], get: Callable[[JoinedRequest], float | None]
) -> list[float]:
    return [v for v in (get(r) for r in joined) if v is not None]


def span_signals(result: SpanJoinResult, records: Sequence[RequestRecord]) -> list[Signal]:
    """`spans.*` and the server-side `server.*` figures of the joined requests."""
    if not result.num_requests:
        return []
    window, joined = _window(records), result.joined
    share = len(joined) / result.num_requests
    out = [Signal("spans.joined_share", share, "fraction", SOURCE, window)]
    for name, get in (
        ("spans.queue_time", lambda r: r.queue_s),
        ("spans.prefill_time", lambda r: r.prefill_s),
        ("spans.decode_time", lambda r: r.decode_s),
        ("spans.ttft", lambda r: r.server_ttft_s),
        ("spans.ttft_gap", lambda r: r.ttft_gap_s),
    ):
        out += _percentiles(name, _values(joined, get), window)
    queue = _values(joined, lambda r: r.queue_s)
    by_name = {s.name: s for s in out}
    for quantile in ("p50", "p95"):
        theirs = by_name.get(f"spans.ttft_{quantile}_s")
        if theirs is not None:
            out.append(Signal(f"server.ttft_{quantile}_s", theirs.value, "s", SOURCE, window))
    if queue:
        out.append(Signal("server.queue_time_mean_s", float(np.mean(queue)), "s", SOURCE, window))
    return out


def merge_span_signals(measured: Sequence[Signal], from_spans: Sequence[Signal]) -> list[Signal]:
    """The spans' figures join the run's; a `server.*` one the metrics gave is kept theirs."""
    names = {s.name for s in measured}
    return [*measured, *(s for s in from_spans if s.name not in names)]
