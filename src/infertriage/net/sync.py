"""net, level 0½: the one blocking HTTP call, for code that runs outside an event loop.

Takes a URL (a method, a body, headers, a timeout and a `Redactor`); gives
a `SyncAnswer`: the status (None when no HTTP answer came), the body read
up to a limit, and why it failed in a few words (redacted). Never raises for
the network: a refused connection, a timeout or an invalid URL is an answer
without a status. Used where a thread or a script polls a server (the
twin's `/health`, `/metrics` at the start of validate, the profiler's
start and stop). A redirect to another origin carries none of the headers
but the protocol's own (`net.session.KEPT_ACROSS_ORIGINS`): urllib would send
them all on, `Authorization` included.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infertriage.net.session import KEPT_ACROSS_ORIGINS
from infertriage.net.urls import same_origin
from infertriage.schemas.redact import Redactor

__all__ = ["SyncAnswer", "sync_request"]

DEFAULT_TIMEOUT_S = 5.0


class _GuardedRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, less the user's headers when the origin changes."""

    def redirect_request(
        self, req: urllib.request.Request, *args: Any, **kwargs: Any
    ) -> urllib.request.Request | None:
        # (req, fp, code, msg, headers, newurl): only `req` and what it becomes matter here
        follow = super().redirect_request(req, *args, **kwargs)
        if follow is not None and not same_origin(req.full_url, follow.full_url):
            for name in list(follow.headers):
                if name.lower() not in KEPT_ACROSS_ORIGINS:
                    follow.remove_header(name)
        return follow


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    status: int | None  # None: no HTTP answer (see `error`)
    body: bytes = b""
    error: str = ""  # "" on a 2xx; "HTTP 503", or the reason no answer came

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def sync_request(
    url: str,
    *,
    method: str = "GET",
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = 0,
    redact: Redactor | None = None,
) -> SyncAnswer:
    """One request; the body is read only up to `max_bytes` (0: not read)."""
    redact = redact or Redactor()
    try:
        request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
        opener = urllib.request.build_opener(_GuardedRedirects())
        with opener.open(request, timeout=timeout_s) as response:
            status: int = response.status
            body = response.read(max_bytes) if max_bytes else b""
    except urllib.error.HTTPError as err:
        return SyncAnswer(err.code, b"", f"HTTP {err.code}")
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError) as err:
        return SyncAnswer(None, b"", redact(str(getattr(err, "reason", err))))
    return SyncAnswer(status, body, "" if 200 <= status < 300 else f"HTTP {status}")
