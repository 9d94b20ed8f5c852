"""Metric definitions on hand-built records: exact numbers, not tolerances."""

from __future__ import annotations

import numpy as np
import pytest

from infertriage.analyze.stats.distribution import describe
from infertriage.analyze.stats.latency import (
    Slo,
    apportion,
    default_slos,
    icl_samples,
    itl_samples,
    judge_client,
    parse_slos,
    steady_requests,
    steady_window,
    summarize,
    summary_signals,
    tpot_s,
    ttfo_s,
)
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, Thresholds, UserError


def _record(
    chunks: list[tuple[float, int] | tuple[float, int, bool]],
    *,
    sent: float = 0.0,
    scheduled: float | None = None,
    output: int | None = None,
    exact: bool = True,
    **fields: object,
) -> RequestRecord:
    made = tuple(Chunk(*c) for c in chunks)
    return RequestRecord(
        id=str(fields.pop("id", "r")),
        scheduled_ts=sent if scheduled is None else scheduled,
        sent_ts=sent,
        first_token_ts=made[0].ts if made else None,
        last_token_ts=made[-1].ts if made else None,
        end_ts=fields.pop("end_ts", made[-1].ts if made else None),  # type: ignore[arg-type]
        chunks=made,
        output_tokens=output if output is not None else sum(c.num_tokens for c in made),
        chunk_tokens_exact=exact,
        **fields,  # type: ignore[arg-type]
    )


def test_ttft_tpot_e2e_of_one_request() -> None:
    r = _record([(0.100, 1), (0.120, 1), (0.140, 1), (0.160, 1)], sent=0.010, scheduled=0.0)
    assert r.ttft_s == pytest.approx(0.090)
    assert tpot_s(r) == pytest.approx(0.060 / 3)
    s = summarize([r])
    assert s.ttft_intended is not None and s.ttft_intended.mean == pytest.approx(0.100)
    assert s.e2e is not None and s.e2e.mean == pytest.approx(0.150)
    assert s.dispatch_lag is not None and s.dispatch_lag.mean == pytest.approx(0.010)


def test_itl_per_token_splits_a_coalesced_chunk() -> None:
    # Tokens every 10 ms, but the network delivered tokens 2-4 in one read at 40 ms.
    r = _record([(0.010, 1), (0.040, 3), (0.050, 1)])
    assert itl_samples(r).tolist() == pytest.approx([0.010, 0.010, 0.010, 0.010])
    assert icl_samples(r).tolist() == pytest.approx([0.030, 0.010])
    assert float(itl_samples(r).mean()) == pytest.approx(tpot_s(r))  # type: ignore[arg-type]
    # vLLM's chunk-as-token ITL on the same events: the 3 coalesced events arrive as one
    # gap of 30 ms and two of 0 ms; on the chunks, 30 and 10 ms. Ours is the delivered rate.


def test_itl_first_chunk_extra_tokens_are_zero_gaps() -> None:
    r = _record([(0.010, 3), (0.030, 2)])
    assert itl_samples(r).tolist() == pytest.approx([0.0, 0.0, 0.010, 0.010])
    assert len(itl_samples(r)) == 4  # N − 1 samples
    assert float(itl_samples(r).sum()) == pytest.approx(0.020)  # E2E − TTFT


def test_inexact_counts_are_apportioned_to_usage() -> None:
    # Three events arrived, but usage says 6 tokens: each chunk is given 2.
    r = _record([(0.010, 1), (0.030, 1), (0.050, 1)], output=6, exact=False)
    assert itl_samples(r).tolist() == pytest.approx([0.0, 0.010, 0.010, 0.010, 0.010])
    assert float(itl_samples(r).mean()) == pytest.approx(tpot_s(r))  # type: ignore[arg-type]
    assert summarize([r]).itl_token_level == 0.0
    assert apportion(7, [1, 1, 1]) == [3, 2, 2]
    assert apportion(5, [0, 0]) == [0, 0]


def test_zero_token_chunks_pass_their_gap_on() -> None:
    r = _record([(0.010, 1), (0.020, 0), (0.030, 1)])
    assert itl_samples(r).tolist() == pytest.approx([0.020])
    assert icl_samples(r).tolist() == pytest.approx([0.010, 0.010])


def test_reasoning_counts_for_ttft_not_ttfo() -> None:
    r = _record([(0.050, 2, True), (0.090, 1, True), (0.120, 1), (0.130, 1)], sent=0.0)
    assert r.ttft_s == pytest.approx(0.050)
    assert ttfo_s(r) == pytest.approx(0.120)
    assert tpot_s(r) == pytest.approx(0.080 / 4)


def test_tpot_needs_two_tokens() -> None:
    assert tpot_s(_record([(0.010, 1)])) is None
    assert tpot_s(_record([])) is None


def test_tpot_is_request_weighted() -> None:
    short = _record([(0.1, 1), (0.2, 1)], id="a")  # TPOT 100 ms over 1 gap
    long = _record([(0.1 + 0.01 * i, 1) for i in range(101)], id="b")  # 10 ms over 100 gaps
    s = summarize([short, long])
    assert s.tpot is not None and s.tpot.mean == pytest.approx(0.055)  # not token-weighted
    assert s.itl is not None and s.itl.count == 101


def test_steady_window_and_throughput() -> None:
    records = [
        _record([(t + 0.5, 1), (t + 1.0, 1)], sent=t, id=str(i), prompt_tokens=100)
        for i, t in enumerate(np.arange(0.0, 10.0, 0.5).tolist())
    ]
    w = steady_window(records)
    assert (w.start_ts, w.end_ts) == pytest.approx((1.0, 9.5))
    s = summarize(records)
    finished = sum(1 for r in records if r.end_ts is not None and 1.0 <= r.end_ts <= 9.5)
    assert s.request_throughput == pytest.approx(finished / 8.5)
    tokens = sum(1 for r in records for c in r.chunks if 1.0 <= c.ts <= 9.5)
    assert s.output_throughput == pytest.approx(tokens / 8.5)
    burst = [_record([(1.0, 1)], sent=0.0, id=str(i)) for i in range(5)]
    assert steady_window(burst).basis == "whole run"


def test_steady_requests_leave_out_a_closed_loops_first_burst() -> None:
    burst = [_record([(0.3, 1), (0.5, 1)], sent=0.001 * i, id=f"b{i}") for i in range(16)]
    loop = [
        _record([(t + 0.03, 1), (t + 0.3, 1)], sent=t, id=f"s{i}")
        for i, t in enumerate(np.arange(0.6, 30.0, 0.25).tolist())
    ]
    judged_records, judged = steady_requests([*burst, *loop])
    assert judged.basis == "steady" and judged.num_first_burst == 16
    assert (judged.start_ts, judged.end_ts) == pytest.approx((0.5, loop[-1].sent_ts))
    assert judged_records == loop and judged.num_judged == len(loop)
    assert judged.num_requests == len(loop) + 16
    assert judged.describe().startswith(f"judged 0.5–{loop[-1].sent_ts:.1f} s: 118 of 134 ")
    assert "16 of the first burst" in judged.describe()
    # too short a level for a steady window: judged whole, and it says so
    whole_records, whole = steady_requests(burst)
    assert whole.basis == "whole level" and whole_records == burst
    assert whole.describe() == "judged the whole level, 0.0–0.5 s: all 16 requests " + (
        "(too short a level for a steady window)"
    )


def test_goodput_counts_requests_meeting_every_slo() -> None:
    fast = [_record([(0.05, 1), (0.06, 1)], sent=i * 0.1, id=f"f{i}") for i in range(10)]
    slow = _record([(0.50, 1), (0.51, 1)], sent=0.0, id="slow")
    s = summarize([*fast, slow], (Slo("ttft", 0.2), Slo("tpot", 0.05)))
    window = s.window.duration_s
    good = sum(1 for r in fast if r.end_ts is not None and r.end_ts in s.window)
    assert s.goodput == pytest.approx(good / window)
    assert s.goodput < s.request_throughput
    assert default_slos(Thresholds()) == (Slo("ttft", 0.2), Slo("tpot", 0.05))
    assert parse_slos("ttft=150ms,e2e=2s") == (Slo("ttft", 0.15), Slo("e2e", 2.0))
    with pytest.raises(UserError, match="not METRIC=TIME"):
        parse_slos("latency=3")


def test_error_taxonomy_and_short_outputs() -> None:
    ok = _record([(0.1, 1), (0.2, 1)], max_tokens=4)
    reset = _record([(0.1, 1)], error_kind=ErrorKind.STREAM, fault="reset", id="x")
    http = _record([], error_kind=ErrorKind.HTTP, fault="http_5xx", id="y")
    cut = _record([], error_kind=ErrorKind.CLIENT, fault="cancelled", id="z")
    s = summarize([ok, reset, reset, http, cut])
    assert dict(s.errors) == {"stream:reset": 2, "http:http_5xx": 1, "client:cancelled": 1}
    # the cut request is no error: 3 failures among the 4 requests the server answered
    assert s.num_failed == 3 and s.num_incomplete == 1 and s.error_rate == pytest.approx(0.75)
    assert s.num_short_outputs == 1 and s.output_ratio == pytest.approx(0.5)


def test_rejected_refused_and_cut_requests_are_not_the_servers_errors() -> None:
    ok = [_record([(0.1, 1), (0.2, 1)], id=f"ok{i}") for i in range(6)]
    failed = _record([], error_kind=ErrorKind.HTTP, fault="http_5xx", id="f", http_status=503)
    body = '{"object":"error","message":"This model\'s maximum context length is 2048 tokens.'
    too_long = [
        _record(
            [], error_kind=ErrorKind.REJECTED, fault="http_4xx", id=f"r{i}", http_status=400,
            error_text=f"HTTP 400: {body} However, you requested {2100 + i} tokens.\"}}",
        )
        for i in range(2)
    ]  # fmt: skip
    refused = _record([], error_kind=ErrorKind.ADMISSION, fault="http_4xx", id="q", http_status=429)
    # cut by the drain deadline before any token: not an error, whatever its kind
    cut = _record([], error_kind=ErrorKind.TIMEOUT, fault="run_deadline", id="c")
    s = summarize([*ok, failed, *too_long, refused, cut])
    assert (s.num_requests, s.num_ok, s.num_failed, s.num_incomplete) == (11, 6, 1, 1)
    assert s.num_counted == 7 and s.error_rate == pytest.approx(1 / 7)
    assert s.num_refused == 1 and s.admission_rate == pytest.approx(1 / 10)
    assert dict(s.errors) == {"http:http_5xx": 1, "timeout:run_deadline": 1}
    assert s.rejections.num_rejected == 2 and s.rejections.num_requests == 10
    assert s.rejections.line() == (
        "2 requests (20.0 %) rejected by the server as invalid: HTTP 400 'This model's maximum "
        "context length is 2048 tokens. However, you requested 2100 tokens.' — fix: "
        "--max-model-len / a shorter --workload"
    )


def test_describe_matches_numpy() -> None:
    values = np.random.default_rng(0).lognormal(0, 1, 1000)
    d = describe(values)
    assert d is not None
    assert d.p99 == pytest.approx(np.percentile(values, 99))
    assert d.p999 == pytest.approx(np.percentile(values, 99.9))
    assert d.mean == pytest.approx(values.mean()) and d.count == 1000
    assert describe([]) is None


def test_client_verdict() -> None:
    v = judge_client(
        cpu_busiest=0.97, loop_lag_p99_s=0.030, dispatch_lag_p99_s=0.02, icl_p50_s=0.00002
    )
    assert v.client_bound and not v.host_busy and len(v.reasons) == 3
    v = judge_client(
        cpu_busiest=0.10, loop_lag_p99_s=0.0012, dispatch_lag_p99_s=0.001, icl_p50_s=0.02
    )
    assert not v.client_bound and not v.host_busy and v.reasons == ()
    # Late at 60 % of a core: the client's own work; late at 15 %: a busy host.
    assert judge_client(
        cpu_busiest=0.6, loop_lag_p99_s=0.008, dispatch_lag_p99_s=None, icl_p50_s=0.004
    ).client_bound
    busy_host = judge_client(
        cpu_busiest=0.15, loop_lag_p99_s=0.008, dispatch_lag_p99_s=None, icl_p50_s=0.004
    )
    assert not busy_host.client_bound and busy_host.host_busy
    # A long typical chunk gap tolerates more lag than the 2 ms floor.
    assert not judge_client(
        cpu_busiest=0.6, loop_lag_p99_s=0.010, dispatch_lag_p99_s=None, icl_p50_s=0.05
    ).reasons


def test_signals_carry_the_window() -> None:
    s = summarize([_record([(0.1, 1), (0.2, 1)])])
    signals = {sig.name: sig for sig in summary_signals(s)}
    assert signals["bench.ttft.p95"].value == pytest.approx(0.1)
    assert signals["bench.ttft.p95"].window == (s.window.start_ts, s.window.end_ts)
