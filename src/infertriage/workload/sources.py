"""workload, level 1: requests read from files (ShareGPT JSON, custom JSONL, timed traces).

Takes a path; gives `DatasetItem`s (the messages of one request, its prompt
and output token targets, and an optional timestamp for replay). Reading is
the only I/O here: a local file, never a hub. A malformed file is a
`UserError` that names file and line.

Custom JSONL, one request per line: `{"prompt": "..."}` or
`{"messages": [{"role": "user", "content": "..."}]}`, with optional
`"max_tokens"` (or `"output_tokens"`), `"prompt_tokens"` and `"timestamp"`
(seconds; `"timestamp_ms"` too). A line with only `"input_length"` and
`"output_length"` (a Mooncake-style trace) gets synthetic text of that length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from infertriage.schemas import UserError
from infertriage.workload.spec import SynthText, Turn
from infertriage.workload.text import TokenCounter, estimate_tokens

__all__ = ["DatasetItem", "read_jsonl_requests", "read_sharegpt"]

DEFAULT_OUTPUT_TOKENS = 256


@dataclass(frozen=True, slots=True)
class DatasetItem:
    turns: tuple[Turn, ...]
    prompt_tokens: int
    output_tokens: int
    timestamp_s: float | None = None


def _count(text: str, tokenizer: TokenCounter | None) -> int:
    return tokenizer.count(text) if tokenizer is not None else estimate_tokens(text)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise UserError(f"cannot read workload file {path}: {err.strerror}.") from err


def read_sharegpt(path: Path, tokenizer: TokenCounter | None = None) -> list[DatasetItem]:
    """The first human turn of each ShareGPT conversation; the first reply's length as output."""
    try:
        data = orjson.loads(_read_bytes(path))
    except orjson.JSONDecodeError as err:
        raise UserError(f"{path} is not valid JSON ({err.msg}).") from err
    if not isinstance(data, list):
        raise UserError(f"{path}: a ShareGPT file holds a JSON list of conversations.")
    items: list[DatasetItem] = []
    for entry in data:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        first, reply = turns[0], turns[1]
        if not (isinstance(first, dict) and isinstance(reply, dict)):
            continue
        prompt, answer = first.get("value"), reply.get("value")
        if not (isinstance(prompt, str) and isinstance(answer, str) and prompt and answer):
            continue
        items.append(
            DatasetItem(
                turns=(Turn("user", prompt),),
                prompt_tokens=_count(prompt, tokenizer),
                output_tokens=max(4, _count(answer, tokenizer)),
            )
        )
    if not items:
        raise UserError(f"{path} holds no usable ShareGPT conversation (human turn, then reply).")
    return items


def _messages(value: Any, where: str) -> tuple[Turn, ...]:
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: `messages` must be a non-empty list.")
    turns = []
    for message in value:
        if not isinstance(message, dict):
            raise UserError(f"{where}: each message is an object with role and content.")
        role, content = message.get("role"), message.get("content")
        if not (isinstance(role, str) and isinstance(content, str)):
            raise UserError(f"{where}: each message needs a string role and content.")
        turns.append(Turn(role, content))
    return tuple(turns)


def _int(line: dict[str, Any], keys: tuple[str, ...], where: str) -> int | None:
    for key in keys:
        if key in line:
            value = line[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UserError(f"{where}: {key!r} must be a non-negative integer.")
            return value
    return None


def _timestamp(line: dict[str, Any], where: str) -> float | None:
    for key, scale in (("timestamp", 1.0), ("timestamp_ms", 1e-3)):
        if key in line:
            value = line[key]
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise UserError(f"{where}: {key!r} must be a number.")
            return float(value) * scale
    return None


def _item(line: Any, where: str, tokenizer: TokenCounter | None, key: int) -> DatasetItem:
    if not isinstance(line, dict):
        raise UserError(f"{where}: each line is a JSON object.")
    prompt_tokens = _int(line, ("prompt_tokens", "input_length", "input_tokens"), where)
    if "messages" in line:
        turns = _messages(line["messages"], where)
    elif isinstance(line.get("prompt"), str):
        turns = (Turn("user", line["prompt"]),)
    elif prompt_tokens is not None:
        turns = (Turn("user", SynthText(max(1, prompt_tokens), key)),)
    else:
        raise UserError(f"{where}: a request needs `prompt`, `messages` or `input_length`.")
    if prompt_tokens is None:
        text = "\n".join(t.content for t in turns if isinstance(t.content, str))
        prompt_tokens = _count(text, tokenizer)
    output = _int(line, ("max_tokens", "output_tokens", "output_length"), where)
    return DatasetItem(
        turns=turns,
        prompt_tokens=prompt_tokens,
        output_tokens=max(1, output if output is not None else DEFAULT_OUTPUT_TOKENS),
        timestamp_s=_timestamp(line, where),
    )


def read_jsonl_requests(
    path: Path, tokenizer: TokenCounter | None = None, *, key_base: int = 0
) -> list[DatasetItem]:
    """One request per line; blank lines are skipped."""
    items: list[DatasetItem] = []
    for lineno, raw in enumerate(_read_bytes(path).splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            raise UserError(f"{where}: malformed JSON ({err.msg}).") from err
        items.append(_item(line, where, tokenizer, key_base + lineno))
    if not items:
        raise UserError(f"{path} holds no request.")
    stamps = [item.timestamp_s for item in items]
    if any(s is not None for s in stamps) and any(s is None for s in stamps):
        raise UserError(f"{path}: either every line has a timestamp or none does.")
    return items
