"""What `loadgen.h1` writes and how it keeps connections, seen by a raw socket server.

The server records each request's bytes and answers with a fixed response, so the
request line, the headers and the reuse of connections are what the client really sent
(each compared with aiohttp's, which https and redirects still use).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from infertriage.loadgen.client import ClientConfig, RequestClient, make_session
from infertriage.schemas import ErrorKind, RequestRecord

from .conftest import READERS, _fetch_one, spec

STREAM = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"%x\r\n%s\r\n0\r\n\r\n"
) % (len(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'),
     b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n')  # fmt: skip


class _Recorder:
    """A loopback server: one thread per connection, each request's head recorded."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.heads: list[tuple[int, bytes]] = []  # (connection number, request head)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)  # `accept` wakes to see the socket closed
        self.port = self.sock.getsockname()[1]
        self._conns = 0

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            self._conns += 1
            threading.Thread(target=self._one, args=(conn, self._conns), daemon=True).start()

    def _one(self, conn: socket.socket, number: int) -> None:
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\r\n\r\n" in buf:
                    head, _, rest = buf.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    if len(rest) < length:
                        break
                    buf = rest[length:]
                    self.heads.append((number, head))
                    conn.sendall(self.answer)


@contextmanager
def _recording(answer: bytes = STREAM) -> Iterator[_Recorder]:
    server = _Recorder(answer)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.sock.close()
        thread.join(timeout=5)


def _headers(head: bytes) -> list[bytes]:
    return head.split(b"\r\n")[1:]


@pytest.mark.parametrize("reader", READERS)
def test_a_users_host_header_replaces_the_clients_own(reader: str) -> None:
    """An ingress routing on Host (KServe, Istio) sees the one the user gave."""
    with _recording() as server:
        record = _fetch_one(
            f"http://127.0.0.1:{server.port}", reader=reader, headers=(("Host", "m.example.com"),)
        )
    assert record.ok, record.error
    hosts = [h for h in _headers(server.heads[0][1]) if h.lower().startswith(b"host:")]
    assert hosts == [b"Host: m.example.com"]


@pytest.mark.parametrize("reader", READERS)
def test_the_request_target_is_percent_encoded(reader: str) -> None:
    with _recording() as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}/m\u00f3del", reader=reader)
    assert record.ok, record.error
    assert server.heads[0][1].split(b"\r\n")[0] == b"POST /m%C3%B3del/v1/chat/completions HTTP/1.1"


@pytest.mark.parametrize(
    ("status", "framing"),
    [(204, b"Transfer-Encoding: chunked"), (304, b"Content-Length: 50")],
)
@pytest.mark.parametrize("reader", READERS)
def test_a_bodiless_status_with_a_framing_header_ends_at_its_head(
    status: int, framing: bytes, reader: str
) -> None:
    """204 and 304 never have a body (RFC 9112 6.3), whatever they say of one: an HTTP
    error at once, not a stall until the stall time-out."""
    answer = b"HTTP/1.1 %d X\r\n%s\r\n\r\n" % (status, framing)
    with _recording(answer) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader, stall_timeout_s=30)
    assert record.error_kind is ErrorKind.HTTP and record.http_status == status
    assert record.fault == f"http_{status // 100}xx"


@pytest.mark.parametrize("reader", READERS)
def test_a_switching_protocols_answer_ends_at_its_head(reader: str) -> None:
    """101 has no body (RFC 9112 6.3) and the server, holding the connection open for
    another protocol, sends nothing more: an HTTP error at once, not a stall until the
    stall time-out, and the connection never reused."""
    answer = b"HTTP/1.1 101 Switching\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    with _recording(answer) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader, stall_timeout_s=30)
    assert record.error_kind is ErrorKind.HTTP and record.http_status == 101
    assert record.fault == "http_1xx"


@pytest.mark.parametrize("status_line", [b"HTTP/1.1 2000 OK", b"HTTP/1.1 200OK"])
@pytest.mark.parametrize("reader", READERS)
def test_a_status_code_run_on_past_three_digits_is_no_response(
    status_line: bytes, reader: str
) -> None:
    """Neither `2000` nor `200OK` is status 200: not a response, as aiohttp says, and
    never a success."""
    with _recording(status_line + STREAM.partition(b"\r\n")[2]) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader)
    assert record.error_kind is ErrorKind.CONNECT and record.fault == "protocol"
    assert record.http_status is None


@pytest.mark.parametrize("reader", READERS)
def test_a_head_whose_lines_end_in_a_bare_lf_is_read(reader: str) -> None:
    """A recipient may take a bare LF for a line's end (RFC 9112 2.2), and aiohttp does:
    such a server's stream is measured, not failed at its head."""
    head, _, body = STREAM.partition(b"\r\n\r\n")
    with _recording(head.replace(b"\r\n", b"\n") + b"\n\n" + body) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader)
    assert record.ok, record.error_text
    assert record.http_status == 200 and record.output_tokens == 1


@pytest.mark.parametrize("reader", READERS)
def test_a_header_folded_onto_a_second_line_is_one_value(reader: str) -> None:
    """An obs-fold (a header line that starts with a space) goes on the value before it:
    a user agent must read it so (RFC 9112 5.2), and aiohttp does; h1 failed the head.
    h1 puts one space for the fold, aiohttp keeps its leading spaces."""
    head, _, body = STREAM.partition(b"\r\n\r\n")
    folded = head + b"\r\nX-Request-Id: req\r\n  -1\r\n\r\n" + body
    with _recording(folded) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader)
    assert record.ok, record.error_text
    assert (record.server_request_id or "").split() == ["req", "-1"]  # aiohttp keeps the spaces


@pytest.mark.parametrize(
    "body",
    [
        b'data: {"choices":[]}\n\n',  # events unframed under a chunked head: no CRLF comes
        b"5\r\nhelloX",  # a chunk's data not ended by CRLF, and nothing after
    ],
)
@pytest.mark.parametrize("reader", READERS)
def test_a_chunked_framing_broken_before_any_line_end_fails_at_once(
    body: bytes, reader: str
) -> None:
    """The server sends what breaks the framing, then waits: a broken framing at once,
    as aiohttp's parser says, not a stall until the stall time-out."""
    head = STREAM.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"
    with _recording(head + body) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader, stall_timeout_s=30)
    assert record.error_kind is not ErrorKind.TIMEOUT and not record.ok
    if reader == "h1":
        assert record.error_kind is ErrorKind.STREAM and record.fault == "bad_transfer"


@pytest.mark.parametrize(
    "answer",
    [b"220 mail.example.com ESMTP\r\n", b"SSH-2.0-OpenSSH_9.6", b"HTTP/1.1 2x0 OK\r\n"],
)
@pytest.mark.parametrize("reader", READERS)
def test_an_answer_that_cannot_start_a_response_fails_at_once(answer: bytes, reader: str) -> None:
    """A service that is not HTTP answers a line of its own and waits: no response, at
    once, as aiohttp's parser says, not a stall until the stall time-out."""
    with _recording(answer) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader, stall_timeout_s=30)
    assert record.error_kind is ErrorKind.CONNECT and record.fault == "protocol"


@pytest.mark.parametrize("reader", READERS)
def test_two_different_content_lengths_are_no_response(reader: str) -> None:
    """A response whose Content-Lengths differ has no framing: a user agent must discard
    it and close the connection (RFC 9112 6.3), as aiohttp does; h1 read the first."""
    body = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n%s" % (len(body), body)
    )
    with _recording(answer) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader)
    assert record.error_kind is ErrorKind.CONNECT and record.fault == "protocol"


@pytest.mark.parametrize("reader", READERS)
def test_empty_lines_before_the_status_line_are_skipped(reader: str) -> None:
    """A stray CRLF before a response (one a server left after its last body) is no
    line of the head: aiohttp skips it, and so does h1, which failed the response."""
    with _recording(b"\r\n\r\n" + STREAM) as server:
        record = _fetch_one(f"http://127.0.0.1:{server.port}", reader=reader)
    assert record.ok, record.error_text


def _fetch_in_turn(url: str, num_requests: int) -> list[RequestRecord]:
    """Requests one after another through one client (its connections kept between them)."""
    cfg = ClientConfig(base_url=url + "/v1", model="test-model")

    async def go() -> list[RequestRecord]:
        records = []
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            try:
                for n in range(num_requests):
                    start = time.perf_counter_ns()
                    state = client.new_state(spec(), start)
                    await client.fetch(state, f"req-{n}")
                    records.append(state.record(f"req-{n}", start))
            finally:
                await client.aclose()
        return records

    return asyncio.run(go())


def test_a_redirect_to_a_port_that_refuses_is_not_resent_as_a_stale_connection() -> None:
    """The redirect's target refused the connection: a connect that failed, not a kept-alive
    connection the server had closed, though the first hop reused one. It was resent as
    one (the server asked twice), and from then on every request opened a connection."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    answer = (
        b"HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:%d/v1/chat/completions\r\n"
        b"Content-Length: 0\r\n\r\n" % dead
    )
    with _recording(answer) as server:
        records = _fetch_in_turn(f"http://127.0.0.1:{server.port}", 3)
    assert [(r.error_kind, r.fault) for r in records] == [(ErrorKind.CONNECT, "connect")] * 3
    assert not any("retried" in r.labels for r in records)
    assert len(server.heads) == 4  # h1's first, then aiohttp's: one each
