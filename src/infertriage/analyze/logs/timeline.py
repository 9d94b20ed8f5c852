"""analyze, level 1: a server's log as a timeline, and the signals the rules read from it.

Takes `LogRecord`s (one or more logs of one server, read by `records`), the
window asked for and the interval; gives a `LogTimeline`: per interval the
requests running and waiting (the most any line said), the KV cache use (the
most), the prompt and generation throughput (the lines' mean), the draft
acceptance, preemptions and out-of-memory errors; the stalls (requests
running while the engine generated nothing). Data-parallel vLLM logs a line
per engine (`Engine 000:`, `Engine 001:`): their queues and throughputs are
summed, the KV cache is the fullest engine's, and each engine stalls on its
own. (`signals` gives the same figures under the rules' names.)

Choices the figures rest on:
- a record without a stamp (a traceback line) takes the time of the record
  before it; out-of-memory lines at the same second are one error (a
  traceback repeats the message);
- `kv.usage_max` is the most KV cache in use *while requests waited* when
  any did (a queue with the cache full is memory's, with room it is not),
  else the most in use at all;
- a stall starts at the first stats line with requests running and no
  token generated nor prompt read, and ends at the next line that shows
  work or no request running, else at the last record of the window: vLLM
  logs an idle interval at DEBUG, so a hung engine goes quiet after one
  such line; an engine's watchdog that gave up (SGLang's `Scheduler watchdog
  timeout`) is a stall of its timeout, ending at its line;
- V0 logs every preemption (and its running count: the count wins); V1 and
  SGLang log none, so their silence is no zero;
- SGLang's decode lines say whether the step ran from CUDA graphs: of those
  with requests running, the share that ran eagerly, and those lines' median
  batch and time between a request's tokens (running / generation throughput:
  per step, or per accepted token with speculative decoding).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infertriage.analyze.logs.events import EventSummary, summarise_events
from infertriage.analyze.logs.records import LogRecord
from infertriage.analyze.stats.distribution import describe
from infertriage.analyze.trace.compiled import parse_recompile_log
from infertriage.engines import SpecLine, StatsLine

__all__ = [
    "GraphUse",
    "Interval",
    "LogTimeline",
    "SpecSummary",
    "Stall",
    "graph_use",
    "make_timeline",
    "pick_interval",
    "with_times",
]

_Moment = tuple[float, float | None, float | None, float | None]
_NICE_S = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0)


@dataclass(frozen=True, slots=True)
class Interval:
    start: float  # Unix seconds
    num_stats_lines: int
    running: float | None
    waiting: float | None
    kv_usage: float | None  # fraction
    prompt_tok_s: float | None
    gen_tok_s: float | None
    spec_acceptance: float | None  # fraction of drafted tokens accepted
    preemptions: int
    oom_errors: int
    stalled: bool  # within a stall


@dataclass(frozen=True, slots=True)
class Stall:
    start: float
    end: float
    running: float  # the most requests running meanwhile

    @property
    def duration_s(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class SpecSummary:
    num_lines: int
    acceptance_rate: float | None
    mean_accepted_tokens: float | None  # per step, the bonus token not counted
    per_position: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class GraphUse:
    """The decode stats lines that say whether their step ran from CUDA graphs (SGLang's
    `cuda graph: True/False`), those with requests running."""

    num_lines: int
    eager_share: float  # of them, the lines that ran eagerly (outside graphs)
    eager_batch: float | None  # the eager lines' median requests running
    eager_token_s: float | None  # their median time between a request's tokens
    num_eager: int = 0  # the lines that ran eagerly
    # their median step time: the time between tokens × the tokens a step gives (the line's
    # accept len with speculative decoding, else one)
    eager_step_s: float | None = None
    ranked: bool = False  # the lines carry data-parallel ranks (SGLang's DP attention)


@dataclass(frozen=True, slots=True)
class LogTimeline:
    engine: str | None  # "vllm", "vllm-v0", "sglang"; None when no stats line was read
    interval_s: float
    start: float  # the window's first and last record, Unix seconds
    end: float
    num_records: int
    intervals: tuple[Interval, ...]
    stalls: tuple[Stall, ...]
    preemptions: int | None  # None: the engine does not log them
    oom_errors: int
    recompilations: int
    spec: SpecSummary | None
    stats: tuple[_Moment, ...]  # each second with a stats line: at, running, waiting, KV
    prefix_hit_rate: float | None
    throughput_known: bool  # some stats line said its generation throughput
    events: EventSummary = dataclasses.field(default_factory=EventSummary)
    dated: bool = True  # False: no line had a stamp — a snapshot of state, not a timeline
    waiting_share: float | None = None  # of the stats moments (lines, undated), those with a queue
    # of vLLM V0's stats lines with two or more requests running, those that read prompts
    # and generated nothing: decodes paused while prefills ran (V0 without chunked prefill)
    prefill_only_share: float | None = None
    # records repeated word for word at the same time (a logger with two handlers): a logging
    # artefact, never two engines or two events
    duplicated: int = 0
    # each data-parallel engine's own lines (vLLM `Engine 001:`, SGLang `DP1`): at, rank,
    # running, waiting, KV use — the ranks apart, as the summed `stats` cannot show them
    rank_stats: tuple[tuple[float, int, float | None, float | None, float | None], ...] = ()
    graph_use: GraphUse | None = None  # None: no line says whether decode ran in graphs


def with_times(records: Sequence[LogRecord]) -> list[LogRecord]:
    """Every record dated: an undated one takes the time before it (the first, at the start)."""
    first = next((r.at for r in records if r.at is not None), None)
    if first is None:
        return []
    out, last = [], first
    for record in records:
        dated = record if record.at is not None else dataclasses.replace(record, at=last)
        last = dated.at if dated.at is not None else last
        out.append(dated)
    return out


def pick_interval(span_s: float, base_s: float, max_rows: int) -> float:
    """The base interval, or the first round one above it that keeps `span_s` in `max_rows`."""
    if span_s <= base_s * max_rows:
        return base_s
    return next((n for n in _NICE_S if n >= base_s and span_s <= n * max_rows), _NICE_S[-1])


def _preemptions(records: Iterable[LogRecord]) -> dict[int, int]:
    """Preemptions by record index: one a warning, or the rise of the count it carries."""
    out, previous = {}, None
    for index, record in enumerate(records):
        if not record.preempted:
            continue
        count = record.cumulative_preemptions
        rise = count - previous if count is not None and previous is not None else 1
        out[index] = max(1, rise)
        previous = count if count is not None else previous
    return out


def _ooms(records: Sequence[LogRecord]) -> set[int]:
    """Indices of the records that start an out-of-memory error (one per second)."""
    seen: set[float | None] = set()
    out = set()
    for index, record in enumerate(records):
        if record.oom and record.at not in seen:
            seen.add(record.at)
            out.add(index)
    return out


def _stalls(records: Sequence[LogRecord], end: float) -> list[Stall]:
    """Each engine's stalls (data-parallel engines log one line each), in time order."""
    stalls: list[Stall] = []
    opened: dict[int | None, tuple[float, float]] = {}  # engine → (start, running)
    for record in records:
        s = record.stats
        if s is None or record.at is None:
            continue
        idle = (s.running or 0) > 0 and s.gen_tok_s == 0 and not s.prompt_tok_s
        was = opened.pop(s.engine_index, None)
        if idle:
            start, running = was if was is not None else (record.at, 0.0)
            opened[s.engine_index] = (start, max(running, s.running or 0.0))
        elif was is not None:
            stalls.append(Stall(was[0], record.at, was[1]))
    stalls += [Stall(start, end, running) for start, running in opened.values()]
    return sorted(stalls + _watchdog_stalls(records), key=lambda s: s.start)


def _watchdog_stalls(records: Sequence[LogRecord]) -> list[Stall]:
    """An engine's watchdog that gave up: the seconds it waited, before its line."""
    out, running = [], 0.0
    for record in records:
        if record.stats is not None and record.stats.running is not None:
            running = record.stats.running
        if record.stuck_s is not None and record.at is not None:
            out.append(Stall(record.at - record.stuck_s, record.at, running))
    return out


@dataclass(frozen=True, slots=True)
class _Figures:
    running: float | None
    waiting: float | None
    kv_usage: float | None
    prompt_tok_s: float | None
    gen_tok_s: float | None


def _figures(stats: Sequence[StatsLine]) -> _Figures:
    """Lines of one span: each engine's most (its mean rate), then summed over the engines.

    Data-parallel vLLM logs one line per engine (`Engine 000:`, `Engine 001:`): the server's
    queue is their sum, its KV cache as full as the fullest engine's.
    """
    by_engine: dict[int | None, list[StatsLine]] = defaultdict(list)
    for line in stats:
        by_engine[line.engine_index].append(line)
    each = [
        _Figures(
            _most(s.running for s in lines),
            _most(s.waiting for s in lines),
            _most(s.kv_usage for s in lines),
            _mean(s.prompt_tok_s for s in lines),
            _mean(s.gen_tok_s for s in lines),
        )
        for lines in by_engine.values()
    ]
    return _Figures(
        _sum(f.running for f in each),
        _sum(f.waiting for f in each),
        _most(f.kv_usage for f in each),
        _sum(f.prompt_tok_s for f in each),
        _sum(f.gen_tok_s for f in each),
    )


def _sum(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return sum(found) if found else None


def _mean(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return sum(found) / len(found) if found else None


def _most(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def _acceptance(records: Sequence[LogRecord]) -> float | None:
    specs = [r.spec for r in records if r.spec is not None]
    drafted = sum(s.drafted_tokens or 0 for s in specs if s.accepted_tokens is not None)
    if drafted > 0:
        return sum(s.accepted_tokens or 0 for s in specs if s.drafted_tokens) / drafted
    return _mean(s.acceptance_rate for s in specs)


def _interval(
    span: tuple[float, float],
    records: Sequence[LogRecord],
    preempted: int,
    ooms: int,
    stalls: list[Stall],
) -> Interval:
    stats = [r.stats for r in records if r.stats is not None]
    figures = _figures(stats)
    start, end = span
    return Interval(
        start=start,
        num_stats_lines=len(stats),
        running=figures.running,
        waiting=figures.waiting,
        kv_usage=figures.kv_usage,
        prompt_tok_s=figures.prompt_tok_s,
        gen_tok_s=figures.gen_tok_s,
        spec_acceptance=_acceptance(records),
        preemptions=preempted,
        oom_errors=ooms,
        stalled=any(s.start < end and s.end >= start for s in stalls),
    )


def _spec_summary(records: Sequence[LogRecord]) -> SpecSummary | None:
    specs = [r.spec for r in records if r.spec is not None]
    if not specs:
        return None
    lengths = [s.mean_acceptance_length for s in specs if s.mean_acceptance_length is not None]
    weights = [float(s.drafted_tokens or 1) for s in specs]
    rows = [(s.per_position, w) for s, w in zip(specs, weights, strict=True) if s.per_position]
    width = min((len(p) for p, _ in rows), default=0)
    per_position = tuple(
        sum(p[i] * w for p, w in rows) / sum(w for _, w in rows) for i in range(width)
    )
    return SpecSummary(
        num_lines=len(specs),
        acceptance_rate=_acceptance(records),
        mean_accepted_tokens=(sum(lengths) / len(lengths)) - 1.0 if lengths else None,
        per_position=per_position,
    )


def _moments(stats: Sequence[LogRecord]) -> tuple[_Moment, ...]:
    """(time, running, waiting, KV use) of each second with a stats line, engines summed."""
    by_second: dict[float, list[StatsLine]] = defaultdict(list)
    for record in stats:
        if record.stats is not None and record.at is not None:
            by_second[record.at].append(record.stats)
    moments = []
    for at, lines in sorted(by_second.items()):
        f = _figures(lines)
        moments.append((at, f.running, f.waiting, f.kv_usage))
    return tuple(moments)


def _waiting_share(
    stats: Sequence[LogRecord], moments: Sequence[_Moment], dated: bool
) -> float | None:
    """The share of the stats moments (undated: of the stats lines) with requests waiting."""
    waits = (
        [m[2] for m in moments]
        if dated
        else [r.stats.waiting for r in stats if r.stats is not None]
    )
    known = [w for w in waits if w is not None]
    return sum(1 for w in known if w > 0) / len(known) if known else None


def _prefill_only_share(stats: Sequence[LogRecord]) -> float | None:
    lines = [
        r.stats
        for r in stats
        if r.stats is not None
        and r.stats.engine == "vllm-v0"  # V1 mixes prefill and decode in one step
        and (r.stats.running or 0) >= 2  # one request: no other decode to pause
        and r.stats.gen_tok_s is not None
        and r.stats.prompt_tok_s is not None
        and (r.stats.gen_tok_s > 0 or r.stats.prompt_tok_s > 0)
    ]
    if not lines:
        return None
    paused = sum(1 for s in lines if s.gen_tok_s == 0 and (s.prompt_tok_s or 0) > 0)
    return paused / len(lines)


def graph_use(lines: Iterable[tuple[StatsLine, SpecLine | None]]) -> GraphUse | None:
    """What the decode lines say of CUDA graphs (see `GraphUse`); None when none says it.

    `lines`: each stats line with the speculative-decoding figures of the same line (SGLang
    prints its accept len on the decode line), or None."""
    said = [(s, spec) for s, spec in lines if s.cuda_graph is not None and (s.running or 0) > 0]
    if not said:
        return None
    eager = [(s, spec) for s, spec in said if not s.cuda_graph]
    batch = describe([s.running for s, _ in eager if s.running is not None])
    token_s = [
        (s.running / s.gen_tok_s, _tokens_per_step(spec))
        for s, spec in eager
        if s.running and s.gen_tok_s
    ]
    token = describe([each for each, _ in token_s])
    step = describe([each * tokens for each, tokens in token_s])
    return GraphUse(
        num_lines=len(said),
        eager_share=len(eager) / len(said),
        eager_batch=None if batch is None else batch.p50,
        eager_token_s=None if token is None else token.p50,
        num_eager=len(eager),
        eager_step_s=None if step is None else step.p50,
        ranked=any(s.engine_index is not None for s, _ in said),
    )


def _tokens_per_step(spec: SpecLine | None) -> float:
    """The tokens a request gets from one step: the accept len with speculative decoding."""
    length = None if spec is None else spec.mean_acceptance_length
    return length if length is not None and length >= 1 else 1.0


def _duplicates(records: Sequence[LogRecord]) -> set[int]:
    """Indices of records that repeat one before them word for word: a logger writing twice.

    Only records that say something (stats, events, spec, preemptions) count — an access log
    repeats its `GET /health` lines by nature. Dated, the same text at the same second; undated
    (a snapshot), the same event line right after itself — a stats line may repeat there
    when nothing changed between two of them."""
    seen: set[tuple[float | None, str]] = set()
    out: set[int] = set()
    previous = ""
    for index, record in enumerate(records):
        said = record.events or record.spec or record.preempted or record.stats
        if not said or len(record.text) < 24:
            continue
        if record.at:
            if (record.at, record.text) in seen:
                out.add(index)
            seen.add((record.at, record.text))
        elif record.stats is None and record.text == previous:
            out.add(index)
        previous = record.text
    return out


def make_timeline(
    records: Sequence[LogRecord],
    window: tuple[float | None, float | None],
    interval_s: float,
    *,
    dated: bool = True,
) -> LogTimeline | None:
    """The timeline of the dated records within `window` (Unix seconds, either end open).

    `dated` False: the records had no stamp and were all given one moment — the log is a
    snapshot (its most running, waiting and KV use; its events), not a timeline."""
    low, high = window
    kept = [
        r
        for r in with_times(records)
        if r.at is not None and (low is None or r.at >= low) and (high is None or r.at <= high)
    ]
    if not kept:
        return None
    kept.sort(key=lambda r: r.at or 0.0)  # several files: one stream in time order
    twice = _duplicates(kept)  # counted once: a record written twice is one event
    kept = [r for i, r in enumerate(kept) if i not in twice]
    start, end = kept[0].at or 0.0, kept[-1].at or 0.0
    preempted, ooms, stalls = _preemptions(kept), _ooms(kept), _stalls(kept, end)
    origin = math.floor(start / interval_s) * interval_s
    buckets: dict[int, list[int]] = defaultdict(list)
    for index, record in enumerate(kept):
        if (
            record.stats
            or record.spec
            or record.stuck_s
            or record.events
            or index in preempted
            or index in ooms
        ):
            buckets[int(((record.at or 0.0) - origin) // interval_s)].append(index)
    intervals = tuple(
        _interval(
            (origin + key * interval_s, origin + (key + 1) * interval_s),
            [kept[i] for i in members],
            sum(preempted.get(i, 0) for i in members),
            sum(1 for i in members if i in ooms),
            stalls,
        )
        for key, members in sorted(buckets.items())
    )
    stats = [r for r in kept if r.stats is not None]
    moments = _moments(stats)
    summary = summarise_events(kept)
    stated = sum(preempted.values()) + summary.preempted
    engines = {r.stats.engine for r in stats if r.stats is not None}
    engine = "vllm-v0" if "vllm-v0" in engines else next(iter(sorted(engines)), None)
    return LogTimeline(
        engine=engine,
        interval_s=interval_s,
        start=start,
        end=end,
        num_records=len(kept),
        intervals=intervals,
        stalls=tuple(stalls),
        preemptions=stated if engine == "vllm-v0" or stated else None,
        oom_errors=len(ooms),
        recompilations=parse_recompile_log(r.text for r in kept).recompilations,
        spec=_spec_summary(kept),
        stats=moments,
        prefix_hit_rate=_mean(r.stats.prefix_hit_rate for r in stats if r.stats is not None),
        throughput_known=any(r.stats.gen_tok_s is not None for r in stats if r.stats is not None),
        events=summary,
        dated=dated,
        waiting_share=_waiting_share(stats, moments, dated),
        prefill_only_share=_prefill_only_share(stats),
        duplicated=len(twice),
        rank_stats=tuple(
            (r.at or 0.0, r.stats.engine_index, r.stats.running, r.stats.waiting, r.stats.kv_usage)
            for r in stats
            if r.stats is not None and r.stats.engine_index is not None
        ),
        graph_use=graph_use((r.stats, r.spec) for r in stats if r.stats is not None),
    )
