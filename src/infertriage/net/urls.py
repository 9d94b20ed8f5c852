"""net, level 0½: the one URL normaliser — a server's root, its API base and its /metrics.

Takes what a user typed (`h:8000`, `http://h:8000/`, `…/v1`, `…/metrics`);
gives the server's root (`root_url`: no trailing slash, no `/v1`, no
`/metrics`, no query), the OpenAI API base (`api_url`: the root + `/v1`;
`normalize_base_url` also refuses what is not an http(s) URL) and the
metrics URL (`metrics_url_of`). Every module that turns one URL into
another calls these.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from infertriage.schemas import UserError

__all__ = ["api_url", "is_url", "metrics_url_of", "normalize_base_url", "root_url"]

_API = "/v1"
_METRICS = "/metrics"


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def root_url(url: str) -> str:
    """The server's root: `h:8000`, `http://h:8000/v1/` or `…/metrics` → `http://h:8000`."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    path = parts.path.rstrip("/")
    for suffix in (_METRICS, _API):
        path = path.removesuffix(suffix)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def api_url(url: str) -> str:
    """The OpenAI API base: `http://h:8000`, `…/v1` or `…/v1/` → `http://h:8000/v1`."""
    return root_url(url) + _API


def normalize_base_url(url: str) -> str:
    """`api_url` of an http:// or https:// URL (`--url`); anything else is a `UserError`."""
    base = url.strip().rstrip("/")
    if not is_url(base) or len(base.split("://", 1)[1]) == 0:
        raise UserError(f"--url {url!r} is not an http:// or https:// URL.")
    return api_url(base)


def metrics_url_of(url: str) -> str:
    """`http://h:8000` or `http://h:8000/v1` → `http://h:8000/metrics`; other paths are kept."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if path in {"", _API}:
        path = _METRICS
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
