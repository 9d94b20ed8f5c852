"""loadgen, level 2: the HTTP of what `bench` learns before any load, each call blocking.

Takes the base URL (`…/v1`) and the headers; gives `ask_models`'s `ServerInfo`
(`/v1/models`: a wrong URL, a server that is down or a refused key is a `UserError` of
one sentence), `find_limit` (the server's context length, `context`, or none) and
`learn_prompts` (how the server counts prompts, `promptcount`). Each runs its own event
loop here, so `api.preflight` orchestrates without one. `limit_s` (the run's own
request or stall time-out) bounds every probe's wait: a server that stalls costs
the run no more before its load than one of its requests would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from infertriage.engines import read_model_list
from infertriage.loadgen.context import PER_PROBE_TIMEOUT_S, find_context_limit
from infertriage.loadgen.promptcount import learn_prompt_model
from infertriage.loadgen.runner import blocking, run_sync
from infertriage.net import open_session, root_url
from infertriage.schemas import UserError
from infertriage.workload import ContextLimit

__all__ = ["ServerInfo", "ask_models", "find_limit", "learn_prompts", "probe_timeout"]

_PREFLIGHT_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What `/v1/models` answered, and where and how it was asked (for `find_limit`)."""

    models: tuple[str, ...]
    entries: tuple[Any, ...] = ()  # the model cards, for `find_limit`
    base_url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # the key is in them
    limit_s: float | None = None  # the most any probe of this server waits (`probe_timeout`)


def probe_timeout(own_s: float, limit_s: float | None) -> float:
    """A probe's time-out: its own, or the run's limit where that is shorter."""
    return own_s if limit_s is None else min(own_s, limit_s)


async def _get_models(base: str, headers: dict[str, str], wait_s: float) -> tuple[int, bytes]:
    async with (
        open_session(timeout_s=wait_s, connect_timeout_s=min(3.0, wait_s)) as session,
        session.get(base + "/models", headers=headers) as resp,
    ):
        return resp.status, await resp.content.read(1 << 20)


def _answer(base: str, headers: dict[str, str], wait_s: float) -> tuple[int, bytes]:
    try:
        return run_sync(_get_models(base, headers, wait_s), use_uvloop=False)
    except aiohttp.InvalidURL as err:
        raise UserError(f"{base} is not a valid URL.") from err
    except aiohttp.ClientConnectorError as err:
        refused = isinstance(err.os_error, ConnectionRefusedError)
        reason = "connection refused" if refused else err.os_error.strerror or str(err.os_error)
        raise UserError(f"cannot connect to {base}: {reason.lower()}.") from err
    except TimeoutError as err:
        raise UserError(f"{base} did not answer within {wait_s:g} s.") from err
    except aiohttp.ServerDisconnectedError as err:
        raise UserError(f"{base} closed the connection without answering.") from err
    except aiohttp.ClientResponseError as err:  # what came back cannot be read as HTTP
        raise UserError(f"{base} did not answer in HTTP: {_one_line(err.message)}.") from err
    except aiohttp.ClientError as err:
        raise UserError(f"{base} failed before answering ({type(err).__name__}).") from err


def _one_line(text: str) -> str:
    """aiohttp's parser error on one line: its lines joined, the caret under the bytes left
    out (`Bad status line: Expected HTTP/, …: b'220 mail.example ESMTP ready'`)."""
    parts = [line.strip() for line in text.splitlines()]
    joined = " ".join(part for part in parts if part.strip("^"))
    return (joined or "no reason given").rstrip(".")[:200]


def ask_models(
    base: str, headers: dict[str, str], *, need_model: bool, limit_s: float | None = None
) -> ServerInfo:
    """Ask /v1/models: a wrong URL fails here, in one sentence, before any load."""
    status, body = _answer(base, headers, probe_timeout(_PREFLIGHT_TIMEOUT_S, limit_s))
    if status in (401, 403):
        raise UserError(f"{base} refused the request (HTTP {status}): check --api-key.")
    if status != 200:
        if not need_model:
            return ServerInfo((), base_url=base, headers=headers, limit_s=limit_s)
        raise UserError(
            f"{base}/models answered HTTP {status}: is this the base URL of an "
            "OpenAI-compatible server?"
        )
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise UserError(f"{base}/models did not answer with an OpenAI model list.") from err
    if isinstance(document, dict) and not document.get("data"):  # a list of no models
        return ServerInfo((), base_url=base, headers=headers, limit_s=limit_s)
    listing = read_model_list(document)
    if listing.problem:
        raise UserError(f"{base}/models did not answer with an OpenAI model list.")
    return ServerInfo(listing.ids, listing.cards, base_url=base, headers=headers, limit_s=limit_s)


async def _find(info: ServerInfo, model: str, override: int | None) -> ContextLimit | None:
    wait_s = probe_timeout(_PROBE_TIMEOUT_S, info.limit_s)
    async with open_session(timeout_s=wait_s, headers=info.headers) as session:
        return await find_context_limit(
            session,
            root_url(info.base_url),
            model=model,
            models_document={"data": list(info.entries)},
            override=override,
            timeout_s=probe_timeout(PER_PROBE_TIMEOUT_S, info.limit_s),
        )


def find_limit(info: ServerInfo, model: str, override: int | None) -> ContextLimit | None:
    """The override, else what the server says of `model`'s context length, else None."""
    return run_sync(_find(info, model, override), use_uvloop=False)


# Count a sample of specs with the server's `/tokenize` (`promptcount`), blocking.
learn_prompts = blocking(learn_prompt_model)
