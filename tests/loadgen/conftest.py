"""Loadgen test helpers: a loopback server in a thread and a one-request client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from infertriage.loadgen.client import ClientConfig, Endpoint, RequestClient, make_session
from infertriage.schemas import RequestRecord
from infertriage.workload import RequestSpec, SynthText, Turn
from infertriage_testing.testserver import PathServer, ServerConfig, serve_in_thread


@pytest.fixture
def server() -> Iterator[tuple[str, PathServer]]:
    with serve_in_thread(ServerConfig()) as pair:
        yield pair


def spec(max_tokens: int = 10, prompt: int = 16) -> RequestSpec:
    return RequestSpec(0, (Turn("user", SynthText(prompt, 1)),), prompt, max_tokens)


def _fetch_one(
    url: str,
    behavior: str | None = None,
    *,
    max_tokens: int = 10,
    endpoint: Endpoint = Endpoint.CHAT,
    reader: str = "h1",
    **config: object,
) -> RequestRecord:
    """One request through the real client; times are seconds since the request was made."""
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", endpoint=endpoint, **config)  # type: ignore[arg-type]

    async def go() -> RequestRecord:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            use_reader(client, reader)
            if behavior:
                client._headers["X-Test-Behavior"] = behavior
            start = time.perf_counter_ns()
            state = client.new_state(spec(max_tokens), start)
            try:
                await client.fetch(state, "req-1")
            finally:
                await client.aclose()
            return state.record("req-1", start)

    return asyncio.run(go())


# The two ways a stream is read: `h1` (plain http) and aiohttp's session (https, redirects).
READERS = ("h1", "aiohttp")


def use_reader(client: RequestClient, reader: str) -> None:
    """Have `client` send through `reader`: "h1" (its own for plain http) or "aiohttp"."""
    if reader == "aiohttp":
        client._pool = None


@pytest.fixture
def fetch_one() -> object:
    """`fetch_one(url, behavior, **client_config)` → the record of one request."""
    return _fetch_one
