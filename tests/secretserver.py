"""Loopback OpenAI-compatible servers that test where the secrets sent to them end up.

- `serve_recording()`: a small server that records the headers of every request
  it gets (`Recorded.seen`: path and headers) and answers the model list, chat
  and completions (streamed or not), /health and nothing else.
- `serve_redirecting(to)`: a front that answers every request with a 307 to the
  same path at `to` (another port: another origin), except paths under `/same/`,
  which it 307s to `/served/` and the rest of the path on itself (the same
  origin) and serves there, recording them.
- `serve_echoing(key, user_info)`: a server that echoes what it was sent as a
  careless server or gateway does, in every form a redactor must know: the
  request's `Authorization` (and `X-Secret-Token`) in the response's
  `X-Request-Id`, or in its stream's first event's `id`; the credential upper-case,
  lower-case, base64 (standard and URL-safe, padded or not) and base64 inside a
  longer base64 text (`user:KEY`, `Authorization: Bearer KEY`); some requests
  answer a 500 quoting them all. With `user_info` set, a request without that
  `Authorization: Basic` is refused with a 401 that quotes what it got.

Each runs on 127.0.0.1 from a thread with its own event loop.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .appthread import serve_app

MODEL = "secret-test-model"
ERROR_EVERY = 8  # of the echoing server's generation requests, every 8th is a 500


@dataclass
class Recorded:
    """What a server saw: (path, headers) of each request, in order."""

    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def headers_of(self, path_end: str) -> list[dict[str, str]]:
        return [headers for path, headers in self.seen if path.endswith(path_end)]


def _chunk(chat: bool, text: str, reason: str | None, event_id: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    choice |= {"delta": {"content": text}} if chat else {"text": text}
    document: dict[str, Any] = {"model": MODEL, "choices": [choice]}
    return document | ({"id": event_id} if event_id is not None else {})


def _frame(document: object) -> bytes:
    return b"data: " + json.dumps(document).encode() + b"\n\n"


async def _answer(
    request: web.Request, *, reply_id: str = "", event_id: str | None = None
) -> web.StreamResponse:
    """A short answer to a chat or completions request, streamed when asked."""
    chat = request.path.endswith("/chat/completions")
    body = json.loads(await request.text() or "{}")
    num_tokens = max(1, min(int(body.get("max_tokens") or 4), 8))
    headers = {"X-Request-Id": reply_id} if reply_id else {}
    if not body.get("stream"):
        text = " word" * num_tokens
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        usage = {"prompt_tokens": 8, "completion_tokens": num_tokens}
        document = {"id": event_id or "cmpl-1", "choices": [choice], "usage": usage}
        return web.json_response(document, headers=headers)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await response.prepare(request)
    for i in range(num_tokens):
        last = "length" if i == num_tokens - 1 else None
        await response.write(_frame(_chunk(chat, " word", last, event_id if i == 0 else None)))
    usage = {"prompt_tokens": 8, "completion_tokens": num_tokens}
    await response.write(_frame({"choices": [], "usage": usage}))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _models(_request: web.Request) -> web.Response:
    card = {"id": MODEL, "object": "model", "owned_by": "test", "max_model_len": 4096}
    return web.json_response({"object": "list", "data": [card]})


async def _health(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _serving_routes(app: web.Application, prefix: str = "") -> None:
    app.router.add_get(f"{prefix}/health", _health)
    app.router.add_get(f"{prefix}/v1/models", _models)
    app.router.add_post(f"{prefix}/v1/completions", _answer)
    app.router.add_post(f"{prefix}/v1/chat/completions", _answer)


def _recording(record: Recorded) -> Callable[..., Any]:
    @web.middleware
    async def middleware(request: web.Request, handler: Callable[..., Any]) -> Any:
        record.seen.append((request.path, dict(request.headers)))
        return await handler(request)

    return middleware


@contextlib.contextmanager
def serve_recording() -> Iterator[tuple[str, Recorded]]:
    """The recording server; yields its root URL and what it saw."""
    record = Recorded()
    app = web.Application(middlewares=[_recording(record)])
    _serving_routes(app)
    with serve_app(app, "secretserver") as url:
        yield url, record


@contextlib.contextmanager
def serve_redirecting(to: str) -> Iterator[tuple[str, Recorded]]:
    """The redirecting front (module docstring); yields its root URL and what it served."""
    record = Recorded()

    async def redirect(request: web.Request) -> web.Response:
        path = request.path_qs
        if path.startswith("/same/"):
            raise web.HTTPTemporaryRedirect("/served" + path.removeprefix("/same"))
        raise web.HTTPTemporaryRedirect(to + path)

    served = web.Application(middlewares=[_recording(record)])
    _serving_routes(served)
    app = web.Application()
    app.router.add_route("*", "/same/{tail:.*}", redirect)
    app.add_subapp("/served", served)
    app.router.add_route("*", "/{tail:.*}", redirect)
    with serve_app(app, "secretserver") as url:
        yield url, record


def echo_forms(secret: str) -> list[str]:
    """The forms a careless server echoes `secret` in (see the module docstring)."""
    raw = secret.encode()
    return [
        secret,
        secret.upper(),
        secret.lower(),
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        base64.b64encode(b"user:" + raw).decode(),
        base64.urlsafe_b64encode(b"Authorization: Bearer " + raw).decode(),
        base64.b64encode(b"{" + raw + b"}").decode(),
    ]


def _credential(value: str) -> str:
    return value.split(" ", 1)[1] if " " in value else value


@contextlib.contextmanager
def serve_echoing(user_info: str | None = None) -> Iterator[tuple[str, Recorded]]:
    """The echoing server (module docstring); yields its root URL and what it saw."""
    record = Recorded()
    count = 0
    expected = (
        "Basic " + base64.b64encode(user_info.encode()).decode() if user_info is not None else None
    )

    async def generate(request: web.Request) -> web.StreamResponse:
        nonlocal count
        auth = request.headers.get("Authorization", "")
        if expected is not None and auth != expected:
            message = f"unauthorized: got {auth!r}"
            return web.json_response({"error": {"message": message, "code": 401}}, status=401)
        secrets = [_credential(auth)] if auth else []
        secrets += [v for v in [request.headers.get("X-Secret-Token", "")] if v]
        forms = [form for secret in secrets for form in echo_forms(secret)] or ["none"]
        count += 1
        if count % ERROR_EVERY == 0:
            message = "bad key: " + " ".join(forms)
            return web.json_response({"error": {"message": message, "code": 500}}, status=500)
        echo = forms[(count // 2) % len(forms)]
        if count % 2:  # the id header: the echo, and the whole Authorization besides
            return await _answer(request, reply_id=f"{echo} {auth}".strip())
        return await _answer(request, event_id=echo)

    app = web.Application(middlewares=[_recording(record)])
    app.router.add_get("/health", _health)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    with serve_app(app, "secretserver") as url:
        yield url, record
