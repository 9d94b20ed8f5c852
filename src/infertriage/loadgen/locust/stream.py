"""loadgen, level 2: one streamed request from a Locust user, measured as `client` measures it.

Takes a `ClientConfig`, a `TextRenderer` and a `StreamState` (`loadgen.response`: it
reads the headers, and its `SseParser` and `on_events` turn bytes into chunks); gives
the filled state. Runs in a gevent greenlet: the request (`loadgen.request`'s body and
headers) goes out on a gevent socket, kept alive and reused as aiohttp's pool would,
and geventhttpclient's HTTP parser (the one Locust's `FastHttpUser` uses) reads the
answer. Every `recv` is stamped with `perf_counter_ns` the moment it returns, before
any parsing, and its body bytes (decoded, where the server compressed them though
asked not to) are one feed of the SSE parser, as `client` stamps each aiohttp read —
so TTFT and ITL mean the same in both. Failures never raise; each becomes the
`ErrorKind` and fault `client` gives it (connect, connect_timeout, slow_headers,
stall, timeout, reset, protocol, bad_transfer, http_Nxx, and what `response` finds in
a body), and a send that met a closed kept-alive connection before any answer goes
once more on a fresh one, labelled `retried`.
"""

from __future__ import annotations

import socket
import time
import zlib
from urllib.parse import urlsplit

import gevent
import gevent.socket
import gevent.ssl
from geventhttpclient.response import HTTPParseError, HTTPResponse

from infertriage.loadgen.request import ClientConfig, request_body, request_headers
from infertriage.loadgen.response import (
    ERROR_TEXT_LIMIT,
    REPLICA_HEADERS,
    BodyMode,
    StreamState,
    body_text,
)
from infertriage.loadgen.sse import SseEventTooLarge
from infertriage.loadgen.tracecontext import TRACEPARENT, new_trace
from infertriage.schemas import ErrorKind
from infertriage.workload import TextRenderer

__all__ = ["GeventClient"]

_READ_SIZE = 65536
_JSON_BODY_LIMIT = ERROR_TEXT_LIMIT * 64
_DONE_GRACE_S = 0.5  # after [DONE], the body's end is awaited this long, to reuse the socket


class _Response(HTTPResponse):
    """geventhttpclient's parser with the body handed over as it is parsed."""

    def __init__(self) -> None:
        super().__init__(method="POST")
        self.pieces: list[bytes] = []
        self.size = 0

    def _on_body(self, buf: bytearray) -> None:
        self.pieces.append(bytes(buf))
        self.size += len(buf)

    def take(self) -> bytes:
        data = b"".join(self.pieces)
        self.pieces.clear()
        return data


class _ConnectError(Exception):
    def __init__(self, kind: ErrorKind, fault: str, text: str) -> None:
        super().__init__(text)
        self.kind, self.fault = kind, fault


class _RequestTimeout(Exception):
    """The whole request outlasted `timeout_s` (gevent's timer raises it in the greenlet)."""


class GeventClient:
    """Sends specs over kept-alive gevent sockets and fills their `StreamState`s."""

    def __init__(self, config: ClientConfig, renderer: TextRenderer) -> None:
        self.config = config
        self.renderer = renderer
        url = urlsplit(config.url)
        self._tls = url.scheme == "https"
        self._address = (url.hostname or "127.0.0.1", url.port or (443 if self._tls else 80))
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        headers = {"Host": url.netloc, **request_headers(config)}
        self._head = f"POST {path} HTTP/1.1\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        self._idle: list[socket.socket] = []
        self._fresh_only = False  # set once the server is seen closing kept-alive connections
        self.num_reads = 0
        self.num_events = 0

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def fetch(self, state: StreamState, request_id: str) -> None:
        """Send the request and read its stream into `state`; only a greenlet kill escapes."""
        try:
            body = request_body(self.config, self.renderer, state.spec)
        except Exception as err:  # a spec the client cannot encode is the user's data
            state.fail(ErrorKind.CLIENT, "encode", f"{type(err).__name__}: {err}")
            return
        state.trace_id, traceparent = new_trace()  # the server's spans join on it
        head = (
            f"{self._head}X-Request-Id: {request_id}\r\n{TRACEPARENT}: {traceparent}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        payload = head.encode("latin-1") + body
        state.sent_ns = state.last_ns = time.perf_counter_ns()
        timer = gevent.Timeout(self.config.timeout_s, _RequestTimeout)
        timer.start()
        try:
            try:
                self._exchange(state, payload)
            except (OSError, HTTPParseError) as err:
                if not (state.headers_ns is None and state.reused and not state.retried):
                    raise
                # The kept-alive socket was closed by the server before any answer: once
                # more on a fresh one, as `client` does, and from now on one per request.
                state.retried, self._fresh_only, state.reused = True, True, False
                state.retry_cause = state.redact(f"{type(err).__name__}: {err}")[:120]
                state.sent_ns = state.last_ns = time.perf_counter_ns()
                self._exchange(state, payload)
        except _ConnectError as err:
            state.fail(err.kind, err.fault, state.redact(str(err)))
        except _RequestTimeout:
            fault = "slow_headers" if state.headers_ns is None else "timeout"
            text = f"the request outlasted its {self.config.timeout_s:g} s timeout"
            state.fail(ErrorKind.TIMEOUT, fault, text)
        except TimeoutError:
            fault = "slow_headers" if state.headers_ns is None else "stall"
            state.fail(ErrorKind.TIMEOUT, fault, f"no byte for {self.config.stall_timeout_s:g} s")
        except (OSError, HTTPParseError) as err:
            before = state.headers_ns is None
            kind = ErrorKind.CONNECT if before else ErrorKind.STREAM
            text = f"{type(err).__name__}: {err}"
            if not isinstance(err, HTTPParseError):
                state.fail(kind, "reset", text)
            elif before:
                state.fail(kind, "protocol", text)
            else:  # the body's framing: a bad chunked transfer encoding
                state.fail(kind, "bad_transfer", f"the body's framing broke: {text}")
        finally:
            timer.close()

    def _take(self) -> tuple[socket.socket, bool]:
        if self._idle and not self._fresh_only:
            return self._idle.pop(), True
        cfg = self.config
        try:
            sock = gevent.socket.create_connection(self._address, timeout=cfg.connect_timeout_s)
            if self._tls:
                context = gevent.ssl.create_default_context()
                sock = context.wrap_socket(sock, server_hostname=self._address[0])
        except TimeoutError as err:
            raise _ConnectError(ErrorKind.TIMEOUT, "connect_timeout", repr(err)) from err
        except OSError as err:
            text = f"{type(err).__name__}: {err}"
            raise _ConnectError(ErrorKind.CONNECT, "connect", text) from err
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, False

    def _exchange(self, state: StreamState, payload: bytes) -> None:
        sock, state.reused = self._take()
        keep = False
        try:
            sock.settimeout(self.config.stall_timeout_s)
            sock.sendall(payload)
            keep = self._read(state, sock)
        finally:
            if keep and not self._fresh_only:
                self._idle.append(sock)
            else:
                sock.close()

    def _read(self, state: StreamState, sock: socket.socket) -> bool:
        """Read the answer into `state`; true when the socket can carry the next request."""
        resp, mode = _Response(), BodyMode.STREAM
        perf = time.perf_counter_ns
        reads = num_events = 0
        while not resp.message_complete:
            try:
                data = sock.recv(_READ_SIZE)
            except OSError:
                if state.done_ns is None:
                    raise
                break  # past [DONE]: the socket is not reused, the request is whole
            ns = perf()
            if not data:
                resp.feed(b"")  # the end of a body delimited by the connection's close
                break
            state.last_ns = ns
            resp.feed(data)
            if state.headers_ns is None and resp.headers_complete:
                mode = _on_headers(state, resp, ns)
            if mode is not BodyMode.STREAM:
                if mode is BodyMode.DONE or resp.size >= _JSON_BODY_LIMIT:
                    break
                continue
            num = _stream(state, resp.take(), ns)
            if num < 0:
                mode = BodyMode.DONE
                break
            if state.done_ns is not None:
                sock.settimeout(_DONE_GRACE_S)  # the last read: not counted, as in `client`
                continue
            reads += 1
            num_events += num
        self.num_reads += reads
        self.num_events += num_events
        if state.headers_ns is None:
            raise ConnectionResetError("the server closed the connection before answering")
        if mode is BodyMode.DONE:
            return False  # given up on: the rest of the body is not read, nor the socket kept
        self._settle(state, resp, mode)
        return bool(resp.message_complete and not resp.should_close())

    @staticmethod
    def _settle(state: StreamState, resp: _Response, mode: BodyMode) -> None:
        if mode is BodyMode.ERROR:
            text = body_text(resp.take()[:ERROR_TEXT_LIMIT], state.encoding)
            state.http_error(resp.status_code, text)
        elif mode is BodyMode.JSON:
            state.json_body(resp.take())
        else:
            state.end_stream()


def _header(resp: _Response, name: str) -> str:
    value = resp.get(name) or ""
    return value if isinstance(value, str) else value[0]  # a repeated header: its first


def _on_headers(state: StreamState, resp: _Response, ns: int) -> BodyMode:
    return state.on_headers(
        ns,
        resp.status_code,
        _header(resp, "content-type"),
        _header(resp, "content-encoding"),
        _header(resp, "x-request-id"),
        replica=next((v for name in REPLICA_HEADERS if (v := _header(resp, name))), None),
    )


def _stream(state: StreamState, data: bytes, ns: int) -> int:
    """One read's body bytes into `state`: how many events, or -1 when the body was given up."""
    if state.done_ns is not None:
        return 0  # what follows [DONE] does not count
    try:
        if state.decode is not None:
            data = state.decode(data)
        if not state.head:
            state.take_head(data)
        events = state.parser.feed(data)
    except (SseEventTooLarge, zlib.error) as err:
        state.body_failed(err)
        return -1
    if events:
        state.on_events(events, ns)
    return len(events)
