"""A loopback OpenAI-compatible server whose every text is hostile, and that echoes secrets.

Its model name, error messages, `/version` and the label values of its vLLM
`/metrics` carry rich markup (`[/x]`, `[bold]`), terminal escapes (clear the
screen, set the window title), `<script>`, a pipe and backticks. Of the
generation requests (chat and completions, streamed or not) the first of
every `PERIOD` answers HTTP 400 and the third a stream that breaks off with
an error event, both quoting the request's `Authorization` and
`X-Secret-Token` headers as a careless server does ("Incorrect API key
provided: Bearer sk-…"); the second is a 500; the rest stream normally (few
enough rejections that validate and diagnose take the load as asked). With `key` set, a
request without that key gets a 401 that echoes the key it was sent (model
listing stays open, so the load starts). `serve_hostile()` runs it on
127.0.0.1 from a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from .appthread import serve_app

HOSTILE = "[/x][bold]\x1b[2J\x1b]0;pwn\x07<script>alert(1)</script>|`tick`"
HOSTILE_MODEL = f"evil{HOSTILE}"
RAW_CONTROLS = ("\x1b", "\x07")
PERIOD = 100


def _echo(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "(none)")
    token = request.headers.get("X-Secret-Token", "(none)")
    return f"Incorrect API key provided: {auth}; token {token}. {HOSTILE}"


def _error(message: str, status: int) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": status}}
    return web.json_response(body, status=status)


def _chunk(chat: bool, text: str, reason: str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    choice |= {"delta": {"content": text}} if chat else {"text": text}
    return {"id": "cmpl-hostile", "model": HOSTILE_MODEL, "choices": [choice]}


def _frame(document: object) -> bytes:
    return b"data: " + json.dumps(document).encode() + b"\n\n"


class _Hostile:
    def __init__(self, key: str | None) -> None:
        self.key = key
        self.count = 0

    async def generate(self, request: web.Request) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        body = json.loads(await request.text())
        if self.key is not None and request.headers.get("Authorization") != f"Bearer {self.key}":
            return _error(_echo(request), 401)
        self.count += 1
        turn = self.count % PERIOD
        if turn == 1:
            return _error(_echo(request), 400)
        if turn == 2:
            return _error(f"CUDA error: {HOSTILE}", 500)
        num_tokens = max(1, min(int(body.get("max_tokens") or 4), 8))
        if not body.get("stream"):
            text = " word" * num_tokens
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            choice |= (
                {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            )
            usage = {"prompt_tokens": 8, "completion_tokens": num_tokens}
            return web.json_response({"id": "x", "choices": [choice], "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if turn == 3:  # a stream that breaks off with an error event echoing the secrets
            await response.write(_frame(_chunk(chat, " word")))
            await response.write(_frame({"error": {"message": _echo(request), "code": 400}}))
        else:
            for i in range(num_tokens):
                last = "length" if i == num_tokens - 1 else None
                await response.write(_frame(_chunk(chat, " word", last)))
                await asyncio.sleep(0.002)
            usage = {"prompt_tokens": 8, "completion_tokens": num_tokens}
            await response.write(_frame({"id": "x", "choices": [], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _metrics_text() -> str:
    model = f'model_name="{_label(HOSTILE_MODEL)}"'
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{model}}} 1\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{{{model}}} 0\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{{{model}}} 0.25\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="16",cache_dtype="{_label(HOSTILE)}",'
        'num_gpu_blocks="1000",gpu_memory_utilization="0.9"} 1\n'
        "# TYPE vllm:prompt_tokens_total counter\n"
        f"vllm:prompt_tokens_total{{{model}}} 100\n"
    )


def _app(key: str | None) -> web.Application:
    hostile = _Hostile(key)

    async def models(_request: web.Request) -> web.Response:
        card = {"id": HOSTILE_MODEL, "object": "model", "owned_by": HOSTILE, "max_model_len": 4096}
        return web.json_response({"object": "list", "data": [card]})

    async def version(_request: web.Request) -> web.Response:
        return web.json_response({"version": HOSTILE})

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text=_metrics_text(), content_type="text/plain")

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", hostile.generate)
    app.router.add_post("/v1/chat/completions", hostile.generate)
    return app


@contextlib.contextmanager
def serve_hostile(key: str | None = None) -> Iterator[str]:
    """The hostile server on 127.0.0.1 from a thread with its own loop; yields its base URL."""
    app = _app(key)
    with serve_app(app, "hostileserver") as url:
        yield url
