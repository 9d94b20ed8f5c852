"""The goodput search on hostile inputs (issue 34's sweep): a server whose lengths fail the
step's checks at every rate, and a search cut short by Ctrl-C."""

from __future__ import annotations

from infertriage.analyze.stats.latency import Slo
from infertriage.loadgen.maxrate import MaxRateRule, MaxRateSearch, judge_attainment, judge_step
from infertriage.schemas import Chunk, RequestRecord

SLOS = (Slo("ttft", 1.0),)
SHORT = "output lengths: outputs 6% of the asked length (mean of 200)"


def _records(n: int) -> list[RequestRecord]:
    """n fast requests 0.1 s apart, every one meeting the SLO."""
    out = []
    for i in range(n):
        sent = 0.1 * i
        chunks = tuple(Chunk(sent + 0.01 + 0.001 * j, 1) for j in range(4))
        out.append(
            RequestRecord(
                id=f"r{i}",
                scheduled_ts=sent,
                sent_ts=sent,
                first_token_ts=chunks[0].ts,
                last_token_ts=chunks[-1].ts,
                end_ts=chunks[-1].ts,
                chunks=chunks,
                output_tokens=4,
                http_status=200,
            )
        )
    return out


def test_short_outputs_before_any_rate_held_end_the_search_at_once() -> None:
    search = MaxRateSearch(probe_rps=20.0)
    step = search.first()
    assert step is not None
    judged = judge_step(step.rate, _records(200), SLOS, failed_checks=[SHORT])
    assert judged.holds is False and not judged.valid and judged.rate_blind == SHORT
    assert search.record(judged) is None  # no lower rate would pass a length check
    result = search.result(MaxRateRule.ATTAINMENT, 0.9, SLOS)
    assert result.max_rate is None and len(result.steps) == 1
    assert result.why.startswith("no rate held: output lengths"), result.why


def test_a_rate_dependent_failure_still_steps_down() -> None:
    search = MaxRateSearch(probe_rps=20.0)
    step = search.first()
    assert step is not None
    lagging = "rate: achieved 10/s of a nominal 16/s (62%)"
    judged = judge_step(step.rate, _records(200), SLOS, failed_checks=[lagging])
    assert judged.rate_blind == ""
    following = search.record(judged)
    assert following is not None and following.rate < step.rate


def test_short_outputs_after_a_rate_held_are_an_ordinary_failure() -> None:
    search = MaxRateSearch(probe_rps=20.0)
    first = search.first()
    assert first is not None
    up = search.record(judge_attainment(first.rate, 200, 200, target=0.9))
    assert up is not None and up.rate > first.rate
    judged = judge_step(up.rate, _records(200), SLOS, failed_checks=[SHORT])
    assert search.record(judged) is not None  # bisects between the two
    assert search.result(MaxRateRule.ATTAINMENT, 0.9, SLOS).max_rate == first.rate


def test_an_interrupted_search_says_so_and_is_not_converged() -> None:
    search = MaxRateSearch(probe_rps=20.0)
    first = search.first()
    assert first is not None
    search.record(judge_attainment(first.rate, 200, 200, target=0.9))
    result = search.result(MaxRateRule.ATTAINMENT, 0.9, SLOS, interrupted=True)
    assert result.interrupted and not result.converged
    assert result.max_rate == first.rate  # a rate that ran to its end and held
    assert result.why.startswith("interrupted after 1 judged steps"), result.why
