"""testing: a loopback OpenAI-compatible streaming server with known timing and faults.

Takes a `ServerConfig` (a default `Behavior`, named presets chosen per request
by the `X-Test-Behavior` header, periodic faults, a capacity, an API key);
gives `/v1/chat/completions`, `/v1/completions` (SSE), `/v1/models`,
`/health`, `/tokenize` (vLLM's or llama.cpp's form), `/apply-template`
(llama.cpp's) and `/_log` (per request
id: the perf_counter_ns of its first and last token writes, its token count and
its arrival — the truth a client is judged against). Tokens go out on absolute deadlines:
the first at arrival + TTFT, event i at first + i·ITL, so the schedule is
known exactly. Pathologies: coalesced events, a buffering proxy, a slow first
chunk, role-only chunks, reasoning deltas, CRLF framing, comments, multi-line
data, UTF-8 split across writes, mid-stream error events, stalls, connection
resets, invalid JSON, non-200 statuses, slow headers, an early EOS that
`ignore_eos` and `min_tokens` override (what each request asked is kept in
`asked`), and — `reject_over_context` — vLLM's HTTP 400 for a prompt +
`max_tokens` past `max_model_len` (a prompt counted as words times
`prompt_token_scale`, plus its chat template's tokens). Binds 127.0.0.1
only. For tests and benchmarks; `python -m infertriage_testing.testserver
--help` serves it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import orjson
from aiohttp import web

__all__ = [
    "PRESETS",
    "Behavior",
    "PathServer",
    "ServerConfig",
    "fetch_arrivals",
    "fetch_log",
    "fetch_posts",
    "fetch_writes",
    "serve_in_process",
    "serve_in_thread",
    "with_behavior",
]

_WORDS = ("the", "of", "and", "to", "in", "is", "that", "for", "it", "as")
_UTF8_WORDS = ("café", "naïve", "€uro", "日本")
_MAX_TOKENS_CAP = 100_000
_LENGTH_FIELDS = ("max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos")


@dataclass(frozen=True, slots=True)
class Behavior:
    """How one response streams. Event i (1-based) of the output goes out at TTFT + (i−1)·ITL."""

    ttft_s: float = 0.02
    itl_s: float = 0.005
    num_tokens: int | None = None  # None: the request's max_tokens
    tokens_per_event: int = 1
    events_per_write: int = 1  # > 1: events coalesce, written together at the last one's time
    buffered: bool = False  # a buffering proxy: the whole body in one write at the end
    role_chunk: bool = True  # chat: a first chunk with only the role
    reasoning_tokens: int = 0  # the first N tokens are reasoning deltas
    crlf: bool = False
    comments: bool = False  # a ": keep-alive" comment before every event
    multiline: bool = False  # each event's JSON split over two data: lines
    split_utf8: bool = False  # multi-byte words, each event written in two halves
    error_after: int | None = None  # an error event after N tokens, then [DONE]
    named_error: bool = False  # the error as `event: error` rather than data {"error": …}
    reset_after: int | None = None  # abort the connection after N tokens
    reset_before: bool = False  # abort the connection before any response byte
    non_stream: bool = False  # answer with one JSON completion, as if `stream` were false
    stall_after: int | None = None  # after N tokens, hold the stream open silently
    stall_s: float = 10.0
    invalid_json_at: int | None = None  # event N (1-based) is not JSON
    status: int = 200
    error_message: str = "overloaded"  # the message of a non-200 answer
    headers_delay_s: float = 0.0
    send_done: bool = True
    usage: bool = True  # honour include_usage and continuous_usage_stats
    close_after: bool = False  # close the connection after each stream, yet answer keep-alive
    # with close_after: close this long after the stream, while the client may already have
    # sent its next request on the connection (a keep-alive timeout racing a request)
    close_delay_s: float = 0.0
    # The model's EOS after N tokens, as a real model stops early: finish_reason "stop"
    # unless the request asks `ignore_eos` or `min_tokens` (when `sampling_fields` honours them).
    eos_after: int | None = None
    sampling_fields: bool = True
    echo_request_id: bool = False  # answer with the request's X-Request-Id header

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Behavior:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown behavior fields: {sorted(unknown)}")
        return cls(**values)


PRESETS: dict[str, Behavior] = {
    "normal": Behavior(),
    "coalesce": Behavior(events_per_write=4),
    "buffered": Behavior(buffered=True),
    "slow_first": Behavior(ttft_s=0.3),
    "multi_token": Behavior(tokens_per_event=3),
    "reasoning": Behavior(reasoning_tokens=3),
    "crlf": Behavior(crlf=True, comments=True, multiline=True),
    "utf8": Behavior(split_utf8=True),
    "error": Behavior(error_after=3),
    "named_error": Behavior(error_after=3, named_error=True),
    "reset": Behavior(reset_after=3),
    "reset_before": Behavior(reset_before=True),
    "non_stream": Behavior(non_stream=True),
    "stall": Behavior(stall_after=2, stall_s=5.0),
    "invalid_json": Behavior(invalid_json_at=3),
    "http_503": Behavior(status=503),
    "http_400": Behavior(
        status=400,
        error_message="This model's maximum context length is 2048 tokens. However, you "
        "requested 2310 tokens (2054 in the messages, 256 in the completion). Please reduce "
        "the length of the messages or completion.",
    ),  # vLLM's words
    "http_429": Behavior(status=429, error_message="Too many requests: rate limit reached"),
    "slow_headers": Behavior(headers_delay_s=5.0),
    "echo_request_id": Behavior(echo_request_id=True),
    "no_done": Behavior(send_done=False),
    "no_usage": Behavior(usage=False),
    "close_after": Behavior(close_after=True),  # as llama-server does
    "close_late": Behavior(close_after=True, close_delay_s=0.2),
    "eos": Behavior(eos_after=3),
    "eos_unsupported": Behavior(eos_after=3, sampling_fields=False),
}


@dataclass(frozen=True, slots=True)
class ServerConfig:
    behavior: Behavior = field(default_factory=Behavior)
    presets: Mapping[str, Behavior] = field(default_factory=lambda: dict(PRESETS))
    faults: tuple[tuple[int, str], ...] = ()  # (n, preset): every nth request gets the preset
    capacity: int | None = None  # concurrent streams; more wait in a queue (a queue-bound server)
    api_key: str | None = None  # when set, requests must carry `Authorization: Bearer <key>`
    model: str = "test-model"
    max_model_len: int = 4096
    # One decode step of ITL writes the next token of every running stream, as an engine's
    # batch does, instead of a timer per stream: fast enough for 32 streams at 1 ms. Only
    # the timing fields of the default behaviour apply.
    engine: bool = False
    log_writes: bool = False  # keep every token write's time (GET /_writes)
    # POST /tokenize: "vllm" (`count`), "llama.cpp" (`tokens`) or "none" (404); its count
    # is the usage count times `tokenize_scale` (≠ 1: a server whose counts disagree).
    tokenize: str = "vllm"
    tokenize_scale: float = 1.0
    # The first /tokenize is answered after this long (a cold tokenizer and chat template,
    # as a freshly started engine's on a busy host); later ones at once.
    tokenize_first_delay_s: float = 0.0
    # How the server counts a prompt (usage, /tokenize and the context check): each word
    # as `prompt_token_scale` tokens, and a chat request's template as
    # `template_tokens` + `template_tokens_per_message` per message.
    prompt_token_scale: float = 1.0
    template_tokens: int = 4
    template_tokens_per_message: int = 0
    # Answer as vLLM does a request whose prompt + max_tokens passes max_model_len, or whose
    # min_tokens passes max_tokens: HTTP 400 with its message (`rejected` counts them).
    reject_over_context: bool = False


@dataclass(slots=True)
class _Job:
    """One stream in engine mode: what to write next and what it carried."""

    resp: web.StreamResponse
    events: Iterator[tuple[int | None, bytes, int]]
    done: asyncio.Future[None]
    start_ns: int
    pending: list[bytes] = field(default_factory=list)
    pending_tokens: int = 0
    finished: bool = False
    writes: list[int] = field(default_factory=list)

    def advance(self) -> tuple[bytes, int]:
        """This step's bytes: the pending token event and what follows it up to the next one."""
        out, tokens = self.pending, self.pending_tokens
        self.pending, self.pending_tokens = [], 0
        for due, payload, carried in self.events:
            if due is not None:
                self.pending, self.pending_tokens = [payload], carried
                return b"".join(out), tokens
            out.append(payload)
        self.finished = True
        return b"".join(out), tokens


class PathServer:
    """The aiohttp application and the truth it logged."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig()
        # id → (first token write ns, last write ns, tokens, arrival ns: the handler's start)
        self.log: dict[str, tuple[int, int, int, int]] = {}
        self.seen_keys: set[str] = set()
        self.num_requests = 0
        self.posts: dict[str, int] = {}  # request id → POSTs that carried it (a resend: 2)
        self.in_flight = 0
        self.max_in_flight = 0
        self._slots = asyncio.Semaphore(self.config.capacity) if self.config.capacity else None
        self.writes: dict[str, list[int]] = {}  # id → every token write (log_writes)
        self.asked: dict[str, dict[str, object]] = {}  # id → the request's length fields
        self.rejected: list[str] = []  # the 400 messages of over-long requests
        self._jobs: list[_Job] = []
        self._ticker: asyncio.Task[None] | None = None
        self._tokenize_warm = False
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/_log", self._log)
        app.router.add_get("/_writes", self._writes)
        app.router.add_get("/_posts", self._posts)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_post("/apply-template", self._apply_template)
        self.app = app

    async def _models(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._check_key(request)) is not None:
            return denied
        model = {
            "id": self.config.model,
            "object": "model",
            "owned_by": "infertriage",
            "max_model_len": self.config.max_model_len,
        }
        return web.json_response({"object": "list", "data": [model]})

    async def _health(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def _posts(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.posts)

    async def _log(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=orjson.dumps(self.log), content_type="application/json")

    async def _writes(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=orjson.dumps(self.writes), content_type="application/json")

    async def _tokenize(self, request: web.Request) -> web.StreamResponse:
        """Words, as usage counts them; llama.cpp's form has neither a template nor a model."""
        body = orjson.loads(await request.read())
        if not self._tokenize_warm:
            self._tokenize_warm = True
            await asyncio.sleep(self.config.tokenize_first_delay_s)
        form = self.config.tokenize
        if form == "llama.cpp" and "content" in body:
            count = math.ceil(len(str(body["content"]).split()) * self.config.prompt_token_scale)
        elif form == "vllm" and ("prompt" in body or "messages" in body):
            count = _count_prompt(body, self.config)
        else:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        count = round(count * self.config.tokenize_scale)
        if form == "vllm":
            return web.json_response({"count": count, "tokens": list(range(count))})
        return web.json_response({"tokens": list(range(count))})

    async def _apply_template(self, request: web.Request) -> web.StreamResponse:
        """llama.cpp's: the chat template as text, one marker word per template token."""
        body = orjson.loads(await request.read())
        if self.config.tokenize != "llama.cpp" or not isinstance(body.get("messages"), list):
            return web.json_response({"error": {"message": "not found"}}, status=404)
        messages = body["messages"]
        cfg = self.config
        num_marks = cfg.template_tokens + cfg.template_tokens_per_message * len(messages)
        words = ["<t>"] * num_marks + [str(m.get("content", "")) for m in messages]
        return web.json_response({"prompt": " ".join(w for w in words if w)})

    def _check_key(self, request: web.Request) -> web.StreamResponse | None:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            self.seen_keys.add(auth[7:])
        if self.config.api_key is not None and auth != f"Bearer {self.config.api_key}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        return None

    def _behavior(self, request: web.Request) -> Behavior:
        name = request.headers.get("X-Test-Behavior")
        if name:
            return self.config.presets[name]
        for every, preset in self.config.faults:
            if self.num_requests % every == every - 1:
                return self.config.presets[preset]
        return self.config.behavior

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def _serve(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        if (denied := self._check_key(request)) is not None:
            return denied
        behavior = self._behavior(request)
        self.num_requests += 1
        # Taken now: by the stream's end other requests have moved the counter on.
        request_id = request.headers.get("X-Request-Id", f"anon-{self.num_requests}")
        self.posts[request_id] = self.posts.get(request_id, 0) + 1
        body = orjson.loads(await request.read())
        self.asked[request_id] = {k: body.get(k) for k in _LENGTH_FIELDS if k in body}
        if self.config.reject_over_context and (problem := self._too_long(body)):
            self.rejected.append(problem)
            error = {"object": "error", "message": problem, "type": "BadRequestError", "code": 400}
            return web.json_response(error, status=400)
        if behavior.headers_delay_s:
            await asyncio.sleep(behavior.headers_delay_s)
        if behavior.reset_before and request.transport is not None:
            request.transport.abort()
            return web.Response()  # never sent: the connection is gone
        if behavior.non_stream:
            return web.json_response(_completion(body, chat, behavior))
        if behavior.status != 200:
            error = {
                "error": {
                    "message": behavior.error_message,
                    "type": "server_error",
                    "code": behavior.status,
                }
            }
            return web.json_response(error, status=behavior.status)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.config.engine:
                return await self._stream_engine(request, request_id, body, behavior, chat)
            if self._slots is None:
                return await self._stream(request, request_id, body, behavior, chat)
            async with self._slots:
                return await self._stream(request, request_id, body, behavior, chat)
        finally:
            self.in_flight -= 1

    def _too_long(self, body: dict[str, Any]) -> str:
        """vLLM's 400 for a request that does not fit; "" when it does."""
        limit, prompt = self.config.max_model_len, _count_prompt(body, self.config)
        asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if prompt + asked > limit:
            return (
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). "
                "Please reduce the length of the messages or completion."
            )
        at_least = int(body.get("min_tokens") or 0)
        if at_least > asked:
            return f"min_tokens must be less than or equal to max_tokens={asked}, got {at_least}."
        return ""

    async def _stream(
        self,
        request: web.Request,
        request_id: str,
        body: dict[str, Any],
        behavior: Behavior,
        chat: bool,
    ) -> web.StreamResponse:
        arrival = time.perf_counter_ns()
        headers = {"Content-Type": "text/event-stream"}
        if behavior.echo_request_id:
            headers["X-Request-Id"] = request_id
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        stream = _Stream(behavior, body, chat, self.config)
        first_ns = last_ns = 0
        pending: list[bytes] = []
        for due, payload, tokens in stream.events():
            if due is not None:
                deadline = arrival + round((behavior.ttft_s + due * behavior.itl_s) * 1e9)
                if behavior.stall_after is not None and stream.sent >= behavior.stall_after:
                    await asyncio.sleep(behavior.stall_s)
                    return resp
                if behavior.reset_after is not None and stream.sent >= behavior.reset_after:
                    await resp.write(b"".join(pending))
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                delay = deadline - time.perf_counter_ns()
                if delay > 0 and not behavior.buffered:
                    await asyncio.sleep(delay * 1e-9)
            pending.append(payload)
            flush = len(pending) >= behavior.events_per_write or due is None
            if flush and not behavior.buffered:
                await _write(resp, pending, behavior.split_utf8)
                now = time.perf_counter_ns()
                if tokens:
                    first_ns, last_ns = first_ns or now, now
                pending = []
        if behavior.buffered:
            await asyncio.sleep(max(0.0, stream.total_time_s(behavior)))
            await _write(resp, pending, False)
            first_ns = last_ns = time.perf_counter_ns()
        self.log[request_id] = (first_ns, last_ns, stream.sent, arrival)
        await resp.write_eof()
        if behavior.close_after and request.transport is not None:
            if behavior.close_delay_s:
                await asyncio.sleep(behavior.close_delay_s)
            request.transport.close()
        return resp

    async def _stream_engine(
        self,
        request: web.Request,
        request_id: str,
        body: dict[str, Any],
        behavior: Behavior,
        chat: bool,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        arrival = time.perf_counter_ns()
        job = _Job(resp, _Stream(behavior, body, chat, self.config).events(),
                   asyncio.get_running_loop().create_future(),
                   arrival + round(behavior.ttft_s * 1e9))  # fmt: skip
        head, _ = job.advance()  # the role chunk goes at once; the first token waits
        await resp.write(head)
        self._jobs.append(job)
        if self._ticker is None:
            self._ticker = asyncio.create_task(self._tick(behavior.itl_s))
        await job.done
        tokens = len(job.writes)
        writes = (job.writes[0], job.writes[-1]) if tokens else (0, 0)
        self.log[request_id] = (*writes, tokens, arrival)
        if self.config.log_writes:
            self.writes[request_id] = job.writes
        await resp.write_eof()
        return resp

    async def _tick(self, itl_s: float) -> None:
        """The engine loop: every ITL, on absolute deadlines, one token for every stream."""
        step = max(1, round(itl_s * 1e9))
        next_ns = time.perf_counter_ns()
        try:
            while self._jobs:
                next_ns += step
                delay = next_ns - time.perf_counter_ns()
                if delay > 0:
                    await asyncio.sleep(delay * 1e-9)
                now = time.perf_counter_ns()
                for job in [j for j in self._jobs if j.start_ns <= now]:
                    data, tokens = job.advance()
                    await job.resp.write(data)
                    if tokens:
                        job.writes.append(time.perf_counter_ns())
                    if job.finished:
                        self._jobs.remove(job)
                        job.done.set_result(None)
        except (ConnectionError, RuntimeError) as err:  # a client left: end every stream
            for job in self._jobs:
                job.done.set_exception(err)
            self._jobs.clear()
        finally:
            self._ticker = None


async def _write(resp: web.StreamResponse, pending: list[bytes], split: bool) -> None:
    data = b"".join(pending)
    if split and len(data) > 2:
        cut = _utf8_cut(data)
        await resp.write(data[:cut])
        await asyncio.sleep(0.001)
        data = data[cut:]
    await resp.write(data)


def _utf8_cut(data: bytes) -> int:
    """An index inside a multi-byte character, when there is one."""
    for i, byte in enumerate(data):
        if byte >= 0xC0:
            return i + 1
    return len(data) // 2


class _Stream:
    """The SSE byte strings of one response, each with the token offset it is due at."""

    def __init__(
        self, behavior: Behavior, body: dict[str, Any], chat: bool, config: ServerConfig
    ) -> None:
        self.b = behavior
        self.chat = chat
        self.model = config.model
        asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        self.num_tokens = behavior.num_tokens or min(asked, _MAX_TOKENS_CAP)
        self.finish = "length"
        if behavior.eos_after is not None and behavior.eos_after < self.num_tokens:
            honoured = behavior.sampling_fields
            at_least = int(body.get("min_tokens") or 0) if honoured else 0
            if not (honoured and body.get("ignore_eos")) and at_least < self.num_tokens:
                self.num_tokens, self.finish = max(behavior.eos_after, at_least), "stop"
        options = body.get("stream_options") or {}
        self.include_usage = behavior.usage and bool(options.get("include_usage"))
        self.continuous = behavior.usage and bool(options.get("continuous_usage_stats"))
        self.prompt_tokens = _count_prompt(body, config)
        self.sent = 0
        self.num_events = 0

    def total_time_s(self, b: Behavior) -> float:
        events = -(-self.num_tokens // b.tokens_per_event)
        return b.ttft_s + (events - 1) * b.itl_s

    def _frame(self, obj: dict[str, Any], *, raw: bytes | None = None) -> bytes:
        data = raw if raw is not None else orjson.dumps(obj)
        nl = b"\r\n" if self.b.crlf else b"\n"
        head = b": keep-alive" + nl + nl if self.b.comments else b""
        if self.b.multiline and raw is None and len(data) > 8:
            # JSON allows a newline between tokens: split after the first comma.
            cut = data.index(b",") + 1
            return head + b"data: " + data[:cut] + nl + b"data: " + data[cut:] + nl + nl
        return head + b"data: " + data + nl + nl

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None) -> dict[str, Any]:
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
            kind = "chat.completion.chunk"
        else:
            text = (delta or {}).get("content", "")
            choice = {"index": 0, "text": text, "finish_reason": finish}
            kind = "text_completion"
        obj: dict[str, Any] = {
            "id": "cmpl-test",
            "object": kind,
            "created": 0,
            "model": self.model,
            "choices": [choice],
        }
        if self.continuous:
            obj["usage"] = self._usage(self.sent + self._carried(delta))
        return obj

    def _carried(self, delta: dict[str, Any] | None) -> int:
        if not delta or not (delta.get("content") or delta.get("reasoning_content")):
            return 0
        return min(self.b.tokens_per_event, self.num_tokens - self.sent)

    def _usage(self, completion: int) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }

    def _text(self, count: int) -> str:
        words = _UTF8_WORDS if self.b.split_utf8 else _WORDS
        return "".join(" " + words[(self.sent + j) % len(words)] for j in range(count))

    def events(self) -> Iterator[tuple[int | None, bytes, int]]:
        """(event offset it is due at, or None for 'right after the last'; bytes; tokens)."""
        b = self.b
        if self.chat and b.role_chunk:
            yield None, self._frame(self._chunk({"role": "assistant", "content": ""}, None)), 0
        index = 0
        while self.sent < self.num_tokens:
            index += 1
            count = min(b.tokens_per_event, self.num_tokens - self.sent)
            due = index - 1  # event offset: it is due at TTFT + due·ITL
            if b.error_after is not None and self.sent >= b.error_after:
                yield None, self._error(), 0
                break
            if b.invalid_json_at == index:
                yield due, self._frame({}, raw=b'{"choices": [{"delta": {"content": "x"'), 0
                continue
            field_name = "reasoning_content" if self.sent < b.reasoning_tokens else "content"
            delta = {field_name: self._text(count)}
            yield due, self._frame(self._chunk(delta, None)), count
            self.sent += count
        yield None, self._frame(self._chunk({}, self.finish)), 0
        if self.include_usage:
            final = {
                "id": "cmpl-test",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [],
                "usage": self._usage(self.sent),
            }
            yield None, self._frame(final), 0
        if b.send_done:
            yield None, self._frame({}, raw=b"[DONE]"), 0

    def _error(self) -> bytes:
        error = {"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}
        if self.b.named_error:
            return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
        return self._frame(error)


def _completion(body: dict[str, Any], chat: bool, behavior: Behavior) -> dict[str, Any]:
    """A non-streamed answer, as a server or proxy that ignores `stream: true` gives."""
    asked = int(body.get("max_tokens") or 16)
    tokens = behavior.num_tokens or min(asked, _MAX_TOKENS_CAP)
    text = " tok" * tokens
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
    return {
        "object": "chat.completion" if chat else "text_completion",
        "choices": [choice],
        "usage": {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1},
    }


def _count_prompt(body: dict[str, Any], config: ServerConfig) -> int:
    """Words as tokens (times `prompt_token_scale`), plus the chat template's tokens."""
    scale = config.prompt_token_scale
    if "messages" in body:
        messages = body["messages"]
        words = sum(len(str(m.get("content", "")).split()) for m in messages)
        template = config.template_tokens + config.template_tokens_per_message * len(messages)
        return math.ceil(words * scale) + template
    return math.ceil(len(str(body.get("prompt", "")).split()) * scale)


@contextlib.contextmanager
def serve_in_thread(config: ServerConfig | None = None) -> Iterator[tuple[str, PathServer]]:
    """Serve on 127.0.0.1:<ephemeral> from a thread with its own loop; yields (base URL, server)."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        box["loop"] = loop
        server = PathServer(config)
        runner = web.AppRunner(server.app, access_log=None, shutdown_timeout=0.5)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["server"], box["port"] = server, runner.addresses[0][1]
        ready.set()
        loop.run_until_complete(box.setdefault("stopped", asyncio.Event()).wait())
        loop.run_until_complete(runner.cleanup())
        # Handlers still asleep (a stall) are cancelled, not left for the loop's collector.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    thread = threading.Thread(target=main, name="pathserver", daemon=True)
    thread.start()
    if not ready.wait(10.0):
        raise RuntimeError("the test server did not start")
    try:
        yield f"http://127.0.0.1:{box['port']}", box["server"]
    finally:
        loop = box["loop"]
        loop.call_soon_threadsafe(box["stopped"].set)
        thread.join(timeout=10.0)


@contextlib.contextmanager
def serve_in_process(
    behavior: Behavior | None = None,
    *,
    capacity: int | None = None,
    api_key: str | None = None,
    uvloop: bool = False,
    engine: bool = False,
    log_writes: bool = False,
) -> Iterator[str]:
    """Serve from a child process (its own GIL and loop); yields the base URL."""
    command = [sys.executable, "-m", "infertriage_testing.testserver",
               "--behavior", orjson.dumps(asdict(behavior or Behavior())).decode()]  # fmt: skip
    if capacity is not None:
        command += ["--capacity", str(capacity)]
    if api_key is not None:
        command += ["--api-key", api_key]
    if uvloop:
        command.append("--uvloop")
    if engine:
        command.append("--engine")
    if log_writes:
        command.append("--log-writes")
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if not line.startswith("listening on "):
                raise RuntimeError(f"the test server did not start: {line!r}")
            yield line.removeprefix("listening on ")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def fetch_arrivals(url: str) -> dict[str, int]:
    """Request id → the perf_counter_ns its handler started: where the server's TTFT begins."""
    with urllib.request.urlopen(url + "/_log", timeout=10) as resp:  # 127.0.0.1 only
        data: dict[str, list[int]] = orjson.loads(resp.read())
    return {key: v[3] for key, v in data.items()}


def fetch_posts(url: str) -> dict[str, int]:
    """Request id → how many POSTs carried it: 1 each, unless the client sent one again."""
    with urllib.request.urlopen(url + "/_posts", timeout=10) as resp:  # 127.0.0.1 only
        data: dict[str, int] = orjson.loads(resp.read())
    return data


def fetch_writes(url: str) -> dict[str, list[int]]:
    """With `log_writes`: request id → the perf_counter_ns of every token write."""
    with urllib.request.urlopen(url + "/_writes", timeout=30) as resp:  # 127.0.0.1 only
        data: dict[str, list[int]] = orjson.loads(resp.read())
    return data


def fetch_log(url: str) -> dict[str, tuple[int, int, int]]:
    """The server's truth: request id → (first token write ns, last write ns, tokens)."""
    with urllib.request.urlopen(url + "/_log", timeout=10) as resp:  # 127.0.0.1 only
        data: dict[str, list[int]] = orjson.loads(resp.read())
    return {key: (v[0], v[1], v[2]) for key, v in data.items()}


async def _serve_forever(config: ServerConfig, port: int) -> None:
    server = PathServer(config)
    runner = web.AppRunner(server.app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    sys.stdout.write(f"listening on http://127.0.0.1:{runner.addresses[0][1]}\n")
    sys.stdout.flush()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the loopback test server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--behavior", default="{}", help="JSON object of Behavior fields.")
    parser.add_argument("--capacity", type=int, default=None)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--uvloop", action="store_true", help="Serve on uvloop.")
    parser.add_argument("--engine", action="store_true", help="One decode step for all streams.")
    parser.add_argument("--log-writes", action="store_true", help="Keep every write's time.")
    args = parser.parse_args(argv)
    behavior = Behavior.from_mapping(orjson.loads(args.behavior))
    config = ServerConfig(behavior=behavior, capacity=args.capacity, api_key=args.api_key,
                          engine=args.engine, log_writes=args.log_writes)  # fmt: skip
    factory = None
    if args.uvloop:
        import uvloop  # noqa: PLC0415  # optional

        factory = uvloop.new_event_loop
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve_forever(config, args.port))


def with_behavior(config: ServerConfig, **changes: Any) -> ServerConfig:
    """A copy of `config` whose default behaviour has `changes`."""
    return replace(config, behavior=replace(config.behavior, **changes))


if __name__ == "__main__":
    main()
