"""A loopback OpenAI-compatible server whose answers are odd in every way a server's can be.

Raw HTTP/1.1 over asyncio streams, so that nothing between the test and the bytes
tidies them: kept-alive connections, chunked bodies, and per request one `MODES`
entry, named by its `X-Odd-Mode` header, else by `plan` for its index (the number
that ends its `X-Request-Id`, as `bench` numbers requests), else `ok`. The modes:
valid JSON of the wrong shape (`choices: [null]`, `choices: "abc"`, `delta: "x"`,
`id: 5`), token counts that are not counts (a string, negative, 1e20, 2.5, a string
`prompt_tokens`), the request's `Authorization` echoed as its id (the
`X-Request-Id` header, or the events' `id`), a gzip body though none was asked,
one in a coding no client decodes (`br`), an HTML login page (labelled, and
labelled `text/plain`), a plain-text body, a stream of tool calls only, streams
with no token (empty `choices`, a role alone), bare-CR and mixed line ends, one
event of `HUGE_EVENT_BYTES`, and a chunked body whose framing breaks (the socket
then stays open: a client that waits for it reads a stall). `GET /v1/models`
answers as vLLM does. `serve_odd(plan)` runs it on 127.0.0.1 from a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

MODEL = "odd-model"
HUGE_EVENT_BYTES = 6 << 20  # past the client's limit on one event
BREAK_DELAY_S = 0.05
_TEXT = ("Hello", " odd", " world")


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def chat(self) -> bool:
        return self.path.endswith("/chat/completions")

    @property
    def index(self) -> int | None:
        tail = self.headers.get("x-request-id", "").rpartition("-")[2]
        return int(tail) if tail.isdigit() else None


def _doc(chat: bool, text: str | None, **extra: object) -> dict[str, object]:
    choice: dict[str, object] = {"index": 0, "finish_reason": extra.pop("finish", None)}
    if text is not None:
        choice |= {"delta": {"content": text}} if chat else {"text": text}
    return {"id": extra.pop("id", "cmpl-odd"), "model": MODEL, "choices": [choice], **extra}


def _frame(document: object, end: bytes = b"\n\n") -> bytes:
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    return b"data: " + raw + end


def _usage(completion: object, prompt: object = 16) -> dict[str, object]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 19}


def _ok_frames(
    chat: bool, *, bad: bytes | None = None, usage_first: object = None, **extra: object
) -> list[bytes]:
    """A healthy stream of three tokens, with `bad` (an event's JSON) after the first."""
    frames = []
    if chat:
        role = {
            "id": extra.get("id", "cmpl-odd"),
            "choices": [{"index": 0, "delta": {"role": "assistant"}}],
        }
        frames.append(_frame(role))
    for i, text in enumerate(_TEXT, start=1):
        usage = usage_first if (i == 1 and usage_first is not None) else _usage(i)
        frames.append(_frame(_doc(chat, text, usage=usage, **extra)))
        if i == 1 and bad is not None:
            frames.append(_frame(bad))
    frames.append(_frame(_doc(chat, "", finish="length", usage=_usage(3), **extra)))
    frames.append(b"data: [DONE]\n\n")
    return frames


def _tool_frames(chat: bool) -> list[bytes]:
    call = {"index": 0, "id": "call_1", "type": "function"}
    deltas = [
        {"role": "assistant", "content": None},
        {"tool_calls": [{**call, "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
    ]
    frames = [_frame({"id": "cmpl-odd", "choices": [{"index": 0, "delta": d}]}) for d in deltas]
    end = {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    frames.append(_frame({"id": "cmpl-odd", "choices": [end], "usage": _usage(12)}))
    return [*frames, b"data: [DONE]\n\n"]


def _empty_frames(chat: bool) -> list[bytes]:
    frames = [_frame({"id": "cmpl-odd", "choices": []}) for _ in range(3)]
    frames.append(_frame({"id": "cmpl-odd", "choices": [], "usage": _usage(0)}))
    return [*frames, b"data: [DONE]\n\n"]


def _role_only_frames(chat: bool) -> list[bytes]:
    role = {"id": "cmpl-odd", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
    end = {"id": "cmpl-odd", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return [_frame(role), _frame(end), b"data: [DONE]\n\n"]


def _relined(frames: list[bytes], ends: tuple[bytes, ...]) -> list[bytes]:
    """The same events with their line ends taken in turn from `ends`."""
    return [f[:-2] + ends[i % len(ends)] for i, f in enumerate(frames)]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


class _Writer:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def head(self, content_type: str, *extra: str, status: str = "200 OK") -> None:
        lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", *extra]
        lines.append("Transfer-Encoding: chunked")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await self.writer.drain()

    async def chunks(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self.writer.write(_chunk(piece))
            await self.writer.drain()
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def stream(self, frames: list[bytes], *extra: str) -> None:
        await self.head("text/event-stream", *extra)
        await self.chunks(frames)


Mode = Callable[[_Writer, Request, "OddServer"], Awaitable[bool]]  # true: keep the connection


def _frames_mode(make: Callable[[Request], list[bytes]], *extra: str) -> Mode:
    async def mode(w: _Writer, request: Request, server: OddServer) -> bool:
        await w.stream(make(request), *extra)
        return True

    return mode


def _bad(raw: bytes) -> Mode:
    return _frames_mode(lambda r: _ok_frames(r.chat, bad=raw))


def _counted(usage: object) -> Mode:
    return _frames_mode(lambda r: _ok_frames(r.chat, usage_first=usage))


async def _echo_id(w: _Writer, request: Request, server: OddServer) -> bool:
    await w.stream(_ok_frames(request.chat), f"X-Request-Id: {request.headers['authorization']}")
    return True


async def _gzip(w: _Writer, request: Request, server: OddServer) -> bool:
    """Compressed as a proxy that ignores `Accept-Encoding: identity` would: flushed per event."""
    packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    pieces = [
        packer.compress(f) + packer.flush(zlib.Z_SYNC_FLUSH) for f in _ok_frames(request.chat)
    ]
    await w.head("text/event-stream", "Content-Encoding: gzip")
    await w.chunks([*pieces, packer.flush()])
    return True


async def _brotli(w: _Writer, request: Request, server: OddServer) -> bool:
    await w.stream(_ok_frames(request.chat), "Content-Encoding: br")
    return True


LOGIN_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n\n"
    b"<body><form action='/login'><input name='user'></form></body></html>\n"
)


async def _html(w: _Writer, request: Request, server: OddServer) -> bool:
    await w.head("text/html; charset=utf-8")
    await w.chunks([LOGIN_PAGE])
    return True


async def _html_as_text(w: _Writer, request: Request, server: OddServer) -> bool:
    await w.head("text/plain")
    await w.chunks([LOGIN_PAGE])
    return True


async def _text_plain(w: _Writer, request: Request, server: OddServer) -> bool:
    await w.head("text/plain; charset=utf-8")
    await w.chunks([b"OK: the service is running.\n\nNothing else to say.\n"])
    return True


async def _huge_event(w: _Writer, request: Request, server: OddServer) -> bool:
    frames = _ok_frames(request.chat)
    event = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * HUGE_EVENT_BYTES
    pieces = [frames[0], *(event[i : i + 65536] for i in range(0, len(event), 65536))]
    await w.head("text/event-stream")
    await w.chunks([*pieces, b'"}}]}\n\n', *frames[1:]])
    return True


async def _bad_chunk(w: _Writer, request: Request, server: OddServer) -> bool:
    """Two good events, then a chunk size that is no number; the socket stays open.

    The break goes out a moment after the events, so that it reaches the client in a read
    of its own, after the headers, nearly always (with them it is a response that does not
    parse at all: `protocol`, before any header).
    """
    await w.head("text/event-stream")
    for frame in _ok_frames(request.chat)[:2]:
        w.writer.write(_chunk(frame))
    await w.writer.drain()
    await asyncio.sleep(BREAK_DELAY_S)
    w.writer.write(b"zz\r\nnot a chunk\r\n")
    await w.writer.drain()
    return False  # the connection is held until the client closes it (`_serve`)


MODES: dict[str, Mode] = {
    "ok": _frames_mode(lambda r: _ok_frames(r.chat)),
    "choices_null": _bad(b'{"id":"cmpl-odd","choices":[null]}'),
    "choices_str": _bad(b'{"id":"cmpl-odd","choices":"abc"}'),
    "delta_str": _bad(b'{"id":"cmpl-odd","choices":[{"index":0,"delta":"x"}]}'),
    "content_number": _bad(b'{"id":"cmpl-odd","choices":[{"index":0,"delta":{"content":7}}]}'),
    "usage_str": _bad(b'{"id":"cmpl-odd","choices":[],"usage":"12"}'),
    "prompt_tokens_str": _counted(_usage(1, prompt="12")),
    "count_str": _counted(_usage("1")),
    "count_negative": _counted(_usage(-3)),
    "count_huge": _bad(b'{"id":"cmpl-odd","choices":[],"usage":{"completion_tokens":1e20}}'),
    "count_float": _counted(_usage(2.5)),
    "id_int": _frames_mode(lambda r: _ok_frames(r.chat, id=5)),
    "echo_id": _echo_id,
    "echo_event_id": _frames_mode(
        lambda r: _ok_frames(r.chat, id=f"chatcmpl-{r.headers['authorization']}")
    ),
    "gzip": _gzip,
    "brotli": _brotli,
    "html": _html,
    "html_as_text": _html_as_text,
    "text_plain": _text_plain,
    "tool_calls": _frames_mode(lambda r: _tool_frames(r.chat)),
    "empty_choices": _frames_mode(lambda r: _empty_frames(r.chat)),
    "role_only": _frames_mode(lambda r: _role_only_frames(r.chat)),
    "bare_cr": _frames_mode(lambda r: _relined(_ok_frames(r.chat), (b"\r\r",))),
    "mixed_ends": _frames_mode(
        lambda r: _relined(_ok_frames(r.chat), (b"\r\r", b"\n\n", b"\r\n\r\n", b"\r\n\r"))
    ),
    "huge_event": _huge_event,
    "bad_chunk": _bad_chunk,
}

# What each mode's request becomes: the fault of its record ("" for a success).
EXPECTED_FAULT = {
    "ok": "",
    "choices_null": "bad_shape",
    "choices_str": "bad_shape",
    "delta_str": "bad_shape",
    "content_number": "bad_shape",
    "usage_str": "bad_shape",
    "prompt_tokens_str": "bad_count",
    "count_str": "bad_count",
    "count_negative": "bad_count",
    "count_huge": "bad_count",
    "count_float": "bad_count",
    "id_int": "bad_shape",
    "echo_id": "",
    "echo_event_id": "",
    "gzip": "",
    "brotli": "bad_encoding",
    "html": "html_page",
    "html_as_text": "html_page",
    "text_plain": "not_event_stream",
    "tool_calls": "",
    "empty_choices": "empty_stream",
    "role_only": "empty_stream",
    "bare_cr": "",
    "mixed_ends": "",
    "huge_event": "event_too_large",
    "bad_chunk": "bad_transfer",
}
assert EXPECTED_FAULT.keys() == MODES.keys()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body)


@dataclass
class OddServer:
    plan: Mapping[int, str] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)  # the generation requests' ids, as they came

    def mode(self, request: Request) -> str:
        named = request.headers.get("x-odd-mode")
        if named:
            return named
        index = request.index
        return self.plan.get(index, "ok") if index is not None else "ok"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader)) is not None:
                if not await self._answer(request, _Writer(writer)):
                    await _hold_until_closed(reader)
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _answer(self, request: Request, w: _Writer) -> bool:
        if request.method == "GET" and request.path.endswith("/models"):
            document = {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "max_model_len": 4096}],
            }
            body = json.dumps(document).encode()
            w.writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            await w.writer.drain()
            return True
        if request.method != "POST" or not request.path.endswith("completions"):
            w.writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            await w.writer.drain()
            return True
        self.seen.append(request.headers.get("x-request-id", ""))
        return await MODES[self.mode(request)](w, request, self)


async def _hold_until_closed(reader: asyncio.StreamReader) -> None:
    """Keep the socket open (writing nothing) until the client closes it, for 60 s at most."""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(60):
            while await reader.read(65536):
                pass


@contextlib.contextmanager
def serve_odd(plan: Mapping[int, str] | None = None) -> Iterator[tuple[str, OddServer]]:
    """`(base URL without /v1, server)` of an `OddServer` on 127.0.0.1, from a thread."""
    server = OddServer(dict(plan or {}))
    loop = asyncio.new_event_loop()
    started: list[asyncio.Server] = []
    ready = threading.Event()

    async def start() -> None:
        started.append(await asyncio.start_server(server.serve, "127.0.0.1", 0))
        ready.set()

    def run() -> None:
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    port = started[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:

        async def stop() -> None:
            started[0].close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
