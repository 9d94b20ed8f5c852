"""The common chat event's one-pass reading agrees with the full reading, and a body the
socket delivers faster than it is read (aiohttp pauses the socket) is read whole."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import aiohttp
import orjson
import pytest
from aiohttp import web

from infertriage.loadgen.client import ClientConfig, RequestClient
from infertriage.loadgen.response import StreamState
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, TokenSource

from .conftest import READERS, spec, use_reader


def _event(i: int, **change: object) -> bytes:
    doc: dict[str, object] = {
        "id": "cmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}],
        "usage": {"prompt_tokens": 16, "completion_tokens": i + 1, "total_tokens": 17 + i},
    }
    doc.update(change)
    return orjson.dumps(doc)


def _read(events: list[list[bytes]], *, keep_text: bool = False) -> StreamState:
    """Each inner list one read's events, stamped 1, 2, …; then the finish and [DONE]."""
    state = StreamState(spec(), 0, chat=True)
    if keep_text:
        state.texts = []
    for ns, read in enumerate(events, 1):
        state.on_events([(b"", data) for data in read], ns)
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    state.on_events([(b"", orjson.dumps(finish)), (b"", b"[DONE]")], len(events) + 1)
    state.end_stream()
    return state


def _full(i: int) -> bytes:
    """The same event in a shape the one-pass reading leaves to the full one (a `role`)."""
    delta = {"content": f" w{i}", "role": "assistant"}
    return _event(i, choices=[{"index": 0, "delta": delta, "finish_reason": None}])


def test_one_pass_and_full_reading_agree() -> None:
    reads = [[_event(0)], [_event(1), _event(2)], [_event(3)]]
    slow = [[_full(0)], [_full(1), _full(2)], [_full(3)]]
    fast, full = _read(reads, keep_text=True), _read(slow, keep_text=True)
    assert fast.chunks == full.chunks == [(1, 1, False), (2, 2, False), (3, 1, False)]
    assert fast.texts == full.texts == [" w0", " w1", " w2", " w3"]
    assert (fast.usage_prompt, fast.usage_completion) == (16, 4)
    assert fast.exact and fast.server_id == "cmpl-1" and fast.error_kind is ErrorKind.NONE
    record = fast.record("r", 0)
    assert record.output_tokens == 4 and record.output_tokens_source is TokenSource.USAGE
    assert record.chunks == tuple(Chunk(ns * 1e-9, k, r) for ns, k, r in fast.chunks)
    assert record.chunk_tokens_exact and record.ok


@pytest.mark.parametrize(
    ("usage", "fault"),
    [
        ({"prompt_tokens": 16, "completion_tokens": -3}, "bad_count"),
        ({"prompt_tokens": 16, "completion_tokens": 2.5}, "bad_count"),
        ({"prompt_tokens": 16, "completion_tokens": 10**12}, "bad_count"),
        ({"prompt_tokens": "16", "completion_tokens": 1}, "bad_count"),
        ({"prompt_tokens": 16, "completion_tokens": True}, "bad_count"),
        ([1, 2], "bad_shape"),
    ],
)
def test_a_bad_count_in_a_common_event_still_fails(usage: object, fault: str) -> None:
    state = _read([[_event(0)], [_event(1, usage=usage)]])
    assert state.error_kind is ErrorKind.STREAM and state.fault == fault


@pytest.mark.parametrize(
    "change",
    [
        {"choices": [{"index": 0, "delta": {"content": 5}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": "x", "finish_reason": None}]},
        {"choices": "abc"},
        {"id": 5},
    ],
)
def test_a_bad_shape_in_a_common_looking_event_still_fails(change: dict[str, object]) -> None:
    state = StreamState(spec(), 0, chat=True)
    state.on_events([(b"", _event(0, **change))], 1)
    assert state.error_kind is ErrorKind.STREAM and state.fault == "bad_shape"


def test_the_first_events_id_names_the_request() -> None:
    state = _read([[_event(0, id="srv-7")], [_event(1, id="srv-8")]])
    assert state.server_id == "srv-7"


def test_an_error_in_a_common_looking_event_is_the_servers_error() -> None:
    state = _read([[_event(0)], [_event(1, error={"message": "engine died"})]])
    assert state.fault == "error_event" and "engine died" in state.error_text


# --- a body faster than its reader: aiohttp pauses the socket, the reader resumes it ------

NUM_EVENTS = 3000  # each its own HTTP chunk, written at once
PAD = "x" * 100


async def _flood(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i in range(NUM_EVENTS):
        choice = {"index": 0, "delta": {"content": PAD}, "finish_reason": None}
        usage = {"prompt_tokens": 16, "completion_tokens": i + 1}
        await resp.write(b"data: " + orjson.dumps({"choices": [choice], "usage": usage}) + b"\n\n")
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    await resp.write(b"data: " + orjson.dumps(end) + b"\n\ndata: [DONE]\n\n")
    await resp.write_eof()
    return resp


@pytest.fixture
def flood_url() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _flood)
    runner = web.AppRunner(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class _Behind(StreamState):
    """A reader behind its socket: each read's events take it 2 ms, so the body piles up."""

    __slots__ = ("reads",)

    def on_events(self, events: list[tuple[bytes, bytes]], ns: int) -> None:
        self.reads = getattr(self, "reads", 0) + 1
        time.sleep(0.002)
        super().on_events(events, ns)


@pytest.mark.parametrize("reader", READERS)
def test_a_body_faster_than_its_reader_is_read_whole(flood_url: str, reader: str) -> None:
    cfg = ClientConfig(base_url=flood_url + "/v1", model="m", stall_timeout_s=5.0)

    async def go() -> tuple[RequestRecord, int]:
        # A small read buffer: aiohttp pauses the socket once 64 HTTP chunks wait unread.
        async with aiohttp.ClientSession(read_bufsize=1024, auto_decompress=False) as session:
            client = RequestClient(cfg, session)
            use_reader(client, reader)  # h1 has no pause: the socket's buffer fills instead
            start = time.perf_counter_ns()
            state = _Behind(spec(NUM_EVENTS), start, chat=True)
            try:
                await client.fetch(state, "flood-1")
            finally:
                await client.aclose()  # h1's kept-alive connection
            return state.record("flood-1", start), state.reads

    record, reads = asyncio.run(go())
    assert record.ok, (record.fault, record.error_text)
    assert (
        record.output_tokens == NUM_EVENTS
        and sum(c.num_tokens for c in record.chunks) == NUM_EVENTS
    )
    assert reads < NUM_EVENTS  # the events piled up between reads, as a paused socket's do
