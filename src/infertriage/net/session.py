"""net, level 0½: the one HTTP seam — every aiohttp session in `src` is made here.

Takes the timeouts, headers (and an API key) of one conversation with a
server; gives an `aiohttp.ClientSession` (`open_session`), the headers with
the `Authorization` the key makes (`auth_headers`) and the `Redactor` of
their secrets (`redactor_of`), through which any server text kept or shown
passes. Tests swap the seam as httpx's `MockTransport` is swapped: replace
`session_factory` (pytest's `monkeypatch.setattr`), which every session here
is made by. The load client's own session (`loadgen.client.make_session`) and
the TTFT floor's raw reader are left out on purpose: their connection
settings are part of what they measure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import aiohttp

from infertriage.schemas.redact import Redactor

__all__ = ["auth_headers", "open_session", "redactor_of", "session_factory"]

# What every session is made by; a test may replace it (it takes ClientSession's keywords).
session_factory: Callable[..., aiohttp.ClientSession] = aiohttp.ClientSession


def auth_headers(
    api_key: str | None = None, headers: Mapping[str, str] | Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """The headers to send: `headers`, and `Authorization: Bearer KEY` when there is a key."""
    sent = dict(headers.items() if isinstance(headers, Mapping) else headers)
    if api_key:
        sent["Authorization"] = f"Bearer {api_key}"
    return sent


def redactor_of(
    api_key: str | None = None, headers: Mapping[str, str] | Iterable[tuple[str, str]] = ()
) -> Redactor:
    """The `Redactor` of a conversation's secrets (the key and every header value)."""
    return Redactor.of(api_key, headers)


def open_session(
    *,
    timeout_s: float | None = None,
    connect_timeout_s: float | None = None,
    read_timeout_s: float | None = None,
    headers: Mapping[str, str] | None = None,
    fresh_connections: bool = False,
    connector: aiohttp.BaseConnector | None = None,
) -> aiohttp.ClientSession:
    """A session with these settings; unset ones keep aiohttp's defaults.

    `timeout_s` bounds each request whole, `connect_timeout_s` its connect,
    `read_timeout_s` each read;
    `fresh_connections` opens a new connection for every request (no keep-alive).
    """
    options: dict[str, Any] = {}
    if (timeout_s, connect_timeout_s, read_timeout_s) != (None, None, None):
        options["timeout"] = aiohttp.ClientTimeout(
            total=timeout_s, sock_connect=connect_timeout_s, sock_read=read_timeout_s
        )
    if headers is not None:
        options["headers"] = dict(headers)
    if fresh_connections:
        connector = aiohttp.TCPConnector(force_close=True)
    if connector is not None:
        options["connector"] = connector
    return session_factory(**options)
