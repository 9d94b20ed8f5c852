"""net, level 0½: the one HTTP seam, and the one URL normaliser.

Takes URLs, headers, an API key and timeouts; gives aiohttp sessions
(`open_session`, made by the swappable `session.session_factory`), one
blocking request (`sync_request`), the headers and `Redactor` of a
conversation, the guard that keeps them from a redirect to another origin
(`make_redirect_guard`), and the URL forms of a server (`root_url`,
`api_url`, `metrics_url_of`; a URL's `user:password@` comes off with
`split_userinfo` and goes as `basic_authorization`). Imports only `schemas`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertriage.schemas.lazy import lazy_exports

if TYPE_CHECKING:
    from infertriage.net.session import (
        auth_headers,
        basic_authorization,
        check_header,
        make_redirect_guard,
        open_session,
        redactor_of,
    )
    from infertriage.net.sync import SyncAnswer, sync_request
    from infertriage.net.urls import (
        api_url,
        is_url,
        metrics_url_of,
        normalize_base_url,
        root_url,
        split_userinfo,
        strip_userinfo,
    )

__all__ = [
    "SyncAnswer",
    "api_url",
    "auth_headers",
    "basic_authorization",
    "check_header",
    "is_url",
    "make_redirect_guard",
    "metrics_url_of",
    "normalize_base_url",
    "open_session",
    "redactor_of",
    "root_url",
    "split_userinfo",
    "strip_userinfo",
    "sync_request",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "auth_headers": "infertriage.net.session",
        "basic_authorization": "infertriage.net.session",
        "check_header": "infertriage.net.session",
        "make_redirect_guard": "infertriage.net.session",
        "open_session": "infertriage.net.session",
        "redactor_of": "infertriage.net.session",
        "SyncAnswer": "infertriage.net.sync",
        "sync_request": "infertriage.net.sync",
        "api_url": "infertriage.net.urls",
        "is_url": "infertriage.net.urls",
        "metrics_url_of": "infertriage.net.urls",
        "normalize_base_url": "infertriage.net.urls",
        "root_url": "infertriage.net.urls",
        "split_userinfo": "infertriage.net.urls",
        "strip_userinfo": "infertriage.net.urls",
    },
)
