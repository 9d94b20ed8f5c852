"""A measured level's validity: each check passes and fails on records built to pass or fail it."""

from __future__ import annotations

import pytest

from infertriage.analyze.stats.latency import ClientVerdict
from infertriage.loadgen.saturation import Saturation
from infertriage.loadgen.validity import LevelFacts, ValidityRules, judge_validity, nominal_of
from infertriage.schemas import (
    SAMPLE_VALIDITY,
    CheckStatus,
    Chunk,
    RequestRecord,
    SloProfile,
    Thresholds,
    TokenSource,
    Validity,
    ValidityCheck,
    checklist_ready,
    validity_check,
)

T = Thresholds()  # TTFT p95 200 ms, ITL p95 50 ms


def _records(
    num: int,
    *,
    gap_s: float = 0.25,
    ttft_s: float = 0.05,
    ttft_step_s: float = 0.0,
    tokens: int = 10,
    asked: int = 10,
    prompt: int = 64,
    slow_every: int = 0,
) -> list[RequestRecord]:
    """`num` requests sent every `gap_s`, each `tokens` tokens 20 ms apart after its TTFT."""
    out = []
    for i in range(num):
        t = i * gap_s
        ttft = ttft_s + ttft_step_s * i + (1.0 if slow_every and (i + 1) % slow_every == 0 else 0.0)
        chunks = tuple(Chunk(t + ttft + 0.02 * k, 1) for k in range(tokens))
        out.append(
            RequestRecord(
                id=f"r-{i}",
                scheduled_ts=t,
                sent_ts=t,
                first_token_ts=chunks[0].ts,
                last_token_ts=chunks[-1].ts,
                end_ts=chunks[-1].ts,
                chunks=chunks,
                prompt_tokens=prompt,
                output_tokens=tokens,
                prompt_tokens_source=TokenSource.USAGE,
                output_tokens_source=TokenSource.USAGE,
                max_tokens=asked,
            )
        )
    return out


def _check(validity: Validity, name: str) -> ValidityCheck:
    return next(check for check in validity.checks if check.name == name)


def _rate(value: float, **facts: object) -> LevelFacts:
    return LevelFacts(mode="rate", value=value, **facts)  # type: ignore[arg-type]


def test_a_long_steady_level_is_valid() -> None:
    records = _records(200, gap_s=0.1)  # 20 s at 10/s
    validity = judge_validity(records, T, _rate(10.0, client=ClientVerdict(False, False, ())))
    assert validity.valid and validity.line() == "VALID"
    assert [c.name for c in validity.checks] == [
        "duration", "sample: TTFT p95", "sample: TPOT p95", "rate", "output lengths",
        "steady state", "client",
    ]  # fmt: skip


def test_a_short_level_fails_duration_and_the_p95_sample() -> None:
    records = _records(36, gap_s=0.1)  # 3.6 s
    validity = judge_validity(records, T, _rate(10.0))
    assert not validity.valid
    duration = _check(validity, "duration")
    assert not duration.passed and "longer" in duration.fix
    sample = _check(validity, "sample: TTFT p95")
    assert not sample.passed
    # LoadGen: a p95 claim with none over the limit needs 90 requests
    assert "need ≥ 90 requests for a p95 TTFT claim" in sample.figure
    judged = int(sample.figure.rsplit("; ", 1)[1].split()[0])
    assert judged < 36 and f"≥ {90 - judged} more requests" in sample.fix
    assert validity.line().startswith("INVALID: duration: judged")


def test_requests_over_the_limit_raise_the_sample_needed() -> None:
    records = _records(120, gap_s=0.1, slow_every=60)  # 2 of them 1 s late: over 200 ms
    sample = _check(judge_validity(records, T, _rate(10.0)), "sample: TTFT p95")
    # 2 over the limit: LoadGen's rule asks 165 (90 with none, 130 with one)
    assert not sample.passed and "need ≥ 165 requests" in sample.figure
    assert "(2 over 200 ms)" in sample.figure


def test_a_clear_miss_is_a_valid_claim_and_an_unclear_one_is_not() -> None:
    clear = judge_validity(_records(120, gap_s=0.1, ttft_s=0.5), T, _rate(10.0))
    check = _check(clear, "sample: TTFT p95")
    assert check.passed and check.figure.startswith("a miss:")
    unclear = judge_validity(_records(120, gap_s=0.1, slow_every=12), T, _rate(10.0))
    check = _check(unclear, "sample: TTFT p95")  # 10 of 120 over: 8 %, not surely over 5 %
    assert not check.passed and "not established" in check.fix


def test_the_batch_profile_claims_no_percentile() -> None:
    validity = judge_validity(_records(36), Thresholds(profile=SloProfile.BATCH), _rate(4.0))
    assert not [c for c in validity.checks if c.name.startswith("sample")]


def test_a_rate_short_of_the_nominal_fails() -> None:
    records = _records(200, gap_s=0.1)  # 10/s
    assert _check(judge_validity(records, T, _rate(10.0)), "rate").passed
    short = _check(judge_validity(records, T, _rate(14.0)), "rate")
    assert not short.passed and "nominal 14/s" in short.figure and "--workers" in short.fix
    closed = judge_validity(records, T, LevelFacts(mode="concurrency", value=4.0))
    assert not [c for c in closed.checks if c.name == "rate"]


def test_outputs_short_of_the_asked_fail_only_when_asked_exactly() -> None:
    records = _records(200, gap_s=0.1, tokens=5, asked=10)
    check = _check(judge_validity(records, T, _rate(10.0)), "output lengths")
    assert not check.passed and "50%" in check.figure
    loose = judge_validity(records, T, _rate(10.0, exact_outputs=False))
    assert not [c for c in loose.checks if c.name == "output lengths"]


def test_prompts_are_held_to_the_asked_lengths_with_a_template_slack() -> None:
    records = _records(200, gap_s=0.1, prompt=300)
    near = {r.id: 290 for r in records}  # off by 10 tokens: a chat template's own
    far = {r.id: 150 for r in records}
    assert _check(
        judge_validity(records, T, _rate(10.0, asked_prompt_tokens=near)), "prompt lengths"
    ).passed
    check = _check(
        judge_validity(records, T, _rate(10.0, asked_prompt_tokens=far)), "prompt lengths"
    )
    assert not check.passed and "--tokenizer" in check.fix


def test_growing_ttft_is_no_steady_state_open_or_closed() -> None:
    records = _records(200, gap_s=0.1, ttft_step_s=0.01)  # TTFT grows 0.1 s per s
    open_loop = _check(judge_validity(records, T, _rate(10.0)), "steady state")
    closed = _check(
        judge_validity(records, T, LevelFacts(mode="concurrency", value=4.0)), "steady state"
    )
    assert not open_loop.passed and not closed.passed and "lower load" in closed.fix


def test_a_bound_client_is_invalid_and_a_busy_host_a_note() -> None:
    records = _records(200, gap_s=0.1)
    bound = ClientVerdict(True, False, ("a client process used 95% of a core",))
    check = _check(judge_validity(records, T, _rate(10.0, client=bound)), "client")
    assert not check.passed and "95%" in check.figure and "--workers" in check.fix
    busy = ClientVerdict(False, True, ("dispatch lag p99 30.0 ms > 10 ms",))
    check = _check(judge_validity(records, T, _rate(10.0, client=busy)), "client")
    assert check.passed and "late: dispatch lag p99 30.0 ms" in check.figure


def test_an_interrupted_level_is_invalid() -> None:
    validity = judge_validity(_records(200, gap_s=0.1), T, _rate(10.0, interrupted=True))
    assert not _check(validity, "duration").passed


def test_the_rules_can_be_tightened() -> None:
    records = _records(200, gap_s=0.1)  # ~20 s
    strict = judge_validity(records, T, _rate(10.0), ValidityRules(min_judged_s=60.0))
    assert not _check(strict, "duration").passed


def test_a_verdict_must_agree_with_its_checks() -> None:
    failed = ValidityCheck(name="x", passed=False, figure="f", rule="r", fix="do y")
    with pytest.raises(ValueError, match="VALID exactly"):
        Validity(verdict="VALID", checks=(failed,))
    validity = Validity.of([failed])
    assert validity.line() == "INVALID: x: f; do y"
    assert Validity.model_validate(validity.model_dump(mode="json")) == validity


def test_a_level_name_gives_its_nominal_load() -> None:
    assert nominal_of("rate=4") == ("rate", 4.0)
    assert nominal_of("concurrency=16") == ("concurrency", 16.0)
    assert nominal_of("rate=inf") == ("rate", float("inf"))
    assert nominal_of("rate=16.3 again") == ("rate", 16.3)  # a goodput search's rerun
    assert nominal_of("replay") == (None, None) and nominal_of("rate=x") == (None, None)


def test_the_checklist_item_fails_on_an_invalid_level_and_skips_an_unmeasured_one() -> None:
    valid = judge_validity(_records(200, gap_s=0.1), T, _rate(10.0))
    invalid = judge_validity(_records(36, gap_s=0.1), T, _rate(10.0))
    assert validity_check(valid).status is CheckStatus.PASS
    check = validity_check(invalid)
    assert check.failed and check.name == SAMPLE_VALIDITY and "is INVALID: duration" in check.detail
    assert not checklist_ready([check]) and checklist_ready([validity_check(valid)])
    assert validity_check(None).status is CheckStatus.SKIP


def test_a_level_stopped_as_over_saturated_is_invalid() -> None:
    stop = Saturation("queue", 12.0, 5.8, 175, 318, 26.9, 183, 326, 8.0, 34.5, 2.2, 430, 110)
    records = _records(200, gap_s=0.1)  # whatever the records say, the stop decides
    check = _check(judge_validity(records, T, _rate(10.0, saturation=stop)), "steady state")
    assert not check.passed and "the queue grew from 175 to 318" in check.figure
    assert "lower rate" in check.fix
