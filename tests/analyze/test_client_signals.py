"""The client's signals: throughput over the steady window, with a closed loop's first burst."""

from __future__ import annotations

import dataclasses

import pytest

from infertriage.analyze.signals.client import client_signals
from infertriage.schemas import Chunk, ErrorKind, RequestRecord


def _stream(
    rid: str, sent: float, tokens: int, *, cut: bool = False, itl: float = 0.01
) -> RequestRecord:
    chunks = tuple(Chunk(sent + 0.02 + i * itl, 1) for i in range(tokens))
    end = chunks[-1].ts
    return RequestRecord(
        id=rid, scheduled_ts=sent, sent_ts=sent, first_token_ts=chunks[0].ts,
        last_token_ts=end, end_ts=end, chunks=chunks, prompt_tokens=100,
        output_tokens=tokens, http_status=200,
        error_kind=ErrorKind.TIMEOUT if cut else ErrorKind.NONE,
        fault="run_deadline" if cut else "",
    )  # fmt: skip


def test_throughput_counts_the_first_bursts_tokens_inside_the_window() -> None:
    # four streams of 100-130 tokens at 10 ms each from t=0 (the burst), each followed by two
    # more; the last wave is cut by the client's deadline: 400 tokens a second throughout
    waves = [[_stream(f"w0-{i}", i * 0.001, 100 + 10 * i) for i in range(4)]]
    for k in (1, 2):
        cut = k == 2
        waves.append(
            [_stream(f"w{k}-{i}", r.end_ts or 0.0, 100, cut=cut) for i, r in enumerate(waves[-1])]
        )
    first, second = waves[0], waves[1] + waves[2]
    signals = {s.name: s for s in client_signals(first + second, client_bound=False)}
    throughput = signals["client.throughput_tok_s"]
    assert throughput.window is not None and throughput.window[0] > 0.5  # after the burst began
    assert throughput.value == pytest.approx(400.0, rel=0.05)


def _failed(
    rid: str, sent: float, kind: ErrorKind, status: int | None, fault: str
) -> RequestRecord:
    return RequestRecord(
        id=rid, scheduled_ts=sent, sent_ts=sent, end_ts=sent + 0.01, http_status=status,
        error_kind=kind, fault=fault, error_text=f"HTTP {status}: {{\"message\": \"no\"}}",
    )  # fmt: skip


def test_errors_come_with_their_counts_and_rejections_and_429s_are_apart() -> None:
    served = [_stream(f"s{i}", i * 0.05, 20) for i in range(40)]
    errors = [_failed(f"e{i}", 0.5 + i * 0.1, ErrorKind.HTTP, 500, "http_5xx") for i in range(2)]
    rejected = [
        _failed(f"r{i}", 0.6 + i * 0.1, ErrorKind.REJECTED, 400, "http_4xx") for i in range(4)
    ]
    refused = [
        _failed(f"q{i}", 0.7 + i * 0.1, ErrorKind.ADMISSION, 429, "http_4xx") for i in range(2)
    ]
    # cut by the drain deadline: one mid-stream (kept, measured), one before its first token
    cut = [
        _stream("c0", 1.0, 20, cut=True),
        _failed("c1", 1.5, ErrorKind.TIMEOUT, None, "run_deadline"),
        _failed("c2", 1.5, ErrorKind.CLIENT, None, "cancelled"),
    ]
    records = served + errors + rejected + refused + cut
    values = {s.name: s.value for s in client_signals(records, client_bound=False)}
    steady = values["client.num_requests"]
    assert values["client.num_errors"] == 2 and steady <= 43  # 40 served, 2 failed, c0
    assert values["client.error_rate"] == pytest.approx(2 / steady)
    assert values["client.rejected_rate"] > 0 and values["client.admission_rate"] > 0
    assert values["client.timeout_rate"] == 0.0  # the run's own cuts are no timeouts


def test_latency_is_judged_without_the_first_burst_but_its_failures_count() -> None:
    # 16 streams start at once: 14 queue behind each other (first token at 275 ms), 2 fail;
    # then the closed loop is steady, first tokens at 20 ms (the window `validate` judges too)
    burst = [_late(f"b{i}", 0.001 * i, 0.275) for i in range(14)]
    failed = [_failed(f"f{i}", 0.001 * i, ErrorKind.HTTP, 503, "http_5xx") for i in range(2)]
    loop = [_stream(f"s{i}", 0.6 + 0.05 * i, 20) for i in range(300)]
    values = {s.name: s.value for s in client_signals(burst + failed + loop, client_bound=False)}
    assert values["client.ttft_p95_s"] == pytest.approx(0.02)
    assert values["client.num_errors"] == 2 and values["client.num_requests"] == 316


def _late(rid: str, sent: float, ttft: float) -> RequestRecord:
    chunks = tuple(Chunk(sent + ttft + i * 0.01, 1) for i in range(20))
    return RequestRecord(
        id=rid, scheduled_ts=sent, sent_ts=sent, first_token_ts=chunks[0].ts,
        last_token_ts=chunks[-1].ts, end_ts=chunks[-1].ts, chunks=chunks, prompt_tokens=100,
        output_tokens=20, http_status=200,
    )  # fmt: skip


def _with_prompt(record: RequestRecord, digest: str) -> RequestRecord:
    """`record` sending a 1,000-token prompt of one message, digest `digest`."""
    return dataclasses.replace(record, prompt_prefix=((digest, 1000),), prompt_tokens=1000)


def test_prefix_reuse_is_counted_over_the_window_the_server_is_read_over() -> None:
    # Long prompts (healthy, synthetic:input=7000): the measured level's first burst resent
    # the warm-up's 16 prompts, and the server hit them before the judged window, over which
    # its hit rate (0 %) is read; the steady requests sent new prompts. Counted over the whole
    # level the client's reuse (a third) read as prefixes the server recomputed.
    warm = [_with_prompt(_stream(f"w{i}", -5.0 + 0.001 * i, 20), f"p{i}") for i in range(16)]
    burst = [_with_prompt(_late(f"b{i}", 0.001 * i, 0.275), f"p{i}") for i in range(16)]
    loop = [_with_prompt(_stream(f"s{i}", 0.6 + 0.05 * i, 20), f"n{i}") for i in range(40)]
    values = {
        s.name: s.value
        for s in client_signals(burst + loop, client_bound=False, run=warm + burst + loop)
    }
    assert values["workload.prefix_reuse"] == 0.0
    # the same prompts resent within the window are the reuse it holds
    again = [_with_prompt(_stream(f"a{i}", 2.7 + 0.05 * i, 20), f"n{i}") for i in range(40)]
    values = {
        s.name: s.value
        for s in client_signals(
            burst + loop + again, client_bound=False, run=warm + burst + loop + again
        )
    }
    assert values["workload.prefix_reuse"] == pytest.approx(0.5, abs=0.05)
    # without the run's records the level's own first burst is among the prompts sent before
    resent = [
        _with_prompt(_stream(f"s{i}", 0.6 + 0.05 * i, 20), f"p{i}" if i < 16 else f"n{i}")
        for i in range(40)
    ]
    values = {s.name: s.value for s in client_signals(burst + resent, client_bound=False)}
    assert values["workload.prefix_reuse"] == pytest.approx(16 * 992 / (40 * 1000))


def test_mean_concurrency_is_the_requests_in_flight_over_the_throughputs_window() -> None:
    # a closed loop of four streams, then a drain as long as the level: the window the
    # throughput is read over holds both, two streams in flight on average, four at most
    loop = [_stream(f"s{i}", 0.001 * i, 100) for i in range(4)]
    values = {s.name: s.value for s in client_signals(loop, client_bound=False)}
    assert values["client.max_concurrency"] == 4
    assert values["client.mean_concurrency"] == pytest.approx(4.0, rel=0.02)
    tail = [_stream(f"t{i}", 1.02, 100 * (i + 1)) for i in range(2)]
    values = {s.name: s.value for s in client_signals(loop + tail, client_bound=False)}
    assert values["client.mean_concurrency"] < 0.75 * values["client.max_concurrency"]
