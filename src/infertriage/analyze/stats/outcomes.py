"""analyze.stats, level 1: how each request ended, and which endings count against the server.

Takes `RequestRecord`s; gives the class of each ending and `Rejections`, the
requests the server refused as invalid grouped by its own message, with the
flag that fixes the most common one. Pure: no clock, no I/O.

- cut by the run's own end (its drain deadline `run_deadline`, Ctrl-C or a
  stop `cancelled`), whether or not a token had arrived: never an error;
- rejected (`ErrorKind.REJECTED`: a 4xx refusing the request — too long for
  the context, an invalid parameter, an unknown model, a missing key): the
  workload's fault, reported on its own line, never in the error rate;
- refused (`ErrorKind.ADMISSION`, HTTP 429): the server declining load, its
  own signal (admission control), not a failure;
- failed: every other ending but success — the server's error rate is the
  failed share of the requests it was validly asked to serve (`is_counted`).

A level with more than `MAX_REJECTED_SHARE` of its requests rejected does not
measure the server: `check_rejections` stops `diagnose` and `validate` there.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from infertriage.schemas import ErrorKind, RequestRecord, UserError

__all__ = [
    "MAX_REJECTED_SHARE",
    "Rejections",
    "check_rejections",
    "is_counted",
    "is_incomplete",
    "is_refused",
    "is_rejected",
    "is_server_failure",
    "rejections_of",
    "server_message",
]

MAX_REJECTED_SHARE = 0.02  # more rejected than this and a level does not measure the server
_INCOMPLETE_FAULTS = frozenset({"cancelled", "run_deadline"})
_NOT_THE_SERVERS = frozenset({ErrorKind.REJECTED, ErrorKind.ADMISSION})
_SHOWN_CHARS = 100
_HTTP_PREFIX = re.compile(r"^HTTP (\d{3}):\s*")
_QUOTED_MESSAGE = re.compile(r'"(?:message|msg|error)"\s*:\s*"((?:[^"\\]|\\.)*)')
_NUMBER = re.compile(r"\d+")

# The flag that fixes a rejection, by what the server said (first match wins).
_OUTPUT_FIX = "a --workload with shorter outputs (bench: --no-ignore-eos)"
_CONTEXT_FIX = "--max-model-len / a shorter --workload"
_FIXES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"min_tokens|ignore_eos"), _OUTPUT_FIX),
    (
        re.compile(r"context|max_model_len|n_ctx|max_new_tokens|too long|maximum.*length|exceed"),
        _CONTEXT_FIX,
    ),
    (re.compile(r"model"), "--model (one that /v1/models lists)"),
)
_AUTH_STATUSES = (401, 403)
_FIX_BY_STATUS = {
    401: "--api-key",
    403: "--api-key",
    404: "--url / --endpoint",
    413: "a shorter --workload",
}
_FIX_OTHERWISE = "--workload / --endpoint (the request the server refused)"


def is_incomplete(record: RequestRecord) -> bool:
    """Cut by the run (its drain deadline, Ctrl-C, a stop), not failed by the server."""
    return record.fault in _INCOMPLETE_FAULTS


def is_rejected(record: RequestRecord) -> bool:
    """Refused as invalid by the server (a 4xx but 408 and 429): the workload's fault."""
    return record.error_kind is ErrorKind.REJECTED and not is_incomplete(record)


def is_refused(record: RequestRecord) -> bool:
    """Refused for load (HTTP 429): admission control or a rate limit, not a failure."""
    return record.error_kind is ErrorKind.ADMISSION and not is_incomplete(record)


def is_counted(record: RequestRecord) -> bool:
    """Counted in the server's error rate: sent, not cut by the run, not rejected, not refused."""
    return not is_incomplete(record) and record.error_kind not in _NOT_THE_SERVERS


def is_server_failure(record: RequestRecord) -> bool:
    """Failed, and the server is to blame: 5xx, timeouts, broken streams, refused connections."""
    return not record.ok and is_counted(record)


def _message_of(document: object) -> str | None:
    """`{"error": {"message": m}}` (OpenAI), `{"message": m}` (vLLM), `{"error": m}` (TGI)."""
    if isinstance(document, str):
        return document
    if isinstance(document, list) and document:
        return _message_of(document[0])  # FastAPI's 422: {"detail": [{"msg": …}]}
    if not isinstance(document, dict):
        return None
    for key in ("message", "msg", "error", "detail"):
        if key in document and (found := _message_of(document[key])) is not None:
            return found
    return None


def server_message(record: RequestRecord) -> str:
    """The server's own words for a refused request, without the JSON around them."""
    body = _HTTP_PREFIX.sub("", record.error_text)
    try:
        found = _message_of(orjson.loads(body))
    except orjson.JSONDecodeError:  # cut at the record's length limit: the message is first
        match = _QUOTED_MESSAGE.search(body)
        found = match.group(1).replace('\\"', '"') if match else None
    return " ".join((found or body).split())


def _shown(record: RequestRecord) -> str:
    message = server_message(record)
    if len(message) > _SHOWN_CHARS:
        message = message[: _SHOWN_CHARS - 1].rstrip() + "…"
    status = f"HTTP {record.http_status}" if record.http_status else "the server"
    return f"{status} '{message}'" if message else status


def _fix(record: RequestRecord) -> str:
    message = server_message(record).lower()
    if record.http_status in _AUTH_STATUSES:
        return _FIX_BY_STATUS[record.http_status]
    for pattern, fix in _FIXES:
        if pattern.search(message):
            return fix
    return _FIX_BY_STATUS.get(record.http_status or 0, _FIX_OTHERWISE)


@dataclass(frozen=True, slots=True)
class Rejections:
    """The requests of one level the server refused as invalid, by its message."""

    num_rejected: int = 0
    num_requests: int = 0  # sent and not cut by the run's end
    causes: tuple[tuple[str, int], ...] = ()  # "HTTP 400 'message'" → count, most common first
    fix: str = ""  # the flag that fixes the most common cause
    status: int | None = None  # the HTTP status of the most common cause

    @property
    def share(self) -> float:
        return self.num_rejected / self.num_requests if self.num_requests else 0.0

    @property
    def about_length(self) -> bool:
        """The most common cause is a request longer than the context (prompt or output)."""
        return self.fix in (_OUTPUT_FIX, _CONTEXT_FIX)

    @property
    def all_unauthorized(self) -> bool:
        """Every request refused, most for its credentials (401, 403): no load reaches the model."""
        whole = self.num_requests > 0 and self.num_rejected == self.num_requests
        return whole and self.status in _AUTH_STATUSES

    def line(self) -> str:
        """One line: how many, the server's most common message and the flag that fixes it."""
        if not self.num_rejected:
            return ""
        cause = self.causes[0][0] if self.causes else "a 4xx"
        return (
            f"{self.num_rejected} request{'s' if self.num_rejected != 1 else ''} "
            f"({_percent(self.share)}) rejected by the server as invalid: {cause} — fix: {self.fix}"
        )


def _percent(share: float) -> str:
    return f"{share * 100:.1f} %"


def rejections_of(records: Iterable[RequestRecord]) -> Rejections:
    """Count the rejected requests; group them by status and message, numbers aside."""
    counted = [r for r in records if not is_incomplete(r)]
    rejected = [r for r in counted if is_rejected(r)]
    if not rejected:
        return Rejections(0, len(counted))
    groups: Counter[tuple[int | None, str]] = Counter()
    first: dict[tuple[int | None, str], RequestRecord] = {}
    for record in rejected:
        key = (record.http_status, _NUMBER.sub("N", server_message(record)))
        groups[key] += 1
        first.setdefault(key, record)
    ranked = sorted(groups.items(), key=lambda item: -item[1])
    causes = tuple((_shown(first[key]), count) for key, count in ranked)
    top = first[ranked[0][0]]
    return Rejections(len(rejected), len(counted), causes, _fix(top), top.http_status)


def check_rejections(level: str, rejections: Rejections) -> str:
    """Raise a `UserError` when more than 2 % of `level` was rejected; else its one line."""
    if rejections.share <= MAX_REJECTED_SHARE:
        return rejections.line()
    cause = rejections.causes[0][0] if rejections.causes else "a 4xx"
    raise UserError(
        f"{rejections.num_rejected} of {rejections.num_requests} requests of level {level} "
        f"({_percent(rejections.share)}, over {_percent(MAX_REJECTED_SHARE)}) were rejected by "
        f"the server as invalid, most with {cause}, so the load is not the one asked for: "
        f"fix it with {rejections.fix}."
    )
