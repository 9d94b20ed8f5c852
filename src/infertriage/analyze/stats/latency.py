"""analyze.stats, level 1: latency, throughput and goodput from `RequestRecord`s.

Takes the records of one load level, the SLOs and a seed; gives a typed
`LatencySummary` (and `Signal`s for the rules). Pure: no clock, no I/O.

Definitions (all seconds, on the run's clock):

- TTFT = first content chunk − send; `ttft_intended` from the scheduled start
  instead, so client lag and client queueing are never hidden. A role-only
  chunk is not content; a reasoning delta is (it is a generated token).
- TTFO = first non-reasoning content chunk − send (time to first output).
- E2E = last content chunk − send (the `[DONE]` time is kept apart as `end_ts`).
- TPOT = (E2E − TTFT) / (N − 1) per request, N its output tokens (the server's
  `usage` when given); aggregated request-weighted (one value per request).
- ITL, per token: a chunk (what arrived in one read) carrying k tokens, g after
  the previous token-bearing chunk, contributes k samples of g/k; the first
  chunk's k − 1 extra tokens contribute gaps of 0. Within a request the samples
  sum to E2E − TTFT and number N − 1, so their mean is exactly TPOT, however the
  server or the network coalesces events. vLLM's client counts each event as a
  token: when events coalesce its gaps pile up at 0 and one large gap, and
  when one event carries k tokens its ITL is k× too large. Counts come from the
  server per chunk (`continuous_usage_stats`) or, where events × 1 = usage, are
  exact; otherwise N is apportioned over the chunks and the request counts as
  chunk-level (`itl_token_level` < 1).
- ICL = the raw gaps between consecutive content chunks.
- Throughput and goodput are per second of a steady window: from the first
  completion (warm-up over) to the last send (drain begins); with too little
  of it, the whole run. Goodput counts requests meeting every SLO.
- The error rate is the server's failures over the requests it was validly
  asked to serve: requests cut by the run's end, rejected as invalid (4xx) or
  refused for load (429) are counted apart (`outcomes`), never as errors.
- Percentiles are numpy's (linear); the mean carries a seeded percentile
  bootstrap confidence interval where asked (`distribution.describe`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from infertriage.analyze.stats.distribution import Distribution, describe
from infertriage.analyze.stats.outcomes import (
    Rejections,
    is_incomplete,
    is_refused,
    is_server_failure,
    rejections_of,
)
from infertriage.analyze.stats.samples import FloatArray
from infertriage.schemas import (
    JudgedWindow,
    RequestRecord,
    Signal,
    Thresholds,
    UserError,
    parse_duration,
)

__all__ = [
    "SLO_METRICS",
    "ClientVerdict",
    "LatencySummary",
    "ScheduleBehind",
    "Slo",
    "Window",
    "apportion",
    "default_slos",
    "e2e_s",
    "icl_samples",
    "is_incomplete",
    "itl_samples",
    "judge_client",
    "parse_slos",
    "schedule_behind",
    "steady_requests",
    "steady_window",
    "summarize",
    "summary_signals",
    "tpot_s",
    "ttfo_s",
]

# A steady window shorter than this share of the run is no window: use the whole run.
_MIN_WINDOW_SHARE = 0.2
# Fewer requests than this sent within the steady window: judge the whole level instead.
_MIN_STEADY_REQUESTS = 5
# The client fell behind its schedule when its last sends left later than this share of the
# schedule's span, and than this long (a host's stall is shorter: a backlog is not).
_BEHIND_SHARE, _BEHIND_FLOOR_S = 0.05, 0.25
_BEHIND_TAIL = 0.1  # the last tenth of the sends, by schedule


# --- per-request metrics -------------------------------------------------------------------


def _num_output(record: RequestRecord) -> int:
    if record.output_tokens is not None:
        return record.output_tokens
    return sum(chunk.num_tokens for chunk in record.chunks)


def ttfo_s(record: RequestRecord) -> float | None:
    for chunk in record.chunks:
        if not chunk.reasoning:
            return chunk.ts - record.sent_ts
    return None


def e2e_s(record: RequestRecord) -> float | None:
    return None if record.last_token_ts is None else record.last_token_ts - record.sent_ts


def tpot_s(record: RequestRecord) -> float | None:
    """(E2E − TTFT) / (N − 1); None for fewer than two tokens."""
    n = _num_output(record)
    if n < 2 or record.first_token_ts is None or record.last_token_ts is None:
        return None
    return (record.last_token_ts - record.first_token_ts) / (n - 1)


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split `total` into integers proportional to `weights` (largest remainder first)."""
    weight_sum = sum(weights)
    if weight_sum <= 0:
        return [0] * len(weights)
    exact = [total * w / weight_sum for w in weights]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def _token_chunks(record: RequestRecord) -> tuple[list[float], list[int]]:
    """Times and token counts of the token-bearing chunks, counts apportioned to N if inexact."""
    times = [c.ts for c in record.chunks if c.num_tokens > 0]
    counts = [c.num_tokens for c in record.chunks if c.num_tokens > 0]
    n = record.output_tokens
    if not record.chunk_tokens_exact and n is not None and n != sum(counts) and n >= len(counts):
        counts = apportion(n, counts)
    return times, counts


def itl_samples(record: RequestRecord) -> FloatArray:
    """Per-token inter-token gaps (see the module's definition); their mean is the TPOT."""
    times, counts = _token_chunks(record)
    if not times:
        return np.zeros(0)
    ts = np.asarray(times)
    k = np.asarray(counts, dtype=np.int64)
    gaps = np.diff(ts) / k[1:]
    head = np.zeros(int(k[0]) - 1)
    return np.concatenate((head, np.repeat(gaps, k[1:])))


def icl_samples(record: RequestRecord) -> FloatArray:
    """Raw gaps between consecutive content chunks."""
    return np.diff(np.asarray([c.ts for c in record.chunks], dtype=np.float64))


# --- SLOs ----------------------------------------------------------------------------------

SLO_METRICS: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": lambda r: r.ttft_s,
    "ttft_intended": lambda r: (
        None if r.first_token_ts is None else r.first_token_ts - r.scheduled_ts
    ),
    "ttfo": ttfo_s,
    "tpot": tpot_s,
    "e2e": e2e_s,
    "e2e_intended": lambda r: None if r.last_token_ts is None else r.last_token_ts - r.scheduled_ts,
    "itl_max": lambda r: float(s.max()) if (s := itl_samples(r)).size else None,
}


@dataclass(frozen=True, slots=True)
class Slo:
    """A per-request limit on one metric of `SLO_METRICS`, in seconds."""

    metric: str
    limit_s: float

    def met(self, record: RequestRecord) -> bool:
        value = SLO_METRICS[self.metric](record)
        return value is None or value <= self.limit_s


def default_slos(thresholds: Thresholds) -> tuple[Slo, ...]:
    """Goodput's default SLOs: TTFT and TPOT within the profile's TTFT and ITL limits."""
    return (Slo("ttft", thresholds.ttft_p95_s), Slo("tpot", thresholds.itl_p95_s))


def parse_slos(text: str) -> tuple[Slo, ...]:
    """`--goodput ttft=200ms,tpot=50ms,e2e=10s` (any metric of `SLO_METRICS`)."""
    slos = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SLO_METRICS:
            known = ", ".join(SLO_METRICS)
            raise UserError(f"--goodput {text!r}: {part!r} is not METRIC=TIME (metrics: {known}).")
        limit_s = parse_duration(value.strip(), "ms")
        if not limit_s > 0:
            raise UserError(f"--goodput {text!r}: {key} must be a time above 0, such as 200ms.")
        slos.append(Slo(key, limit_s))
    return tuple(slos)


# --- the window and the summary ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    start_ts: float
    end_ts: float
    basis: str

    @property
    def duration_s(self) -> float:
        return max(self.end_ts - self.start_ts, 1e-9)

    def __contains__(self, ts: float) -> bool:
        return self.start_ts <= ts <= self.end_ts


def steady_window(records: Sequence[RequestRecord]) -> Window:
    """First completion → last send when that is long enough, else the whole run."""
    if not records:
        return Window(0.0, 0.0, "no requests")
    first_send = min(r.sent_ts for r in records)
    last_send = max(r.sent_ts for r in records)
    ends = [r.end_ts for r in records if r.end_ts is not None]
    last_end = max(ends, default=last_send)
    done = [r.end_ts for r in records if r.ok and r.end_ts is not None]
    span = max(last_end - first_send, 1e-9)
    if done:
        first_done = min(done)
        if last_send - first_done >= _MIN_WINDOW_SHARE * span:
            return Window(first_done, last_send, "steady: first completion to last send")
    return Window(first_send, last_end, "whole run")


def steady_requests(
    records: Sequence[RequestRecord],
) -> tuple[list[RequestRecord], JudgedWindow]:
    """The requests an SLO is judged on — those sent within `steady_window` — and that window.

    The one definition `diagnose` and `validate` share. A closed loop's first burst
    (every slot sending at once, queueing behind each other as no steady load does)
    is sent before any request finishes, so it falls before the window; the window
    ends at the last send, before the drain. Too short a level, or fewer than five
    requests within its window, is judged whole.
    """
    window = steady_window(records)
    inside = [r for r in records if r.sent_ts in window]
    if window.basis.startswith("steady") and len(inside) >= _MIN_STEADY_REQUESTS:
        judged = JudgedWindow(
            start_ts=window.start_ts,
            end_ts=window.end_ts,
            num_judged=len(inside),
            num_requests=len(records),
            num_first_burst=sum(1 for r in records if r.sent_ts < window.start_ts),
        )
        return inside, judged
    times = [t for r in records for t in (r.sent_ts, r.end_ts) if t is not None]
    judged = JudgedWindow(
        start_ts=min(times, default=0.0),
        end_ts=max(times, default=0.0),
        num_judged=len(records),
        num_requests=len(records),
        basis="whole level",
    )
    return list(records), judged


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Everything `bench` reports about one load level; seconds, tokens and requests per second."""

    num_requests: int  # every request sent: ok + failed + incomplete + rejected + refused
    num_ok: int
    num_failed: int  # failed by the server (`outcomes.is_server_failure`)
    num_incomplete: int  # cut by the run's own end
    window: Window
    ttft: Distribution | None
    ttft_intended: Distribution | None
    ttfo: Distribution | None
    tpot: Distribution | None
    itl: Distribution | None
    icl: Distribution | None
    e2e: Distribution | None
    e2e_intended: Distribution | None
    dispatch_lag: Distribution | None
    client_queue: Distribution | None
    tokens_per_chunk: Distribution | None
    itl_token_level: float  # share of requests whose per-chunk token counts are exact
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    goodput: float
    slos: tuple[Slo, ...]
    total_input_tokens: int
    total_output_tokens: int
    num_short_outputs: int  # fewer output tokens than asked
    output_ratio: float | None  # mean output tokens / asked
    errors: tuple[tuple[str, int], ...] = field(default=())  # the server's and the run's cuts
    rejections: Rejections = field(default=Rejections())  # refused as invalid (4xx)
    num_refused: int = 0  # HTTP 429: the server refused the load (admission control)
    num_resent: int = 0  # sent twice: the first send met a kept-alive connection closed

    @property
    def num_counted(self) -> int:
        """The requests the error rate is over: answered, and validly asked."""
        return self.num_ok + self.num_failed

    @property
    def error_rate(self) -> float:
        """The server's failures over the requests it was validly asked to serve."""
        return self.num_failed / self.num_counted if self.num_counted else 0.0

    @property
    def admission_rate(self) -> float:
        """Refused with a 429, over the requests sent and not cut by the run's end."""
        sent = self.num_requests - self.num_incomplete
        return self.num_refused / sent if sent else 0.0


def _error_counts(records: Iterable[RequestRecord]) -> tuple[tuple[str, int], ...]:
    """Failures by kind: the server's and the run's cuts; rejected and refused are apart."""
    counts = Counter(
        f"{r.error_kind.value}:{r.fault}" if r.fault else r.error_kind.value
        for r in records
        if is_server_failure(r) or is_incomplete(r)
    )
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _values(
    records: Iterable[RequestRecord], metric: Callable[[RequestRecord], float | None]
) -> list[float]:
    return [v for r in records if (v := metric(r)) is not None]


def _output_tokens_in(record: RequestRecord, window: Window) -> float:
    total = sum(c.num_tokens for c in record.chunks)
    if total == 0:
        return 0.0
    scale = (record.output_tokens or total) / total
    return scale * sum(c.num_tokens for c in record.chunks if c.ts in window)


def _throughputs(
    records: Sequence[RequestRecord], window: Window, slos: Sequence[Slo]
) -> tuple[float, float, float, float]:
    finished = [r for r in records if r.ok and r.end_ts is not None and r.end_ts in window]
    output = sum(_output_tokens_in(r, window) for r in records)
    prompt = sum(
        r.prompt_tokens or 0
        for r in records
        if r.first_token_ts is not None and r.first_token_ts in window
    )
    good = sum(1 for r in finished if all(slo.met(r) for slo in slos))
    seconds = window.duration_s
    return len(finished) / seconds, output / seconds, (output + prompt) / seconds, good / seconds


def summarize(
    records: Sequence[RequestRecord], slos: Sequence[Slo] = (), *, seed: int = 0
) -> LatencySummary:
    """The summary of one load level; headline means carry bootstrap intervals."""
    ok = [r for r in records if r.ok]
    window = steady_window(records)
    itl = [itl_samples(r) for r in ok]
    chunk_tokens = [c.num_tokens for r in ok for c in r.chunks if c.num_tokens > 0]
    asked = [(r.output_tokens or 0, r.max_tokens) for r in ok if r.max_tokens]
    req_tp, out_tp, total_tp, goodput = _throughputs(records, window, slos)
    return LatencySummary(
        num_requests=len(records),
        num_ok=len(ok),
        num_failed=sum(1 for r in records if is_server_failure(r)),
        num_incomplete=sum(1 for r in records if is_incomplete(r)),
        window=window,
        ttft=describe(_values(ok, lambda r: r.ttft_s), ci=True, seed=seed),
        ttft_intended=describe(_values(ok, SLO_METRICS["ttft_intended"]), seed=seed),
        ttfo=describe(_values(ok, ttfo_s)),
        tpot=describe(_values(ok, tpot_s), ci=True, seed=seed + 1),
        itl=describe(np.concatenate(itl) if itl else np.zeros(0)),
        icl=describe(np.concatenate([icl_samples(r) for r in ok]) if ok else np.zeros(0)),
        e2e=describe(_values(ok, e2e_s), ci=True, seed=seed + 2),
        e2e_intended=describe(_values(ok, SLO_METRICS["e2e_intended"])),
        dispatch_lag=describe([r.dispatch_lag_s - r.client_queue_s for r in records]),
        client_queue=describe([r.client_queue_s for r in records]),
        tokens_per_chunk=describe(chunk_tokens),
        itl_token_level=_token_level_share(ok),
        request_throughput=req_tp,
        output_throughput=out_tp,
        total_token_throughput=total_tp,
        goodput=goodput,
        slos=tuple(slos),
        total_input_tokens=sum(r.prompt_tokens or 0 for r in ok),
        total_output_tokens=sum(r.output_tokens or 0 for r in ok),
        num_short_outputs=sum(1 for got, want in asked if got < want),
        output_ratio=(sum(g / w for g, w in asked) / len(asked)) if asked else None,
        errors=_error_counts(records),
        rejections=rejections_of(records),
        num_refused=sum(1 for r in records if is_refused(r)),
        num_resent=sum(1 for r in records if "retried" in r.labels),
    )


def _token_level_share(ok: Sequence[RequestRecord]) -> float:
    if not ok:
        return 0.0
    exact = sum(
        1
        for r in ok
        if r.chunk_tokens_exact or r.output_tokens == sum(c.num_tokens for c in r.chunks)
    )
    return exact / len(ok)


@dataclass(frozen=True, slots=True)
class ClientVerdict:
    """Would the load client's own lag distort the figures, and why."""

    client_bound: bool
    host_busy: bool  # stamps run late, but the client is mostly idle: the host is contended
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScheduleBehind:
    """How far behind its schedule the client's sends ended."""

    behind_s: float  # the median dispatch lag (less client queue) of the last tenth sent
    span_s: float  # the schedule's span: first to last intended start

    @property
    def fell_behind(self) -> bool:
        """The lag grew to a backlog: the client could not keep its schedule."""
        return self.behind_s > max(_BEHIND_FLOOR_S, _BEHIND_SHARE * self.span_s)


def schedule_behind(records: Sequence[RequestRecord]) -> ScheduleBehind | None:
    """The lag of a level's last sends (by intended start); None for fewer than 2 records,
    or all due at once.

    A client that keeps its schedule ends about as late as it began, whatever its jitter;
    one that cannot (too high a rate for its CPU, or for the share of a core its host gives
    it) falls further behind with every request, and its last sends show the backlog.
    """
    ordered = sorted(records, key=lambda r: r.scheduled_ts)
    if len(ordered) < 2 or ordered[-1].scheduled_ts <= ordered[0].scheduled_ts:
        return None  # a burst (`--rate inf`) has no schedule to keep
    tail = ordered[-max(1, round(len(ordered) * _BEHIND_TAIL)) :]
    lag = float(np.median([r.dispatch_lag_s - r.client_queue_s for r in tail]))
    return ScheduleBehind(lag, ordered[-1].scheduled_ts - ordered[0].scheduled_ts)


def judge_client(
    *,
    cpu_busiest: float,
    loop_lag_p99_s: float | None,
    dispatch_lag_p99_s: float | None,
    icl_p50_s: float | None,
    events_per_read: float | None = None,
    behind: ScheduleBehind | None = None,
) -> ClientVerdict:
    """Is the load client itself distorting the figures?

    Late is: the event loop runs late by more than max(2 ms, ¼ of the typical chunk
    gap) at p99 (stamps land late), or sends leave more than 10 ms after their deadline
    at p99. The client's CPU need is its busiest process's CPU share times the SSE
    events per socket read (`events_per_read`, ≥ 1): a reader that runs behind finds
    several events in each read and does less work per event than it would reading
    each as it came, so a starved client's share alone understates its need. The
    client is bound when that need is ≥ 85 % of a core, or it is late while needing ≥
    50 % of one: its own work is the cause and more `--workers` help. Late with the
    client mostly idle is a busy host (`host_busy`), not the client. Whatever its CPU,
    a client whose sends fell behind its schedule (`behind.fell_behind`) is bound: it
    did not send the load asked, so no figure describes the server at that load.
    """
    late = []
    lag_limit = max(0.002, 0.25 * icl_p50_s) if icl_p50_s else 0.002
    if loop_lag_p99_s is not None and loop_lag_p99_s > lag_limit:
        late.append(f"event-loop lag p99 {loop_lag_p99_s * 1e3:.1f} ms > {lag_limit * 1e3:.1f} ms")
    if dispatch_lag_p99_s is not None and dispatch_lag_p99_s > 0.010:
        late.append(f"dispatch lag p99 {dispatch_lag_p99_s * 1e3:.1f} ms > 10 ms")
    need = cpu_busiest * max(1.0, events_per_read or 1.0)
    cpu = f"a client process used {cpu_busiest:.0%} of a core"
    if need > cpu_busiest * 1.05:
        cpu += f" with {events_per_read:.1f} events per read (about {need:.0%} to keep up)"
    saturated = need >= 0.85
    fell_behind = behind is not None and behind.fell_behind
    bound = saturated or fell_behind or (bool(late) and need >= 0.5)
    reasons = ([cpu] if bound else []) + late
    if behind is not None and fell_behind:
        reasons.insert(
            0,
            f"the sends fell {behind.behind_s:.2f} s behind the schedule by its end "
            f"(of {behind.span_s:.1f} s): the client could not keep it",
        )
    return ClientVerdict(bound, bool(late) and not bound, tuple(reasons))


def summary_signals(summary: LatencySummary, source: str = "bench") -> list[Signal]:
    """The headline figures as `Signal`s over the steady window."""
    w = (summary.window.start_ts, summary.window.end_ts)
    out = [
        Signal("bench.request_throughput", summary.request_throughput, "requests/s", source, w),
        Signal("bench.output_throughput", summary.output_throughput, "tokens/s", source, w),
        Signal("bench.goodput", summary.goodput, "requests/s", source, w),
        Signal("bench.error_rate", summary.error_rate, "fraction", source, w),
        Signal("bench.rejected_rate", summary.rejections.share, "fraction", source, w),
        Signal("bench.admission_rate", summary.admission_rate, "fraction", source, w),
        Signal("bench.itl_token_level", summary.itl_token_level, "fraction", source, w),
    ]
    for name in ("ttft", "ttft_intended", "ttfo", "tpot", "itl", "e2e", "dispatch_lag"):
        dist: Distribution | None = getattr(summary, name)
        if dist is None:
            continue
        for stat in ("mean", "p50", "p95", "p99"):
            out.append(Signal(f"bench.{name}.{stat}", getattr(dist, stat), "s", source, w))
    return out
