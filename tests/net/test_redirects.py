"""A redirect to another origin carries none of the user's headers, on every seam.

A front on one loopback port answers every request with a 307 to a second
server on another port, which records the headers it got. The key
(`Authorization`), `X-Api-Key` and `api-key` must not reach it — aiohttp by
itself drops only `Authorization` — while a redirect within the front's own
origin keeps them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest

from infertriage.api.preflight import preflight
from infertriage.net import auth_headers, make_redirect_guard, open_session, sync_request

from ..secretserver import MODEL, Recorded, serve_recording, serve_redirecting

KEY = "sk-redirect-0123456789SECRET"
HEADERS = {"X-Api-Key": "xak-redirect-SECRET", "api-key": "azure-key-SECRET"}
SECRET_NAMES = {"authorization", "x-api-key", "api-key"}


def _leaked(record: Recorded) -> list[str]:
    """The secret headers, by name or by value, among what `record`'s server was sent."""
    found = []
    for path, headers in record.seen:
        found += [f"{path}: {name}" for name in headers if name.lower() in SECRET_NAMES]
        found += [f"{path}: {name}={value}" for name, value in headers.items() if "SECRET" in value]
    return found


@pytest.fixture
def servers() -> Iterator[tuple[str, Recorded, Recorded]]:
    """The front's root URL, what the other origin saw, what the front served itself."""
    with serve_recording() as (elsewhere, seen), serve_redirecting(elsewhere) as (front, own):
        yield front, seen, own


def _sent() -> dict[str, str]:
    return auth_headers(KEY, HEADERS)


def test_without_the_guard_aiohttp_sends_all_but_authorization_on(
    servers: tuple[str, Recorded, Recorded],
) -> None:
    # the hazard the guard removes, so that the tests below can see a leak
    front, seen, _ = servers

    async def run() -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{front}/v1/models", headers=_sent()) as answer,
        ):
            return answer.status

    assert asyncio.run(run()) == 200
    assert {name.lower() for name in seen.seen[0][1]} >= {"x-api-key", "api-key"}


def test_the_models_check_sends_no_secret_to_another_origin(
    servers: tuple[str, Recorded, Recorded],
) -> None:
    front, seen, _ = servers
    info = preflight(f"{front}/v1", _sent(), need_model=True)
    assert info.models == (MODEL,)  # the redirect was followed
    assert seen.headers_of("/v1/models") and _leaked(seen) == []


def test_a_session_of_the_seam_sends_no_secret_to_another_origin(
    servers: tuple[str, Recorded, Recorded],
) -> None:
    front, seen, _ = servers

    async def run() -> list[int]:
        statuses = []
        async with open_session(timeout_s=10, headers=_sent()) as session:
            async with session.get(f"{front}/v1/models") as answer:
                statuses.append(answer.status)
            body = {"model": MODEL, "max_tokens": 2, "prompt": "hi"}
            async with session.post(f"{front}/v1/completions", json=body) as answer:
                statuses.append(answer.status)
        return statuses

    assert asyncio.run(run()) == [200, 200]
    assert len(seen.seen) == 2 and _leaked(seen) == []


def test_the_guard_in_a_session_of_ones_own_keeps_a_streamed_post_clean(
    servers: tuple[str, Recorded, Recorded],
) -> None:
    # as the load client's session uses it: per-request headers, a 307 that keeps the body
    front, seen, _ = servers

    async def run() -> bytes:
        async with aiohttp.ClientSession(trace_configs=[make_redirect_guard()]) as session:
            body = {"model": MODEL, "max_tokens": 2, "stream": True, "messages": []}
            headers = {**_sent(), "Content-Type": "application/json", "X-Request-Id": "r-1"}
            url = f"{front}/v1/chat/completions"
            async with session.post(url, json=body, headers=headers) as answer:
                return await answer.read()

    assert b"[DONE]" in asyncio.run(run())
    assert _leaked(seen) == []
    assert seen.seen[0][1]["Content-Type"] == "application/json"  # the protocol's own stay


def test_the_blocking_call_sends_no_secret_to_another_origin(
    servers: tuple[str, Recorded, Recorded],
) -> None:
    front, seen, _ = servers
    answer = sync_request(f"{front}/v1/models", headers=_sent(), max_bytes=4096)
    assert answer.ok and MODEL.encode() in answer.body
    assert seen.seen and _leaked(seen) == []


def test_a_redirect_within_the_origin_keeps_every_header(
    servers: tuple[str, Recorded, Recorded],
) -> None:
    front, seen, own = servers

    async def run() -> int:
        async with (
            open_session(timeout_s=10) as session,
            session.get(f"{front}/same/v1/models", headers=_sent()) as answer,
        ):
            return answer.status

    assert asyncio.run(run()) == 200
    assert sync_request(f"{front}/same/health", headers=_sent()).ok
    assert not seen.seen and len(own.seen) == 2
    for _, headers in own.seen:
        assert headers["X-Api-Key"] == HEADERS["X-Api-Key"]
        assert headers["Authorization"] == f"Bearer {KEY}"
