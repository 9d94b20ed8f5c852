"""The HTTP seam: sessions come from one swappable factory; the one blocking call never raises."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest

from infertriage.net import (
    api_url,
    auth_headers,
    metrics_url_of,
    normalize_base_url,
    open_session,
    redactor_of,
    root_url,
    sync_request,
)
from infertriage.net import session as seam
from infertriage.schemas import UserError


def test_a_test_swaps_the_session_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    def factory(**options: Any) -> aiohttp.ClientSession:
        made.append(options)
        return aiohttp.ClientSession(**options)

    monkeypatch.setattr(seam, "session_factory", factory)

    async def run() -> None:
        async with open_session(timeout_s=2.0, connect_timeout_s=1.0, headers={"X-A": "b"}):
            pass
        async with open_session():
            pass

    asyncio.run(run())
    timeout = made[0]["timeout"]
    assert (timeout.total, timeout.sock_connect, timeout.sock_read) == (2.0, 1.0, None)
    assert made[0]["headers"] == {"X-A": "b"}
    # nothing set: aiohttp's own defaults, as before the seam, but for the redirect guard
    assert list(made[1]) == ["trace_configs"]
    assert all(len(options["trace_configs"]) == 1 for options in made)


def test_fresh_connections_close_after_each_request(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def factory(**options: Any) -> aiohttp.ClientSession:
        seen.append(options["connector"].force_close)
        return aiohttp.ClientSession(**options)

    monkeypatch.setattr(seam, "session_factory", factory)

    async def run() -> None:
        async with open_session(fresh_connections=True):
            pass

    asyncio.run(run())
    assert seen == [True]


def test_headers_and_their_secrets() -> None:
    sent = auth_headers("sk-secret-key", [("X-Team", "team-token-1")])
    assert sent == {"X-Team": "team-token-1", "Authorization": "Bearer sk-secret-key"}
    redact = redactor_of("sk-secret-key", [("X-Team", "team-token-1")])
    assert redact("bad key sk-secret-key for team-token-1") == "bad key *** for ***"


def test_the_blocking_call_answers_instead_of_raising() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    refused = sync_request(f"http://127.0.0.1:{port}/health", timeout_s=2)
    assert refused.status is None and refused.error and not refused.ok
    invalid = sync_request("not a url", timeout_s=2)
    assert invalid.status is None and invalid.error


@pytest.mark.parametrize(
    ("typed", "root"),
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("http://h:8000/metrics", "http://h:8000"),
        (" h:8000/v1 ", "http://h:8000"),
        ("https://gw.example/llm/v1", "https://gw.example/llm"),
    ],
)
def test_one_root_for_every_spelling(typed: str, root: str) -> None:
    assert root_url(typed) == root
    assert api_url(typed) == root + "/v1"


def test_the_api_base_and_the_metrics_url() -> None:
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    for bad in ("h:8000", "ftp://h", "http://"):
        with pytest.raises(UserError, match="is not an http"):
            normalize_base_url(bad)
    assert metrics_url_of("http://h:8000/v1") == "http://h:8000/metrics"
    assert metrics_url_of("http://h:9400/custom") == "http://h:9400/custom"
