"""The client against every pathology of the loopback server: what each one records."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest

from infertriage.analyze.latency import icl_samples, itl_samples, tpot_s, ttfo_s
from infertriage.loadgen.client import ClientConfig, Endpoint, RequestClient, make_session
from infertriage.loadgen.testserver import PathServer
from infertriage.schemas import ErrorKind, RequestRecord, TokenSource

from .conftest import spec

Server = tuple[str, PathServer]
Fetch = Callable[..., RequestRecord]


def test_normal_stream_one_token_per_chunk(server: Server, fetch_one: Fetch) -> None:
    url, srv = server
    r = fetch_one(url)
    assert r.ok and r.http_status == 200 and r.fault == ""
    assert [c.num_tokens for c in r.chunks] == [1] * 10
    assert r.output_tokens == 10 and r.output_tokens_source is TokenSource.USAGE
    assert r.prompt_tokens_source is TokenSource.USAGE and r.chunk_tokens_exact
    # The role-only first chunk goes out at once; TTFT waits for the first content (20 ms).
    assert r.ttft_s is not None and r.ttft_s >= 0.019
    assert r.end_ts is not None and r.last_token_ts is not None and r.end_ts >= r.last_token_ts
    assert r.headers_ts is not None and r.headers_ts < r.first_token_ts  # type: ignore[operator]
    assert "req-1" in srv.log and srv.log["req-1"][2] == 10


def test_coalesced_events_keep_per_token_itl(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "coalesce")
    assert r.ok and [c.num_tokens for c in r.chunks] == [4, 4, 2]
    samples = itl_samples(r)
    assert len(samples) == 9
    assert float(samples.mean()) == pytest.approx(tpot_s(r))  # type: ignore[arg-type]
    assert len(icl_samples(r)) == 2


def test_buffered_response_is_one_chunk(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "buffered")
    assert r.ok and len(r.chunks) == 1 and r.chunks[0].num_tokens == 10
    assert r.ttft_s is not None and r.ttft_s >= 0.02 + 9 * 0.005 - 0.001
    assert itl_samples(r).tolist() == [0.0] * 9


def test_multi_token_events_counted_from_continuous_usage(server: Server, fetch_one: Fetch) -> None:
    r = fetch_one(server[0], "multi_token")
    assert [c.num_tokens for c in r.chunks] == [3, 3, 3, 1] and r.chunk_tokens_exact


def test_reasoning_deltas_count_for_ttft_and_ttfo_comes_later(
    server: Server, fetch_one: Fetch
) -> None:
    r = fetch_one(server[0], "reasoning")
    assert [c.reasoning for c in r.chunks[:4]] == [True, True, True, False]
    ttfo = ttfo_s(r)
    assert r.ttft_s is not None and ttfo is not None and ttfo > r.ttft_s + 0.01
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
    assert r.ok and r.output_tokens == 10 and sum(c.num_tokens for c in r.chunks) == 10
    assert len(r.chunks) >= 8  # 10 events 5 ms apart; a loaded host may join two in one read


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
def test_faults_are_recorded_by_kind(
    server: Server,
    fetch_one: Fetch,
    behavior: str,
    kind: ErrorKind,
    fault: str,
    tokens: int,
    text: str,
) -> None:
    r = fetch_one(server[0], behavior)
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


def test_a_kept_alive_connection_the_server_closed_is_retried_once(server: Server) -> None:
    # llama-server answers keep-alive but closes after every streamed response: without a
    # retry every other request on a reused connection fails before it is sent.
    url, _ = server
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", endpoint=Endpoint.CHAT)

    async def go() -> list[RequestRecord]:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            client._headers["X-Test-Behavior"] = "close_after"
            records = []
            for i in range(6):
                start = time.perf_counter_ns()
                state = client.new_state(spec(4), start)
                await client.fetch(state, f"req-{i}")
                records.append(state.record(f"req-{i}", start))
            await client.aclose()
            return records

    records = asyncio.run(go())
    assert all(r.ok for r in records), [r.error_text for r in records]
    retried = [r for r in records if r.labels.get("retried") == "stale_connection"]
    assert len(retried) == 1  # then every request opens a connection of its own


def test_concurrent_streams_on_stale_connections_are_retried_on_fresh_ones(
    server: Server,
) -> None:
    # Found on llama-server at 64 streams: a retry sent with `Connection: close` through
    # the same pool took another pooled connection the server had just closed and failed
    # again. Once a stale connection is seen, requests go through a session that opens a
    # connection per request (the race itself is a matter of microseconds, so the test
    # pins the mechanism and that waves of concurrent streams all succeed).
    url, _ = server
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", endpoint=Endpoint.CHAT)

    async def one(client: RequestClient, rid: str) -> RequestRecord:
        start = time.perf_counter_ns()
        state = client.new_state(spec(4), start)
        await client.fetch(state, rid)
        return state.record(rid, start)

    async def go() -> list[RequestRecord]:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            client._headers["X-Test-Behavior"] = "close_after"
            records = [await one(client, "first"), await one(client, "second")]
            for wave in range(3):
                records += await asyncio.gather(*(one(client, f"w{wave}-{i}") for i in range(8)))
            fresh = client._fresh
            force_close = (
                fresh is not None and fresh.connector is not None and fresh.connector.force_close
            )
            await client.aclose()
            assert force_close
            return records

    records = asyncio.run(go())
    assert all(r.ok for r in records), [r.error_text for r in records if not r.ok]
    assert sum(r.labels.get("retried") == "stale_connection" for r in records) == 1
