"""The goodput search: its rules on records and counts, and its bisection on a known curve."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infertriage.analyze.stats.latency import Slo
from infertriage.loadgen.maxrate import (
    MaxRateRule,
    MaxRateSearch,
    StepJudgement,
    at_rate,
    judge_attainment,
    judge_step,
)
from infertriage.schemas import Chunk, ErrorKind, RequestRecord

TARGET = 0.9
CENTRE, WIDTH = 16.0, 0.6  # attainment(r) = 1 / (1 + exp((r - CENTRE) / WIDTH))
TRUE_MAX = CENTRE + WIDTH * math.log(1 / TARGET - 1)  # attainment 0.9 exactly: 14.68 req/s


def _attainment(rate: float) -> float:
    return 1.0 / (1.0 + math.exp((rate - CENTRE) / WIDTH))


def _search(seed: int, n: int = 200, probe: float = 18.0) -> MaxRateSearch:
    """The search against seeded binomial draws of the curve; reruns pool their draws."""
    rng = np.random.default_rng(seed)
    search = MaxRateSearch(probe_rps=probe, tolerance=0.05)
    step = search.first()
    met = judged = 0
    while step is not None:
        draws = step.more or n
        k = int(rng.binomial(draws, _attainment(step.rate)))
        met, judged = (met + k, judged + draws) if step.more else (k, draws)
        step = search.record(judge_attainment(step.rate, met, judged, target=TARGET))
    return search


@pytest.mark.parametrize("seed", range(12))
def test_the_search_converges_near_the_rate_where_attainment_is_the_target(seed: int) -> None:
    search = _search(seed)
    result = search.result(MaxRateRule.ATTAINMENT, TARGET, ())
    low, high = result.bracket
    assert result.converged and low is not None and high is not None, result.why
    assert high - low <= 0.05 * low
    assert result.max_rate == low
    assert low == pytest.approx(TRUE_MAX, rel=0.10)
    # Conservative: the rate found holds at 95 % confidence, so it is not above the truth
    # by more than the bracket's width.
    assert low <= TRUE_MAX * 1.05
    assert len(result.steps) <= 10
    held = result.at_max
    assert held is not None and held.holds and held.interval[0] >= TARGET


def test_an_undecided_rate_runs_again_pooled_then_counts_as_not_holding() -> None:
    search = MaxRateSearch(probe_rps=10.0)
    first = search.first()
    assert first is not None and first.rate == pytest.approx(8.0)
    straddles = judge_attainment(8.0, 182, 200, target=TARGET)  # 91 %: [86 %, 94.5 %]
    assert straddles.holds is None and straddles.more > 0
    again = search.record(straddles)
    assert again is not None and again.rate == 8.0 and again.more == straddles.more
    pooled = judge_attainment(8.0, 182 + 91, 200 + 100, target=TARGET)
    assert pooled.holds is None
    after = search.record(pooled)
    assert search.steps[-1].holds is False and "counted as not holding" in search.steps[-1].why
    assert after is not None and after.rate == pytest.approx(8.0 * 0.6)  # steps down


def test_nothing_holding_ends_with_no_rate_and_every_rate_holding_has_no_upper_end() -> None:
    none = MaxRateSearch(probe_rps=10.0)
    step = none.first()
    while step is not None:
        step = none.record(judge_attainment(step.rate, 0, 100, target=TARGET))
    result = none.result(MaxRateRule.ATTAINMENT, TARGET, ())
    assert result.max_rate is None and result.at_max is None and not result.converged
    every = MaxRateSearch(probe_rps=10.0, max_steps=4)
    step = every.first()
    while step is not None:
        step = every.record(judge_attainment(step.rate, 100, 100, target=TARGET))
    result = every.result(MaxRateRule.ATTAINMENT, TARGET, ())
    assert result.bracket[1] is None and result.max_rate == pytest.approx(8 * 1.25**3, rel=1e-3)
    assert "no upper end" in result.why and len(result.steps) == 4


def test_an_invalid_step_does_not_hold_whatever_its_attainment() -> None:
    step = judge_attainment(5.0, 100, 100, target=TARGET, invalid="INVALID: fell behind")
    assert step.holds is False and not step.valid and step.why == "INVALID: fell behind"


def test_a_steps_arrivals_are_scaled_to_offer_its_rate_exactly() -> None:
    rng = np.random.default_rng(3)
    drawn = np.cumsum(rng.exponential(1 / 10.0, size=150)).tolist()
    scaled = at_rate(drawn, 10.0)
    assert (scaled[-1] - scaled[0]) == pytest.approx(149 / 10.0)
    gaps, drawn_gaps = np.diff(scaled), np.diff(drawn)
    assert np.allclose(gaps / drawn_gaps, gaps[0] / drawn_gaps[0])  # one factor: shape kept
    assert at_rate([0.5], 10.0) == [0.5]


# --- on records -------------------------------------------------------------------------------


def _records(n: int, *, ttft: float = 0.05, slow: int = 0, failed: int = 0) -> list[RequestRecord]:
    """n requests 0.1 s apart, 8 tokens each; the last `slow` take 1 s to a first token, the
    `failed` before them get a server error."""
    out = []
    for i in range(n):
        sent = 0.1 * i
        first = sent + (1.0 if i >= n - slow else ttft)
        chunks = tuple(Chunk(first + 0.01 * j, 1) for j in range(8))
        error = n - slow - failed <= i < n - slow
        out.append(
            RequestRecord(
                id=f"r{i}",
                scheduled_ts=sent,
                sent_ts=sent,
                first_token_ts=None if error else chunks[0].ts,
                last_token_ts=None if error else chunks[-1].ts,
                end_ts=chunks[-1].ts,
                chunks=() if error else chunks,
                output_tokens=None if error else 8,
                error_kind=ErrorKind.HTTP if error else ErrorKind.NONE,
                http_status=500 if error else 200,
            )
        )
    return out


SLOS = (Slo("ttft", 0.2), Slo("tpot", 0.05))


def test_attainment_on_records_counts_failures_and_late_requests_against_it() -> None:
    good = judge_step(4.0, _records(200), SLOS, target=TARGET)
    assert good.holds and good.num_met == good.num_judged > 150
    bad = judge_step(4.0, _records(200, slow=20, failed=20), SLOS, target=TARGET)
    assert bad.holds is False and bad.num_judged - bad.num_met >= 39
    unstable = judge_step(4.0, _records(200), SLOS, target=TARGET, stable=False)
    assert unstable.holds is False and unstable.why.startswith("INVALID")


def test_the_mlperf_server_rule_wants_p99_within_the_limit_and_loadgens_sample() -> None:
    rule = MaxRateRule.MLPERF_SERVER
    enough = judge_step(4.0, _records(520), SLOS, rule=rule)
    assert enough.holds is True and all(c.met for c in enough.claims)
    short = judge_step(4.0, _records(120), SLOS, rule=rule)
    assert short.holds is None and short.more == short.claims[0].more > 0
    assert "needs ≥ 459 requests" in short.why
    over = judge_step(4.0, _records(520, slow=10), SLOS, rule=rule)
    assert over.holds is False and "p99 ttft over 200 ms" in over.why


def test_a_step_judgement_of_no_request_is_invalid() -> None:
    step = judge_step(4.0, [], SLOS, target=TARGET)
    assert isinstance(step, StepJudgement) and step.holds is False and not step.valid


def test_a_miss_with_the_server_idle_ends_the_search_and_a_loaded_miss_steps_down() -> None:
    # one request each 0.1 s, each 0.09 s long: 0.9 in flight, every TTFT over a 1 ms SLO
    idle_miss = judge_step(4.0, _records(200, ttft=0.02), (Slo("ttft", 0.001),), target=TARGET)
    assert idle_miss.holds is False and idle_miss.valid
    assert idle_miss.in_flight is not None and idle_miss.in_flight < 1.0
    search = MaxRateSearch(probe_rps=5.0)
    assert search.record(idle_miss) is None
    result = search.result(MaxRateRule.ATTAINMENT, TARGET, ())
    assert result.max_rate is None and "mostly idle" in result.why
    # the same miss with many in flight: a lower rate may hold, so the search goes on
    loaded = MaxRateSearch(probe_rps=5.0)
    step = loaded.record(
        StepJudgement(4.0, 200, 0, (0.0, 0.02), False, True, "miss", in_flight=12.0)
    )
    assert step is not None and step.rate < 4.0
