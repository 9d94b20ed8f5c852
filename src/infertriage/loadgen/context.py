"""loadgen, level 2: the server's context length, learnt before any load.

Takes an aiohttp session, the server's root URL (no `/v1`), the model and,
when the caller already has it, the `/v1/models` document; gives a
`ContextLimit` (the length and where it came from) or None. Where each
engine says it is its adapter's (`infertriage.engines`); this module asks,
in this order:

- an override (`--max-model-len`) wins;
- `/v1/models`: `max_model_len` of the model's card (vLLM, SGLang, the twin),
  llama.cpp's `meta.n_ctx` (never `n_ctx_train`, the model's trained length);
- `/props`: llama.cpp's per-slot `n_ctx` (`default_generation_settings.n_ctx`);
- `/get_server_info`: SGLang's `context_length`, and `max_req_input_len` as
  its prompt limit;
- `/info`: TGI's `max_total_tokens`, with `max_input_tokens` (or the older
  `max_input_length`) as its prompt limit;
- `/tokenize`: vLLM's answer carries `max_model_len` too.

Every probe is short; a failed one is skipped, never raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from infertriage.engines import (
    ENGINES,
    SaidLimit,
    limit_from_card,
    read_model_list,
    tokenize_forms,
)
from infertriage.workload import ContextLimit

__all__ = ["PER_PROBE_TIMEOUT_S", "find_context_limit", "limit_from_models"]

PER_PROBE_TIMEOUT_S = 3.0  # each probe's, unless the caller bounds it
_PROBE_PROMPT = "hello"


def _limit(said: SaidLimit | None) -> ContextLimit | None:
    return None if said is None else ContextLimit(said.length, said.source, said.prompt_length)


def limit_from_models(entries: Sequence[Any], model: str | None) -> ContextLimit | None:
    """The context length a `/v1/models` list gives for `model` (or its first card)."""
    cards = [c for c in entries if isinstance(c, Mapping)]
    chosen = [c for c in cards if model is not None and str(c.get("id")) == model] or cards[:1]
    for card in chosen:
        found = limit_from_card(card)
        if found is not None:
            return _limit(found)
    return None


async def _get(
    session: aiohttp.ClientSession,
    url: str,
    payload: object = None,
    timeout_s: float = PER_PROBE_TIMEOUT_S,
) -> Any:
    """The JSON answer of a GET (or a POST of `payload`); None on any failure."""
    data = orjson.dumps(payload) if payload is not None else None
    method = "GET" if data is None else "POST"
    headers = {"Content-Type": "application/json"} if data is not None else None
    try:
        async with asyncio.timeout(timeout_s):
            async with session.request(method, url, data=data, headers=headers) as resp:
                if resp.status != 200:
                    return None
                return orjson.loads(await resp.read())
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return None


async def _from_engines(
    session: aiohttp.ClientSession, root: str, timeout_s: float
) -> ContextLimit | None:
    readers = [
        (e.path, e.read_limit)
        for engine in ENGINES
        for e in engine.endpoints
        if e.read_limit is not None
    ]
    documents = await asyncio.gather(
        *(_get(session, root + path, timeout_s=timeout_s) for path, _ in readers)
    )
    for (_, reader), document in zip(readers, documents, strict=True):
        found = reader(document) if isinstance(document, Mapping) else None
        if found is not None:
            return _limit(found)
    return None


async def find_context_limit(
    session: aiohttp.ClientSession,
    root: str,
    *,
    model: str | None,
    models_document: Any = None,
    override: int | None = None,
    timeout_s: float = PER_PROBE_TIMEOUT_S,
) -> ContextLimit | None:
    """The server's context length, from the first source that says it (module docstring);
    each probe waits at most `timeout_s`."""
    if override is not None:
        return ContextLimit(override, "--max-model-len")
    if models_document is None:
        models_document = await _get(session, root + "/v1/models", timeout_s=timeout_s)
    listing = read_model_list(models_document)
    found = limit_from_models(listing.cards, model) if listing.is_list else None
    if found is None:
        found = await _from_engines(session, root, timeout_s)
    if found is None and model is not None:
        found = await _from_tokenize(session, root, model, timeout_s)
    return found


async def _from_tokenize(
    session: aiohttp.ClientSession, root: str, model: str, timeout_s: float
) -> ContextLimit | None:
    """The context length an engine's `/tokenize` answer tells (`TokenizeForm.read_limit`)."""
    for form in tokenize_forms():
        body = form.body(model, {"prompt": _PROBE_PROMPT}) if form.read_limit else None
        if form.read_limit is None or body is None:
            continue
        answer = await _get(session, root + form.path, body, timeout_s=timeout_s)
        found = _limit(form.read_limit(answer))
        if found is not None:
            return found
    return None
