"""loadgen, level 2: over-saturation caught while an open-loop level runs.

Takes, as a level runs, each finished request (`finished`: when it was due, when its
first token came, when it ended, in the level's seconds) and a periodic look (`tick`:
the time, how many requests were due by then, how many finished, how many stream with
a first token); gives a `Saturation` verdict with its evidence the first time a rule
holds, else None. Pure: no clock, no I/O; the runner feeds it and stops issuing on a
verdict (`runner`), the sweep counts such a level unstable (`sweep`).

The queue is the requests due but without a first token yet (the client's backlog, the
wait for a `--max-concurrency` slot and the server's queue together); in flight, the
requests due and not finished. The window is the last half of the level so far, within
`MIN_WINDOW_S`..`MAX_WINDOW_S`. Two rules, after `MIN_ELAPSED_S` and `MIN_DUE`
requests (no verdict on a handful), each holding at every look for `HOLD_S`:

- **queue**: the queue grows without bound — its least-squares slope over the window is
  at least `QUEUE_GROWTH_SHARE` of the target rate, with its lower bound
  (slope − `SLOPE_Z` standard errors, one independent sample a second, as GuideLLM's
  over-saturation detector counts them) above zero, and `MIN_QUEUE` requests — and
  `MIN_QUEUE_S` seconds of the target rate's arrivals — wait at the window's end. A
  healthy server's queue is its rate × TTFT: bounded.
- **rate**: the achieved completion rate falls behind the target — completions in the
  window short of the requests due in it by more than `RATE_MARGIN` of them plus
  `RATE_Z` × √due (Poisson noise), once `MIN_FINISHED` requests finished and the window
  starts after their median latency from the intended start (a level's first requests
  are not late for having just started, however long they decode).

The TTFT-from-intended-start slope over the window (s per s) is kept as evidence.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "HOLD_S",
    "MAX_WINDOW_S",
    "MIN_DUE",
    "MIN_ELAPSED_S",
    "MIN_FINISHED",
    "MIN_QUEUE",
    "MIN_QUEUE_S",
    "MIN_WINDOW_S",
    "QUEUE_GROWTH_SHARE",
    "RATE_MARGIN",
    "RATE_Z",
    "SLOPE_Z",
    "TICK_S",
    "Saturation",
    "SaturationDetector",
]

TICK_S = 0.25  # how often the runner looks
MIN_ELAPSED_S = 10.0  # no verdict before the level has run this long
MIN_DUE = 30  # ... nor before this many requests were due
MIN_WINDOW_S, MAX_WINDOW_S = 5.0, 60.0  # the window: half the level so far, within these
HOLD_S = 2.0  # a rule holds at every look for this long before the verdict
QUEUE_GROWTH_SHARE = 0.1  # queue: grows by at least 10 % of the target rate
SLOPE_Z = 3.0  # queue: slope − 3 standard errors > 0
MIN_QUEUE = 20  # queue: at least this many wait at the window's end …
MIN_QUEUE_S = 5.0  # … and at least this many seconds of the target rate's arrivals
RATE_MARGIN = 0.2  # rate: completions short of the requests due by 20 % of them …
RATE_Z = 3.0  # … plus 3 × √due
MIN_FINISHED = 10  # rate: judged once this many finished
_MIN_TTFT_POINTS = 5


@dataclass(frozen=True, slots=True)
class Saturation:
    """An over-saturated level's verdict and its evidence (seconds from the level's start)."""

    rule: str  # "queue" (the queue grew without bound) | "rate" (completions fell behind)
    at_s: float  # when the verdict was given
    window_s: float  # the window the evidence covers, ending at `at_s`
    queue_start: int  # requests due without a first token, at the window's start
    queue_end: int  # … and at its end
    queue_slope: float  # requests/s, least squares over the window
    in_flight_start: int  # requests due and not finished, at the window's start
    in_flight_end: int  # … and at its end
    achieved_rate: float  # completions/s in the window
    target_rate: float  # requests due/s in the window
    ttft_slope: float | None  # TTFT from the intended start against when due, s per s
    num_due: int  # requests due by `at_s`
    num_finished: int  # requests finished by `at_s`

    def describe(self) -> str:
        """One sentence: what grew or fell behind, over which window, when."""
        what = (
            f"the queue grew from {self.queue_start} to {self.queue_end} requests "
            f"({self.queue_slope:+.2f}/s)"
            if self.rule == "queue"
            else f"completions fell behind: {self.achieved_rate:.3g} req/s achieved"
        )
        ttft = (
            ""
            if self.ttft_slope is None
            else f", TTFT from intended start {self.ttft_slope:+.2f} s/s"
        )
        return (
            f"over-saturated at {self.at_s:.1f} s: {what} against {self.target_rate:.3g} req/s "
            f"due over the last {self.window_s:.1f} s (in flight {self.in_flight_start} → "
            f"{self.in_flight_end}{ttft})"
        )


@dataclass(frozen=True, slots=True)
class _Look:
    at_s: float
    due: int
    finished: int
    queue: int


def _slope(x: np.ndarray, y: np.ndarray, n_eff: float) -> tuple[float, float]:
    """(least-squares slope, its standard error counting `n_eff` independent samples)."""
    n = len(x)
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if n < 3 or sxx <= 0:  # a line through fewer points has no error
        return 0.0, math.inf
    slope = float(xc @ (y - y.mean())) / sxx
    rss = float(np.sum((y - y.mean() - slope * xc) ** 2))
    dof = max(min(float(n), n_eff) - 2, 1.0)
    se = math.sqrt(rss / max(n - 2, 1) / sxx) * math.sqrt(n / dof)
    return slope, se


class SaturationDetector:
    """Fed as a level runs (`finished`, `tick`); `verdict` once a rule held (module doc)."""

    def __init__(self) -> None:
        self._looks: deque[_Look] = deque()
        self._ttft: deque[tuple[float, float]] = deque()  # (due at, TTFT from intended start)
        # kept in the order of first tokens: the window holds those whose first token came in it
        self._latency: list[float] = []  # end − due of each finished request
        self._since: dict[str, float] = {}  # rule → the first look of its current hold
        self.verdict: Saturation | None = None

    def finished(self, due_s: float, first_token_s: float | None, end_s: float | None) -> None:
        """One request finished (any outcome): when due, its first token, its end."""
        if first_token_s is not None:
            self._ttft.append((due_s, first_token_s - due_s))
        if end_s is not None:
            self._latency.append(end_s - due_s)

    def tick(self, now_s: float, *, due: int, finished: int, streaming: int) -> Saturation | None:
        """A look at `now_s`: `due` requests due so far, `finished` of them finished,
        `streaming` with a first token and not finished. The verdict, once given."""
        if self.verdict is not None:
            return self.verdict
        self._looks.append(_Look(now_s, due, finished, max(0, due - finished - streaming)))
        while self._looks and self._looks[0].at_s < now_s - MAX_WINDOW_S:
            self._looks.popleft()
        while self._ttft and sum(self._ttft[0]) < now_s - MAX_WINDOW_S:
            self._ttft.popleft()
        if now_s < MIN_ELAPSED_S or due < MIN_DUE:
            self._since.clear()
            return None
        window_s = min(MAX_WINDOW_S, max(MIN_WINDOW_S, now_s / 2))
        looks = [look for look in self._looks if look.at_s >= now_s - window_s]
        evidence, queue_bound = self._evidence(looks, now_s)
        rules = (("queue", _queue_grows(evidence, queue_bound)), ("rate", self._behind(evidence)))
        for rule, holds in rules:
            if not holds:
                self._since.pop(rule, None)
                continue
            since = self._since.setdefault(rule, now_s)
            if now_s - since >= HOLD_S:
                self.verdict = replace(evidence, rule=rule)
                return self.verdict
        return None

    def _evidence(self, looks: list[_Look], now_s: float) -> tuple[Saturation, float]:
        """The window's evidence (no rule yet), and the queue slope's lower bound."""
        first, last = looks[0], looks[-1]
        span = max(last.at_s - first.at_s, 1e-9)
        x = np.asarray([look.at_s for look in looks])
        slope, se = _slope(x, np.asarray([float(look.queue) for look in looks]), span)
        points = [p for p in self._ttft if sum(p) >= first.at_s]  # first token in the window
        ttft_slope = None
        if len(points) >= _MIN_TTFT_POINTS:
            px = np.asarray([p[0] for p in points])
            ttft_slope = _slope(px, np.asarray([p[1] for p in points]), span)[0]
        evidence = Saturation(
            rule="",
            at_s=now_s,
            window_s=span,
            queue_start=first.queue,
            queue_end=last.queue,
            queue_slope=slope,
            in_flight_start=first.due - first.finished,
            in_flight_end=last.due - last.finished,
            achieved_rate=(last.finished - first.finished) / span,
            target_rate=(last.due - first.due) / span,
            ttft_slope=ttft_slope,
            num_due=last.due,
            num_finished=last.finished,
        )
        return evidence, slope - SLOPE_Z * se

    def _behind(self, e: Saturation) -> bool:
        if len(self._latency) < MIN_FINISHED:
            return False
        if e.at_s - e.window_s < float(np.median(self._latency)):  # the window is in the ramp
            return False
        due = e.target_rate * e.window_s
        done = e.achieved_rate * e.window_s
        return due > 0 and due - done > RATE_MARGIN * due + RATE_Z * math.sqrt(due)


def _queue_grows(e: Saturation, lower_bound: float) -> bool:
    """The queue rule (module doc), on the window's evidence and its slope's lower bound."""
    return (
        e.target_rate > 0
        and e.queue_slope >= QUEUE_GROWTH_SHARE * e.target_rate
        and lower_bound > 0
        and e.queue_end >= max(MIN_QUEUE, MIN_QUEUE_S * e.target_rate)
    )
