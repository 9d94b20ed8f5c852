"""twin.engine and twin.costmodel: the step loop, tokens, speculation, faults, step costs."""

from __future__ import annotations

import pytest

from infertriage.plan import decode_step_time, prefill_time
from infertriage.twin.capacity import make_hardware
from infertriage.twin.costmodel import BatchShape, CostModel
from infertriage.twin.engine import EngineCore, RequestRejectedError, StepResult, VirtualClock
from infertriage.twin.request import (
    FinishReason,
    RequestTimings,
    SamplingParams,
    output_token_id,
    output_token_ids,
    request_seed,
)
from infertriage.twin.scenario import scenario_from_mapping
from infertriage.twin.scenario_model import Scenario


def drain(engine: EngineCore, clock: VirtualClock, *, use_runs: bool = False) -> list[StepResult]:
    results = []
    while engine.has_unfinished_requests():
        if use_runs and engine.step_decode_run(float("inf")) is not None:
            continue
        result = engine.step()
        clock.advance_to(result.end_ts)
        results.append(result)
    return results


def finished_timings(results: list[StepResult]) -> dict[str, RequestTimings]:
    return {o.request_id: o.timings for r in results for o in r.outputs if o.timings is not None}


def test_a_request_gets_exactly_max_tokens_by_the_token_rule() -> None:
    clock = VirtualClock()
    engine = EngineCore(Scenario(), clock)
    engine.add_request("r1", list(range(100)), SamplingParams(max_tokens=7, ignore_eos=True))
    results = drain(engine, clock)
    tokens = [t for r in results for o in r.outputs for t in o.new_token_ids]
    seed = request_seed("r1")
    assert tokens == [output_token_id(seed, i, engine.vocab_size) for i in range(7)]
    assert tokens == output_token_ids(seed, 0, 7, engine.vocab_size)
    assert results[-1].outputs[0].finish_reason is FinishReason.LENGTH
    assert all(0 <= t < engine.vocab_size for t in tokens)


def test_timings_and_realistic_step_times_on_the_healthy_server() -> None:
    clock = VirtualClock()
    engine = EngineCore(Scenario(), clock)
    engine.add_request("r", list(range(512)), SamplingParams(max_tokens=20), arrival_ts=0.0)
    results = drain(engine, clock)
    timings = finished_timings(results)["r"]
    ttft = timings.ttft_s
    assert timings.queue_s == 0.0 and ttft is not None
    assert ttft == pytest.approx(results[0].duration_s)
    assert 0.005 < ttft < 0.05  # a 512-token prefill of an 8B model on an H100
    itl = timings.itl_s()
    assert len(itl) == 19 and all(0.006 < gap < 0.012 for gap in itl)
    assert timings.e2e_s == pytest.approx(ttft + sum(itl))
    assert timings.decode_s == pytest.approx(sum(itl))


def test_steps_never_overlap_and_the_engine_never_moves_the_clock() -> None:
    clock = VirtualClock()
    engine = EngineCore(Scenario(), clock)
    engine.add_request("r", [1, 2, 3], SamplingParams(max_tokens=3))
    first, second = engine.step(), engine.step()
    assert clock.now() == 0.0
    assert second.start_ts == first.end_ts > 0


def test_prompts_that_do_not_fit_are_rejected() -> None:
    engine = EngineCore(Scenario(), VirtualClock())
    with pytest.raises(RequestRejectedError, match="maximum context length is 8192"):
        engine.add_request("long", [1] * 8192)
    with pytest.raises(RequestRejectedError, match="no tokens"):
        engine.add_request("empty", [])


def timeline(use_runs: bool) -> tuple[dict[str, RequestTimings], EngineCore]:
    clock = VirtualClock()
    engine = EngineCore(Scenario(), clock)
    for index in range(6):
        engine.add_request(f"r{index}", list(range(50 * index + 10)), SamplingParams(30 + index))
    timings: dict[str, RequestTimings] = {}
    while engine.has_unfinished_requests():
        run = engine.step_decode_run(float("inf")) if use_runs else None
        outputs = run.finished if run is not None else engine.step().outputs
        timings.update({o.request_id: o.timings for o in outputs if o.timings is not None})
    return timings, engine


def test_decode_runs_give_the_same_timeline_as_single_steps() -> None:
    single, _ = timeline(use_runs=False)
    batched, engine = timeline(use_runs=True)
    assert batched.keys() == single.keys()
    for request_id, timings in single.items():
        other = batched[request_id]
        assert other.output_event_ts == pytest.approx(timings.output_event_ts, rel=1e-6)
        assert other.num_output_tokens == timings.num_output_tokens
    assert engine.get_stats().num_generation_tokens == sum(30 + i for i in range(6))


def test_speculative_decoding_accepts_each_position_with_the_configured_rate() -> None:
    scenario = scenario_from_mapping(
        {"speculative": {"num_draft_tokens": 3, "acceptance_rate": 0.6}}, "spec"
    )
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    for index in range(8):
        engine.add_request(f"r{index}", list(range(64)), SamplingParams(max_tokens=400))
    results = drain(engine, clock)
    spec = engine.get_stats().spec_decode
    per_pos = [n / spec.num_drafts for n in spec.num_accepted_tokens_per_pos]
    for position, share in enumerate(per_pos):
        assert share == pytest.approx(0.6 ** (position + 1), abs=0.04)
    assert spec.acceptance_rate == pytest.approx((0.6 + 0.36 + 0.216) / 3, abs=0.03)
    decode_steps = [r for r in results if r.shape.num_decode_seqs and not r.shape.prefill_chunks]
    assert any(r.shape.num_decode_tokens == 4 * r.shape.num_decode_seqs for r in decode_steps)
    timings = finished_timings(results)
    assert all(t.num_output_tokens == 400 for t in timings.values())
    assert max(max(t.output_event_tokens) for t in timings.values()) == 4


def test_injected_errors_fail_a_seeded_fraction_of_requests() -> None:
    scenario = scenario_from_mapping({"faults": {"error_rate": 0.25}, "seed": 5}, "faults")
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    for index in range(400):
        engine.add_request(f"r{index}", [index % 50, 2, 3], SamplingParams(max_tokens=2))
    timings = finished_timings(drain(engine, clock))
    failed = [t for t in timings.values() if t.finish_reason is FinishReason.ERROR]
    assert 70 < len(failed) < 130
    assert all(t.num_output_tokens == 0 and t.first_token_ts is None for t in failed)
    assert engine.get_stats().num_free_blocks == engine.num_gpu_blocks - 1


def test_the_kv_leak_fault_keeps_blocks_for_ever() -> None:
    scenario = scenario_from_mapping({"faults": {"kv_leak_blocks_per_request": 3}}, "leak")
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    free_after = []
    for index in range(4):
        engine.add_request(f"r{index}", list(range(100 * index, 100 * index + 80)))
        drain(engine, clock)
        free_after.append(engine.get_stats().num_free_blocks)
    usable = engine.num_gpu_blocks - 1
    assert free_after == [usable - 3, usable - 6, usable - 9, usable - 12]
    assert engine.get_stats().num_leaked_blocks == 12


# ---------------------------------------------------------------------------- cost model


def cost_model(**overrides: object) -> CostModel:
    scenario = scenario_from_mapping(overrides, "cost")
    return CostModel(make_hardware(scenario), scenario)


DECODE_32 = BatchShape((), 32, 32 * 1000, 32)


def test_decode_is_memory_bound_and_realistic_on_an_h100() -> None:
    one = cost_model().step_cost(BatchShape((), 1, 500, 1))
    assert one.bound == "memory" and 0.006 < one.total_s < 0.010
    prefill = cost_model().step_cost(BatchShape(((4096, 0),)))
    assert prefill.bound == "compute" and prefill.tensor_active_s > prefill.dram_active_s


def test_tensor_parallel_over_pcie_pays_far_more_communication_than_nvlink() -> None:
    nvlink = cost_model(tensor_parallel=4).step_cost(DECODE_32)
    pcie = cost_model(tensor_parallel=4, interconnect="pcie").step_cost(DECODE_32)
    assert pcie.comm_s > 2 * nvlink.comm_s > 0
    assert pcie.comm_bytes == nvlink.comm_bytes > 0
    assert cost_model().step_cost(DECODE_32).comm_s == 0.0


def test_eager_mode_adds_launch_gaps_that_read_as_busy_but_not_as_sm_activity() -> None:
    graphs = cost_model(model="qwen2.5-0.5b").step_cost(DECODE_32)
    eager = cost_model(model="qwen2.5-0.5b", engine={"cuda_graphs": False}).step_cost(DECODE_32)
    assert graphs.launch_gap_s == 0.0 and eager.launch_gap_s > 2 * eager.kernel_s
    # A graph step keeps the fitted fixed cost (1.5 ms on Hopper); eager adds its launches.
    assert eager.total_s > 1.3 * graphs.total_s
    assert eager.util_busy_s == pytest.approx(eager.total_s)  # gaps under NVML's resolution
    assert eager.sm_active_s / eager.total_s < 0.3 < graphs.sm_active_s / graphs.total_s


def test_naive_attention_is_slower_than_flash_on_long_contexts() -> None:
    shape = BatchShape(((4096, 4096),), 32, 32 * 6000, 32)
    flash = cost_model().step_cost(shape)
    naive = cost_model(engine={"attention_backend": "naive"}).step_cost(shape)
    assert naive.bytes > 2 * flash.bytes and naive.total_s > 1.2 * flash.total_s


def test_scheduler_cpu_time_grows_with_the_batch() -> None:
    model = cost_model(engine={"scheduler_overhead_us_per_seq": 100, "async_scheduling": False})
    small, large = model.step_cost(BatchShape((), 2, 200, 2)), model.step_cost(DECODE_32)
    assert large.cpu_s - small.cpu_s == pytest.approx(30 * 100e-6)


def test_async_scheduling_hides_host_time_behind_the_gpu_until_it_is_longer() -> None:
    hidden = cost_model(engine={"scheduler_overhead_us_per_seq": 20}).step_cost(DECODE_32)
    assert hidden.cpu_s == 0.0 and hidden.total_s == pytest.approx(hidden.gpu_span_s)
    exposed = cost_model(engine={"scheduler_overhead_us_per_seq": 2000}).step_cost(DECODE_32)
    host_s = 32 * 2000e-6
    assert exposed.cpu_s == pytest.approx(host_s - exposed.gpu_span_s)
    assert exposed.total_s == pytest.approx(host_s)
    sync = cost_model(engine={"scheduler_overhead_us_per_seq": 20, "async_scheduling": False})
    assert sync.step_cost(DECODE_32).total_s > hidden.total_s


def test_a_decode_run_sums_its_steps() -> None:
    model = cost_model()
    run = model.decode_run(8, 8 * 300, 50, 0.0, float("inf"))
    steps = [model.step_cost(BatchShape((), 8, 8 * (300 + i), 8)) for i in range(50)]
    assert run.step_end_ts[-1] == pytest.approx(sum(s.total_s for s in steps), rel=1e-6)
    assert run.total.dram_active_s == pytest.approx(sum(s.dram_active_s for s in steps), rel=1e-6)
    cut = model.decode_run(8, 8 * 300, 50, 0.0, run.step_end_ts[9])
    assert len(cut.step_end_ts) == 10


@pytest.mark.parametrize(("model", "gpu", "tp"), [("llama-3.1-8b", "H100-SXM", 1),
                                                  ("llama-3.1-70b", "A100-80GB", 4)])  # fmt: skip
def test_twin_steps_are_plans_steps(model: str, gpu: str, tp: int) -> None:
    """One cost model: with no scenario overhead on top, a twin step is `plan`'s step."""
    twin = cost_model(model=model, gpu=gpu, tensor_parallel=tp,
                      engine={"scheduler_overhead_us_per_seq": 0})  # fmt: skip
    hw = twin.hw
    decode = twin.step_cost(BatchShape((), 8, 8 * 1024, 8))
    plan_decode = decode_step_time(hw.spec, hw.gpu, hw.dtype, 8, 1024, tp=tp)
    assert decode.total_s == pytest.approx(plan_decode.total_s, rel=1e-3)
    assert decode.comm_s == pytest.approx(plan_decode.comm_s)
    prefill = twin.step_cost(BatchShape(((2048, 0),)))
    plan_prefill = prefill_time(hw.spec, hw.gpu, hw.dtype, 2048, tp=tp)
    assert prefill.total_s == pytest.approx(plan_prefill.total_s, rel=1e-3)


def _arrival_during_the_first_step(
    *, async_scheduling: bool
) -> tuple[EngineCore, VirtualClock, StepResult]:
    """An engine (no hand-off) that ran request a's first step, and request b that arrived
    halfway through it; the clock at that step's end."""
    scenario = Scenario.model_validate(
        {"engine": {"async_scheduling": async_scheduling}, "frontend": {"handoff_ms": 0}}
    )
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    engine.add_request("a", list(range(64)), SamplingParams(max_tokens=50), arrival_ts=0.0)
    first = engine.step()
    clock.advance_to(first.end_ts)
    engine.add_request("b", list(range(100, 164)), SamplingParams(max_tokens=5),
                       arrival_ts=first.end_ts / 2)  # fmt: skip
    return engine, clock, first


@pytest.mark.parametrize(("async_scheduling", "first_step"), [(True, 3), (False, 2)])
def test_a_request_arriving_mid_step_runs_in_the_step_after_next_under_async_scheduling(
    async_scheduling: bool, first_step: int
) -> None:
    """vLLM's async scheduler fixes step k+1 while step k runs: an arrival during step 1 is
    first seen when step 3 is scheduled; a synchronous one takes it in step 2."""
    engine, clock, first = _arrival_during_the_first_step(async_scheduling=async_scheduling)
    steps = [first]
    while not any(o.request_id == "b" and o.new_token_ids for o in steps[-1].outputs):
        steps.append(engine.step())
        clock.advance_to(steps[-1].end_ts)
    assert len(steps) == first_step
    # Queue time ends when the batch that takes it is decided (vLLM's stamp), in both modes:
    # at step 1's end, when step 2 runs (synchronous) or is launched and step 3 decided.
    timings = finished_timings(drain(engine, clock))["b"]
    assert timings.queue_s == pytest.approx(first.end_ts / 2)


def test_the_api_server_hand_off_delays_the_engine_not_the_queue() -> None:
    scenario = Scenario.model_validate({"frontend": {"handoff_ms": 4}})
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    engine.add_request("r", list(range(64)), SamplingParams(max_tokens=3), arrival_ts=0.0)
    results = drain(engine, clock)
    assert results[0].start_ts == pytest.approx(0.004)
    timings = finished_timings(results)["r"]
    assert timings.queue_s == 0.0


def test_the_waiting_gauge_counts_what_an_async_engine_core_still_holds() -> None:
    """A request decided into the next batch is not waiting; one still on its way from the
    API server (the hand-off) is not either; one that arrived during the last step is."""
    engine, clock, _ = _arrival_during_the_first_step(async_scheduling=True)
    second = engine.step()  # decided at step 1's start: b waits for step 3, decided already
    clock.advance_to(second.end_ts)
    assert len(engine.scheduler.waiting) == 1 and second.stats.num_waiting_reqs == 0
    engine.add_request("c", list(range(200, 264)), SamplingParams(max_tokens=5),
                       arrival_ts=(second.start_ts + second.end_ts) / 2)  # fmt: skip
    engine.add_request("d", list(range(300, 364)), SamplingParams(max_tokens=5),
                       arrival_ts=second.end_ts + 1.0)  # fmt: skip
    assert engine.get_stats().num_waiting_reqs == 1  # c; b decided, d not there yet
