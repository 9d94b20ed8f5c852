"""The over-saturation detector on seeded synthetic levels: healthy ones (Poisson noise, a
long ramp, a busy but stable queue) never stop; a growing queue or completions falling
behind do, with the evidence."""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np
import pytest

from infertriage.loadgen.runner import LoadPlan
from infertriage.loadgen.saturation import (
    MIN_DUE,
    MIN_ELAPSED_S,
    TICK_S,
    Saturation,
    SaturationDetector,
)
from infertriage.workload import Schedule, make_specs, parse_workload


def _level(
    rate: float,
    *,
    servers: int | None,
    service_s: Callable[[np.random.Generator, float], float],
    duration_s: float,
    seed: int,
    ttft_s: float = 0.05,
) -> Saturation | None:
    """A Poisson level against `servers` FIFO seats (None: a seat for every request); the
    detector fed as the runner feeds it: each finished request, and a look every tick."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, size=int(rate * duration_s * 2) + 10))
    arrivals = arrivals[arrivals < duration_s]
    seats: list[float] = [0.0] * (servers or 0)
    first, end = [], []
    for due in arrivals.tolist():
        start = due if servers is None else max(due, heapq.heappop(seats))
        first.append(start + ttft_s)
        end.append(start + ttft_s + service_s(rng, due))
        if servers is not None:
            heapq.heappush(seats, end[-1])
    detector = SaturationDetector()
    order = sorted(range(len(arrivals)), key=lambda i: end[i])
    fed, now = 0, 0.0
    while now < duration_s:
        now += TICK_S
        while fed < len(order) and end[order[fed]] <= now:
            i = order[fed]
            detector.finished(float(arrivals[i]), first[i], end[i])
            fed += 1
        due = int(np.searchsorted(arrivals, now, side="right"))
        streaming = sum(1 for i in range(due) if first[i] <= now < end[i])
        verdict = detector.tick(now, due=due, finished=fed, streaming=streaming)
        if verdict is not None:
            return verdict
    return None


def _around(mean_s: float) -> Callable[[np.random.Generator, float], float]:
    return lambda rng, due: float(rng.uniform(0.5, 1.5) * mean_s)


@pytest.mark.parametrize("seed", range(5))
def test_healthy_levels_never_stop(seed: int) -> None:
    # a seat for everyone, 20 s decodes: in flight ramps up for 20 s, then holds
    assert _level(5, servers=None, service_s=_around(20), duration_s=120, seed=seed) is None
    # a busy server (75 % of its seats) under Poisson noise
    assert _level(6, servers=8, service_s=_around(1.0), duration_s=120, seed=seed) is None
    # a fast one at a high rate
    assert _level(80, servers=128, service_s=_around(0.8), duration_s=60, seed=seed) is None
    # a single seat, 80 % busy: its queue wanders for tens of seconds, and comes back
    assert _level(1, servers=1, service_s=_around(0.8), duration_s=120, seed=seed) is None
    # a slow rate: never enough requests for a verdict within a minute
    assert _level(0.4, servers=1, service_s=_around(3), duration_s=60, seed=seed) is None


@pytest.mark.parametrize("seed", range(3))
def test_a_growing_queue_is_caught_early_with_its_evidence(seed: int) -> None:
    verdict = _level(40, servers=8, service_s=_around(1.0), duration_s=120, seed=seed)
    assert verdict is not None and verdict.rule == "queue"
    assert MIN_ELAPSED_S <= verdict.at_s < 20  # soon after the minimum, not the level's end
    assert verdict.num_due >= MIN_DUE
    assert verdict.queue_end > verdict.queue_start and verdict.queue_slope > 20
    assert verdict.in_flight_end > verdict.in_flight_start
    assert verdict.achieved_rate < 12 and verdict.target_rate > 30
    assert verdict.ttft_slope is not None and verdict.ttft_slope > 0.5
    assert "over-saturated at" in verdict.describe() and "queue grew" in verdict.describe()


def test_a_slight_overload_is_caught_later() -> None:
    verdict = _level(10, servers=8, service_s=_around(1.0), duration_s=180, seed=1)
    assert verdict is not None and verdict.rule == "queue" and verdict.at_s > MIN_ELAPSED_S


def test_completions_falling_behind_with_no_queue_is_caught_by_the_rate_rule() -> None:
    # every request is admitted at once, but decodes slow down as the batch grows:
    # a request due at t takes 1 + 0.5·t s, so completions run at 2/3 of the rate
    def slowing(rng: np.random.Generator, due: float) -> float:
        return 1 + 0.5 * due

    verdict = _level(10, servers=None, service_s=slowing, duration_s=120, seed=0)
    assert verdict is not None and verdict.rule == "rate"
    assert verdict.queue_end < 10  # nothing queued: the first tokens came at once
    assert verdict.achieved_rate < 0.8 * verdict.target_rate
    assert "completions fell behind" in verdict.describe()


def test_no_verdict_on_a_handful() -> None:
    detector = SaturationDetector()
    # a queue that only grows, but too early and too few
    for n in range(1, 30):
        assert detector.tick(n * TICK_S, due=n, finished=0, streaming=0) is None
    assert detector.verdict is None


def test_the_verdict_once_given_stays() -> None:
    verdict = _level(40, servers=8, service_s=_around(1.0), duration_s=60, seed=0)
    assert verdict is not None
    detector = SaturationDetector()
    detector.verdict = verdict
    assert detector.tick(100.0, due=10, finished=10, streaming=0) is verdict


def test_only_an_open_loop_of_requests_that_asks_is_watched() -> None:
    specs = make_specs(parse_workload("synthetic:input=8,output=4"), 4, seed=0)
    open_loop = Schedule(specs, np.arange(4, dtype=float))
    assert LoadPlan(open_loop, stop_on_saturation=True).watches_saturation
    assert not LoadPlan(open_loop).watches_saturation  # --no-stop-on-saturation
    assert not LoadPlan(
        Schedule(specs, None), concurrency=2, stop_on_saturation=True
    ).watches_saturation
