"""The client against every pathology of the loopback server: what each one records."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Callable, Sequence

import pytest

from infertriage.analyze.stats.latency import icl_samples, itl_samples, tpot_s, ttfo_s
from infertriage.loadgen.client import ClientConfig, Endpoint, RequestClient, make_session
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, TokenSource
from infertriage_testing.testserver import PathServer

from .conftest import READERS, spec, use_reader

Server = tuple[str, PathServer]
Fetch = Callable[..., RequestRecord]


def _events_in_reads(chunks: Sequence[Chunk], events: Sequence[int]) -> bool:
    """The chunks are the server's events (tokens each), some perhaps joined: a read that
    finds several events, as a late reader on a busy host does, makes one chunk of them.
    Every chunk ends where an event ends, so none was split or miscounted."""
    ends = list(itertools.accumulate(c.num_tokens for c in chunks))
    return bool(ends) and set(ends) <= set(itertools.accumulate(events)) and ends[-1] == sum(events)


def test_normal_stream_one_token_per_chunk(server: Server, fetch_one: Fetch) -> None:
    url, srv = server
    r = fetch_one(url)
    assert r.ok and r.http_status == 200 and r.fault == ""
    assert _events_in_reads(r.chunks, [1] * 10), [c.num_tokens for c in r.chunks]
    assert r.output_tokens == 10 and r.output_tokens_source is TokenSource.USAGE
    assert r.prompt_tokens_source is TokenSource.USAGE and r.chunk_tokens_exact
    # The role-only first chunk goes out at once; TTFT waits for the first content (20 ms).
    assert r.ttft_s is not None and r.ttft_s >= 0.019
    assert r.end_ts is not None and r.last_token_ts is not None and r.end_ts >= r.last_token_ts
    assert r.headers_ts is not None and r.headers_ts < r.first_token_ts  # type: ignore[operator]
    assert "req-1" in srv.log and srv.log["req-1"][2] == 10


def test_coalesced_events_keep_per_token_itl(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "coalesce")
    assert r.ok and _events_in_reads(r.chunks, [4, 4, 2]), [c.num_tokens for c in r.chunks]
    samples = itl_samples(r)
    assert len(samples) == 9
    assert float(samples.mean()) == pytest.approx(tpot_s(r))  # type: ignore[arg-type]
    assert len(icl_samples(r)) == len(r.chunks) - 1


def test_buffered_response_is_one_chunk(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "buffered")
    assert r.ok and len(r.chunks) == 1 and r.chunks[0].num_tokens == 10
    assert r.ttft_s is not None and r.ttft_s >= 0.02 + 9 * 0.005 - 0.001
    assert itl_samples(r).tolist() == [0.0] * 9


def test_multi_token_events_counted_from_continuous_usage(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "multi_token")
    assert _events_in_reads(r.chunks, [3, 3, 3, 1]) and r.chunk_tokens_exact


def test_reasoning_deltas_count_for_ttft_and_ttfo_comes_later(
    server: Server, fetch_one: Fetch
) -> None:
    r = fetch_one(server[0], "reasoning")
    # Three reasoning deltas, then the output, 5 ms apart (a late read may join some: a
    # read's reasoning chunk comes before its output chunk, at the same stamp).
    flags = [c.reasoning for c in r.chunks]
    assert flags == sorted(flags, reverse=True) and flags[0] and not flags[-1]
    assert sum(c.num_tokens for c in r.chunks if c.reasoning) == 3
    ttfo = ttfo_s(r)
    assert r.ttft_s is not None and ttfo is not None and ttfo >= r.ttft_s
    assert r.output_tokens == 10


@pytest.mark.parametrize("behavior", ["crlf", "utf8", "no_done"])
def test_framing_variants_are_clean(server: Server, fetch_one: Fetch, behavior: str) -> None:
    r = fetch_one(server[0], behavior)
    assert r.ok, r.error_text
    assert r.output_tokens == 10 and sum(c.num_tokens for c in r.chunks) == 10


def test_without_usage_counts_are_estimates(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "no_usage")
    assert r.ok and r.output_tokens == 10
    assert r.output_tokens_source is TokenSource.ESTIMATE and not r.chunk_tokens_exact
    assert r.prompt_tokens == 16 and r.prompt_tokens_source is TokenSource.ESTIMATE


def test_completions_endpoint(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], endpoint=Endpoint.COMPLETIONS)
    assert r.ok and r.output_tokens == 10 and _events_in_reads(r.chunks, [1] * 10)


@pytest.mark.parametrize(
    ("behavior", "kind", "fault", "tokens", "text"),
    [
        ("error", ErrorKind.STREAM, "error_event", 3, "engine died"),
        ("named_error", ErrorKind.STREAM, "error_event", 3, "engine died"),
        ("reset", ErrorKind.STREAM, "reset", 3, ""),
        ("invalid_json", ErrorKind.STREAM, "malformed_event", 10, "choices"),
        ("http_503", ErrorKind.HTTP, "http_5xx", 0, "overloaded"),
        # a 4xx refusing the request is the workload's fault; a 429 the server refusing load
        ("http_400", ErrorKind.REJECTED, "http_4xx", 0, "maximum context length is 2048"),
        ("http_429", ErrorKind.ADMISSION, "http_4xx", 0, "rate limit"),
    ],
)
@pytest.mark.parametrize("reader", READERS)
def test_faults_are_recorded_by_kind(
    server: Server,
    fetch_one: Fetch,
    reader: str,
    behavior: str,
    kind: ErrorKind,
    fault: str,
    tokens: int,
    text: str,
) -> None:
    r = fetch_one(server[0], behavior, reader=reader)
    assert (r.error_kind, r.fault) == (kind, fault)
    assert sum(c.num_tokens for c in r.chunks) == tokens  # what arrived is kept
    assert text in r.error_text
    if behavior == "http_503":
        assert r.http_status == 503


def test_a_stall_times_out_as_a_stall(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "stall", stall_timeout_s=0.3)
    assert (r.error_kind, r.fault) == (ErrorKind.TIMEOUT, "stall")
    assert sum(c.num_tokens for c in r.chunks) == 2


def test_slow_headers_time_out_before_the_response(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "slow_headers", stall_timeout_s=0.3)
    assert (r.error_kind, r.fault) == (ErrorKind.TIMEOUT, "slow_headers")
    assert r.http_status is None and r.chunks == ()


def test_the_request_timeout_bounds_a_slow_stream(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "slow_first", timeout_s=0.15)
    assert (r.error_kind, r.fault) == (ErrorKind.TIMEOUT, "timeout")


def test_connection_refused_is_a_connect_error(fetch_one: Fetch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    r = fetch_one(f"http://127.0.0.1:{port}")
    assert r.error_kind is ErrorKind.CONNECT and r.fault == "connect"


def test_key_and_headers_are_sent_and_the_key_is_in_no_repr(
    server: Server, fetch_one: Fetch
) -> None:
    url, srv = server
    r = fetch_one(url, api_key="sk-very-secret", headers=(("X-Team", "a"),))
    assert r.ok and srv.seen_keys == {"sk-very-secret"}
    assert "sk-very-secret" not in repr(r)
    assert "sk-very-secret" not in repr(ClientConfig("u", "m", api_key="sk-very-secret"))


async def _one(client: RequestClient, rid: str) -> RequestRecord:
    start = time.perf_counter_ns()
    state = client.new_state(spec(4), start)
    await client.fetch(state, rid)
    return state.record(rid, start)


@pytest.mark.parametrize("reader", READERS)
def test_a_kept_alive_connection_the_server_closed_is_retried_once(
    server: Server, reader: str
) -> None:
    # A server that closes a kept-alive connection just after the next request went out on
    # it (here 0.2 s after each stream: a keep-alive timeout racing the request; across a
    # network, llama-server's close after every streamed response): nothing was answered,
    # so the request is sent once more on a fresh connection, and later ones each open
    # their own.
    url, _ = server
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", endpoint=Endpoint.CHAT)

    async def go() -> list[RequestRecord]:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            use_reader(client, reader)
            client._headers["X-Test-Behavior"] = "close_late"
            records = [await _one(client, f"req-{i}") for i in range(6)]
            await client.aclose()
            return records

    records = asyncio.run(go())
    assert all(r.ok for r in records), [r.error_text for r in records]
    retried = [r for r in records if r.labels.get("retried") == "stale_connection"]
    assert [r.id for r in retried] == ["req-1"]  # then every request opens a connection
    # Its TTFT counts from the resend (the server's 20 ms and the trip), not from the send
    # that waited 0.2 s for the close; the time lost is in its dispatch lag.
    (r,) = retried
    assert r.ttft_s is not None and 0.019 < r.ttft_s < 0.15
    assert r.dispatch_lag_s > 0.15


@pytest.mark.parametrize("reader", READERS)
def test_concurrent_streams_on_stale_connections_are_retried_on_fresh_ones(
    server: Server,
    reader: str,
) -> None:
    # Found on llama-server at 64 streams: a retry sent with `Connection: close` through
    # the same pool took another pooled connection the server had just closed and failed
    # again. Once a stale connection is seen, requests go through a session that opens a
    # connection per request.
    url, _ = server
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", endpoint=Endpoint.CHAT)

    async def go() -> list[RequestRecord]:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            use_reader(client, reader)
            client._headers["X-Test-Behavior"] = "close_late"
            records = [await _one(client, "first"), await _one(client, "second")]
            for wave in range(3):
                records += await asyncio.gather(*(_one(client, f"w{wave}-{i}") for i in range(8)))
            per_request = client._no_keepalive  # each request opens its own connection now
            fresh = client._fresh
            if reader == "aiohttp":  # through a session that closes every connection
                assert fresh is not None and fresh.connector is not None
                per_request = per_request and fresh.connector.force_close
            await client.aclose()
            assert per_request
            return records

    records = asyncio.run(go())
    assert all(r.ok for r in records), [r.error_text for r in records if not r.ok]
    assert sum(r.labels.get("retried") == "stale_connection" for r in records) == 1


@pytest.mark.parametrize("reader", READERS)
def test_a_server_closing_after_each_stream_fails_no_request(server: Server, reader: str) -> None:
    # llama-server's way on one host: the close comes right after the stream. The client
    # lets the loop take one turn before it sends, so the pool has usually seen the close
    # and opens a new connection instead of writing to the closed one. The race is a matter
    # of microseconds and a busy host can lose it: then the requests sent together on stale
    # connections are sent once more, and from then on each request has its own connection.
    url, _ = server
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", endpoint=Endpoint.CHAT)

    async def go() -> list[RequestRecord]:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            use_reader(client, reader)
            client._headers["X-Test-Behavior"] = "close_after"
            records = [await _one(client, f"r-{i}") for i in range(4)]
            for wave in range(3):
                records += await asyncio.gather(*(_one(client, f"w{wave}-{i}") for i in range(8)))
            await client.aclose()
            return records

    records = asyncio.run(go())
    assert all(r.ok for r in records), [r.error_text for r in records if not r.ok]
    resent = [r.id for r in records if r.labels.get("retried") == "stale_connection"]
    rounds = {rid.split("-")[0] if rid.startswith("w") else rid for rid in resent}
    assert len(rounds) <= 1, resent  # one request alone, or one wave sent together


def test_what_the_server_calls_the_request_is_recorded(server: Server, fetch_one: Fetch) -> None:
    url, _ = server
    echoed = fetch_one(url, "echo_request_id")  # the response's X-Request-Id header
    assert echoed.ok and echoed.server_request_id == "req-1"
    streamed = fetch_one(url)  # no header: the stream's own `id`
    assert streamed.ok and streamed.server_request_id == "cmpl-test"
