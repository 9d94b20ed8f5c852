"""loadgen, level 1: a streaming HTTP/1.1 client on `asyncio.Protocol`, for plain http.

Takes a host and port (`H1Pool`), a request's bytes and a callback for its body;
gives the response's head (`H1Head`: status, headers, the moment its last byte was
read) and its body, piece by piece, to the callback, each piece with the
`time.perf_counter_ns()` of the read that brought it, stamped once per read before
anything is parsed. The body is handed over in the socket's callback, not through a
reader task: a streamed token costs no task wakeup. Bodies framed by chunked
transfer encoding, by `Content-Length` or by the connection's close; connections
kept alive (HTTP/1.1 unless `Connection: close`) go back to the pool, one the
server closed is never handed out again. Failures raise an `H1Error`: `ConnectionCut`
(the connection closed or reset before the response's end; `before_response` when
no byte of it came), `BadFraming` (the chunked framing broke), `BadHead` (no HTTP
response head). TLS, proxies and redirects are not here (`client` sends those
through aiohttp).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from multidict import CIMultiDict

__all__ = [
    "BadFraming",
    "BadHead",
    "BodySink",
    "ConnectionCut",
    "H1Conn",
    "H1Error",
    "H1Head",
    "H1Pool",
]

# (what one read brought of the body: the data of each whole or partial chunk, in order, none
# empty; the read's perf_counter_ns); what it gives is ignored
BodySink = Callable[[list[bytes], int], object]

_DNS_TTL_S = 300.0  # a host's addresses are looked up again after this, as aiohttp does
_HEAD_LIMIT = 64 << 10  # a response head past this is not one
_SIZE_LINE_LIMIT = 4096  # a chunk-size line (with extensions) past this is broken framing
_HEX = frozenset(b"0123456789abcdefABCDEF")
# phases of a connection
_IDLE, _HEAD, _BODY, _TRAILER, _DONE = 0, 1, 2, 3, 4
# how the body ends
_CHUNKED, _LENGTH, _CLOSE = 0, 1, 2


class H1Error(Exception):
    """The response failed at the HTTP level."""


class ConnectionCut(H1Error):
    """The connection closed, or was reset, before the response's end."""

    def __init__(self, text: str, *, before_response: bool) -> None:
        super().__init__(text)
        self.before_response = before_response


class BadFraming(H1Error):
    """The body's chunked transfer encoding broke."""


class BadHead(H1Error):
    """What came back was not an HTTP/1.x response head."""


@dataclass(frozen=True, slots=True)
class H1Head:
    status: int
    headers: CIMultiDict[str]
    ns: int  # perf_counter_ns of the read that completed the head


def _discard(pieces: list[bytes], ns: int) -> None:
    return None


class H1Conn(asyncio.Protocol):
    """One connection: one request at a time, its response read in `data_received`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # it carried a response before this request
        self.got_bytes = False  # some byte of the current response came
        self.keep = False  # the connection may carry another request after this response
        self._phase = _IDLE
        self._buf = b""
        self._mode = _CLOSE
        self._left = 0  # bytes left in the current chunk, or in the Content-Length body
        self._crlf = False  # a chunk's data ended: its CRLF is due
        self._whole = False  # a chunked body, no part of a chunk held: a read may be one whole
        self._head_fut: asyncio.Future[H1Head] | None = None
        self._sink: BodySink | None = None
        self._early: list[tuple[list[bytes], int]] = []  # body read before a sink was set
        self._waiter: asyncio.Future[bool] | None = None
        self._end: BaseException | bool | None = None  # True: the body ended; else its failure

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        ns = time.perf_counter_ns()
        self.got_bytes = True
        try:
            if self._phase == _BODY:
                sink = self._sink
                if self._whole and sink is not None:
                    # The common read, one whole chunk (an event, as servers write them), at once.
                    eol = data.find(b"\r\n", 0, 10)
                    if eol > 0 and _HEX.issuperset(digits := data[:eol]):
                        end = eol + 2 + int(digits, 16)
                        if end + 2 == len(data) and end > eol + 2 and data[end:] == b"\r\n":
                            sink([data[eol + 2 : end]], ns)
                            return
                self._body(data, ns)
            elif self._phase == _HEAD:
                self._head(data, ns)
            elif self._phase == _TRAILER:
                self._buf += data
                self._trailer()
            else:  # bytes with no request out, or past the response's end
                self.keep = False
        except Exception as err:  # a broken framing, or the sink's own failure
            self._fail(err)

    def eof_received(self) -> bool | None:
        self.closed = True  # the transport closes: never handed out again
        if self._phase == _BODY and self._mode == _CLOSE:
            self.keep = False
            self._finish()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.keep = False
        if self._phase in (_HEAD, _BODY, _TRAILER):
            if self._phase == _BODY and self._mode == _CLOSE and exc is None:
                self._finish()
                return
            cause = f": {type(exc).__name__}: {exc}" if exc is not None else ""
            where = "the response's end" if self.got_bytes else "any response"
            cut = ConnectionCut(
                f"the server closed the connection before {where}{cause}",
                before_response=not self.got_bytes,
            )
            self._fail(cut)

    # --- the client's side ------------------------------------------------------------

    def request(self, data: bytes) -> asyncio.Future[H1Head]:
        """Write one request; gives its response's head."""
        assert self.transport is not None and self._phase in (_IDLE, _DONE)
        loop = asyncio.get_running_loop()
        self._head_fut = fut = loop.create_future()
        self._phase, self._buf, self.got_bytes, self.keep = _HEAD, b"", False, False
        self._whole = False
        self._sink, self._early, self._waiter, self._end = None, [], None, None
        try:
            if self.closed or self.transport.is_closing():
                raise ConnectionResetError("the server closed the kept-alive connection")
            self.transport.write(data)
        except (OSError, RuntimeError) as err:
            text = f"the request could not be written: {type(err).__name__}: {err}"
            self._head_fut = None
            fut.set_exception(ConnectionCut(text, before_response=True))
        return fut

    def set_sink(self, sink: BodySink) -> None:
        """Where the body goes from now on; what came before the call goes first."""
        early, self._early = self._early, []
        self._sink = sink
        for pieces, ns in early:
            if self._sink is not sink:
                break  # the sink woke its reader and stopped listening
            try:
                sink(pieces, ns)
            except Exception as err:
                self._fail(err)
                return

    def wait(self) -> asyncio.Future[bool]:
        """True at the body's end; False once `wake` is called before it; raises its failure."""
        fut = asyncio.get_running_loop().create_future()
        if isinstance(self._end, BaseException):
            fut.set_exception(self._end)
        elif self._end is not None:
            fut.set_result(True)
        else:
            self._waiter = fut
        return fut

    def wake(self, *, drop_rest: bool = True) -> None:
        """The reader goes on; `drop_rest`: the sink has what it needs, the rest of the
        body is dropped."""
        if drop_rest:
            self._sink = _discard
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(False)

    @property
    def ended(self) -> bool:
        return self._end is True

    def close(self) -> None:
        self.keep = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True

    # --- parsing ----------------------------------------------------------------------

    def _head(self, data: bytes, ns: int) -> None:
        buf = self._buf + data if self._buf else data
        while True:
            if buf[:1] in (b"\r", b"\n"):  # empty lines before the status line are skipped,
                buf = buf.lstrip(b"\r\n")  # as aiohttp does (a stray CRLF after a body)
            end, rest = _head_end(buf)
            if end < 0:
                _check_head_start(buf)
                self._buf = buf
                return
            status, version, headers = _parse_head(buf[:end])
            buf = buf[rest:]
            if 100 <= status < 200 and status != 101:
                continue  # an interim response (100 Continue): the real one follows
            break
        self._buf = b""
        self._start_body(status, version, headers)
        fut = self._head_fut
        if fut is not None and not fut.done():
            fut.set_result(H1Head(status, headers, ns))
        if self._phase == _BODY:
            if buf:
                self._body(buf, ns)
        elif self._phase == _DONE:
            if buf:
                self.keep = False
            self._finish()

    def _start_body(self, status: int, version: bytes, headers: CIMultiDict[str]) -> None:
        connection = headers.get("Connection", "").lower()
        if version == b"HTTP/1.1":
            self.keep = "close" not in connection
        else:
            self.keep = "keep-alive" in connection
        if status in (204, 304) or status < 200:  # never a body, whatever its framing
            self._phase = _DONE  # headers say (RFC 9112 §6.3); only 101 gets here of the 1xx
            if status == 101:  # the connection speaks another protocol from now on
                self.keep = False
            return
        coding = headers.get("Transfer-Encoding", "").lower()
        length = headers.get("Content-Length")
        self._phase = _BODY
        if coding:
            if coding.rsplit(",", 1)[-1].strip() == "chunked":
                self._mode, self._left, self._crlf, self._whole = _CHUNKED, -1, False, True
            else:
                self._mode, self.keep = _CLOSE, False
        elif length is not None:
            try:
                size = int(length.strip())
            except ValueError:
                raise BadHead(f"bad Content-Length {length!r}") from None
            if size < 0 or not length.strip().isdigit():
                raise BadHead(f"bad Content-Length {length!r}")
            if len(set(headers.getall("Content-Length"))) > 1:  # the framing is invalid
                raise BadHead("two different Content-Lengths")  # (RFC 9112 §6.3)
            self._mode, self._left = _LENGTH, size
            if size == 0:
                self._phase = _DONE
        else:
            self._mode, self.keep = _CLOSE, False

    def _body(self, data: bytes, ns: int) -> None:
        mode = self._mode
        if mode == _CHUNKED:
            pieces: list[bytes] = []
            try:
                self._dechunk(data, pieces)
            except BadFraming:
                if pieces:  # the events before the break are kept, as aiohttp delivers them
                    self._deliver(pieces, ns)
                raise
        elif mode == _LENGTH:
            left = self._left
            if len(data) >= left:
                if len(data) > left:
                    self.keep = False
                pieces, self._left, self._phase = [data[:left]], 0, _DONE
            else:
                pieces, self._left = [data], left - len(data)
        else:
            pieces = [data]
        if pieces and pieces[0]:
            self._deliver(pieces, ns)
        if self._phase == _DONE:
            self._finish()

    def _deliver(self, pieces: list[bytes], ns: int) -> None:
        sink = self._sink
        if sink is None:
            self._early.append((pieces, ns))
        else:
            sink(pieces, ns)

    def _dechunk(self, data: bytes, out: list[bytes]) -> None:
        """The chunks' data in `data` (and what was held) onto `out`, in order, none empty;
        the framing kept in step (what came before a break stays on `out`)."""
        if self._left >= 0 or self._buf or self._crlf:
            self._dechunk_held(data, out)
            return
        # The common reads: whole chunks (an event each, as servers write them).
        pos, size = 0, len(data)
        while True:
            eol = data.find(b"\r\n", pos, pos + 10)
            if eol <= pos or not _HEX.issuperset(digits := data[pos:eol]):
                break
            start = eol + 2
            end = start + int(digits, 16)
            if end == start or end + 2 > size or data[end : end + 2] != b"\r\n":
                break  # the last chunk, or one not whole, or a broken one: the long way
            out.append(data[start:end])
            pos = end + 2
            if pos == size:
                return
        self._dechunk_held(data[pos:] if pos else data, out)

    def _dechunk_held(self, data: bytes, out: list[bytes]) -> None:
        buf = self._buf + data if self._buf else data
        size, pos, left = len(buf), 0, self._left
        while True:
            if left > 0:
                take = min(left, size - pos)
                if take:
                    out.append(buf[pos : pos + take])
                pos += take
                left -= take
                if left:
                    break
                self._crlf = True
            # A framing broken in what came so far fails now, not once more bytes come: a
            # server that sent its events unframed sends no CRLF, then waits.
            if self._crlf:
                if not b"\r\n".startswith(buf[pos : pos + 2]):
                    raise BadFraming("a chunk's data did not end in CRLF")
                if size - pos < 2:
                    break
                pos += 2
                self._crlf = False
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                _check_size_line_start(buf[pos:])
                break
            digits = buf[pos:eol].split(b";", 1)[0].strip(b" \t")
            if not digits or not _HEX.issuperset(digits):
                raise BadFraming(f"a bad chunk size {buf[pos:eol][:40]!r}")
            pos = eol + 2
            left = int(digits, 16)
            if left == 0:
                self._phase, self._whole = _TRAILER, False
                self._buf = buf[pos:]
                self._left = -1
                self._trailer(final=False)
                return
        self._left = left if left > 0 else -1
        self._buf = buf[pos:]
        self._whole = left <= 0 and not self._crlf and not self._buf

    def _trailer(self, *, final: bool = True) -> None:
        buf = self._buf
        if buf.startswith(b"\r\n"):
            rest = buf[2:]
        else:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _HEAD_LIMIT:
                    raise BadFraming("the chunked body's trailer never ended")
                return
            rest = buf[end + 4 :]
        if rest:
            self.keep = False
        self._buf = b""
        self._phase = _DONE
        if final:
            self._finish()

    def _finish(self) -> None:
        """The body ended."""
        self._phase = _DONE
        if self._end is None:
            self._end = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def _fail(self, err: BaseException) -> None:
        self.keep, self._whole = False, False
        if self._end is None:
            self._end = err
        head = self._head_fut
        if head is not None and not head.done():
            head.set_exception(err)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True


def _check_size_line_start(line: bytes) -> None:
    """A chunk-size line whose CRLF has not come: fails where what came cannot start one
    (before its extensions: hex digits, and spaces around them)."""
    if len(line) > _SIZE_LINE_LIMIT:
        raise BadFraming("a chunk-size line too long")
    digits = line.partition(b";")[0].strip(b" \t\r")
    if digits and not _HEX.issuperset(digits):
        raise BadFraming(f"a bad chunk size {line[:40]!r}")


def _head_end(buf: bytes) -> tuple[int, int]:
    """Where the response head in `buf` ends and what follows it starts: at its first empty
    line, lines ended by CRLF or by a bare LF (RFC 9112 §2.2, as aiohttp reads them);
    (-1, -1) while no empty line came."""
    crlf = buf.find(b"\n\r\n")
    lf = buf.find(b"\n\n", 0, crlf + 1 if crlf >= 0 else len(buf))  # one before it
    if lf >= 0:
        end, rest = lf, lf + 2
    elif crlf >= 0:
        end, rest = crlf, crlf + 3
    else:
        return -1, -1
    # the head's last line without its CR: its value (or a status line without headers)
    return (end - 1 if buf[end - 1 : end] == b"\r" else end), rest


def _check_head_start(buf: bytes) -> None:
    """A response head whose end has not come: fails where what came cannot start one (a
    service that is not HTTP answers a line of its own, then waits)."""
    if len(buf) > _HEAD_LIMIT:
        raise BadHead(f"no response head within {_HEAD_LIMIT} bytes")
    eol = buf.find(b"\n")
    if eol >= 0:
        _parse_status(buf[:eol].removesuffix(b"\r"))
    elif not b"HTTP/".startswith(buf[:5]):
        raise BadHead(f"not an HTTP/1.x response: {buf[:80]!r}")


def _parse_status(line: bytes) -> tuple[int, bytes]:
    """The status line's code and HTTP version."""
    version, _, rest = line.partition(b" ")
    code = rest[:3]  # three digits, then a space and the reason, or nothing
    if not version.startswith(b"HTTP/1.") or not code.isdigit() or rest[3:4] not in (b"", b" "):
        raise BadHead(f"not an HTTP/1.x response: {line[:80]!r}")
    return int(code), version


def _parse_head(raw: bytes) -> tuple[int, bytes, CIMultiDict[str]]:
    lines = raw.split(b"\r\n")
    if raw.count(b"\n") != len(lines) - 1:  # some line ends in a bare LF
        lines = [line.removesuffix(b"\r") for line in raw.split(b"\n")]
    code, version = _parse_status(lines[0])
    return code, version, _parse_fields(lines[1:])


def _parse_fields(lines: list[bytes], *, unfolded: bool = False) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            if headers and not unfolded and line[:1] in (b" ", b"\t"):  # an obs-fold
                return _parse_fields(_unfold(lines), unfolded=True)
            raise BadHead(f"a bad header line {line[:80]!r}")
        headers.add(name.decode("latin-1"), value.strip(b" \t").decode("latin-1"))
    return headers


def _unfold(lines: list[bytes]) -> list[bytes]:
    """Header lines, each that starts with a space or tab (an obs-fold) put on the one
    before it after a space (RFC 9112 §5.2, as aiohttp reads it)."""
    out = lines[:1]
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            out[-1] = b"%s %s" % (out[-1].rstrip(b" \t"), line.strip(b" \t"))
        else:
            out.append(line)
    return out


class H1Pool:
    """Connections to one host and port; kept-alive ones are reused, latest first."""

    def __init__(self, host: str, port: int, connect_timeout_s: float) -> None:
        self.host = host
        self.port = port
        self.host_header = f"{host}:{port}"  # what the requests' Host header says
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[H1Conn] = []
        self._addrs: list[tuple[int, str]] = []  # the host resolved: (family, address)
        self._resolved_at = 0.0

    async def acquire(self, *, fresh: bool = False) -> H1Conn:
        """A kept-alive connection the server has not closed, else a new one (raises
        `TimeoutError` past the connect timeout and `OSError` when it cannot connect)."""
        idle = self._idle
        while idle and not fresh:
            conn = idle.pop()
            if not conn.closed and conn.keep:
                conn.reused = True
                return conn
            conn.close()  # bytes came while it sat idle, or the server closed it
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout_s):
            now = time.monotonic()
            if not self._addrs or now - self._resolved_at > _DNS_TTL_S:
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
                self._addrs = [(family, str(addr[0])) for family, _, _, _, addr in infos]
                self._resolved_at = now
            error: OSError | None = None
            for family, address in self._addrs:
                try:
                    _, conn = await loop.create_connection(
                        H1Conn, address, self.port, family=family
                    )
                    return conn
                except OSError as err:
                    error = error or err
            raise error or OSError(f"{self.host} resolved to no address")

    def release(self, conn: H1Conn, *, keep: bool = True) -> None:
        """Back to the pool once its response ended and it may carry another; else closed
        (`keep=False`: its request asked the server to close it)."""
        if keep and conn.keep and conn.ended and not conn.closed:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
