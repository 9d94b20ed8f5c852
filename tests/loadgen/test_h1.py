"""`loadgen.h1`: the HTTP/1.1 response reader, fed bytes as a socket would give them.

The connection's own parser is under test; its transport is a recorder (what the
client wrote, whether it closed), its bytes are real responses cut at every place a
socket may cut them. `test_client.py` runs it against a real server.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from infertriage.loadgen.h1 import BadFraming, BadHead, ConnectionCut, H1Conn, H1Head, H1Pool
from infertriage_testing.testserver import ServerConfig, serve_in_thread

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
EVENTS = [b'data: {"a": 1}\n\n', b'data: {"b": 22}\n\n', b"data: [DONE]\n\n"]


def _chunked(pieces: list[bytes], last: bytes = b"0\r\n\r\n") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + last


class _Transport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class _Run:
    """One request on a fresh connection; the response fed in the given reads."""

    def __init__(self) -> None:
        self.conn = H1Conn()
        self.transport = _Transport()
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]
        self.body: list[bytes] = []
        self.reads = 0

    async def go(self, reads: list[bytes], *, eof: bool = False) -> tuple[H1Head, bool]:
        head_fut = self.conn.request(b"POST / HTTP/1.1\r\n\r\n")
        for data in reads:
            if data:  # a socket never gives an empty read
                self.conn.data_received(data)
        if eof:
            self.conn.eof_received()
            self.conn.connection_lost(None)
        head = await head_fut

        def sink(pieces: list[bytes], ns: int) -> None:
            assert all(pieces) and ns > 0
            self.body.extend(pieces)
            self.reads += 1

        self.conn.set_sink(sink)
        return head, await self.conn.wait()


def _read(reads: list[bytes], *, eof: bool = False) -> tuple[_Run, H1Head, bool]:
    run = _Run()
    head, ended = asyncio.run(run.go(reads, eof=eof))
    return run, head, ended


def test_a_chunked_stream_reads_the_same_wherever_the_socket_cuts_it() -> None:
    raw = CHUNKED + _chunked(EVENTS)
    for cut in range(1, len(raw)):
        for second in (cut, min(len(raw), cut + 7)):
            run, head, ended = _read([raw[:cut], raw[cut:second], raw[second:]])
            assert head.status == 200 and ended, cut
            assert b"".join(run.body) == b"".join(EVENTS), cut
            assert run.conn.keep and not run.transport.closed


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\r\n\n",
        b"\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-A: 1\r\n\t2\r\n  3\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
    ],
)
def test_a_head_of_bare_lfs_folds_or_a_leading_crlf_reads_wherever_the_socket_cuts_it(
    head: bytes,
) -> None:
    raw = head + _chunked(EVENTS)
    for cut in range(1, len(raw)):
        run, got, ended = _read([raw[:cut], raw[cut:]])
        assert got.status == 200 and ended and b"".join(run.body) == b"".join(EVENTS), cut
        assert got.headers["content-type"] == "text/event-stream"
        assert got.headers.get("x-a", "1 2 3") == "1 2 3"


def test_a_heads_last_line_is_read_without_its_cr() -> None:
    # the last header's value, two equal Content-Lengths with the last one last, and a status
    # line without a reason phrase or headers: none carries the CR of its CRLF
    last = CHUNKED.replace(b"\r\n\r\n", b"\r\nX-Last: v\r\n\r\n")
    run, head, ended = _read([last + _chunked(EVENTS)])
    assert head.headers["x-last"] == "v" and ended
    run, head, ended = _read(
        [b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"]
    )
    assert head.status == 200 and ended and b"".join(run.body) == b"abc"
    run, head, ended = _read([b"HTTP/1.1 204\r\n\r\n"])
    assert head.status == 204 and ended and run.body == []


def test_whole_chunks_in_one_read_come_as_one_piece_each() -> None:
    run, head, ended = _read([CHUNKED + _chunked(EVENTS)])
    assert ended and run.body == EVENTS and run.reads == 1
    assert head.headers["content-type"] == "text/event-stream"


def test_chunk_extensions_and_trailers() -> None:
    body = b"5;name=x\r\nhello\r\n6 \r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    run, _, ended = _read([CHUNKED + body])
    assert ended and b"".join(run.body) == b"hello world" and run.conn.keep


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\nhello\r\n0\r\n\r\n",  # not a size
        b"5\r\nhelloXX0\r\n\r\n",  # a chunk's data not ended by CRLF
        b"-5\r\nhello\r\n0\r\n\r\n",
        b"0x5\r\nhello\r\n0\r\n\r\n",
    ],
)
def test_broken_chunked_framing_fails_and_closes(body: bytes) -> None:
    with pytest.raises(BadFraming):
        _read([CHUNKED + body])


def test_broken_framing_after_good_chunks_keeps_what_came() -> None:
    run = _Run()

    async def go() -> None:
        head = run.conn.request(b"x")
        run.conn.data_received(CHUNKED + _chunked(EVENTS[:1], last=b""))
        await head
        run.conn.set_sink(lambda pieces, ns: run.body.extend(pieces))
        run.conn.data_received(b"q\r\n")
        await run.conn.wait()

    with pytest.raises(BadFraming):
        asyncio.run(go())
    assert run.body == EVENTS[:1] and run.transport.closed and not run.conn.keep


def test_content_length_body_then_the_connection_is_kept() -> None:
    head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\n\r\n"
    run, got, ended = _read([head + b"overl", b"oaded", b"!"])
    assert got.status == 503 and ended and b"".join(run.body) == b"overloaded!"
    assert run.conn.keep


def test_a_body_to_the_close_is_not_kept() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    run, _, ended = _read([head + EVENTS[0], EVENTS[1]], eof=True)
    assert ended and run.body == EVENTS[:2] and not run.conn.keep


@pytest.mark.parametrize(
    ("head", "keep"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
    ],
)
def test_keep_alive_as_the_response_says(head: bytes, keep: bool) -> None:
    run, _, ended = _read([head])
    assert ended and run.conn.keep is keep and run.body == []


def test_an_interim_response_is_skipped() -> None:
    run, head, ended = _read([b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED + _chunked(EVENTS)])
    assert head.status == 200 and ended and run.body == EVENTS


@pytest.mark.parametrize(
    "raw",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 2x0 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nbad\r\n\r\n"],
)
def test_what_is_not_a_response_head_fails(raw: bytes) -> None:
    with pytest.raises(BadHead):
        _read([raw])


def test_a_close_before_any_byte_and_one_mid_body_are_told_apart() -> None:
    run = _Run()

    async def before() -> None:
        head = run.conn.request(b"x")
        run.conn.connection_lost(None)
        await head

    with pytest.raises(ConnectionCut) as cut:
        asyncio.run(before())
    assert cut.value.before_response

    with pytest.raises(ConnectionCut) as cut:
        _read([CHUNKED + _chunked(EVENTS[:1], last=b"")], eof=True)
    assert not cut.value.before_response

    length = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"
    with pytest.raises(ConnectionCut):
        _read([length], eof=True)


def test_the_pool_reuses_a_kept_connection_and_never_one_the_server_closed() -> None:
    async def go(url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        pool = H1Pool(host, int(port), 5.0)
        request = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
        conn = await pool.acquire()
        head = await conn.request(request)
        conn.set_sink(lambda pieces, ns: None)
        assert head.status == 200 and await conn.wait()
        pool.release(conn)
        again = await pool.acquire()
        assert again is conn and again.reused
        again.close()  # as a server's close would leave it
        pool.release(again)
        fresh = await pool.acquire()
        assert fresh is not conn and not fresh.reused
        pool.release(fresh)
        pool.close()

    with serve_in_thread(ServerConfig()) as (url, _):
        asyncio.run(go(url))


def test_the_pool_says_why_it_cannot_connect() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def go() -> None:
        await H1Pool("127.0.0.1", port, 5.0).acquire()

    with pytest.raises(OSError):
        asyncio.run(go())


def test_good_chunks_and_a_break_in_one_read_keep_the_good_ones() -> None:
    """aiohttp delivers the events before a broken chunk size; so does `h1`, so the
    failed request keeps its first token and the tokens it streamed."""
    run = _Run()
    with pytest.raises(BadFraming):
        _read_after_head([_chunked(EVENTS[:2], last=b"zz\r\n")], run)
    assert run.body == EVENTS[:2] and run.transport.closed


@pytest.mark.parametrize(
    ("status", "framing"),
    [(204, b"Transfer-Encoding: chunked"), (304, b"Content-Length: 50")],
)
def test_a_bodiless_status_ends_at_its_head_and_stays_kept(status: int, framing: bytes) -> None:
    run, head, ended = _read([b"HTTP/1.1 %d X\r\n%s\r\n\r\n" % (status, framing)])
    assert head.status == status and ended and run.conn.keep and run.body == []


def test_the_pool_never_hands_out_a_connection_it_may_not_keep() -> None:
    """Bytes that came while a connection sat idle, and a request that asked the server to
    close it, each leave it out of the pool: closed, not held open."""

    async def go(url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        pool = H1Pool(host, int(port), 5.0)
        request = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
        conn = await pool.acquire()
        conn.set_sink(lambda pieces, ns: None)
        await conn.request(request)
        assert await conn.wait()
        pool.release(conn)
        conn.data_received(b"stray")  # a byte with no request out
        fresh = await pool.acquire()
        assert fresh is not conn and conn.closed
        fresh.set_sink(lambda pieces, ns: None)
        await fresh.request(request)
        assert await fresh.wait() and fresh.keep
        pool.release(fresh, keep=False)  # its request said `Connection: close`
        last = await pool.acquire()
        assert fresh.closed and last is not fresh
        last.close()
        pool.close()

    with serve_in_thread(ServerConfig()) as (url, _):
        asyncio.run(go(url))


def _read_after_head(reads: list[bytes], run: _Run | None = None) -> _Run:
    """The head alone, then the sink set, then each read: each takes the way a live stream's do
    (on `run`, a fresh one by default: given, what it read is there when a read raises)."""
    run = _Run() if run is None else run

    async def go() -> None:
        head = run.conn.request(b"x")
        run.conn.data_received(CHUNKED)
        await head
        run.conn.set_sink(lambda pieces, ns: run.body.extend(pieces))
        for data in reads:
            run.conn.data_received(data)
        await run.conn.wait()

    asyncio.run(go())
    return run


def test_reads_of_one_whole_chunk_each_read_as_the_long_way_does() -> None:
    reads = [
        b"5\r\nhello\r\n",
        b"0005\r\nworld\r\n",
        b"A\r\n" + b"x" * 10 + b"\r\n",
        b"5 \r\nspace\r\n",  # a size line the quick way leaves to the long one
        b"5;e=1\r\nexten\r\n",
        b"3\r\nab",  # a chunk cut across reads, then whole chunks again
        b"c\r\n",
        b"2\r\nhi\r\n",
        b"0\r\n\r\n",
    ]
    run = _read_after_head(reads)
    assert b"".join(run.body) == b"helloworld" + b"x" * 10 + b"spaceextenabchi"
    assert run.conn.keep and not run.transport.closed


@pytest.mark.parametrize("bad", [b"0x5\r\nhello\r\n", b"+5\r\nhello\r\n", b"5\r\nhelloXX"])
def test_a_broken_chunk_in_a_read_of_its_own_fails(bad: bytes) -> None:
    with pytest.raises(BadFraming):
        _read_after_head([b"5\r\nhello\r\n", bad, b"0\r\n\r\n"])
