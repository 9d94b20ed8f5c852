"""twin.simulate under what a load test sends: workloads, back-to-back stages, client
time-outs, per-stage summaries, and memory that does not grow with the request count."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from infertriage.schemas import UserError
from infertriage.twin.scenario import load_scenario
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.simulate import Stage, simulate

SHORT = "synthetic:input=256,output=128"
PROMPT_SET = "prefix:groups=2,prompts=4,prefix=512,input=120,output=16"


def test_stages_change_the_rate_mid_run() -> None:
    result = simulate(
        Scenario(), stages=[Stage(2, 60), Stage(16, 60)], workload=SHORT, arrivals="constant"
    )
    low, high = result.stages
    assert (low.num_requests, high.num_requests) == (120, 960)
    assert result.num_requests == 1080 and result.num_completed == 1080
    assert low.achieved_rate_rps == pytest.approx(2.0) and high.achieved_rate_rps == 16.0
    assert (low.start_ts, high.start_ts) == (0.0, 60.0)
    assert high.mean_running > 4 * low.mean_running  # more running at the higher stage
    assert high.request_throughput_rps > 4 * low.request_throughput_rps
    assert high.output_throughput_tok_s > 4 * low.output_throughput_tok_s
    assert low.num_completed + high.num_completed == result.num_completed
    assert result.rate_rps == pytest.approx(9.0)  # the stages' mean
    # The run's latencies are its stages' together.
    assert result.ttft.count == low.ttft.count + high.ttft.count == 1080


def test_a_stage_summary_is_in_bench_terms() -> None:
    stage = simulate(Scenario(), rate=4, num_requests=60, workload=SHORT).stages[0]
    assert stage.rate_rps == 4 and stage.duration_s == 15  # one rate: the count over the rate
    assert stage.ttft.count == stage.e2e.count == stage.tpot.count == 60
    assert stage.itl.count == 60 * 127  # per token: N - 1 gaps of each request
    # TPOT is (E2E - TTFT) / (N - 1) per request: its mean is the ITL samples' mean.
    assert stage.tpot.mean_s == pytest.approx(stage.itl.mean_s, rel=1e-9)
    assert 0 < stage.ttft.p50_s <= stage.ttft.p90_s <= stage.ttft.p95_s <= stage.ttft.p99_s
    assert stage.e2e.mean_s == pytest.approx(stage.ttft.mean_s + 127 * stage.tpot.mean_s)


def test_gamma_arrivals_are_burstier_than_poisson() -> None:
    def spread(arrivals: str) -> float:
        result = simulate(Scenario(), rate=8, num_requests=300, workload=SHORT, arrivals=arrivals)
        return result.queue_time.p99_s + result.ttft.p99_s

    assert simulate(Scenario(), rate=8, num_requests=50, arrivals="gamma:0.25").num_completed == 50
    assert spread("gamma:0.1") > spread("constant")


def test_a_time_out_aborts_the_request_at_its_deadline_and_frees_its_blocks() -> None:
    # One 2,000-token answer (about 16 s of decode) with a 1 s time-out: the decode run stops
    # at the deadline, the engine aborts the request there, and every block is free again.
    result = simulate(
        Scenario(), num_requests=1, workload="synthetic:input=100,output=2000", timeout_s=1.0
    )
    assert result.num_timed_out == 1 and result.num_completed == 0
    assert result.stages[0].num_failed == 1 and result.stages[0].num_timed_out == 1
    assert result.ttft.count == 0 and result.e2e.count == 0  # left out of every latency
    ((abort_ts, free),) = result.free_blocks_trajectory
    assert 1.0 <= abort_ts < 1.05  # the first step boundary after the deadline
    assert free == result.num_gpu_blocks - 1  # every block but the null block
    assert result.duration_s == pytest.approx(1.0)


def test_time_outs_under_kv_pressure_free_the_cache_and_cut_preemptions() -> None:
    kv_pressure = load_scenario("kv-pressure")
    waiting = simulate(kv_pressure, rate=6, num_requests=200)
    leaving = simulate(kv_pressure, rate=6, num_requests=200, timeout_s=5.0)
    assert waiting.num_timed_out == 0 and waiting.num_preemptions > 0
    assert leaving.num_timed_out > 0
    assert leaving.num_completed + leaving.num_timed_out == 200
    assert leaving.num_preemptions < waiting.num_preemptions / 2
    assert leaving.e2e.p99_s <= 5.0  # completed requests only
    assert leaving.free_blocks_trajectory[-1][1] == leaving.num_gpu_blocks - 1
    assert leaving.num_leaked_blocks == 0


def test_a_cycled_prompt_set_hits_the_prefix_cache_with_whole_prompts() -> None:
    cycled = simulate(Scenario(), rate=8, num_requests=200, workload=PROMPT_SET)
    drawn = simulate(
        Scenario(), rate=8, num_requests=200, workload=PROMPT_SET.replace("prompts=4,", "")
    )
    assert cycled.prefix_cache_hit_rate > 0.95  # after the first cycle of 8, whole prompts
    assert drawn.prefix_cache_hit_rate < 0.85  # the 512-token prefix of 632 only
    assert cycled.num_completed == drawn.num_completed == 200


def test_every_bench_workload_runs(tmp_path: Path) -> None:
    sharegpt = tmp_path / "sharegpt.json"
    conversations = [
        {
            "conversations": [
                {"from": "human", "value": f"question {i} " * (20 + i)},
                {"from": "gpt", "value": "an answer " * 30},
            ]
        }
        for i in range(12)
    ]
    sharegpt.write_text(json.dumps(conversations))
    jsonl = tmp_path / "requests.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"prompt": f"say {i} " * 40, "max_tokens": 8}) + "\n" for i in range(5))
    )
    for workload in (
        "chat-mix",
        "synthetic:input=64,output=8",
        PROMPT_SET,
        "multiturn:turns=3,input=32,output=8,system=64",
        f"sharegpt:{sharegpt}",
        f"jsonl:{jsonl}",
    ):
        result = simulate(Scenario(), rate=4, num_requests=20, workload=workload)
        assert result.num_completed == 20, workload
        assert result.workload == workload


def test_a_trace_replays_its_own_times(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    stamps = [0.0, 0.5, 0.6, 3.0, 3.1]
    trace.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": 100, "output_length": 8}) + "\n"
            for t in stamps
        )
    )
    result = simulate(Scenario(), workload=f"trace:{trace}")
    assert result.num_requests == 5 and result.num_completed == 5
    assert result.stages[0].duration_s == 3.1 and result.duration_s > 3.1
    with pytest.raises(UserError, match="replays its own timestamps"):
        simulate(Scenario(), rate=4, workload=f"trace:{trace}")
    with pytest.raises(UserError, match="replays its own timestamps"):
        simulate(Scenario(), stages=[Stage(1, 10)], workload=f"trace:{trace}")


def test_a_prompt_longer_than_the_context_is_rejected_not_a_crash() -> None:
    result = simulate(Scenario(), rate=4, num_requests=3, workload="synthetic:input=9000,output=4")
    assert result.num_rejected == 3 and result.num_completed == 0
    assert result.stages[0].num_failed == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"workload": "chat-mix", "input_len": 64}, "not both"),
        ({"stages": [Stage(4, 10)], "rate": 4.0}, "not both"),
        ({"stages": [Stage(4, 10)], "num_requests": 10}, "not both"),
        ({"arrivals": "ramp:1"}, "--arrivals must be poisson, constant or gamma"),
        ({"arrivals": "gamma:x"}, "--arrivals"),
        ({"workload": "nonsense"}, "unknown workload"),
        ({"stages": [Stage(0, 10)]}, "positive rate"),
    ],
)
def test_a_load_that_cannot_be_sent_is_one_sentence(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        simulate(Scenario(), **kwargs)  # type: ignore[arg-type]


def test_memory_does_not_grow_with_the_request_count() -> None:
    # Only what is in flight is held, and each request's small spec: about 430 bytes more per
    # request here (the run before streaming kept every prompt and chunk time: 7.6 MB traced
    # for 200 requests, 18.9 MB for 800, about 19 KB per request).
    def peak(num_requests: int) -> int:
        tracemalloc.start()
        try:
            simulate(
                load_scenario("kv-pressure"),
                rate=4,
                num_requests=num_requests,
                workload="prefix:groups=2,prompts=4,prefix=256,input=64,output=64",
            )
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak(20)  # first-use allocations (caches, imports) out of the way
    assert (peak(800) - peak(200)) / 600 < 1_000
