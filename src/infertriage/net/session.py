"""net, level 0½: the one HTTP seam — every aiohttp session in `src` is made here.

Takes the timeouts, headers (and an API key) of one conversation with a
server; gives an `aiohttp.ClientSession` (`open_session`), the headers with
the `Authorization` the key makes (`auth_headers`) and the `Redactor` of
their secrets (`redactor_of`), through which any server text kept or shown
passes. Tests swap the seam as httpx's `MockTransport` is swapped: replace
`session_factory` (pytest's `monkeypatch.setattr`), which every session here
is made by. The load client's own session (`loadgen.client.make_session`) and
the TTFT floor's raw reader are left out on purpose: their connection
settings are part of what they measure; the load client's session takes
`make_redirect_guard()` (below) among its trace configs.

Secrets stay with their server. Every session here follows a redirect to
another origin (another scheme, host or port) with nothing of the user's:
`make_redirect_guard` drops every header but the protocol's own
(`KEPT_ACROSS_ORIGINS`) — the key, `Authorization`, each `--header` — before
aiohttp sends the request on (aiohttp itself drops only `Authorization` and
cookies). A header that would break the request line (CR, LF or another
control character in `--api-key` or a `--header`) is refused up front, in one
sentence (`check_header`), not by a traceback from deep in aiohttp. A
`--url`'s `user:password@` is sent as `Authorization: Basic`
(`basic_authorization`), as aiohttp sent it, and so is one of the secrets.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping
from types import SimpleNamespace
from typing import Any
from urllib.parse import urljoin

import aiohttp

from infertriage.net.urls import same_origin
from infertriage.schemas import UserError
from infertriage.schemas.redact import Redactor

__all__ = [
    "KEPT_ACROSS_ORIGINS",
    "auth_headers",
    "basic_authorization",
    "check_header",
    "make_redirect_guard",
    "open_session",
    "redactor_of",
    "session_factory",
]

# What every session is made by; a test may replace it (it takes ClientSession's keywords).
session_factory: Callable[..., aiohttp.ClientSession] = aiohttp.ClientSession

# The headers a request keeps when a redirect sends it to another origin: the protocol's
# own, none of which holds anything of the user's (lower case).
KEPT_ACROSS_ORIGINS = frozenset(
    {"accept", "accept-encoding", "content-length", "content-type", "user-agent"}
)
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")


def check_header(flag: str, name: str, value: str) -> None:
    """A `UserError` when a header's name or value holds a control character (CR, LF, …).

    `flag` names where it came from (`--api-key`, `--header`); the value is never quoted.
    """
    if _CONTROLS.search(name) or _CONTROLS.search(value):
        shown = f"{flag} {name!r}" if name and not _CONTROLS.search(name) else flag
        raise UserError(
            f"{shown} holds a line break or another control character, which no HTTP header "
            "may carry: give it again on one line."
        )


def basic_authorization(userinfo: str) -> str:
    """`user:password` (a URL's user-info) → the `Authorization` value `Basic dXNlcjpw…`."""
    user, _, password = userinfo.partition(":")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def auth_headers(
    api_key: str | None = None, headers: Mapping[str, str] | Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """The headers to send: `headers`, and `Authorization: Bearer KEY` when there is a key.

    A control character in the key or a header is a `UserError` (`check_header`)."""
    sent = dict(headers.items() if isinstance(headers, Mapping) else headers)
    for name, value in sent.items():
        check_header("--header", name, value)
    if api_key:
        check_header("--api-key", "", api_key)
        sent["Authorization"] = f"Bearer {api_key}"
    return sent


async def _on_redirect(
    _session: aiohttp.ClientSession,
    _context: SimpleNamespace,
    params: aiohttp.TraceRequestRedirectParams,
) -> None:
    """Before aiohttp follows a redirect: to another origin, only `KEPT_ACROSS_ORIGINS` go.

    aiohttp hands this hook the very headers it sends the next request with, so what is
    removed here is not sent (pinned by tests/net/test_redirects.py)."""
    answer = params.response.headers
    location = answer.get("Location") or answer.get("URI")
    if location is None:
        return  # aiohttp follows no redirect without a place to go
    try:
        target = urljoin(str(params.url), location)
    except ValueError:
        target = ""  # unreadable: treated as another origin
    if same_origin(str(params.url), target):
        return
    for name in {name.lower() for name in params.headers} - KEPT_ACROSS_ORIGINS:
        params.headers.popall(name, None)


def make_redirect_guard() -> aiohttp.TraceConfig:
    """A trace config that keeps the user's headers from a redirect to another origin;
    pass it in a session's `trace_configs` (every session `open_session` makes has one)."""
    guard = aiohttp.TraceConfig()
    guard.on_request_redirect.append(_on_redirect)
    return guard


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
    options: dict[str, Any] = {"trace_configs": [make_redirect_guard()]}
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
