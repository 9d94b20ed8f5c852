"""net, level 0½: the one URL normaliser — a server's root, its API base and its /metrics.

Takes what a user typed (`h:8000`, `http://h:8000/`, `…/v1`, `…/metrics`);
gives the server's root (`root_url`: no trailing slash, no `/v1`, no
`/metrics`, no query), the OpenAI API base (`api_url`: the root + `/v1`;
`normalize_base_url` also refuses what is not an http(s) URL) and the
metrics URL (`metrics_url_of`). Every module that turns one URL into
another calls these.

A URL's user-info (`http://user:password@h:8000`) is a secret: no URL these
give carries it, so none is stored or printed with one. `split_userinfo`
takes it off a URL the user typed and hands it over, for the caller to send as
`Authorization: Basic` (`net.session.basic_authorization`), as aiohttp did
with a URL that carried it.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

from infertriage.schemas import UserError

__all__ = [
    "api_url",
    "is_url",
    "metrics_url_of",
    "normalize_base_url",
    "parse_listen",
    "root_url",
    "same_origin",
    "split_userinfo",
    "strip_userinfo",
]

_API = "/v1"
_METRICS = "/metrics"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def split_userinfo(url: str) -> tuple[str, str | None]:
    """`http://u:p@h:8000/v1` → (`http://h:8000/v1`, `u:p`), percent-decoded; (`url`, None)
    when it has none. Only the user-info changes: the rest is kept as typed."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    return urlunsplit(parts._replace(netloc=host)), unquote(userinfo)


def strip_userinfo(url: str) -> str:
    """`url` without its user-info (`http://u:p@h` → `http://h`), to store or show."""
    return split_userinfo(url)[0]


def root_url(url: str) -> str:
    """The server's root: `h:8000`, `http://h:8000/v1/` or `…/metrics` → `http://h:8000`.

    Never with user-info: `http://u:p@h:8000` → `http://h:8000` (see the module docstring).
    """
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    path = parts.path.rstrip("/")
    for suffix in (_METRICS, _API):
        path = path.removesuffix(suffix)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _origin(url: str) -> tuple[str, str, int | None] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname or "", port if port is not None else _DEFAULT_PORTS.get(scheme)


def same_origin(first: str, second: str) -> bool:
    """Both absolute URLs name one scheme, host and port (`http://h` is `http://h:80`)."""
    origin = _origin(first)
    return origin is not None and origin[1] != "" and origin == _origin(second)


def api_url(url: str) -> str:
    """The OpenAI API base: `http://h:8000`, `…/v1` or `…/v1/` → `http://h:8000/v1`."""
    return root_url(url) + _API


def normalize_base_url(url: str) -> str:
    """`api_url` of an http:// or https:// URL (`--url`); anything else is a `UserError`."""
    base = url.strip().rstrip("/")
    if not is_url(base) or len(base.split("://", 1)[1]) == 0:
        raise UserError(f"--url {strip_userinfo(url)!r} is not an http:// or https:// URL.")
    return api_url(base)


def metrics_url_of(url: str) -> str:
    """`http://h:8000` or `http://h:8000/v1` → `http://h:8000/metrics`; other paths are kept."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if path in {"", _API}:
        path = _METRICS
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def parse_listen(value: str, flag: str = "--otlp-listen") -> tuple[str, int]:
    """An address to listen on: '127.0.0.1:4318' → ('127.0.0.1', 4318); ':4318' is
    127.0.0.1's; port 0 asks the OS for a free one."""
    host, sep, port = value.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise UserError(
            f"{flag} takes HOST:PORT (127.0.0.1:4318; port 0 picks one), not {value!r}."
        )
    return host.strip("[]") or "127.0.0.1", int(port)
