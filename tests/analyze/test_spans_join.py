"""The server's request spans joined to the client's records by trace id, and their signals."""

from __future__ import annotations

import dataclasses

import pytest

from infertriage.analyze.signals.spans import join_spans, merge_span_signals, span_signals
from infertriage.schemas import ErrorKind, RequestRecord, Signal
from infertriage.schemas.spans import ServerSpan


def _record(n: int, ttft_s: float, trace: bool = True) -> RequestRecord:
    sent = float(n)
    return RequestRecord(
        id=f"r-{n}",
        scheduled_ts=sent,
        sent_ts=sent,
        first_token_ts=sent + ttft_s,
        last_token_ts=sent + ttft_s + 1.0,
        end_ts=sent + ttft_s + 1.0,
        trace_id=f"{n + 1:032x}" if trace else "",
    )


def _span(
    n: int, queue: float, prefill: float, *, name: str = "llm_request", end: int = 0
) -> ServerSpan:
    return ServerSpan(
        trace_id=f"{n + 1:032x}",
        span_id=f"{n + 100:016x}",
        name=name,
        start_ns=0,
        end_ns=end,
        attributes={
            "gen_ai.request.id": f"chatcmpl-r-{n}",
            "gen_ai.latency.time_in_queue": queue,
            "gen_ai.latency.time_in_model_prefill": prefill,
            "gen_ai.latency.time_in_model_decode": 0.9,
            "gen_ai.latency.time_to_first_token": queue + prefill,
            "gen_ai.latency.e2e": queue + prefill + 0.9,
        },
    )


def test_each_record_meets_its_own_span_and_the_gap_in_front_of_the_engine() -> None:
    records = [_record(0, 0.5), _record(1, 0.8), _record(2, 0.3), _record(3, 0.4, trace=False)]
    spans = [
        _span(0, 0.1, 0.2),
        _span(1, 0.4, 0.3),
        _span(1, 0.0, 0.0, name="other", end=9),  # not a request span: ignored
        _span(7, 0.1, 0.1),  # a trace no record sent (another client's)
    ]
    result = join_spans(records, spans)
    assert (result.num_requests, result.num_spans) == (3, 3)
    by_id = {r.id: r for r in result.joined}
    assert set(by_id) == {"r-0", "r-1"}  # r-2's span never came, r-3 sent no trace id
    first = by_id["r-0"]
    assert (first.queue_s, first.prefill_s, first.decode_s) == (0.1, 0.2, 0.9)
    assert first.server_request_id == "chatcmpl-r-0" and first.trace_id == f"{1:032x}"
    assert first.ttft_gap_s == pytest.approx(0.5 - 0.3)
    summary = result.summary("otlp-listen")
    assert (summary.num_requests, summary.num_joined) == (3, 2)
    assert [r.id for r in summary.slowest] == ["r-1", "r-0"]  # the longest client TTFT first


def test_a_resent_request_joins_its_later_span() -> None:
    late = _span(0, 0.3, 0.3, end=20)
    result = join_spans([_record(0, 1.0)], [late, _span(0, 0.1, 0.1, end=10)])
    assert [r.queue_s for r in result.joined] == [0.3]


def test_the_span_with_the_latencies_wins_over_a_bare_api_span() -> None:
    """Two spans in one trace (vLLM's journey tracing adds `llm_core`): the timed one joins."""
    bare = ServerSpan(
        trace_id=f"{1:032x}", span_id=f"{5:016x}", name="llm_request", start_ns=0, end_ns=99
    )
    core = _span(0, 0.2, 0.1, name="llm_core", end=50)
    result = join_spans([_record(0, 1.0)], [core, bare])
    assert [(r.queue_s, r.prefill_s) for r in result.joined] == [(0.2, 0.1)]


def test_signals_fill_the_server_figures_the_metrics_lack() -> None:
    records = [_record(n, 0.5 + n * 0.1) for n in range(4)]
    spans = [_span(n, 0.1 * n, 0.2) for n in range(3)]
    signals = {s.name: s for s in span_signals(join_spans(records, spans), records)}
    assert signals["spans.joined_share"].value == 0.75
    assert signals["spans.queue_time_p50_s"].value == pytest.approx(0.1)
    assert signals["server.queue_time_mean_s"].value == pytest.approx(0.1)
    assert signals["server.ttft_p50_s"].value == pytest.approx(0.3)
    assert signals["spans.ttft_gap_p50_s"].value == pytest.approx(0.6 - 0.3)
    scraped = Signal("server.ttft_p50_s", 9.0, "s", "metrics")
    merged = merge_span_signals([scraped], list(signals.values()))
    assert [s.value for s in merged if s.name == "server.ttft_p50_s"] == [9.0]  # the scrape's
    assert any(s.name == "server.queue_time_mean_s" for s in merged)


def test_no_trace_ids_no_signals() -> None:
    records = [_record(0, 0.5, trace=False)]
    assert span_signals(join_spans(records, [_span(0, 0.1, 0.1)]), records) == []


def test_a_request_refused_in_front_of_the_engine_is_not_a_span_lost() -> None:
    """A gateway's 429 never reaches the engine: no span can come, so it is not in the
    share joined; a failure the engine did trace (its span came) is."""
    refused = dataclasses.replace(
        _record(1, 0.0), error_kind=ErrorKind.ADMISSION, first_token_ts=None
    )
    traced_failure = dataclasses.replace(_record(2, 0.3), error_kind=ErrorKind.HTTP)
    records = [_record(0, 0.5), refused, traced_failure]
    result = join_spans(records, [_span(0, 0.1, 0.2), _span(2, 0.1, 0.1)])
    assert result.num_requests == 2 and len(result.joined) == 2
    [share] = [s for s in span_signals(result, records) if s.name == "spans.joined_share"]
    assert share.value == 1.0
