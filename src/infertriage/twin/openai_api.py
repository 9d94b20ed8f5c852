"""twin, level 2: the OpenAI-compatible request bodies and response chunks, as vLLM shapes them.

Takes decoded JSON bodies of `/v1/completions` and `/v1/chat/completions`;
gives a validated `GenerateRequest`, and builds the JSON of responses,
streamed chunks, usage and errors. Pure functions; the server does the I/O.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ApiError",
    "GenerateRequest",
    "error_body",
    "make_chunk",
    "make_response",
    "parse_generate",
]


class ApiError(Exception):
    """An error the server answers with an OpenAI-format body."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def error_body(err: ApiError) -> dict[str, Any]:
    return {"error": {"message": err.message, "type": err.kind, "param": None, "code": err.status}}


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    chat: bool
    model: str | None
    prompt: str | None
    messages: tuple[Mapping[str, object], ...]
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    stop: tuple[str, ...]
    stop_token_ids: frozenset[int]
    stream: bool
    include_usage: bool
    continuous_usage_stats: bool


def _int_field(body: Mapping[str, Any], name: str, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ApiError(400, f"'{name}' must be an integer of at least {minimum}.")
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return tuple(s for s in stop if s)
    raise ApiError(400, "'stop' must be a string or a list of strings.")


def _prompt(
    body: Mapping[str, Any], chat: bool
) -> tuple[str | None, tuple[Mapping[str, object], ...]]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list.")
        if not all(isinstance(m, dict) for m in messages):
            raise ApiError(400, "each message must be an object.")
        return None, tuple(messages)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string.")
    return prompt, ()


def parse_generate(body: object, chat: bool) -> GenerateRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object.")
    prompt, messages = _prompt(body, chat)
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object.")
    max_tokens = _int_field(body, "max_completion_tokens", 1) if chat else None
    max_tokens = max_tokens or _int_field(body, "max_tokens", 1)
    stop_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(isinstance(i, int) for i in stop_ids):
        raise ApiError(400, "'stop_token_ids' must be a list of integers.")
    model = body.get("model")
    return GenerateRequest(
        chat=chat,
        model=model if isinstance(model, str) else None,
        prompt=prompt,
        messages=messages,
        max_tokens=max_tokens,
        min_tokens=_int_field(body, "min_tokens", 0) or 0,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stop=_stop(body),
        stop_token_ids=frozenset(stop_ids),
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage", False)),
        continuous_usage_stats=bool(options.get("continuous_usage_stats", False)),
    )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def make_chunk(
    request_id: str,
    model: str,
    chat: bool,
    *,
    text: str | None,
    finish_reason: str | None = None,
    role: str | None = None,
    usage_counts: tuple[int, int] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One streamed event; `choices=False` makes the final usage-only chunk."""
    chunk: dict[str, Any] = {
        "id": request_id,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [],
    }
    if choices:
        if chat:
            delta: dict[str, Any] = {}
            if role is not None:
                delta["role"] = role
            if text is not None:
                delta["content"] = text
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None}
        choice["finish_reason"] = finish_reason
        chunk["choices"] = [choice]
    if usage_counts is not None:
        chunk["usage"] = usage(*usage_counts)
    return chunk


def make_response(
    request_id: str,
    model: str,
    chat: bool,
    *,
    text: str,
    finish_reason: str,
    usage_counts: tuple[int, int],
) -> dict[str, Any]:
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return {
        "id": request_id,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(*usage_counts),
    }


def find_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index where the first stop string begins in `text`, or None."""
    hits = [index for index in (text.find(s) for s in stops) if index >= 0]
    return min(hits) if hits else None
