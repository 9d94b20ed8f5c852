"""diagnose, level 3: the run's symptom — which SLOs it missed and by how much.

Takes `Evidence` and `Thresholds`; gives whether TTFT, ITL or the error rate
missed their SLO (the client's view first, the server's when there is no
load), and how far: the symptom that findings explain. The error rate has
missed its SLO only when its exact 95 % interval lies above it (`error_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.analyze.stats.binomial import exact_interval
from infertriage.diagnose.evidence import Evidence
from infertriage.engines import Knob, engine_of, knob_flag
from infertriage.schemas import SloProfile, SloResult, Thresholds

__all__ = [
    "ErrorCounts",
    "Miss",
    "current",
    "engine_flag",
    "error_counts",
    "errors_missed",
    "flag",
    "itl_missed",
    "itl_near",
    "misses",
    "queued",
    "slo_missed",
    "slo_results",
    "ttft_missed",
]


def _first(evidence: Evidence, *names: str) -> float | None:
    for name in names:
        value = evidence.get(name)
        if value is not None:
            return value
    return None


def ttft_p95(evidence: Evidence) -> float | None:
    return _first(evidence, "client.ttft_p95_s", "server.ttft_p95_s")


def itl_p95(evidence: Evidence) -> float | None:
    return _first(evidence, "client.itl_p95_s", "server.itl_p95_s")


def ttft_missed(evidence: Evidence, t: Thresholds) -> bool:
    """TTFT p95 above its SLO; with no TTFT measured at all, a queue that persists in the
    evidence itself (`queued`): every waiting request's TTFT grows by its wait."""
    value = ttft_p95(evidence)
    if value is None:
        return queued(evidence, t) is not None and t.profile is SloProfile.INTERACTIVE
    return value > t.ttft_p95_s and t.profile is SloProfile.INTERACTIVE


# one scrape shows a moment: a queue this many times the depth is a symptom even so
_ONE_SCRAPE_DEPTH = 4.0


def queued(evidence: Evidence, t: Thresholds) -> str | None:
    """The evidence's own symptom when no client ran: requests kept waiting.

    At least `queue_symptom_depth` requests waited, in at least `queue_symptom_share` of
    the stats lines; a single scrape (no share) only with four times that depth waiting.
    Gives the sentence that says so, or None."""
    waiting = evidence.get("queue.waiting_max")
    if evidence.has("client.num_requests") or waiting is None:
        return None  # a client ran: its own figures are the symptom (or it measured none)
    share = evidence.get("queue.waiting_share")
    if share is None:  # one scrape: a moment, not a persisting queue — only a deep one counts
        deep = waiting >= _ONE_SCRAPE_DEPTH * t.queue_symptom_depth
        return f"{waiting:.0f} requests waiting (one scrape; TTFT not measured)" if deep else None
    if waiting < t.queue_symptom_depth or share < t.queue_symptom_share:
        return None
    where = f"in {share:.0%} of the stats lines"
    return f"up to {waiting:.0f} requests waiting {where} (TTFT not measured)"


def itl_missed(evidence: Evidence, t: Thresholds) -> bool:
    value = itl_p95(evidence)
    return value is not None and value > t.itl_p95_s and t.profile is SloProfile.INTERACTIVE


def itl_near(evidence: Evidence, t: Thresholds) -> bool:
    """ITL p95 within its SLO but at `slo_headroom` of it or more: no headroom left."""
    value = itl_p95(evidence)
    return (
        value is not None
        and value >= t.slo_headroom * t.itl_p95_s
        and t.profile is SloProfile.INTERACTIVE
    )


@dataclass(frozen=True, slots=True)
class ErrorCounts:
    """The server's failures among the requests validly asked of it, with their 95 % interval."""

    num_errors: int
    num_requests: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.num_errors / self.num_requests if self.num_requests else 0.0


def error_counts(evidence: Evidence) -> ErrorCounts | None:
    """From `client.num_errors` and `client.num_requests`; None without them or without requests."""
    errors, requests = evidence.get("client.num_errors"), evidence.get("client.num_requests")
    if errors is None or requests is None or requests < 1:
        return None
    num_errors, num_requests = round(errors), round(requests)
    low, high = exact_interval(min(num_errors, num_requests), num_requests)
    return ErrorCounts(num_errors, num_requests, low, high)


def errors_missed(evidence: Evidence, t: Thresholds) -> bool:
    """The error rate is over its SLO beyond doubt: the interval's lower bound is above it."""
    counts = error_counts(evidence)
    if counts is not None:
        return counts.low > t.error_rate
    rate = evidence.get("client.error_rate")  # no counts (an older run): the point estimate
    return rate is not None and rate > t.error_rate


def slo_missed(evidence: Evidence, t: Thresholds) -> bool:
    throughput = evidence.get("client.throughput_tok_s")
    low_throughput = (
        t.profile is SloProfile.BATCH
        and throughput is not None
        and throughput < t.min_throughput_tok_s
    )
    return (
        ttft_missed(evidence, t)
        or itl_missed(evidence, t)
        or errors_missed(evidence, t)
        or low_throughput
    )


def _seconds(value: float) -> str:
    return f"{value:.2g} s" if value >= 1 else f"{value * 1e3:.0f} ms"


@dataclass(frozen=True, slots=True)
class Miss:
    """One SLO the run missed, as the chain's end and as a sentence."""

    figure: str  # "TTFT p95 4.7 s"
    target: str  # "200 ms"; "" for the evidence's own symptom (a queue), which has no SLO

    @property
    def symptom(self) -> str:
        return f"{self.figure} (SLO {self.target})" if self.target else self.figure

    @property
    def sentence(self) -> str:
        return f"{self.figure} misses {self.target}" if self.target else self.figure


def misses(evidence: Evidence, t: Thresholds) -> list[Miss]:
    """The SLOs missed, by the same tests the rules use (`slo_missed`)."""
    out: list[Miss] = []
    queue = queued(evidence, t) if ttft_p95(evidence) is None else None
    if ttft_missed(evidence, t) and queue is not None:
        out.append(Miss(queue, ""))
    elif ttft_missed(evidence, t):
        out.append(Miss(f"TTFT p95 {_seconds(ttft_p95(evidence) or 0.0)}", _seconds(t.ttft_p95_s)))
    if itl_missed(evidence, t):
        out.append(Miss(f"ITL p95 {_seconds(itl_p95(evidence) or 0.0)}", _seconds(t.itl_p95_s)))
    if errors_missed(evidence, t):
        counts = error_counts(evidence)
        rate = counts.rate if counts else evidence.get("client.error_rate") or 0.0
        out.append(Miss(f"error rate {rate:.1%}", f"{t.error_rate:.1%}"))
    throughput = evidence.get("client.throughput_tok_s")
    batch = t.profile is SloProfile.BATCH
    if batch and throughput is not None and throughput < t.min_throughput_tok_s:
        target = f"{t.min_throughput_tok_s:,.0f} tokens/s"
        out.append(Miss(f"throughput {throughput:,.0f} tokens/s", target))
    return out


def slo_results(evidence: Evidence, t: Thresholds) -> tuple[SloResult, ...]:
    rows = (
        ("ttft_p95", t.ttft_p95_s, ttft_p95(evidence), "s"),
        ("itl_p95", t.itl_p95_s, itl_p95(evidence), "s"),
        ("error_rate", t.error_rate, evidence.get("client.error_rate"), "fraction"),
    )
    return tuple(
        SloResult(
            name=name,
            target=target,
            measured=measured,
            unit=unit,
            passed=None if measured is None else measured <= target,
        )
        for name, target, measured, unit in rows
    )


def flag(evidence: Evidence, knob: Knob) -> str:
    """The engine's flag for `knob` (vLLM's where the engine is unknown or has none)."""
    return knob_flag(evidence.engine, knob)


def engine_flag(evidence: Evidence, knob: Knob) -> str | None:
    """The flag of the engine the evidence came from; None when unknown or it has none."""
    adapter = engine_of(evidence.engine)
    return adapter.knobs.get(knob) if adapter is not None else None


def current(evidence: Evidence, name: str, fmt: str = "{:g}") -> str:
    """' (now 256)' when the server reported the setting, else ''."""
    value = evidence.get(name)
    return "" if value is None else f" (now {fmt.format(value)})"
