"""collect, level 2: is the server ready, not just alive?

Takes the server's base URL (and the model the run will ask for); gives a
`Readiness`: `/health` answered 2xx, `/v1/models` lists the model (the first
listed when none is named), and the GPU memory state when a local GPU is
known. `wait_until_ready` polls until all of that holds, giving the
time-to-ready of a server infertriage started itself.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp

from infertriage.collect.http import FetchError, fetch, fetch_json
from infertriage.engines import read_model_list
from infertriage.schemas import UserError

__all__ = ["GpuMemory", "Readiness", "check_readiness", "wait_until_ready"]


@dataclass(frozen=True, slots=True)
class GpuMemory:
    used_bytes: float
    total_bytes: float

    @property
    def free_fraction(self) -> float:
        return 1.0 - self.used_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True)
class Readiness:
    health_ok: bool
    health_status: int | None
    models: tuple[str, ...]
    model: str | None  # the model the run will use
    model_listed: bool
    gpu_memory: GpuMemory | None = None
    time_to_ready_s: float | None = None  # when waited for
    problems: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return self.health_ok and self.model_listed


async def _health(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> int | str:
    try:
        return (await fetch(session, base_url + "/health", timeout_s=timeout_s)).status
    except FetchError as err:
        return err.status if err.status is not None else str(err)


async def _models(
    session: aiohttp.ClientSession, base_url: str, timeout_s: float
) -> tuple[str, ...] | str:
    try:
        document = await fetch_json(session, base_url + "/v1/models", timeout_s=timeout_s)
    except FetchError as err:
        return str(err)
    listing = read_model_list(document)
    if not listing.is_list:
        return f"{base_url}/v1/models did not return an OpenAI model list."
    return listing.ids


async def check_readiness(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    model: str | None = None,
    gpu_memory: GpuMemory | None = None,
    timeout_s: float = 3.0,
) -> Readiness:
    """One look at `/health` and `/v1/models`; every problem is a sentence in `problems`."""
    health, models = await asyncio.gather(
        _health(session, base_url, timeout_s), _models(session, base_url, timeout_s)
    )
    problems = []
    status = health if isinstance(health, int) else None
    health_ok = status is not None and 200 <= status < 300
    if not health_ok:
        problems.append(
            f"{base_url}/health answered HTTP {status}." if status is not None else str(health)
        )
    listed: tuple[str, ...] = ()
    if isinstance(models, str):
        problems.append(models)
    else:
        listed = models
        if not listed:
            problems.append(f"{base_url}/v1/models lists no model yet.")
    chosen = model or (listed[0] if listed else None)
    model_listed = chosen is not None and chosen in listed
    if model is not None and listed and not model_listed:
        problems.append(f"model {model!r} is not served (served: {', '.join(listed)}).")
    if gpu_memory is not None and gpu_memory.free_fraction < 0.01:
        problems.append("the GPU has under 1 % of its memory free.")
    return Readiness(
        health_ok, status, listed, chosen, model_listed, gpu_memory, None, tuple(problems)
    )


async def wait_until_ready(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    model: str | None = None,
    timeout_s: float = 600.0,
    poll_s: float = 0.5,
) -> Readiness:
    """Poll until ready; `time_to_ready_s` counts from the call; not ready in time: UserError."""
    started = time.monotonic()
    while True:
        readiness = await check_readiness(
            session, base_url, model=model, timeout_s=min(poll_s * 4, 5.0)
        )
        elapsed = time.monotonic() - started
        if readiness.ready:
            return Readiness(
                readiness.health_ok,
                readiness.health_status,
                readiness.models,
                readiness.model,
                readiness.model_listed,
                readiness.gpu_memory,
                elapsed,
                readiness.problems,
            )
        if elapsed >= timeout_s:
            why = readiness.problems[0] if readiness.problems else "not ready"
            raise UserError(f"{base_url} was not ready after {timeout_s:g} s: {why}")
        await asyncio.sleep(poll_s)
