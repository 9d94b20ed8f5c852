"""loadgen, level 2: the goodput search — the largest Poisson rate whose SLOs hold.

Takes one level's records (or the pooled records of the runs at one rate), its SLOs,
the rule and the level's stability; gives a `StepJudgement` (`judge_step`), and the
bisection that chooses the next rate from those judgements (`MaxRateSearch`), ending in
a `MaxRateResult`. Pure: no I/O, no clock; the API runs each rate as a bench level.

Two rules (`MaxRateRule`):

- **attainment** (default): attainment is the share of the judged requests (those sent
  in the level's steady window, `steady_requests`) that succeeded and met every SLO. A
  rate *holds* when the exact (Clopper–Pearson) 95 % interval of attainment lies at or
  above the target: the claim is "attainment ≥ target at 95 % confidence", so the rate
  found is conservative, never a lucky draw. A rate *fails* when the interval lies
  wholly below the target. An interval that straddles it is *undecided*: the rate is
  run again with the requests that would settle it (`requests_to_settle`, at most
  `MAX_MORE_FACTOR`× the step's) and judged on both runs pooled; still undecided, it
  counts as not holding.
- **mlperf-server** (LoadGen's Server scenario): each SLO is a p99 limit (TTFT and
  TPOT, as `--goodput` or `--slo` give them); a rate holds when every p99 is within its
  limit and LoadGen's early-stopping rule (`analyze.stats.earlystop`, 99 % confidence)
  is met for each with the count over the limit; a p99 within the limit on too small a
  sample is undecided (run again with the requests early stopping asks for, at least
  half the step's again). A failed request counts as over every limit.

In both, a step is VALID only when the level kept up (`sweep.judge_stable`), the client
was not the bottleneck, and the level's own validity checks of `STEP_CHECKS` passed
(`loadgen.validity`: achieved vs nominal rate, lengths, steady state, client); its
duration and per-percentile sample checks are for a level's own p95 claims, and the
search's claim has its own sample rule (the interval, or early stopping). An INVALID
step does not hold (the reason is kept). A step INVALID by a check of the server's lengths
(`RATE_BLIND_CHECKS`) before any rate held ends the search: no lower rate would pass it.
So does a valid step that fails with under `UNLOADED_IN_FLIGHT` request in flight on
average (Little's law over its judged requests: their time from send to end over the
window), before any rate held: the server was mostly idle and still missed the SLOs (an
SLO below its unloaded latency), and a lower rate only makes each step longer.

The search: the closed-loop probe's throughput P bounds the rates worth trying. The
first rate is `FIRST_SHARE`·P; while rates hold it steps up by `GROW`, while they fail
down by `SHRINK`, until one holds and one above it fails (the bracket); then it bisects
until the bracket's width is within `tolerance` of its lower end, or `max_steps` levels
have run. The result is the bracket's lower end (the largest rate that held).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from infertriage.analyze.stats.binomial import exact_interval, requests_to_settle
from infertriage.analyze.stats.earlystop import EarlyStop, early_stop
from infertriage.analyze.stats.latency import SLO_METRICS, Slo, steady_requests
from infertriage.schemas import RequestRecord

__all__ = [
    "CONFIDENCE",
    "STEP_CHECKS",
    "MaxRateResult",
    "MaxRateRule",
    "MaxRateSearch",
    "SearchStep",
    "StepJudgement",
    "at_rate",
    "judge_attainment",
    "judge_step",
    "step_requests",
]

CONFIDENCE = 0.95  # the attainment interval's level
# the level's validity checks (`loadgen.validity`, by name) a step is held to
STEP_CHECKS = ("rate", "output lengths", "prompt lengths", "steady state", "client")
# of those, the checks no lower rate can pass where they fail (the server's lengths): a step
# that fails one before any rate held ends the search, with that check as its reason
RATE_BLIND_CHECKS = ("output lengths", "prompt lengths")
FIRST_SHARE = 0.8  # the first rate tried, of the probe's throughput
GROW = 1.25  # the next rate up while every rate held
SHRINK = 0.6  # the next rate down while every rate failed
MAX_MORE_FACTOR = 4  # an undecided rate reruns with at most this many times its requests
MLPERF_PERCENTILE = 0.99
UNLOADED_IN_FLIGHT = 1.0  # a failing step below this mean in flight: the server was idle
_FLOOR_SHARE = 0.01  # below this share of the probe's throughput, nothing holds
_ATTAINMENT_REQUESTS = 200  # a step's requests when neither --num-requests nor --duration
_MLPERF_REQUESTS = 662  # LoadGen's p99 claim with one request over the limit


class MaxRateRule(StrEnum):
    ATTAINMENT = "attainment"
    MLPERF_SERVER = "mlperf-server"


def at_rate(offsets_s: Sequence[float], rate: float) -> list[float]:
    """A step's Poisson arrival times scaled so that they offer exactly `rate`: n arrivals
    over (n − 1) / rate seconds. One draw of 200 arrivals offers its rate ± 7 %, and every
    step draws with the run's seed, so unscaled every step would be off by the same share;
    scaled, the gaps stay exponential in shape (Poisson arrivals given their count)."""
    if len(offsets_s) < 2 or not rate > 0:
        return list(offsets_s)
    span = offsets_s[-1] - offsets_s[0]
    if not span > 0:
        return list(offsets_s)
    scale = (len(offsets_s) - 1) / rate / span
    return [t * scale for t in offsets_s]


def step_requests(rule: MaxRateRule) -> int:
    """A step's requests when the spec gives neither a count nor a duration."""
    return _MLPERF_REQUESTS if rule is MaxRateRule.MLPERF_SERVER else _ATTAINMENT_REQUESTS


@dataclass(frozen=True, slots=True)
class StepJudgement:
    """One rate, judged: attainment with its interval, and whether the SLOs hold there.

    `holds` is None while undecided (`more` requests could settle it). `claims` are the
    mlperf-server rule's p99 claims, one per SLO, as LoadGen judges them.
    """

    rate: float
    num_judged: int
    num_met: int
    interval: tuple[float, float]
    holds: bool | None
    valid: bool
    why: str
    more: int = 0  # requests a rerun would need to decide it
    claims: tuple[EarlyStop, ...] = ()
    rate_blind: str = ""  # a failed check no lower rate would pass (`RATE_BLIND_CHECKS`)
    in_flight: float | None = None  # mean requests in flight over the judged window

    @property
    def attainment(self) -> float:
        return self.num_met / self.num_judged if self.num_judged else 0.0


def _met(record: RequestRecord, slos: Sequence[Slo]) -> bool:
    return record.ok and all(slo.met(record) for slo in slos)


def _validity(
    stable: bool | None, client_bound: bool, num_judged: int, failed: Sequence[str]
) -> str:
    """'' when the step can be trusted; else why it cannot."""
    if failed:
        return f"INVALID: {failed[0]}"
    if num_judged == 0:
        return "INVALID: no request was judged"
    if stable is False:
        return "INVALID: the server fell behind (completions or TTFT from the intended start)"
    if client_bound:
        return "INVALID: the client was the bottleneck"
    return ""


def judge_step(
    rate: float,
    records: Sequence[RequestRecord],
    slos: Sequence[Slo],
    *,
    rule: MaxRateRule = MaxRateRule.ATTAINMENT,
    target: float = 0.9,
    stable: bool | None = True,
    client_bound: bool = False,
    failed_checks: Sequence[str] = (),
) -> StepJudgement:
    """Whether `slos` hold at `rate` on these records (see the module docstring);
    `failed_checks`: the level's failed validity checks of `STEP_CHECKS`, as lines."""
    judged, window = steady_requests(records)
    met = sum(1 for r in judged if _met(r, slos))
    invalid = _validity(stable, client_bound, len(judged), failed_checks)
    blind = next((line for line in failed_checks if line.startswith(RATE_BLIND_CHECKS)), "")
    base = judge_attainment(rate, met, len(judged), target=target, invalid=invalid)
    base = replace(
        base, rate_blind=blind, in_flight=_in_flight(judged, window.end_ts - window.start_ts)
    )
    if rule is MaxRateRule.MLPERF_SERVER:
        return _judge_mlperf(replace(base, holds=False, why=invalid, more=0), judged, slos)
    return base


def _in_flight(judged: Sequence[RequestRecord], span_s: float) -> float | None:
    """Little's law: the judged requests' time from send to end over the span they were
    sent in (their rate times their mean time in the system)."""
    if span_s <= 0.0 or not judged:
        return None
    busy = sum(r.end_ts - r.sent_ts for r in judged if r.end_ts is not None)
    return busy / span_s


def judge_attainment(
    rate: float, num_met: int, num_judged: int, *, target: float, invalid: str = ""
) -> StepJudgement:
    """The attainment rule on counts: holds, fails or undecided (with the requests to settle
    it); `invalid`, the reason the step cannot be trusted, makes it fail."""
    met, n = num_met, num_judged
    interval = exact_interval(met, n, level=CONFIDENCE)
    base = StepJudgement(rate, n, met, interval, False, not invalid, invalid)
    if invalid:
        return base
    low, high = interval
    share = f"attainment {met}/{n} [{low:.1%}, {high:.1%}]"
    if low >= target:
        return replace(base, holds=True, why=f"{share} ≥ {target:.0%}")
    if high < target:
        return replace(base, why=f"{share} < {target:.0%}")
    settle = requests_to_settle(met / n, target, level=CONFIDENCE)
    more = min(MAX_MORE_FACTOR * n, max(n, (settle or MAX_MORE_FACTOR * n) - n))
    return replace(base, holds=None, why=f"{share} straddles {target:.0%}", more=more)


def _samples(judged: Sequence[RequestRecord], slo: Slo) -> list[float]:
    """The SLO's metric per judged request; a failed request is over every limit."""
    metric = SLO_METRICS[slo.metric]
    values = [(r.ok, metric(r)) for r in judged]
    return [v if ok and v is not None else math.inf for ok, v in values if not ok or v is not None]


def _judge_mlperf(
    base: StepJudgement, judged: Sequence[RequestRecord], slos: Sequence[Slo]
) -> StepJudgement:
    claims = tuple(early_stop(_samples(judged, s), s.limit_s, MLPERF_PERCENTILE) for s in slos)
    base = replace(base, claims=claims)
    if not base.valid:
        return base
    over = [s for s, c in zip(slos, claims, strict=True) if c.num_over > 0.01 * c.num_judged]
    if over:
        return replace(base, why="; ".join(f"p99 {s.metric} over {_ms(s)}" for s in over))
    short = [c for c in claims if not c.met]
    if short:
        wanted = max(base.num_judged // 2, *(c.more for c in short))  # a load, not a handful
        more = min(MAX_MORE_FACTOR * base.num_judged, wanted)
        return replace(base, holds=None, why=short[0].describe(), more=more)
    names = ", ".join(f"p99 {s.metric} ≤ {_ms(s)}" for s in slos)
    return replace(base, holds=True, why=f"{names}; early stopping met")


def _ms(slo: Slo) -> str:
    return f"{slo.limit_s * 1e3:g} ms"


@dataclass(frozen=True, slots=True)
class SearchStep:
    """The next rate to run; `more` > 0: the previous rate again, with that many requests,
    judged pooled with its earlier run."""

    rate: float
    more: int = 0


@dataclass(frozen=True, slots=True)
class MaxRateResult:
    """The search's answer: the largest rate that held, the bracket it ends in, every step."""

    rule: MaxRateRule
    target: float  # attainment's target (the attainment rule)
    slos: tuple[Slo, ...]
    probe_rps: float  # the closed-loop probe's throughput
    max_rate: float | None  # None: no rate held
    bracket: tuple[float | None, float | None]  # (largest held, smallest failed)
    steps: tuple[StepJudgement, ...]
    converged: bool  # the bracket is within the tolerance
    tolerance: float
    why: str
    interrupted: bool = False  # Ctrl-C cut the search short: the bracket is as far as it got

    @property
    def at_max(self) -> StepJudgement | None:
        """The judgement of the rate found (its last, pooled one)."""
        held = [s for s in self.steps if s.rate == self.max_rate and s.holds]
        return held[-1] if held else None


def _missed_unloaded(judgement: StepJudgement) -> bool:
    """A valid step that failed with the server mostly idle (`UNLOADED_IN_FLIGHT`)."""
    flight = judgement.in_flight
    return (
        judgement.holds is False
        and judgement.valid
        and flight is not None
        and flight < UNLOADED_IN_FLIGHT
    )


@dataclass(slots=True)
class MaxRateSearch:
    """Bracket, then bisect, over the Poisson rate (see the module docstring)."""

    probe_rps: float
    tolerance: float = 0.05
    max_steps: int = 10  # rate levels, reruns of an undecided rate included
    held: float | None = None  # the largest rate that held
    failed: float | None = None  # the smallest rate that did not
    steps: list[StepJudgement] = field(default_factory=list)
    stopped: str = ""  # why the search ended early: a rate-blind check failed
    _reran: bool = False  # the last step was a rerun of an undecided rate

    def first(self) -> SearchStep | None:
        """The first rate to run, from the probe's throughput."""
        if not self.probe_rps > 0:
            return None
        return SearchStep(round(FIRST_SHARE * self.probe_rps, 4))

    def record(self, judgement: StepJudgement) -> SearchStep | None:
        """Take a rate's judgement; give the next rate to run, or None: the search is done."""
        if judgement.holds is None and not self._reran and len(self.steps) + 1 < self.max_steps:
            self.steps.append(judgement)
            self._reran = True
            return SearchStep(judgement.rate, max(judgement.more, 1))
        if judgement.holds is None:  # conservative: an undecided rate does not hold
            why = f"{judgement.why}; still undecided: counted as not holding"
            judgement = replace(judgement, holds=False, why=why)
        self.steps.append(judgement)
        self._reran = False
        if judgement.holds:
            self.held = max(self.held or 0.0, judgement.rate)
        else:
            self.failed = min(self.failed or math.inf, judgement.rate)
        if judgement.rate_blind and self.held is None:  # a lower rate would fail it too
            self.stopped = f"{judgement.rate_blind}; no lower rate was tried, it would fail too"
            return None
        if self.held is None and _missed_unloaded(judgement):
            self.stopped = (
                f"the SLOs were missed at {judgement.rate:.4g} req/s with "
                f"{judgement.in_flight:.2f} requests in flight on average (the server mostly "
                "idle): no lower rate was tried, it would miss them too"
            )
            return None
        if self.done() or len(self.steps) >= self.max_steps:
            return None
        return SearchStep(round(self._next_rate(), 4))

    def done(self) -> bool:
        """The bracket is within the tolerance, or nothing holds above the floor."""
        if self.held is not None and self.failed is not None:
            return self.failed - self.held <= self.tolerance * self.held
        return self.held is None and (self.failed or math.inf) < _FLOOR_SHARE * self.probe_rps

    def _next_rate(self) -> float:
        if self.held is not None and self.failed is not None:
            return (self.held + self.failed) / 2.0
        if self.held is not None:
            return self.held * GROW
        assert self.failed is not None
        return self.failed * SHRINK

    def result(
        self,
        rule: MaxRateRule,
        target: float,
        slos: Sequence[Slo],
        *,
        interrupted: bool = False,
    ) -> MaxRateResult:
        """The answer so far (a search cut short keeps its bracket; `interrupted`: by Ctrl-C,
        the step it cut short not judged)."""
        converged = self.held is not None and self.failed is not None and self.done()
        if self.stopped:
            why = f"no rate held: {self.stopped}"
        elif interrupted and not converged:
            held = "no rate held" if self.held is None else f"{self.held:.4g} req/s held"
            why = f"interrupted after {len(self.steps)} judged steps ({held} so far)"
        elif self.held is None:
            why = "no rate tried held" if self.steps else "no rate was run"
        elif self.failed is None:
            why = "every rate tried held: the bracket has no upper end"
        elif converged:
            why = f"bracket within {self.tolerance:.0%}"
        else:
            why = f"stopped after {len(self.steps)} steps, wider than {self.tolerance:.0%}"
        return MaxRateResult(
            rule=rule,
            target=target,
            slos=tuple(slos),
            probe_rps=self.probe_rps,
            max_rate=self.held,
            bracket=(self.held, self.failed),
            steps=tuple(self.steps),
            converged=converged,
            tolerance=self.tolerance,
            why=why,
            interrupted=interrupted and not converged,
        )
