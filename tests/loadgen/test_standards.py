"""`--standard mlperf`: LoadGen's Server-scenario constraints judged on constructed levels."""

from __future__ import annotations

import pytest

from infertriage.analyze.stats.earlystop import requests_needed
from infertriage.api.specs import BenchSpec, ValidateSpec
from infertriage.loadgen.standards import (
    MIN_DURATION_S,
    SCHEDULE_RNG_SEED,
    apply_standard,
    constraint_checks,
    judge_level,
    judge_server,
    server_settings,
)
from infertriage.schemas import CheckStatus, ErrorKind, RequestRecord, UserError

LLAMA = server_settings("llama2-70b", target_qps=1.0)  # TTFT 2 s, TPOT 200 ms at p99


def _record(i: int, at: float, *, ttft: float = 0.5, tpot: float = 0.05, ok: bool = True):
    tokens = 11
    first = at + ttft
    last = first + tpot * (tokens - 1)
    return RequestRecord(
        id=f"r{i}",
        scheduled_ts=at,
        sent_ts=at,
        first_token_ts=first if ok else None,
        last_token_ts=last if ok else None,
        end_ts=last if ok else at + 0.1,
        output_tokens=tokens if ok else None,
        error_kind=ErrorKind.NONE if ok else ErrorKind.HTTP,
    )


def _level(n: int, spacing: float, **kw: float) -> list[RequestRecord]:
    return [_record(i, 10.0 + i * spacing, **kw) for i in range(n)]


def test_a_short_run_is_invalid_on_duration_queries_and_early_stopping() -> None:
    verdict = judge_server(_level(50, 0.2), LLAMA, level="rate=5", sut_name="m")
    assert verdict.performance_met  # every request within both limits
    assert not verdict.min_duration_met and verdict.final_scheduled_s == pytest.approx(9.8)
    assert not verdict.min_queries_met and verdict.num_queries == 50
    # a p99 claim with none over the limit needs 459 queries: 409 more
    assert not verdict.early_stopping_met
    assert verdict.early_ttft.needed == 459 and verdict.early_ttft.more == 409
    assert "Would need to run at least 409 more queries" in verdict.early_stopping_text(
        verdict.early_ttft
    )
    assert not verdict.valid
    assert verdict.recommendations() == [
        "Increase the target QPS so the loadgen pre-generates more queries.",
        "The test exited early, before enough queries were issued.\n"
        "   See the detailed log for why this may have occurred.",
    ]


def test_a_compliant_run_is_valid_with_loadgens_rates() -> None:
    records = _level(700, 0.875)  # the final query scheduled at 611.6 s
    verdict = judge_server(records, LLAMA, level="rate=1", sut_name="m")
    assert verdict.valid and verdict.min_duration_met and verdict.min_queries_met
    assert verdict.early_stopping_text(verdict.early_tpot) == " * Run successful."
    final_done = 699 * 0.875 + 0.5 + 0.5  # the final query's last token, from the first's schedule
    assert verdict.completed_samples_per_s == pytest.approx(699 / final_done)
    assert verdict.completed_tokens_per_s == pytest.approx(700 * 11 / final_done)
    assert verdict.scheduled_samples_per_s == pytest.approx(699 / (699 * 0.875))
    assert verdict.ttft_p_s == pytest.approx(0.5) and verdict.tpot_p_s == pytest.approx(0.05)


def test_the_percentile_is_the_sample_at_n_times_p() -> None:
    # 100 TTFTs of 10, 20, …, 1000 ms: LoadGen's p99 is sorted[99], the largest
    records = [_record(i, i * 7.0, ttft=(i + 1) * 0.010, tpot=0.03) for i in range(100)]
    verdict = judge_server(records, LLAMA, level="x", sut_name="m")
    assert verdict.ttft_p_s == pytest.approx(1.0)
    tight = server_settings("llama2-70b-interactive")  # TTFT limit 450 ms
    over = judge_server(records, tight, level="x", sut_name="m")
    assert not over.ttft_met and over.tpot_met
    assert over.recommendations()[0] == (
        "TTFT constrain not met: Reduce target QPS to improve latency."
    )
    assert over.early_ttft.num_over == 55  # 460 … 1000 ms are over 450 ms


def test_requests_over_the_limit_and_failures_raise_the_sample_needed() -> None:
    records = _level(700, 0.875)
    slow = [_record(700 + i, 700.0 + i, tpot=0.3) for i in range(2)]
    failed = [_record(800, 705.0, ok=False)]
    verdict = judge_server(records + slow + failed, LLAMA, level="x", sut_name="m")
    assert verdict.early_tpot.num_over == 3 and verdict.early_ttft.num_over == 1
    assert verdict.early_tpot.needed == requests_needed(0.99, 3)
    needed = requests_needed(0.99, 3)  # 3 over: more than the 703 run
    assert not verdict.early_tpot.met and verdict.early_tpot.more == needed - 703


def test_constraint_checks_fail_validate_on_each_unmet_constraint() -> None:
    checks = constraint_checks(judge_server(_level(50, 0.2), LLAMA, level="x", sut_name="m"))
    status = {c.name: c.status for c in checks}
    assert status == {
        "mlperf.performance_constraints": CheckStatus.PASS,
        "mlperf.min_duration": CheckStatus.FAIL,
        "mlperf.min_queries": CheckStatus.FAIL,
        "mlperf.early_stopping": CheckStatus.FAIL,
    }
    assert "409 more queries" in next(c.detail for c in checks if c.name.endswith("stopping"))


def test_the_preset_sets_arrivals_duration_seed_and_slos() -> None:
    spec = BenchSpec(url="http://h", rates=(2.0,), standard="MLPerf", mlperf_model="llama3_1-8b")
    applied = apply_standard(spec)
    # past 600 s by ten mean gaps at the lowest rate: the final query lands past 600 s
    assert applied.duration_s == MIN_DURATION_S + 10 / 2.0
    assert applied.seed == SCHEDULE_RNG_SEED
    assert applied.goodput == "ttft=2000ms,tpot=100ms" and applied.arrival == "poisson"
    assert applied.drain_s == applied.timeout_s  # every request waited for
    short = apply_standard(spec.model_copy(update={"duration_s": 5.0, "seed": 7}))
    assert short.duration_s == 5.0 and short.seed == 7  # an override is kept (and judged)
    assert apply_standard(BenchSpec(url="http://h")) == BenchSpec(url="http://h")


@pytest.mark.parametrize(
    ("update", "words"),
    [
        ({"mlperf_model": None}, "needs --mlperf-model"),
        ({"mlperf_model": "gpt-5"}, "no MLPerf Server limits"),
        ({"rates": (), "concurrencies": (4,)}, "give its target QPS as --rate"),
        ({"rates": (float("inf"),)}, "finite --rate"),
        ({"arrival": "constant"}, "Poisson"),
        ({"rates": (), "find_max_rate": True}, "--max-rate-rule mlperf-server"),
    ],
)
def test_the_preset_refuses_what_loadgen_would_not_run(update: dict, words: str) -> None:
    spec = BenchSpec(url="http://h", rates=(2.0,), standard="mlperf", mlperf_model="llama2-70b")
    with pytest.raises(UserError, match=words):
        apply_standard(spec.model_copy(update=update))


def test_an_unknown_standard_is_one_sentence_and_validate_defaults_to_600_s() -> None:
    with pytest.raises(UserError, match="--standard 'spec'"):
        BenchSpec(url="http://h", standard="spec")
    assert ValidateSpec(duration_s=None).duration_s == 60.0
    assert ValidateSpec(standard="mlperf", duration_s=None).duration_s == MIN_DURATION_S
    assert ValidateSpec(standard="mlperf", rate=4, duration_s=None).duration_s == 602.5
    assert ValidateSpec(standard="mlperf", duration_s=30.0).duration_s == 30.0


def test_bench_judges_a_level_only_when_the_standard_is_asked() -> None:
    records = _level(50, 0.2)
    plain = BenchSpec(url="http://h", rates=(5.0,))
    assert judge_level(plain, records, 5.0, "rate=5", "m") is None
    asked = plain.model_copy(update={"standard": "mlperf", "mlperf_model": "llama2-70b"})
    assert judge_level(asked, [], 5.0, "rate=5", "m") is None  # nothing sent
    verdict = judge_level(asked, records, 5.0, "rate=5", "m")
    assert verdict is not None and verdict.settings.target_qps == 5.0 and not verdict.valid
