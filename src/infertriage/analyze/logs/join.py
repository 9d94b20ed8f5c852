"""analyze, level 1: the run's slowest requests joined with the server's log lines about them.

Takes the measured level's `RequestRecord`s, the log's `LogRecord`s and the
run's wall-clock anchor; gives, for the slowest requests (by end-to-end time,
then TTFT), the log lines that name them — by the `X-Request-Id` each was sent
with (vLLM names a request `chatcmpl-<X-Request-Id>` in its request logs) or
the server's own id for it — or, when no line names any of them, the lines
stamped within the request's life (a log's stamps are whole seconds, so one
second either side). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertriage.analyze.logs.records import LogRecord
from infertriage.analyze.stats.latency import e2e_s
from infertriage.schemas import LoggedRequest, RequestRecord

__all__ = ["join_slowest"]

_STAMP_SLACK_S = 1.0  # a log stamps whole seconds


def _slowest(records: Sequence[RequestRecord], count: int) -> list[RequestRecord]:
    def key(r: RequestRecord) -> tuple[float, float]:
        return (e2e_s(r) or 0.0, r.ttft_s or 0.0)

    return sorted(records, key=key, reverse=True)[:count]


def _names(record: RequestRecord) -> tuple[str, ...]:
    names = [record.id]
    if record.server_request_id and record.id not in record.server_request_id:
        names.append(record.server_request_id)
    return tuple(n for n in names if len(n) >= 4)  # a short id would match by chance


def _by_id(record: RequestRecord, logs: Sequence[LogRecord], most: int) -> tuple[str, ...]:
    names = _names(record)
    return tuple(r.text for r in logs if any(n in r.text for n in names))[:most]


def _by_time(
    record: RequestRecord, logs: Sequence[LogRecord], anchor_s: float, most: int
) -> tuple[str, ...]:
    start = anchor_s + record.sent_ts - _STAMP_SLACK_S
    end = anchor_s + (record.end_ts or record.sent_ts) + _STAMP_SLACK_S
    during = [r for r in logs if r.at is not None and start <= r.at <= end]
    telling = [r for r in during if r.stats or r.preempted or r.oom or r.stuck_s] or during
    return tuple(r.text for r in telling)[:most]


def join_slowest(
    records: Sequence[RequestRecord],
    logs: Sequence[LogRecord],
    wall_anchor_s: float,
    *,
    count: int = 5,
    most_lines: int = 6,
) -> list[LoggedRequest]:
    """The `count` slowest requests, each with its log lines (by id when any line has one);
    none without a log."""
    if not logs:
        return []
    slowest = _slowest([r for r in records if r.end_ts is not None], count)
    named = {r.id: _by_id(r, logs, most_lines) for r in slowest}
    by_id = any(named.values())
    out = []
    for r in slowest:
        lines = named[r.id] if by_id else _by_time(r, logs, wall_anchor_s, most_lines)
        out.append(
            LoggedRequest(
                id=r.id,
                ttft_s=r.ttft_s,
                e2e_s=e2e_s(r),
                joined_by="id" if by_id else "time",
                lines=lines,
            )
        )
    return out
