"""collect, level 2: the collectors' GET over a session of the HTTP seam (`infertriage.net`).

Takes a URL and an `aiohttp.ClientSession`; gives the response text, or a
`FetchError` (a `UserError`) that says in one sentence what went wrong:
refused, unknown host, timeout, cut short, or an HTTP error status. The URL
forms (`metrics_url_of`, `base_url_of` = `net.root_url`, `is_url`) are
`infertriage.net`'s, kept here under the names collect's callers use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from infertriage.net import is_url, metrics_url_of
from infertriage.net import root_url as base_url_of  # the name collect's callers know
from infertriage.schemas import UserError

__all__ = [
    "FetchError",
    "Fetched",
    "base_url_of",
    "fetch",
    "fetch_json",
    "is_url",
    "metrics_url_of",
]

_METRICS_HINT = (
    " (vLLM and TGI serve /metrics by default; SGLang needs --enable-metrics, "
    "llama-server --metrics)"
)


class FetchError(UserError):
    """A request that failed; `kind` is refused, dns, timeout, cut, http or invalid."""

    def __init__(self, message: str, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass(frozen=True, slots=True)
class Fetched:
    url: str
    status: int
    text: str
    content_type: str


def _connect_error(url: str, err: aiohttp.ClientConnectorError) -> FetchError:
    if isinstance(err, aiohttp.ClientConnectorDNSError):
        return FetchError(f"cannot reach {url}: unknown host {err.host}.", "dns")
    cause = err.os_error
    if isinstance(cause, ConnectionRefusedError):
        return FetchError(
            f"cannot reach {url}: connection refused (is the server running on that port?).",
            "refused",
        )
    reason = cause.strerror or type(cause).__name__
    return FetchError(f"cannot reach {url}: {reason}.", "refused")


async def fetch(
    session: aiohttp.ClientSession,
    url: str,
    *,
    timeout_s: float = 5.0,
    what: str = "",
    raise_for_status: bool = True,
) -> Fetched:
    """GET `url`; any failure is a `FetchError` of one sentence. `what` adds a hint on 404.

    With `raise_for_status=False` an HTTP error status is returned, not raised, so
    that an API's error document can be read.
    """
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with session.get(url, timeout=timeout, allow_redirects=True) as response:
            body = await response.read()
            status = response.status
            content_type = response.headers.get("Content-Type", "")
    except aiohttp.ClientConnectorError as err:
        raise _connect_error(url, err) from err
    except TimeoutError as err:
        raise FetchError(f"{url} did not answer within {timeout_s:g} s.", "timeout") from err
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as err:
        message = f"the response from {url} was cut short ({type(err).__name__})."
        raise FetchError(message, "cut") from err
    except aiohttp.InvalidURL as err:
        raise FetchError(f"{url} is not a valid URL.", "invalid") from err
    except aiohttp.ClientError as err:
        raise FetchError(f"cannot fetch {url}: {type(err).__name__}.", "refused") from err
    if status >= 400 and raise_for_status:
        hint = _METRICS_HINT if what == "metrics" and status == 404 else ""
        raise FetchError(f"{url} answered HTTP {status}{hint}.", "http", status)
    return Fetched(url, status, body.decode("utf-8", errors="replace"), content_type)


async def fetch_json(session: aiohttp.ClientSession, url: str, *, timeout_s: float = 3.0) -> Any:
    """GET a JSON document; a body that is not JSON is a `FetchError` too."""
    fetched = await fetch(session, url, timeout_s=timeout_s)
    try:
        return orjson.loads(fetched.text)
    except orjson.JSONDecodeError as err:
        raise FetchError(f"{url} did not return JSON.", "invalid") from err
