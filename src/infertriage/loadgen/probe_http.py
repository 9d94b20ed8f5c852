"""loadgen, level 2: the HTTP and answer-parsing helpers of the go-live checklist (`probes`).

Takes a `_Probe` (an aiohttp session, the server's root URL, the model and
what is known of it), a path and a payload; gives a `_Reply` (status and
body, or why there was none) for a whole request, a `_Streamed` (an SSE
stream's JSON chunks, whether `[DONE]` came and what followed it) for a
streamed one, and `/tokenize`'s count of a prompt. Also builds the request
bodies and reads the answers: text, finish reason, usage, and what is wrong
with a reply as a clause for a check's detail. aiohttp, timeout and OS
errors never raise here; each becomes the result's `error`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from infertriage.engines import TokenizeForm, tokenize_forms
from infertriage.loadgen.sse import SseEvent, SseParser

_MAX_TOKENS = 8
_SNIPPET = 120

_PROMPT = "Write one short sentence about the sea."


# ---------------------------------------------------------------------- HTTP


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int | None  # None: no whole HTTP answer
    body: bytes
    error: str  # why there is no answer; "" when there is one

    def document(self) -> Any:
        """The body as JSON; None when it is not valid UTF-8 JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None


@dataclass(slots=True)
class _Streamed:
    status: int | None = None
    error: str = ""  # a transport failure or a bad event
    chunks: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    after_done: int = 0  # events after [DONE]
    body: bytes = b""  # of a non-200 answer


@dataclass(slots=True)
class _Probe:
    session: aiohttp.ClientSession
    root: str  # no /v1
    model: str | None
    max_model_len: int | None
    limit_source: str  # where max_model_len came from
    listed: tuple[str, ...]
    models_problem: str  # why /v1/models gave no list; "" when it did
    health: str  # what /health said, as words for a detail
    # engine form → whether its /tokenize answered the first time it was asked
    tokenize_answers: dict[str, bool] = field(default_factory=dict)


def _describe(err: BaseException) -> str:
    if isinstance(err, TimeoutError):
        return "no answer before the timeout"
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"{type(err.os_error).__name__}: {err.os_error.strerror or err.os_error}"
    return f"{type(err).__name__}: {err}".rstrip(": ")


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _snippet(body: bytes) -> str:
    """The body in short: an OpenAI-format error's message, else the start of the text."""
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict):
        error = document.get("error", document)
        message = error.get("message") if isinstance(error, dict) else error
        text = str(message) if message else text
    text = text.rstrip(". ")
    return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET else "") if text else "(empty body)"


async def _request(p: _Probe, path: str, payload: object = None) -> _Reply:
    """GET without a payload, else POST it (bytes as they are, anything else as JSON)."""
    data = payload if isinstance(payload, bytes) else None
    if payload is not None and data is None:
        data = orjson.dumps(payload)
    headers = {"Content-Type": "application/json"} if data is not None else None
    method = "GET" if data is None else "POST"
    try:
        async with p.session.request(method, p.root + path, data=data, headers=headers) as resp:
            return _Reply(resp.status, await resp.read(), "")
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
        return _Reply(None, b"", _describe(err))


def _fold(out: _Streamed, events: list[SseEvent]) -> None:
    for name, data in events:
        if out.done:
            out.after_done += 1
            continue
        if data == b"[DONE]":
            out.done = True
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if name == b"error" or not isinstance(obj, dict) or "error" in obj:
            out.error = out.error or f"a bad event {_snippet(data)!r}"
        else:
            out.chunks.append(obj)


async def _stream(p: _Probe, path: str, payload: dict[str, object]) -> _Streamed:
    out = _Streamed()
    parser = SseParser()
    body = orjson.dumps({**payload, "stream": True})
    headers = {"Content-Type": "application/json"}
    try:
        async with p.session.post(p.root + path, data=body, headers=headers) as resp:
            out.status = resp.status
            if resp.status != 200:
                out.body = await resp.read()
                return out
            async for data in resp.content.iter_any():
                _fold(out, parser.feed(data))
            _fold(out, parser.close())
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
        out.error = out.error or _describe(err)
    return out


async def _count_with(p: _Probe, form: TokenizeForm, prompt: str) -> int | None:
    """`form`'s count of `prompt`; None where it gave none. A form that gave none the first
    time is not asked again during the checklist."""
    if p.tokenize_answers.get(form.name) is False:
        return None
    body = form.body(p.model or "", {"prompt": prompt})
    if body is None:
        return None
    reply = await _request(p, form.path, body)
    count = form.count(reply.document() if reply.status == 200 else None)
    p.tokenize_answers.setdefault(form.name, count is not None)
    return count


async def _tokenize(p: _Probe, prompt: str) -> int | None:
    """The server's token count of `prompt` as `usage.prompt_tokens` would count it: the first
    engine form that counts so (`TokenizeForm.counts_like_usage`) and answers; None without."""
    for form in tokenize_forms():
        if form.counts_like_usage and (count := await _count_with(p, form, prompt)) is not None:
            return count
    return None


async def _count_tokens(p: _Probe, prompt: str) -> int | None:
    """A token count good enough to size a prompt: the first engine form that answers.

    llama-server's /tokenize may count a BOS the completion does not, so it sizes prompts
    but is never cross-checked against usage (`_tokenize`).
    """
    for form in tokenize_forms():
        if (count := await _count_with(p, form, prompt)) is not None:
            return count
    return None


# ---------------------------------------------------------------------- bodies and answers


def _completion(p: _Probe, prompt: str, max_tokens: int = _MAX_TOKENS, **extra: object) -> Any:
    body = {"model": p.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    return body | extra


def _chat(p: _Probe, max_tokens: int = _MAX_TOKENS, **extra: object) -> Any:
    messages = [{"role": "user", "content": _PROMPT}]
    body = {"model": p.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    return body | extra


def _path(chat: bool) -> str:
    return "/v1/chat/completions" if chat else "/v1/completions"


def _first_choice(document: Any) -> dict[str, Any]:
    choices = document.get("choices") if isinstance(document, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _text_of(choice: dict[str, Any], key: str) -> str:
    """A choice's text; for chat, reasoning counts too (a reasoning model may give only that)."""
    if key == "text":
        return str(choice.get("text") or "")
    part = choice.get(key)
    if not isinstance(part, dict):
        return ""
    return str(part.get("content") or part.get("reasoning_content") or part.get("reasoning") or "")


def _answer(document: Any, chat: bool) -> tuple[str, str | None]:
    """(text, finish_reason) of a whole answer."""
    choice = _first_choice(document)
    reason = choice.get("finish_reason")
    return _text_of(choice, "message" if chat else "text"), str(reason) if reason else None


def _streamed_text(s: _Streamed, chat: bool) -> list[str]:
    """The non-empty content pieces of a stream, one per chunk."""
    key = "delta" if chat else "text"
    texts = (_text_of(_first_choice(chunk), key) for chunk in s.chunks)
    return [text for text in texts if text]


def _streamed_finish(s: _Streamed) -> str | None:
    reasons = [_first_choice(c).get("finish_reason") for c in s.chunks]
    found = [str(r) for r in reasons if r]
    return found[-1] if found else None


def _usage(document: Any, key: str) -> int | None:
    usage = document.get("usage") if isinstance(document, dict) else None
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _reply_problem(reply: _Reply, what: str) -> str | None:
    """None when `reply` is a 200 with a JSON object; else what is wrong, as a clause."""
    if reply.status is None:
        return f"{what} got no answer ({reply.error})"
    if reply.status != 200:
        return f"{what} answered HTTP {reply.status}: {_snippet(reply.body)}"
    if not isinstance(reply.document(), dict):
        return f"{what} answered 200 with a body that is not a valid UTF-8 JSON object"
    return None


def _stream_problem(s: _Streamed, what: str) -> str | None:
    if s.status is None:
        return f"{what} got no answer ({s.error})"
    if s.status != 200:
        return f"{what} answered HTTP {s.status}: {_snippet(s.body)}"
    if s.error:
        return f"{what} broke off: {s.error}"
    if not s.done:
        return f"{what} ended without `data: [DONE]`, which OpenAI clients wait for"
    if s.after_done:
        return f"{what} sent {s.after_done} events after `data: [DONE]`"
    return None
