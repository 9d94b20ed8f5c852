"""analyze.golive, level 1: does the server (or the gateway before it) keep the request's id?

Takes the records of a load, each sent with its own `X-Request-Id` (the record's
`id`), and what the server called it (`server_request_id`: the response's
`X-Request-Id` header, else the stream's `id`); gives one functional `Check`.
An id that comes back, echoed or inside the server's own id (vLLM names a
chat request `chatcmpl-<X-Request-Id>`), lets one slow request be found in the
server's log (`diagnose --log` joins them by it); without it, only by time.
Not a go-live blocker: a warning with how to enable it.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertriage.schemas import Check, CheckGroup, CheckStatus, RequestRecord

__all__ = ["honours_request_id", "request_id_check"]

NAME = "functional.request_id"
_HOW = (
    "forward the X-Request-Id header through the gateway (nginx: "
    "`proxy_set_header X-Request-Id $http_x_request_id`); vLLM names the request by it, and "
    "echoes it with `--enable-request-id-headers`"
)


def honours_request_id(record: RequestRecord) -> bool:
    """The id `bench` sent came back, echoed or inside the server's own name for it."""
    return bool(record.server_request_id) and record.id in record.server_request_id


def request_id_check(records: Sequence[RequestRecord]) -> Check:
    answered = [r for r in records if r.ok and r.server_request_id]
    if not records or not any(r.ok for r in records):
        return Check(
            CheckGroup.FUNCTIONAL, NAME, CheckStatus.SKIP, "no request succeeded to look at."
        )
    kept = sum(1 for r in answered if honours_request_id(r))
    ok = sum(1 for r in records if r.ok)
    if kept == ok:
        detail = f"all {ok} requests kept their X-Request-Id: logs join by it"
        return Check(CheckGroup.FUNCTIONAL, NAME, CheckStatus.PASS, detail)
    seen = f"{kept} of {ok} requests kept their X-Request-Id"
    example = next((r.server_request_id for r in answered if not honours_request_id(r)), "")
    said = f" (the server called one {example!r})" if example else " (no id came back)"
    detail = f"{seen}{said}: a slow request's log lines can be found only by time; {_HOW}."
    return Check(CheckGroup.FUNCTIONAL, NAME, CheckStatus.WARN, detail)
