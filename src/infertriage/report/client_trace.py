"""report, level 4: the client's timeline as a Chrome / Perfetto trace (JSON trace events).

Takes a run's `RequestRecord`s; gives a Trace Event Format document
(`{"traceEvents": [...]}`, which chrome://tracing and ui.perfetto.dev open):
one track (thread) per request, named by its id, holding a complete event
from the send to the stream's end (its TTFT, tokens, status and trace id in
its args), the dispatch lag before it when the send was late, and an instant
event at the first token and at every chunk (its token count in args).
Times are the run's clock in microseconds. `--export timeline` writes it, one
file per load level (`report.exports`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from infertriage.engines.vllm_spans import VllmSpan
from infertriage.schemas import RequestRecord
from infertriage.schemas.spans import ServerSpan

__all__ = ["client_trace"]

_PID = 1
_US = 1e6


def _us(ts: float) -> float:
    return round(ts * _US, 3)


def _request_events(tid: int, record: RequestRecord) -> list[dict[str, Any]]:
    base: dict[str, Any] = {"pid": _PID, "tid": tid}
    events: list[dict[str, Any]] = [
        {**base, "ph": "M", "name": "thread_name", "args": {"name": record.id}},
        {**base, "ph": "M", "name": "thread_sort_index", "args": {"sort_index": tid}},
    ]
    if record.dispatch_lag_s > 0:
        events.append(
            {
                **base,
                "ph": "X",
                "cat": "client",
                "name": "dispatch lag",
                "ts": _us(record.scheduled_ts),
                "dur": _us(record.dispatch_lag_s),
            }
        )
    end = record.end_ts if record.end_ts is not None else record.last_token_ts
    ttft = record.ttft_s
    args: dict[str, Any] = {
        "status": record.http_status,
        "error": str(record.error_kind),
        "ttft_ms": None if ttft is None else round(ttft * 1e3, 3),
        "prompt_tokens": record.prompt_tokens,
        "output_tokens": record.output_tokens,
    }
    if record.trace_id:
        args["trace_id"] = record.trace_id
    events.append(
        {
            **base,
            "ph": "X",
            "cat": "client",
            "name": "request",
            "ts": _us(record.sent_ts),
            "dur": _us(max(0.0, (end or record.sent_ts) - record.sent_ts)),
            "args": args,
        }
    )
    events.append({**base, "ph": "i", "s": "t", "name": "send", "ts": _us(record.sent_ts)})
    if record.first_token_ts is not None:
        events.append(
            {**base, "ph": "i", "s": "t", "name": "first token", "ts": _us(record.first_token_ts)}
        )
    events += [
        {
            **base,
            "ph": "i",
            "s": "t",
            "name": "chunk",
            "ts": _us(chunk.ts),
            "args": {"tokens": chunk.num_tokens},
        }
        for chunk in record.chunks
    ]
    return events


def _server_events(tid: int, span: ServerSpan, wall_anchor_s: float) -> list[dict[str, Any]]:
    """The engine's queue, prefill and decode of one request, from its span (vLLM's times:
    first token = arrival + TTFT, scheduled = first token − prefill, queued = scheduled − queue)."""
    ttft, queue = span.number(VllmSpan.TIME_TO_FIRST_TOKEN), span.number(VllmSpan.TIME_IN_QUEUE)
    prefill, decode = (
        span.number(VllmSpan.TIME_IN_MODEL_PREFILL),
        span.number(VllmSpan.TIME_IN_MODEL_DECODE),
    )
    if ttft is None or queue is None or prefill is None:
        return []
    first = span.start_ns * 1e-9 - wall_anchor_s + ttft
    phases = [("queue", first - prefill - queue, queue), ("prefill", first - prefill, prefill)]
    if decode is not None:
        phases.append(("decode", first, decode))
    return [
        {
            "pid": _PID,
            "tid": tid,
            "ph": "X",
            "cat": "server",
            "name": f"server {name}",
            "ts": _us(start),
            "dur": _us(max(0.0, dur)),
        }
        for name, start, dur in phases
    ]


def client_trace(
    records: Sequence[RequestRecord],
    title: str = "infertriage client",
    server: Mapping[str, ServerSpan] | None = None,
    wall_anchor_s: float = 0.0,
) -> bytes:
    """The records as a Trace Event Format JSON document, one track per request; `server`:
    the server's request spans by trace id, placed on the run's clock by `wall_anchor_s`."""
    events: list[dict[str, Any]] = [
        {"pid": _PID, "ph": "M", "name": "process_name", "args": {"name": title}}
    ]
    ordered = sorted(records, key=lambda r: (r.sent_ts, r.id))
    for tid, record in enumerate(ordered, start=1):
        events += _request_events(tid, record)
        span = (server or {}).get(record.trace_id) if record.trace_id else None
        if span is not None:
            events += _server_events(tid, span, wall_anchor_s)
    return orjson.dumps({"traceEvents": events, "displayTimeUnit": "ms"})
