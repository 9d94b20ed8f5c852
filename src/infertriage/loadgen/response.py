"""loadgen, level 2: one answer to a streamed request, read into a measurement.

Takes the status and headers of one response (`StreamState.on_headers`), then
its body bytes as the socket gives them (decoded when the server compressed
them anyway, then through `SseParser`); gives a `StreamState`: the chunks and
their stamps, the token counts from `usage`, and at most one failure (an
`ErrorKind` with a finer `fault`). Both load engines read through it
(`client`'s asyncio one, `locust.stream`'s gevent one), so an answer means the
same in each.

A server's output is data, never a crash: every field read from an event is
checked where it is read, and a field of the wrong shape fails that request
alone (kind `stream`), never its task or the run. Faults given here:

- `error_event`: an `error` event, or an event or body holding `error`;
- `malformed_event`: an event that is not a JSON object;
- `bad_shape`: a field read of the wrong JSON type (`choices` not an array,
  a choice or `delta` not an object, `content` not a string, `id` not a string);
- `bad_count`: a `usage` token count that is not a whole number from 0 to
  `MAX_TOKEN_COUNT` (a string, a fraction, a negative, 1e20): never stored;
- `event_too_large`: one event past `sse.MAX_EVENT_BYTES`;
- `bad_encoding`: a body compressed though none was asked, in a coding that
  is not decoded (gzip and deflate are), or that does not decode;
- `html_page`: a 200 with an HTML page (a login page, a proxy's notice);
- `not_event_stream`: a 200 body with no event in it (text/plain, …);
- `not_streamed`: a 200 with one JSON body where a stream was asked;
- `truncated`: the body ended before `[DONE]` or a finish reason;
- `empty_stream`: the stream ended well but carried no token and no tool call;
- `http_Nxx`: a status other than 200, with the start of its body.

TTFT is the first content chunk, reasoning included; for a stream that calls
tools before it writes text, the first tool-call delta, and its record says
so (label `ttft_from` = `tool_call`). What the server calls the request (its
`X-Request-Id`, else the first event's `id`) goes through the run's
`Redactor` before it is kept, as every server text does.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from enum import IntEnum
from operator import itemgetter
from typing import Any

import orjson

from infertriage.loadgen.body import (
    HTML_TYPES,
    REPLICA_HEADERS,
    body_text,
    inflater,
    is_html,
    replica_of,
)
from infertriage.loadgen.fields import (
    MAX_TOKEN_COUNT,
    BadField,
    carries,
    not_count,
    part_texts,
    shape,
)
from infertriage.loadgen.sse import SseEvent, SseParser
from infertriage.schemas import Chunk, ErrorKind, RequestRecord, TokenSource, http_error_kind
from infertriage.schemas.redact import Redactor
from infertriage.workload import RequestSpec, TokenCounter, prefix_marks

__all__ = [
    "MAX_TOKEN_COUNT",
    "REPLICA_HEADERS",
    "BodyMode",
    "StreamState",
    "body_text",
    "replica_of",
]

ERROR_TEXT_LIMIT = 300
_SERVER_ID_LIMIT = 200  # a request id longer than this is not one
_HEAD_LIMIT = 200  # the start of a body kept to say what it was when it held no event
_NO_SECRETS = Redactor()
_NOTHING, _OUTPUT, _REASONING, _TOOL = 0, 1, 2, 3
_loads = orjson.loads
_tokens_of = itemgetter(1)  # of a stamped chunk (ns, tokens, reasoning)


class BodyMode(IntEnum):
    """How a response's body is read, from its status and headers."""

    STREAM = 0  # events
    ERROR = 1  # a status other than 200: the start of the body is the error text
    JSON = 2  # one JSON body where a stream was asked
    DONE = 3  # nothing more to read: the headers already failed the request


_new = object.__new__
_set_ts, _set_tokens, _set_reasoning = (
    Chunk.__dict__[name].__set__ for name in ("ts", "num_tokens", "reasoning")
)


def _chunks(stamped: list[tuple[int, int, bool]], start_ns: int) -> tuple[Chunk, ...]:
    """The record's chunks on the run's clock. `Chunk` is frozen, so its `__init__` sets each
    field through `object.__setattr__`; its slots are set here directly, half the cost (a
    200-token answer: 55 µs instead of 105 µs, a quarter of a record's making)."""
    out = []
    for ns, tokens, reasoning in stamped:
        chunk = _new(Chunk)
        _set_ts(chunk, (ns - start_ns) * 1e-9)
        _set_tokens(chunk, tokens)
        _set_reasoning(chunk, reasoning)
        out.append(chunk)
    return tuple(out)


class StreamState:
    """What one request has measured so far; survives cancellation, so partial runs keep it."""

    __slots__ = (
        "chat",
        "chunks",
        "content_type",
        "decode",
        "done_ns",
        "encoding",
        "error_kind",
        "error_text",
        "exact",
        "fault",
        "finished",
        "first_kind",
        "head",
        "headers_ns",
        "last_ns",
        "parser",
        "prev_cum",
        "queue_s",
        "redact",
        "replica",
        "retried",
        "retry_cause",
        "reused",
        "saw_event",
        "scheduled_ns",
        "sent_ns",
        "server_id",
        "spec",
        "status",
        "texts",
        "timed_out",
        "trace_id",
        "usage_completion",
        "usage_prompt",
    )

    def __init__(
        self, spec: RequestSpec, scheduled_ns: int, *, chat: bool, redact: Redactor = _NO_SECRETS
    ) -> None:
        self.spec = spec
        self.redact = redact  # the key and header values out of every server text kept
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
        self.decode: Callable[[bytes], bytes] | None = None  # a compressed body's decoder
        self.status: int | None = None
        self.content_type = ""
        self.encoding = ""
        self.head = b""  # the body's first bytes, to say what a body without events was
        self.saw_event = False
        self.first_kind = _NOTHING  # what the first token-bearing event carried
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
        self.reused = False  # the send went out on a kept-alive connection
        self.server_id = ""  # the response's X-Request-Id, else its first event's `id`
        self.replica = ""  # which replica served it, where a header says (`REPLICA_HEADERS`)
        self.trace_id = ""  # the W3C trace id its `traceparent` carried (`loadgen.tracecontext`)

    def fail(self, kind: ErrorKind, fault: str, text: str = "") -> None:
        """Record the first failure; a later one (a reset after an error event) does not mask it."""
        if self.error_kind is ErrorKind.NONE:
            # Redacted before the cut: a cut inside the key would leave its start behind.
            text = self.redact(text)[:ERROR_TEXT_LIMIT]
            self.error_kind, self.fault, self.error_text = kind, fault, text

    def on_headers(
        self,
        ns: int,
        status: int,
        content_type: str,
        encoding: str,
        request_id: str | None,
        *,
        replica: str | None = None,
    ) -> BodyMode:
        """The response's status and headers: how to read its body (or not at all)."""
        self.headers_ns = self.last_ns = ns
        if replica:
            self.replica = self.redact(replica)[:_SERVER_ID_LIMIT]
        self.status = status
        self.content_type = content_type = content_type.split(";", 1)[0].strip().lower()
        self.encoding = encoding = encoding.strip().lower()
        if request_id:
            self.server_id = self.redact(request_id)[:_SERVER_ID_LIMIT]
        if status != 200:
            return BodyMode.ERROR
        if content_type == "application/json":
            return BodyMode.JSON
        if content_type in HTML_TYPES:
            self._html_page()
            return BodyMode.DONE
        if encoding and encoding != "identity":
            self.decode = inflater(encoding)
            if self.decode is None:
                self.fail(
                    ErrorKind.STREAM,
                    "bad_encoding",
                    f"the server compressed the stream ({encoding}) though it was asked for "
                    "none (Accept-Encoding: identity); only gzip and deflate are decoded",
                )
                return BodyMode.DONE
        return BodyMode.STREAM

    def _html_page(self) -> None:
        self.fail(
            ErrorKind.STREAM,
            "html_page",
            f"the server answered with an HTML page ({self.content_type or 'no content type'}), "
            "not an event stream: a login page or proxy?",
        )

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

    def _usage(self, usage: object) -> int:
        """Tokens since the last count, from cumulative `usage`; 1 when it has no count."""
        if type(usage) is not dict:
            raise shape("usage", usage, "an object")
        prompt = usage.get("prompt_tokens")
        if prompt is not None:
            if type(prompt) is not int or not 0 <= prompt <= MAX_TOKEN_COUNT:
                raise not_count("usage.prompt_tokens", prompt)
            self.usage_prompt = prompt
        cum = usage.get("completion_tokens")
        if cum is None:
            self.exact = False
            return 1
        if type(cum) is not int or not 0 <= cum <= MAX_TOKEN_COUNT:
            raise not_count("usage.completion_tokens", cum)
        self.usage_completion = cum
        tokens, self.prev_cum = cum - self.prev_cum, cum
        return max(tokens, 0)

    def _kind(self, obj: dict[str, Any]) -> int:
        """What the event's first choice carries; a role-only delta carries nothing."""
        choices = obj.get("choices")
        if type(choices) is not list:
            if choices is None:
                return _NOTHING
            raise shape("choices", choices, "an array")
        if not choices:
            return _NOTHING
        first = choices[0]
        if type(first) is not dict:
            raise shape("choices[0]", first, "an object")
        reason = first.get("finish_reason")
        if reason is not None:
            if type(reason) is not str:
                raise shape("choices[0].finish_reason", reason, "a string")
            self.finished = self.finished or bool(reason)
        if self.chat:
            return self._delta(first.get("delta"))
        text = first.get("text")
        if type(text) is str:
            return self._output(text) if text else _NOTHING
        return self._output(text) if carries("choices[0].text", text) else _NOTHING

    def _delta(self, delta: object) -> int:
        """What a chat choice's `delta` carries: reasoning, content, tool calls or nothing."""
        if type(delta) is not dict:
            if delta is None:
                return _NOTHING
            raise shape("choices[0].delta", delta, "an object")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning is not None and carries("delta.reasoning_content", reasoning):
            return _REASONING
        text = delta.get("content")
        if type(text) is str:
            if text:
                if self.texts is not None:
                    self.texts.append(text)
                return _OUTPUT
        elif carries("delta.content", text):
            return self._output(text)
        calls = delta.get("tool_calls")
        if calls is None:
            return _NOTHING
        if type(calls) is not list:
            raise shape("delta.tool_calls", calls, "an array")
        return _TOOL if calls else _NOTHING

    def _output(self, text: object) -> int:
        if self.texts is not None:
            self.texts.append(part_texts(text))
        return _OUTPUT

    def _event(self, name: bytes, data: bytes, ns: int) -> tuple[int, int]:
        """One event → (kind, tokens): kind `_OUTPUT`, `_REASONING`, `_TOOL` or `_NOTHING`."""
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
        return self._object(obj, data)

    def _object(self, obj: object, data: bytes) -> tuple[int, int]:
        """An unnamed event's decoded JSON → (kind, tokens), every field checked."""
        if type(obj) is not dict:
            self.fail(ErrorKind.STREAM, "malformed_event", data[:80].decode("utf-8", "replace"))
            return _NOTHING, 0
        if "error" in obj:
            self._error_event(data)
            return _NOTHING, 0
        try:
            if not self.server_id:
                self._take_id(obj.get("id"))
            kind = self._kind(obj)
            usage = obj.get("usage")
            if usage is not None:
                return kind, self._usage(usage)  # a usage-only event still moves the count on
        except BadField as bad:
            self.fail(ErrorKind.STREAM, bad.fault, str(bad))
            return _NOTHING, 0
        if kind:
            self.exact = False
            return kind, 1
        return _NOTHING, 0

    def _take_id(self, value: object) -> None:
        if value is None:
            return
        if type(value) is not str:
            raise shape("id", value, "a string")
        self.server_id = self.redact(value)[:_SERVER_ID_LIMIT]

    def _common(self, obj: dict[str, Any]) -> int:
        """Tokens of the common chat event (one choice whose delta holds only non-empty
        `content`, no finish, whole-number `usage`), read in one pass; -1: not that event,
        for `_event`'s full reading. The same checks, fewer calls: it runs for every token."""
        choices = obj.get("choices")
        usage = obj.get("usage")
        if type(choices) is not list or len(choices) != 1 or type(usage) is not dict:
            return -1
        if not self.server_id and obj.get("id") is not None:
            return -1  # `_event` takes the id
        first = choices[0]
        if type(first) is not dict or first.get("finish_reason") is not None:
            return -1
        delta = first.get("delta")
        if type(delta) is not dict or len(delta) != 1:
            return -1
        text = delta.get("content")
        cum = usage.get("completion_tokens")
        prompt = usage.get("prompt_tokens")
        if (
            type(text) is not str
            or not text
            or type(cum) is not int
            or type(prompt) is not int
            or not 0 <= cum <= MAX_TOKEN_COUNT
            or not 0 <= prompt <= MAX_TOKEN_COUNT
        ):
            return -1
        if self.texts is not None:
            self.texts.append(text)
        self.usage_prompt, self.usage_completion = prompt, cum
        tokens, self.prev_cum = cum - self.prev_cum, cum
        return tokens if tokens > 0 else 0

    def on_events(self, events: list[SseEvent], ns: int) -> None:
        """Fold the events of one read, all stamped `ns`, into at most two chunks."""
        output = reasoning = -1
        self.saw_event = True
        chat = self.chat
        for name, data in events:
            if name or data == b"[DONE]":
                kind, tokens = self._event(name, data, ns)
            else:
                try:
                    obj = _loads(data)
                except orjson.JSONDecodeError:
                    obj = None
                if chat and type(obj) is dict and "error" not in obj:
                    tokens = self._common(obj)  # the common event, read at once
                    if tokens >= 0:
                        if not self.first_kind:
                            self.first_kind = _OUTPUT
                        output = (output if output > 0 else 0) + tokens
                        continue
                kind, tokens = self._object(obj, data)
            if not kind:
                continue
            if not self.first_kind:
                self.first_kind = kind
            if kind == _REASONING:
                reasoning = max(reasoning, 0) + tokens
            else:
                output = max(output, 0) + tokens
        if reasoning >= 0:
            self.chunks.append((ns, reasoning, True))
        if output >= 0:
            self.chunks.append((ns, output, False))

    def take_head(self, data: bytes) -> None:
        """The body's first bytes, kept to say what a body without any event was."""
        self.head = data[:_HEAD_LIMIT]

    def body_failed(self, err: Exception) -> None:
        """The parser or the decoder gave up on the body."""
        if isinstance(err, zlib.error):
            text = f"the {self.encoding} body does not decode: {err}"
            self.fail(ErrorKind.STREAM, "bad_encoding", text)
        else:
            self.fail(ErrorKind.STREAM, "event_too_large", str(err))

    def end_stream(self) -> None:
        """The body ended: its last partial event, then what the whole stream amounted to."""
        tail = self.parser.close()
        if tail:
            self.on_events(tail, time.perf_counter_ns())
        if self.error_kind is not ErrorKind.NONE:
            return
        if not self.saw_event and self.head.strip():
            self._not_event_stream()
        elif self.done_ns is None and not self.finished:
            self.fail(ErrorKind.STREAM, "truncated", "the stream ended before [DONE]")
        elif not self.chunks:
            self.fail(
                ErrorKind.STREAM,
                "empty_stream",
                "the stream ended with no token and no tool call: nothing to time (TTFT) or count",
            )

    def _not_event_stream(self) -> None:
        if is_html(self.head):
            self._html_page()
            return
        start = self.head[:80].decode("utf-8", "replace")
        self.fail(
            ErrorKind.STREAM,
            "not_event_stream",
            f"the server answered {self.content_type or 'with no content type'} holding no "
            f"server-sent event, not an event stream: {start!r}",
        )

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
        data = body_text(data, self.encoding).encode()
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

        chunks = _chunks(self.chunks, start_ns)
        counted = sum(map(_tokens_of, self.chunks))
        output, output_source = self._output_tokens(counted, tokenizer)
        prompt_source = TokenSource.USAGE if self.usage_prompt is not None else TokenSource.ESTIMATE
        end_ns = self.done_ns or (self.chunks[-1][0] if self.chunks else None)
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
            labels=self._labels(labels, tokenizer, output_source),
            client_queue_s=self.queue_s,
            max_tokens=self.spec.max_tokens,
            headers_ts=ts(self.headers_ns),
            chunk_tokens_exact=bool(self.chunks)
            and (self.exact or self.usage_completion == counted),
            fault=self.fault,
            server_request_id=self.server_id,
            trace_id=self.trace_id,
            prompt_prefix=prefix_marks(
                self.spec.turns, tokenizer.count if tokenizer is not None else None
            ),
        )

    def _labels(
        self,
        labels: tuple[tuple[str, str], ...],
        tokenizer: TokenCounter | None,
        output_source: TokenSource,
    ) -> dict[str, str]:
        all_labels = dict(self.spec.labels)
        all_labels.update(labels)
        if self.retried:
            all_labels["retried"] = "stale_connection"
            all_labels["retry_cause"] = self.retry_cause
        if self.replica:
            all_labels["replica"] = self.replica
        if self.first_kind == _TOOL:
            all_labels["ttft_from"] = "tool_call"  # the first token was a tool call's delta
        if tokenizer is not None and self.texts is not None and output_source is TokenSource.USAGE:
            # The cross-check: what the local tokenizer makes of the text the server sent.
            all_labels["tokenizer_output_tokens"] = str(tokenizer.count("".join(self.texts)))
        return all_labels

    def _output_tokens(
        self, counted: int, tokenizer: TokenCounter | None
    ) -> tuple[int | None, TokenSource]:
        if self.usage_completion is not None:
            return self.usage_completion, TokenSource.USAGE
        if tokenizer is not None and self.texts is not None:
            return tokenizer.count("".join(self.texts)), TokenSource.TOKENIZER
        return (counted if self.chunks else None), TokenSource.ESTIMATE
