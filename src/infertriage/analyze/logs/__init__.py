"""analyze, level 1: offline triage of a server's logs (`infertriage logs`).

Takes one or more logs of one server (their files streamed line by line at a
bounded cost by `source`, or their text); gives its records
(`records`: cleaned, split, stamped, read by the engines' adapters), their
timeline (`timeline`: per interval the queue, KV cache, throughput, draft
acceptance, preemptions, out-of-memory errors, and the stalls), and the
signals the diagnose rules read (`signals`).
"""

from infertriage.analyze.logs.events import EventSummary, RequestTimes, seat_stats, summarise_events
from infertriage.analyze.logs.records import (
    FORMATS,
    OOM,
    LogRecord,
    clean_lines,
    formats_of,
    no_line_read,
    read_records,
    reads_a_line,
    stamp_of,
)
from infertriage.analyze.logs.signals import timeline_signals
from infertriage.analyze.logs.timeline import (
    Interval,
    LogTimeline,
    SpecSummary,
    Stall,
    make_timeline,
    pick_interval,
    with_times,
)

__all__ = [
    "FORMATS",
    "OOM",
    "EventSummary",
    "Interval",
    "LogRecord",
    "LogTimeline",
    "RequestTimes",
    "SpecSummary",
    "Stall",
    "clean_lines",
    "formats_of",
    "make_timeline",
    "no_line_read",
    "pick_interval",
    "read_records",
    "reads_a_line",
    "seat_stats",
    "stamp_of",
    "summarise_events",
    "timeline_signals",
    "with_times",
]
