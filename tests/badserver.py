"""A faulty OpenAI-compatible server for tests: over-length prompts get a 500, streams no usage.

Otherwise it answers like a small OpenAI server (chat and completions, streamed
or not, stop strings, `max_tokens`), with a 512-token limit and no /tokenize or
/metrics. `serve_bad_server()` runs it on 127.0.0.1 from a thread of its own.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from .appthread import serve_app

_BAD_LIMIT = 512
_BAD_MODEL = "bad-model"
_BAD_WORDS = tuple(f"w{i:02d}x" for i in range(40))


def _prompt_tokens(body: dict[str, Any]) -> int:
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) + 2 for m in body["messages"]) + 1
    return len(str(body.get("prompt", "")).split())


def _output(body: dict[str, Any]) -> tuple[list[str], str]:
    """The output words (" w00x", " w01x", …), cut at the first stop string."""
    words = [" " + _BAD_WORDS[i % len(_BAD_WORDS)] for i in range(int(body.get("max_tokens", 16)))]
    text = ""
    for i, word in enumerate(words):
        hits = [(text + word).find(s) for s in body.get("stop") or []]
        cut = min((h for h in hits if h >= 0), default=-1)
        if cut >= 0:
            return [*words[:i], (text + word)[:cut][len(text) :]], "stop"
        text += word
    return words, "length"


def _chunk(rid: str, chat: bool, text: str | None, reason: str | None = None) -> bytes:
    if chat:
        delta = {"role": "assistant"} if text is None else {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": reason}
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": reason}
    return b"data: " + json.dumps({"id": rid, "choices": [choice]}).encode() + b"\n\n"


async def _generate(request: web.Request) -> web.StreamResponse:
    """Like an OpenAI server, except: an over-length prompt is a 500 and streams lack usage."""
    chat = request.path.endswith("/chat/completions")
    try:
        body = json.loads(await request.text())  # accepts lone surrogates, as Python servers do
    except ValueError:
        return web.json_response({"error": {"message": "bad JSON"}}, status=400)
    num_prompt = _prompt_tokens(body)
    if num_prompt + int(body.get("max_tokens", 16)) > _BAD_LIMIT:
        return web.json_response(
            {"error": {"message": "CUDA error: device-side assert"}}, status=500
        )
    words, reason = _output(body)
    rid = f"cmpl-{uuid.uuid4().hex}"
    if not body.get("stream"):
        text = "".join(words)
        choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
        choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        usage = {"prompt_tokens": num_prompt, "completion_tokens": len(words)}
        return web.json_response({"id": rid, "choices": [choice], "usage": usage})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    if chat:
        await response.write(_chunk(rid, chat, None))
    for i, word in enumerate(words):
        await response.write(_chunk(rid, chat, word, reason if i == len(words) - 1 else None))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _models(_request: web.Request) -> web.Response:
    card = {"id": _BAD_MODEL, "object": "model", "max_model_len": _BAD_LIMIT}
    return web.json_response({"object": "list", "data": [card]})


async def _health(_request: web.Request) -> web.Response:
    return web.Response()


@contextlib.contextmanager
def serve_bad_server() -> Iterator[str]:
    """The faulty server on 127.0.0.1 from a thread with its own loop; yields its base URL."""
    app = web.Application()
    app.router.add_get("/health", _health)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/completions", _generate)
    app.router.add_post("/v1/chat/completions", _generate)
    with serve_app(app, "badserver") as url:
        yield url
