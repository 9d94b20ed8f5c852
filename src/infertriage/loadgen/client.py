"""loadgen, level 2: one streaming request to an OpenAI-compatible server, measured.

Takes a `ClientConfig` (base URL, model, endpoint, key, headers, timeouts), an
aiohttp session and a `RequestSpec`; gives a `RequestRecord`. A plain-http URL
is sent and read by `h1` (its own connections, each read handled in the
socket's callback: no task wakeup per token); https, a URL with a user and
password, and a server that redirects, by the aiohttp session. TTFT is the
field's (vLLM's `bench serve`, GuideLLM): the send is stamped just before the
request is written (or goes to aiohttp), connection set-up included, and every
read is stamped with `time.perf_counter_ns()` the moment it returns, before any
parsing; the events of one read become one chunk per kind (reasoning or
output) at that stamp (`response.StreamState` reads them, for both load
engines). Token counts come from `usage` (`stream_options.include_usage`, and
per chunk with `continuous_usage_stats` where the server offers it). Failures
never raise: each becomes an `ErrorKind` with a finer `fault` — here connect,
connect_timeout, reset, stall, slow_headers, timeout, protocol and
`bad_transfer` (the body's framing broke: a bad chunked transfer encoding),
and what a body holds (`response`'s faults: malformed_event, bad_shape,
html_page, truncated, …). A request is sent once; the one exception is a
send that failed on a kept-alive connection (`h1`'s pool, or aiohttp's
trace, says it was one) before any answer, which goes once more on a fresh
connection and is labelled `retried`. The API key is sent in the `Authorization` header and
appears in no record, text or repr. The body is asked for uncompressed
(`Accept-Encoding: identity`); one compressed anyway is decoded here.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yarl
from aiohttp.http_exceptions import HttpProcessingError

from infertriage.loadgen.h1 import BadFraming, ConnectionCut, H1Error, H1Pool
from infertriage.loadgen.h1read import DONE_GRACE_S, read_some, read_stream, stream_reads
from infertriage.loadgen.request import (
    ClientConfig,
    Endpoint,
    prompt_fields,
    request_body,
    request_headers,
)
from infertriage.loadgen.response import (
    ERROR_TEXT_LIMIT,
    BodyMode,
    StreamState,
    body_text,
    replica_of,
)
from infertriage.loadgen.sse import SseEventTooLarge
from infertriage.loadgen.tracecontext import TRACEPARENT, new_trace
from infertriage.net import make_redirect_guard
from infertriage.schemas import ErrorKind
from infertriage.schemas.redact import Redactor
from infertriage.workload import RequestSpec, TextRenderer

__all__ = [
    "ClientConfig",
    "Endpoint",
    "RequestClient",
    "StreamState",
    "prompt_fields",
    "request_body",
    "request_headers",
]

# The watchdog looks this often at most; timeouts are found within one look.
_WATCH_INTERVAL_S = 0.25
# aiohttp's words for a body cut by the connection's close (not a framing that broke).
_CUT_SHORT = "Response payload is not completed"


class _BrokenFraming(aiohttp.ClientPayloadError):
    """The connection closed after aiohttp's parser gave up on the body's framing."""


class _NoConnection(Exception):
    """`h1`'s connect failed: `TimeoutError` past the connect timeout, else an `OSError`."""

    def __init__(self, err: BaseException, where: str) -> None:
        super().__init__(f"cannot connect to {where}: {type(err).__name__}: {err}")
        self.timed_out = isinstance(err, TimeoutError)


class RequestClient:
    """Sends specs over one aiohttp session and fills their `StreamState`s."""

    def __init__(
        self,
        config: ClientConfig,
        session: aiohttp.ClientSession,
        renderer: TextRenderer | None = None,
    ) -> None:
        self.config = config
        self.session = session
        self.renderer = renderer or TextRenderer()
        self._chat = config.endpoint is Endpoint.CHAT
        self._url = config.url
        self._headers = request_headers(config)
        self._redact = Redactor.of(config.api_key, config.headers)
        self._active: dict[StreamState, asyncio.Task[Any]] = {}
        # Plain http goes through `h1` (no reader task per token); https, a URL with a
        # user and password, and a server that redirects go through aiohttp.
        self._pool, self._target = _h1_pool(config)
        self._redirects = False  # set once the server redirected: aiohttp follows them
        self._watchdog: asyncio.Task[None] | None = None
        self._no_keepalive = False  # set once the server is seen closing kept-alive connections
        # From then on a session whose every request opens its own connection: the main
        # session's pool may still hold connections the server has closed.
        self._fresh: aiohttp.ClientSession | None = None
        # Every read and every SSE event, all requests together: events per read > 1 while
        # the server writes one event at a time means the reader runs behind (`client_bound`).
        self.num_reads = 0
        self.num_events = 0

    def body(self, spec: RequestSpec) -> bytes:
        return request_body(self.config, self.renderer, spec)

    def prepare(self, spec: RequestSpec) -> bytes | None:
        """The body, encoded ahead of the send (`runner`'s open loop); None when it cannot
        be: `fetch` encodes it again and records why."""
        try:
            return self.body(spec)
        except Exception:  # the send reports it, with its request
            return None

    def new_state(self, spec: RequestSpec, scheduled_ns: int) -> StreamState:
        state = StreamState(spec, scheduled_ns, chat=self._chat, redact=self._redact)
        if self.config.keep_text:
            state.texts = []
        return state

    async def fetch(self, state: StreamState, request_id: str, body: bytes | None = None) -> None:
        """Send the request (`body`, when encoded ahead) and read its stream into `state`;
        never raises but for cancellation."""
        try:
            body = self.body(state.spec) if body is None else body
        except Exception as err:  # a spec the client cannot encode is the user's data
            state.fail(ErrorKind.CLIENT, "encode", f"{type(err).__name__}: {err}")
            return
        state.trace_id, traceparent = new_trace()  # the server's spans join on it
        headers = {**self._headers, "X-Request-Id": request_id, TRACEPARENT: traceparent}
        send = self._send if self._pool is None or self._redirects else self._send_h1
        # One turn of the loop between encoding and the stamp: pending reads are handled
        # (a server's close of a kept-alive connection among them, so the pool drops it),
        # and requests started together (a closed loop's first burst) all encode before
        # any stamps, so no other request's encoding falls inside this one's TTFT (before
        # Python 3.12 aiohttp writes the body from a task of its own, after the stamp).
        await asyncio.sleep(0)
        task = asyncio.current_task()
        assert task is not None
        self._active[state] = task
        if self._watchdog is None:
            self._watchdog = asyncio.create_task(self._watch())
        state.sent_ns = state.last_ns = time.perf_counter_ns()
        try:
            try:
                await send(state, body, headers)
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, ConnectionCut) as err:
                if not _stale(state, err):
                    raise
                # Proven stale: the request went out on a kept-alive connection, which the
                # server closed before answering anything (llama-server does after every
                # streamed response, though it says keep-alive; so does a keep-alive
                # timeout racing a request). Send it once more on a fresh connection, as
                # HTTP clients do, and from now on open a connection per request. Its
                # TTFT counts from this send; the time lost is in its dispatch lag. A reset
                # on a fresh connection is the server's failure, never sent again.
                state.retried, self._no_keepalive = True, True
                if self._pool is not None:
                    self._pool.close()  # its kept-alive connections are never asked for again
                state.retry_cause = state.redact(f"{type(err).__name__}: {err}")[:120]
                state.reused = False
                state.sent_ns = state.last_ns = time.perf_counter_ns()
                await send(state, body, headers)
        except (
            TimeoutError,
            aiohttp.ClientError,
            HttpProcessingError,
            OSError,
            H1Error,
            _NoConnection,
        ) as err:
            _classify(state, err)
        except asyncio.CancelledError:
            if not state.timed_out:
                raise
            task.uncancel()  # the watchdog's own cancel: a timeout, not the run's end
            limit = self.config.timeout_s if state.timed_out == "timeout" else None
            text = f"no byte for {self.config.stall_timeout_s:g} s"
            if limit is not None:
                text = f"the request outlasted its {limit:g} s timeout"
            state.fail(ErrorKind.TIMEOUT, state.timed_out, text)
        finally:
            self._active.pop(state, None)

    def _session_now(self) -> aiohttp.ClientSession:
        if not self._no_keepalive:
            return self.session
        if self._fresh is None:
            self._fresh = make_session(self.config, force_close=True)
        return self._fresh

    async def aclose(self) -> None:
        """Close the per-request-connection session, if one was opened, and `h1`'s pool."""
        if self._pool is not None:
            self._pool.close()
        if self._fresh is not None:
            await self._fresh.close()
            self._fresh = None

    async def _send(self, state: StreamState, body: bytes, headers: dict[str, str]) -> None:
        session = self._session_now()
        post = session.post(self._url, data=body, headers=headers, trace_request_ctx=state)
        async with post as resp:
            mode = _head_seen(state, time.perf_counter_ns(), resp.status, resp.headers)
            if mode is BodyMode.ERROR:
                await self._http_error(state, resp)
            elif mode is BodyMode.JSON:
                await self._not_streamed(state, resp)
            elif mode is BodyMode.STREAM:
                unwatch = _watch_framing(resp)
                try:
                    await self._read(state, resp)
                finally:
                    unwatch()
            else:
                resp.close()  # refused at its headers: the body is not read, nor the socket kept

    async def _send_h1(self, state: StreamState, body: bytes, headers: dict[str, str]) -> None:
        pool = self._pool
        assert pool is not None
        close = self._no_keepalive
        request = _h1_request(self._target, pool, body, headers, close=close)
        if request is None:  # a header aiohttp refuses (a line break) or frames itself
            await self._send(state, body, headers)
            return
        try:
            conn = await pool.acquire(fresh=close)
        except (TimeoutError, OSError) as err:
            raise _NoConnection(err, f"{pool.host}:{pool.port}") from err
        state.reused = conn.reused
        released = False
        try:
            head = await conn.request(request)
            if head.status in _REDIRECTS and "Location" in head.headers:
                # aiohttp follows it, keeping the user's headers from another origin (`net`)
                conn.close()
                self._redirects, state.reused = True, False
                await self._send(state, body, headers)
                return
            mode = _head_seen(state, head.ns, head.status, head.headers)
            if mode is BodyMode.STREAM:
                counts = [0, 0]
                try:
                    ended = await read_stream(state, conn, counts)
                except (SseEventTooLarge, zlib.error) as err:
                    state.body_failed(err)
                    return
                finally:
                    self.num_reads += counts[0]
                    self.num_events += counts[1]
                if ended:  # free for the next request before this one's end (below)
                    pool.release(conn, keep=not close)
                    released = True
                if state.done_ns is not None:
                    for _ in range(2):  # as `_read`'s two turns
                        await asyncio.sleep(0)
                state.end_stream()
            elif mode is BodyMode.ERROR:
                data, _ = await read_some(conn, ERROR_TEXT_LIMIT)
                state.http_error(head.status, body_text(data, state.encoding))
            elif mode is BodyMode.JSON:
                data, _ = await read_some(conn, ERROR_TEXT_LIMIT * 64)
                state.json_body(data)
        finally:
            if not released:
                pool.release(conn, keep=not close)  # closed unless it ended and may be kept

    async def _watch(self) -> None:
        """One timer for every request in flight, instead of one per read.

        aiohttp's `sock_read` and `total` timeouts reschedule a timer on every chunk; this
        looks a few times a second at each request's last sign of life and its age.
        """
        cfg = self.config
        stall_ns, total_ns = round(cfg.stall_timeout_s * 1e9), round(cfg.timeout_s * 1e9)
        interval = max(0.01, min(_WATCH_INTERVAL_S, cfg.stall_timeout_s / 4, cfg.timeout_s / 4))
        try:
            while self._active:
                await asyncio.sleep(interval)
                now = time.perf_counter_ns()
                for state, task in list(self._active.items()):
                    if state.timed_out:
                        continue
                    if now - state.sent_ns > total_ns:
                        state.timed_out = "timeout"
                    elif now - state.last_ns > stall_ns:
                        state.timed_out = "stall"
                    else:
                        continue
                    if state.headers_ns is None:
                        state.timed_out = "slow_headers"
                    task.cancel()
        finally:
            self._watchdog = None

    async def _http_error(self, state: StreamState, resp: aiohttp.ClientResponse) -> None:
        try:
            data = await resp.content.read(ERROR_TEXT_LIMIT)
        except (TimeoutError, aiohttp.ClientError, HttpProcessingError):
            data = b""
        state.http_error(resp.status, body_text(data, state.encoding))

    async def _not_streamed(self, state: StreamState, resp: aiohttp.ClientResponse) -> None:
        try:
            data = await resp.content.read(ERROR_TEXT_LIMIT * 64)
        except (TimeoutError, aiohttp.ClientError, HttpProcessingError):
            data = b""
        state.json_body(data)

    async def _read(self, state: StreamState, resp: aiohttp.ClientResponse) -> None:
        content = resp.content
        read = content.readany
        protocol, low_water = _quiet_resume(resp)
        counts = [0, 0]
        take = stream_reads(state, counts)
        perf = time.perf_counter_ns
        try:
            while True:
                data = await read()
                ns = perf()
                if not data:
                    break
                # the buffer is drained: the socket may go on, while the connection is still
                # this response's (released at the body's end, it may carry another request)
                if protocol is not None and protocol._reading_paused and resp.connection:
                    protocol.resume_reading()
                if take([data], ns):
                    break  # the last read, with the finish, usage and [DONE] events: not counted
        except (SseEventTooLarge, zlib.error) as err:
            state.body_failed(err)
            resp.close()  # the rest of the body is not read: the connection goes with it
            return
        finally:
            if protocol is not None:
                content._low_water = low_water  # aiohttp's own flow control again
            self.num_reads += counts[0]
            self.num_events += counts[1]
        if state.done_ns is not None:
            await _finish_body(resp)
            # Two turns of the loop before this request's end (its record, the next send): what
            # is waiting, and what the next poll brings, goes first. Other streams' last reads
            # of the same decode step are stamped first (each stamp waited for the finishing
            # work of the streams read before it, which made TPOT long by 1-2 % at 5 ms and
            # 1 ms ITL; one turn took most of it, a second the reads of the next poll), and
            # requests just posted are written first (before Python 3.12 aiohttp writes a
            # request from a task of its own, queued behind this work, inside its TTFT).
            for _ in range(2):
                await asyncio.sleep(0)
        state.end_stream()


async def _finish_body(resp: aiohttp.ClientResponse) -> None:
    """Read to the body's end, briefly, so the connection is reused; nothing after [DONE] counts."""
    try:
        async with asyncio.timeout(DONE_GRACE_S):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, HttpProcessingError):
        resp.close()


def _quiet_resume(resp: aiohttp.ClientResponse) -> tuple[Any, int]:
    """Have the stream's reads resume the socket only when it was paused; gives the
    protocol, whose `_reading_paused` the reader then checks after each read, and the
    body's low-water mark to put back after (None, 0: this aiohttp lacks the fields, and
    its own flow control stays).

    aiohttp 3.14 calls the protocol's `resume_reading` (a parser pass on b"" and the
    transport's resume) for every HTTP chunk a read drains, paused or not: about a
    microsecond per token, the largest cost of a read after the wakeup itself. With the
    body's low-water mark at 0 no drained chunk calls it; the reader resumes a paused
    socket itself, after the read that drained the buffer, before it waits again.
    """
    conn = resp.connection
    protocol = conn.protocol if conn is not None else None
    content = resp.content
    low_water = getattr(content, "_low_water", None)
    if type(low_water) is not int or type(getattr(protocol, "_reading_paused", None)) is not bool:
        return None, 0
    content._low_water = 0
    return protocol, low_water


def _watch_framing(resp: aiohttp.ClientResponse) -> Callable[[], None]:
    """Have a body whose framing breaks fail at once; gives the call that stops watching.

    aiohttp (3.14, its C parser) meets a bad chunk size by closing the connection, and
    leaves the body's reader waiting for bytes that will never come: the request would
    read as a stall after `stall_timeout_s`. On the connection's close, a body not yet
    whole is told so.
    """
    conn = resp.connection
    protocol = conn.protocol if conn is not None else None
    # `closed`, a future on the protocol since aiohttp 3.12.7 (the floor); None until it opens.
    closed = getattr(protocol, "closed", None) if protocol is not None else None
    if protocol is None or closed is None:
        return _nothing
    content = resp.content

    def on_close(_: object) -> None:
        if not content.is_eof() and content.exception() is None:
            cause = protocol.exception()
            content.set_exception(_BrokenFraming(repr(cause)))

    def unwatch() -> None:
        closed.remove_done_callback(on_close)

    closed.add_done_callback(on_close)
    return unwatch


def _nothing() -> None:
    return None


def _stale(state: StreamState, err: BaseException) -> bool:
    """A send failed on a connection the server had already closed: nothing was answered,
    the connection was a kept-alive one, and this request was not resent before. A connect
    that failed is none (a redirect's, after its first hop reused a connection)."""
    if isinstance(err, aiohttp.ClientConnectorError):
        return False
    return state.headers_ns is None and state.reused and not state.retried


async def _on_reuse(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: object) -> None:
    state = ctx.trace_request_ctx
    if isinstance(state, StreamState):
        state.reused = True


def _trace() -> aiohttp.TraceConfig:
    """aiohttp's word on whether a request's connection is a kept-alive one."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_on_reuse)
    return trace


def _classify(state: StreamState, err: BaseException) -> None:
    before_headers = state.headers_ns is None
    text = f"{type(err).__name__}: {err}"
    if isinstance(err, _NoConnection | H1Error):
        _classify_h1(state, err, text)
    elif isinstance(err, aiohttp.ClientConnectorError):
        state.fail(ErrorKind.CONNECT, "connect", text)
    elif isinstance(err, aiohttp.ConnectionTimeoutError):
        state.fail(ErrorKind.TIMEOUT, "connect_timeout", text)
    elif isinstance(err, aiohttp.SocketTimeoutError):
        state.fail(ErrorKind.TIMEOUT, "slow_headers" if before_headers else "stall", text)
    elif isinstance(err, TimeoutError):
        state.fail(ErrorKind.TIMEOUT, "slow_headers" if before_headers else "timeout", text)
    elif _broken_framing(err, before_headers):
        detail = str(err) if isinstance(err, _BrokenFraming) else text
        state.fail(ErrorKind.STREAM, "bad_transfer", f"the body's framing broke: {detail}")
    elif isinstance(err, aiohttp.ClientPayloadError):
        state.fail(ErrorKind.STREAM, "reset", text)
    elif isinstance(err, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | OSError):
        state.fail(ErrorKind.CONNECT if before_headers else ErrorKind.STREAM, "reset", text)
    else:
        kind = ErrorKind.CONNECT if before_headers else ErrorKind.STREAM
        state.fail(kind, "protocol", text)


def _head_seen(state: StreamState, ns: int, status: int, headers: Mapping[str, str]) -> BodyMode:
    """The response's head into `state`, read at `ns` (both readers): how to read its body."""
    return state.on_headers(
        ns,
        status,
        headers.get("Content-Type", ""),
        headers.get("Content-Encoding", ""),
        headers.get("X-Request-Id"),
        replica=replica_of(headers),
    )


_REDIRECTS = frozenset((301, 302, 303, 307, 308))
# A user's header that frames the request: sent through aiohttp, which reconciles it.
_FRAMING_HEADERS = frozenset(("content-length", "transfer-encoding", "connection"))


def _h1_pool(config: ClientConfig) -> tuple[H1Pool | None, str]:
    """`h1`'s pool for a plain-http URL with no user and password, and the request
    target (path and query); None where aiohttp sends."""
    try:
        url = urlsplit(config.url)
        port = url.port or 80
    except ValueError:
        return None, ""
    if url.scheme != "http" or not url.hostname or "@" in url.netloc:
        return None, ""
    if not url.netloc.isascii():
        return None, ""  # an internationalised host: aiohttp encodes it
    target = yarl.URL(config.url).raw_path_qs  # percent-encoded, as aiohttp sends it
    pool = H1Pool(url.hostname, port, config.connect_timeout_s)
    pool.host_header = url.netloc if url.port != 80 else url.netloc.rsplit(":", 1)[0]
    return pool, target


def _h1_request(
    target: str, pool: H1Pool, body: bytes, headers: dict[str, str], *, close: bool
) -> bytes | None:
    """The request's bytes: its line, headers and body; None where a header holds a line
    break (aiohttp refuses it) or frames the request itself (aiohttp reconciles it)."""
    lines = [f"POST {target} HTTP/1.1\r\n"]
    host: str | None = pool.host_header
    for name, value in headers.items():
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
            return None
        lower = name.lower()
        if lower in _FRAMING_HEADERS:
            return None
        if lower == "host":  # the user's Host replaces ours (an ingress routing on it)
            host = None
        lines.append(f"{name}: {value}\r\n")
    if host is not None:
        lines.insert(1, f"Host: {host}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n")
    if close:
        lines.append("Connection: close\r\n")
    lines.append("\r\n")
    return "".join(lines).encode() + body


def _classify_h1(state: StreamState, err: _NoConnection | H1Error, text: str) -> None:
    """`_classify` for `h1`'s failures: the same kinds and faults as aiohttp's."""
    stage = ErrorKind.CONNECT if state.headers_ns is None else ErrorKind.STREAM
    if isinstance(err, _NoConnection):
        if err.timed_out:
            state.fail(ErrorKind.TIMEOUT, "connect_timeout", text)
        else:
            state.fail(ErrorKind.CONNECT, "connect", text)
    elif isinstance(err, BadFraming):
        state.fail(ErrorKind.STREAM, "bad_transfer", f"the body's framing broke: {err}")
    elif isinstance(err, ConnectionCut):
        state.fail(stage, "reset", text)
    else:
        state.fail(stage, "protocol", text)


def _broken_framing(err: BaseException, before_headers: bool) -> bool:
    """A body whose framing the HTTP parser gave up on, not one cut by a close."""
    if isinstance(err, _BrokenFraming):
        return True
    if isinstance(err, HttpProcessingError):  # aiohttp's Python parser raises its own
        return not before_headers
    return isinstance(err, aiohttp.ClientPayloadError) and not str(err).startswith(_CUT_SHORT)


def make_session(config: ClientConfig, *, force_close: bool = False) -> aiohttp.ClientSession:
    """One session per process: no connection limit (a hidden pool would queue requests).

    Only the connect timeout is aiohttp's; stalls and the request timeout are the
    client's watchdog's, which costs nothing per chunk. `force_close`: a new connection
    for every request, closed after it (for servers that drop kept-alive ones).
    """
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=config.connect_timeout_s)
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=force_close)
    return aiohttp.ClientSession(
        timeout=timeout,
        connector=connector,
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
        # a redirect to another origin carries none of the user's headers (`net`)
        trace_configs=[make_redirect_guard()] + ([] if force_close else [_trace()]),
    )
