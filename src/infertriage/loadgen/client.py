"""loadgen, level 2: one streaming request to an OpenAI-compatible server, measured.

Takes a `ClientConfig` (base URL, model, endpoint, key, headers, timeouts), an
aiohttp session and a `RequestSpec`; gives a `RequestRecord`. TTFT is the
field's (vLLM's `bench serve`, GuideLLM): the send is stamped just before the
request goes to aiohttp, connection set-up included, and every read is
stamped with `time.perf_counter_ns()` the moment it returns, before any
parsing; the events of one read become one chunk per kind (reasoning or
output) at that stamp. Token counts come from `usage`
(`stream_options.include_usage`, and per chunk with `continuous_usage_stats`
where the server offers it). A role-only chunk is not content; reasoning
deltas (`reasoning_content` or `reasoning`) are. Failures never raise: each
becomes an `ErrorKind` with a finer `fault` (connect, reset, stall, timeout,
http_5xx, error_event, malformed_event, truncated, not_streamed: a JSON
body where a stream was asked). A request is sent once; the one exception is
a send that failed on a kept-alive connection (aiohttp's trace says it was
one) before any answer, which goes once more on a fresh connection and is
labelled `retried`. The API key is sent in the `Authorization` header and
appears in no record, text or repr.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson

from infertriage.loadgen.request import (
    ClientConfig,
    Endpoint,
    prompt_fields,
    request_body,
    request_headers,
)
from infertriage.loadgen.sse import SseEvent, SseParser
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, TokenSource, http_error_kind
from infertriage.schemas.redact import Redactor
from infertriage.workload import RequestSpec, TextRenderer, TokenCounter

__all__ = [
    "ClientConfig",
    "Endpoint",
    "RequestClient",
    "StreamState",
    "prompt_fields",
    "request_body",
    "request_headers",
]

_ERROR_TEXT_LIMIT = 300
_SERVER_ID_LIMIT = 200  # a request id longer than this is not one
_NO_SECRETS = Redactor()
_NOTHING, _OUTPUT, _REASONING = 0, 1, 2
_loads = orjson.loads
# The watchdog looks this often at most; timeouts are found within one look.
_WATCH_INTERVAL_S = 0.25
# After [DONE], wait at most this long for the body's end so the connection can be reused.
_DONE_GRACE_S = 0.5


class StreamState:
    """What one request has measured so far; survives cancellation, so partial runs keep it."""

    __slots__ = (
        "chat",
        "chunks",
        "done_ns",
        "error_kind",
        "error_text",
        "exact",
        "fault",
        "finished",
        "headers_ns",
        "last_ns",
        "parser",
        "prev_cum",
        "queue_s",
        "redact",
        "retried",
        "retry_cause",
        "reused",
        "scheduled_ns",
        "sent_ns",
        "server_id",
        "spec",
        "status",
        "texts",
        "timed_out",
        "usage_completion",
        "usage_prompt",
    )

    def __init__(
        self, spec: RequestSpec, scheduled_ns: int, *, chat: bool, redact: Redactor = _NO_SECRETS
    ) -> None:
        self.spec = spec
        self.redact = redact  # the key and header values out of the error text
        self.chat = chat
        self.scheduled_ns = scheduled_ns
        self.sent_ns = scheduled_ns
        self.last_ns = scheduled_ns  # the last sign of life: the send, the headers, a read
        self.timed_out = ""  # the watchdog's fault, once it has cancelled the request
        self.queue_s = 0.0
        self.headers_ns: int | None = None
        self.done_ns: int | None = None
        self.chunks: list[tuple[int, int, bool]] = []
        self.parser = SseParser()
        self.status: int | None = None
        self.error_kind = ErrorKind.NONE
        self.error_text = ""
        self.fault = ""
        self.finished = False
        self.exact = True
        self.prev_cum = 0
        self.usage_prompt: int | None = None
        self.usage_completion: int | None = None
        self.texts: list[str] | None = None
        self.retried = False  # resent once on a fresh connection: the kept-alive one was closed
        self.retry_cause = ""  # what the send on the kept-alive connection met
        self.reused = False  # the send went out on a kept-alive connection (aiohttp's trace)
        self.server_id = ""  # the response's X-Request-Id, else its first event's `id`

    def fail(self, kind: ErrorKind, fault: str, text: str = "") -> None:
        """Record the first failure; a later one (a reset after an error event) does not mask it."""
        if self.error_kind is ErrorKind.NONE:
            # Redacted before the cut: a cut inside the key would leave its start behind.
            text = self.redact(text)[:_ERROR_TEXT_LIMIT]
            self.error_kind, self.fault, self.error_text = kind, fault, text

    def _error_event(self, data: bytes) -> None:
        message = data.decode("utf-8", "replace")
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict):
            err = body.get("error", body)
            message = str(err.get("message", err) if isinstance(err, dict) else err)
        self.fail(ErrorKind.STREAM, "error_event", message)

    def _usage(self, usage: Any) -> int:
        """Tokens since the last count, from cumulative `usage`; 1 when it has no count."""
        if isinstance(usage, dict):
            cum = usage.get("completion_tokens")
            self.usage_prompt = usage.get("prompt_tokens", self.usage_prompt)
            if isinstance(cum, int):
                self.usage_completion = cum
                tokens, self.prev_cum = cum - self.prev_cum, cum
                return max(tokens, 0)
        self.exact = False
        return 1

    def _kind(self, obj: dict[str, Any]) -> int:
        """What the event's first choice carries; a role-only delta carries nothing."""
        choices = obj.get("choices")
        if not choices:
            return _NOTHING
        first = choices[0]
        if first.get("finish_reason"):
            self.finished = True
        if self.chat:
            delta = first.get("delta")
            if not delta:
                return _NOTHING
            if delta.get("reasoning_content") or delta.get("reasoning"):
                return _REASONING
            text = delta.get("content")
        else:
            text = first.get("text")
        if not text:
            return _NOTHING
        if self.texts is not None:
            self.texts.append(text)
        return _OUTPUT

    def _event(self, name: bytes, data: bytes, ns: int) -> tuple[int, int]:
        """One event → (kind, tokens): kind `_OUTPUT`, `_REASONING` or `_NOTHING`."""
        if name or data == b"[DONE]":
            if name == b"error":
                self._error_event(data)
            elif not name:
                self.done_ns = self.done_ns or ns
            return _NOTHING, 0
        try:
            obj = _loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is not dict:
            self.fail(ErrorKind.STREAM, "malformed_event", data[:80].decode("utf-8", "replace"))
            return _NOTHING, 0
        if "error" in obj:
            self._error_event(data)
            return _NOTHING, 0
        if not self.server_id:
            self.server_id = str(obj.get("id") or "")[:_SERVER_ID_LIMIT]
        kind = self._kind(obj)
        usage = obj.get("usage")
        if usage is not None:
            return kind, self._usage(usage)  # a usage-only event still moves the count on
        if kind:
            self.exact = False
            return kind, 1
        return _NOTHING, 0

    def on_events(self, events: list[SseEvent], ns: int) -> None:
        """Fold the events of one read, all stamped `ns`, into at most two chunks."""
        output = reasoning = -1
        for name, data in events:
            kind, tokens = self._event(name, data, ns)
            if kind == _OUTPUT:
                output = max(output, 0) + tokens
            elif kind == _REASONING:
                reasoning = max(reasoning, 0) + tokens
        if reasoning >= 0:
            self.chunks.append((ns, reasoning, True))
        if output >= 0:
            self.chunks.append((ns, output, False))

    def end_stream(self) -> None:
        """The body ended: its last partial event, then a stream cut before `[DONE]`."""
        tail = self.parser.close()
        if tail:
            self.on_events(tail, time.perf_counter_ns())
        if self.done_ns is None and not self.finished:
            self.fail(ErrorKind.STREAM, "truncated", "the stream ended before [DONE]")

    def http_error(self, status: int, text: str) -> None:
        """A status other than 200, with the start of its body."""
        # a 4xx refusing the request (rejected) or the load (429) is not the server failing
        kind = http_error_kind(status)
        self.fail(kind, f"http_{status // 100}xx", f"HTTP {status}: {text}".strip())

    def json_body(self, data: bytes) -> None:
        """A 200 with one JSON body: the server, or a proxy before it, ignored `stream`.

        Not a cut stream: nothing streamed, so no TTFT or ITL can be measured. An
        `{"error": …}` body is the server's error, as an error event would be.
        """
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict) and "error" in body:
            self._error_event(data)
            return
        self.fail(
            ErrorKind.STREAM,
            "not_streamed",
            "the server answered with one JSON body (application/json), not an event stream: "
            "it, or a proxy in front of it, ignores `stream: true`, so TTFT and ITL cannot be "
            "measured",
        )

    def record(
        self,
        record_id: str,
        start_ns: int,
        tokenizer: TokenCounter | None = None,
        labels: tuple[tuple[str, str], ...] = (),
    ) -> RequestRecord:
        """The finished record on the run's clock (seconds since `start_ns`)."""

        def ts(ns: int | None) -> float | None:
            return None if ns is None else (ns - start_ns) * 1e-9

        chunks = tuple(Chunk((ns - start_ns) * 1e-9, k, r) for ns, k, r in self.chunks)
        counted = sum(k for _, k, _ in self.chunks)
        output, output_source = self._output_tokens(counted, tokenizer)
        prompt_source = TokenSource.USAGE if self.usage_prompt is not None else TokenSource.ESTIMATE
        end_ns = self.done_ns or (self.chunks[-1][0] if self.chunks else None)
        all_labels = dict(self.spec.labels)
        all_labels.update(labels)
        if self.retried:
            all_labels["retried"] = "stale_connection"
            all_labels["retry_cause"] = self.retry_cause
        if tokenizer is not None and self.texts is not None and output_source is TokenSource.USAGE:
            # The cross-check: what the local tokenizer makes of the text the server sent.
            all_labels["tokenizer_output_tokens"] = str(tokenizer.count("".join(self.texts)))
        return RequestRecord(
            id=record_id,
            scheduled_ts=(self.scheduled_ns - start_ns) * 1e-9,
            sent_ts=(self.sent_ns - start_ns) * 1e-9,
            first_token_ts=chunks[0].ts if chunks else None,
            last_token_ts=chunks[-1].ts if chunks else None,
            end_ts=ts(end_ns),
            chunks=chunks,
            prompt_tokens=self.usage_prompt
            if self.usage_prompt is not None
            else self.spec.prompt_tokens,
            output_tokens=output,
            prompt_tokens_source=prompt_source,
            output_tokens_source=output_source,
            http_status=self.status,
            error_kind=self.error_kind,
            error_text=self.error_text,
            labels=all_labels,
            client_queue_s=self.queue_s,
            max_tokens=self.spec.max_tokens,
            headers_ts=ts(self.headers_ns),
            chunk_tokens_exact=bool(self.chunks)
            and (self.exact or self.usage_completion == counted),
            fault=self.fault,
            server_request_id=self.server_id,
        )

    def _output_tokens(
        self, counted: int, tokenizer: TokenCounter | None
    ) -> tuple[int | None, TokenSource]:
        if self.usage_completion is not None:
            return self.usage_completion, TokenSource.USAGE
        if tokenizer is not None and self.texts is not None:
            return tokenizer.count("".join(self.texts)), TokenSource.TOKENIZER
        return (counted if self.chunks else None), TokenSource.ESTIMATE


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

    def new_state(self, spec: RequestSpec, scheduled_ns: int) -> StreamState:
        state = StreamState(spec, scheduled_ns, chat=self._chat, redact=self._redact)
        if self.config.keep_text:
            state.texts = []
        return state

    async def fetch(self, state: StreamState, request_id: str) -> None:
        """Send the request and read its stream into `state`; never raises but for cancellation."""
        try:
            body = self.body(state.spec)
        except Exception as err:  # a spec the client cannot encode is the user's data
            state.fail(ErrorKind.CLIENT, "encode", f"{type(err).__name__}: {err}")
            return
        headers = {**self._headers, "X-Request-Id": request_id}
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
                await self._send(state, body, headers)
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as err:
                if not _stale(state):
                    raise
                # Proven stale: the request went out on a kept-alive connection, which the
                # server closed before answering anything (llama-server does after every
                # streamed response, though it says keep-alive; so does a keep-alive
                # timeout racing a request). Send it once more on a fresh connection, as
                # HTTP clients do, and from now on open a connection per request. Its
                # TTFT counts from this send; the time lost is in its dispatch lag. A reset
                # on a fresh connection is the server's failure, never sent again.
                state.retried, self._no_keepalive = True, True
                state.retry_cause = state.redact(f"{type(err).__name__}: {err}")[:120]
                state.reused = False
                state.sent_ns = state.last_ns = time.perf_counter_ns()
                await self._send(state, body, headers)
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
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
        """Close the per-request-connection session, if one was opened."""
        if self._fresh is not None:
            await self._fresh.close()
            self._fresh = None

    async def _send(self, state: StreamState, body: bytes, headers: dict[str, str]) -> None:
        session = self._session_now()
        post = session.post(self._url, data=body, headers=headers, trace_request_ctx=state)
        async with post as resp:
            state.headers_ns = state.last_ns = time.perf_counter_ns()
            state.status = resp.status
            state.server_id = resp.headers.get("X-Request-Id", "")[:_SERVER_ID_LIMIT]
            if resp.status != 200:
                await self._http_error(state, resp)
            elif resp.content_type == "application/json":
                await self._not_streamed(state, resp)
            else:
                await self._read(state, resp)

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
            text = (await resp.content.read(_ERROR_TEXT_LIMIT)).decode("utf-8", "replace")
        except (TimeoutError, aiohttp.ClientError):
            text = ""
        state.http_error(resp.status, text)

    async def _not_streamed(self, state: StreamState, resp: aiohttp.ClientResponse) -> None:
        try:
            data = await resp.content.read(_ERROR_TEXT_LIMIT * 64)
        except (TimeoutError, aiohttp.ClientError):
            data = b""
        state.json_body(data)

    async def _read(self, state: StreamState, resp: aiohttp.ClientResponse) -> None:
        read = resp.content.readany
        feed = state.parser.feed
        on_events = state.on_events
        perf = time.perf_counter_ns
        reads = num_events = 0
        while True:
            data = await read()
            ns = perf()
            if not data:
                break
            state.last_ns = ns
            events = feed(data)
            if events:
                on_events(events, ns)
            if state.done_ns is not None:
                break  # the last read, with the finish, usage and [DONE] events: not counted
            reads += 1
            num_events += len(events)
        self.num_reads += reads
        self.num_events += num_events
        if state.done_ns is not None:
            await _finish_body(resp)
        state.end_stream()


async def _finish_body(resp: aiohttp.ClientResponse) -> None:
    """Read to the body's end, briefly, so the connection is reused; nothing after [DONE] counts."""
    try:
        async with asyncio.timeout(_DONE_GRACE_S):
            while await resp.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError):
        resp.close()


def _stale(state: StreamState) -> bool:
    """A send failed on a connection the server had already closed: nothing was answered,
    the connection was a kept-alive one, and this request was not resent before."""
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
    if isinstance(err, aiohttp.ClientConnectorError):
        state.fail(ErrorKind.CONNECT, "connect", text)
    elif isinstance(err, aiohttp.ConnectionTimeoutError):
        state.fail(ErrorKind.TIMEOUT, "connect_timeout", text)
    elif isinstance(err, aiohttp.SocketTimeoutError):
        state.fail(ErrorKind.TIMEOUT, "slow_headers" if before_headers else "stall", text)
    elif isinstance(err, TimeoutError):
        state.fail(ErrorKind.TIMEOUT, "slow_headers" if before_headers else "timeout", text)
    elif isinstance(err, aiohttp.ClientPayloadError):
        state.fail(ErrorKind.STREAM, "reset", text)
    elif isinstance(err, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | OSError):
        state.fail(ErrorKind.CONNECT if before_headers else ErrorKind.STREAM, "reset", text)
    else:
        kind = ErrorKind.CONNECT if before_headers else ErrorKind.STREAM
        state.fail(kind, "protocol", text)


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
        trace_configs=[] if force_close else [_trace()],
    )
