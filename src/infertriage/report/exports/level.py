"""report.exports, level 4: one load level as the exporters see it, and what they share.

Gives `ExportLevel` (a level's records in send order, with what the other tools'
files say about the load around them: the model, the endpoint, the rate or the
concurrency, the goodput SLOs, the wall-clock anchor) and the per-request
measures both exporters read that `analyze.stats.latency` does not define (the
output length, the second chunk, the level's span); TTFT, E2E, TPOT and the gaps
between content chunks are its own. The api
layer builds the levels from a run directory (`api.exports`); nothing here reads
a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from infertriage.analyze.stats.latency import Slo, icl_samples
from infertriage.schemas import RequestRecord
from infertriage.schemas.spans import ServerSpan

__all__ = [
    "ExportLevel",
    "chunk_gaps_s",
    "file_stems",
    "finished_ts",
    "level_span",
    "output_len",
    "second_token_s",
    "slug",
]


@dataclass(frozen=True, slots=True)
class ExportLevel:
    """One load level: its records sorted by scheduled then sent time, and its load."""

    name: str  # as run.json names it: "concurrency=8", "rate=2"
    mode: str  # "rate" | "concurrency" | "replay"
    value: float | None  # requests/s (rate), users (concurrency); None: not known
    records: tuple[RequestRecord, ...]
    model: str
    endpoint: str  # "chat" | "completions"
    wall_anchor_s: float  # Unix time at the run clock's zero
    generator: str  # "infertriage <version>"
    tokenizer: str | None = None  # the client-side tokenizer, where one counted tokens
    max_concurrency: int | None = None  # a rate level's cap on in-flight requests
    burstiness: float | None = None  # gamma shape of the arrivals: 1 Poisson; None: other
    slos: tuple[Slo, ...] = ()  # `--goodput`: () when none was asked
    interrupted: bool = False  # the run was stopped (Ctrl-C) before its end
    # the server's request spans by trace id (`--otlp-listen`, `--spans`): the timeline's
    server: Mapping[str, ServerSpan] = field(default_factory=dict)

    @staticmethod
    def sort(records: Sequence[RequestRecord]) -> tuple[RequestRecord, ...]:
        return tuple(sorted(records, key=lambda r: (r.scheduled_ts, r.sent_ts, r.id)))


_SLUG_MAX = 100  # characters: a file name's limit is 255 bytes, and a unicode one takes more


def slug(name: str) -> str:
    """A level's name as a file name: "concurrency=8" → "concurrency_8" (never `.` or `..`,
    nor a hidden file; cut to 100 characters)."""
    text = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return text.lstrip(".").strip("_")[:_SLUG_MAX] or "level"


def file_stems(names: Sequence[str]) -> list[str]:
    """Each level's file name, one each: two names alike as file names ("a/b", "a_b") are
    told apart by a suffix ("a_b", "a_b-2"), so that no level's file overwrites another's."""
    taken: set[str] = set()
    out: list[str] = []
    for name in names:
        base = stem = slug(name)
        number = 1
        while stem in taken:
            number += 1
            stem = f"{base}-{number}"
        taken.add(stem)
        out.append(stem)
    return out


def output_len(record: RequestRecord) -> int:
    """Output tokens: the server's count (usage) where given, else the chunks' tokens."""
    if record.output_tokens is not None:
        return record.output_tokens
    return sum(chunk.num_tokens for chunk in record.chunks)


def chunk_gaps_s(record: RequestRecord) -> list[float]:
    """The gaps between consecutive content chunks (ICL), seconds."""
    return [float(gap) for gap in icl_samples(record)]


def second_token_s(record: RequestRecord) -> float | None:
    """The second content chunk − the first: AIPerf's time to second token ("Second Response
    Timestamp − First Response Timestamp", aiperf/metrics/types/ttst_metric.py), the gap
    after the first token, not a time from the send."""
    if len(record.chunks) < 2:
        return None
    return record.chunks[1].ts - record.chunks[0].ts


def finished_ts(record: RequestRecord) -> float:
    """When the request was last heard of: its stream's end, last chunk, or its send."""
    for ts in (record.end_ts, record.last_token_ts, record.headers_ts):
        if ts is not None:
            return ts
    return record.sent_ts


def level_span(records: Sequence[RequestRecord]) -> tuple[float, float]:
    """First send → last finish over every record: the level's whole length, seconds."""
    if not records:
        return 0.0, 0.0
    return min(r.sent_ts for r in records), max(finished_ts(r) for r in records)
