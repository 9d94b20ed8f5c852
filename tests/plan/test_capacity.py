"""The capacity plan: per-GPU memory, vLLM's block count, headroom, limits and knobs."""

from __future__ import annotations

import pytest

from infertriage.plan import (
    PlanInputs,
    advise_parallelism,
    get_gpu,
    kv_bytes_per_token,
    load_model,
    make_capacity_plan,
    sweep,
    vllm_kv_cache,
)
from infertriage.schemas import GIB, UserError


def _inputs(**overrides: object) -> PlanInputs:
    base = PlanInputs(
        model=load_model("llama-3.1-8b"),
        gpu=get_gpu("H100-SXM"),
        max_model_len=8192,
        concurrency=64,
        input_len=512,
        output_len=256,
    )
    return base.replace(**overrides)


def test_memory_parts_add_up_to_what_vllm_allocates() -> None:
    plan = make_capacity_plan(_inputs())
    m = plan.memory
    assert m.weights == pytest.approx(8.03e9 * 2, rel=0.005)
    allocated = m.total * 0.9
    assert m.non_kv + plan.kv.available_kv_bytes == pytest.approx(allocated)
    assert plan.kv.num_blocks == int(plan.kv.available_kv_bytes // (16 * 131_072))
    assert plan.kv.usable_blocks == plan.kv.num_blocks - 1


def test_vllm_max_concurrency_is_kv_tokens_over_max_model_len() -> None:
    plan = make_capacity_plan(_inputs())
    assert plan.vllm_max_concurrency == pytest.approx(plan.kv.num_tokens / 8192)


def test_demand_and_headroom() -> None:
    plan = make_capacity_plan(_inputs(concurrency=64))
    assert plan.peak_kv_demand_bytes == 64 * (768 // 16) * 16 * 131_072
    assert plan.fits and plan.fits_with_headroom
    assert plan.free_fraction > 0.10
    too_many = make_capacity_plan(_inputs(concurrency=plan.max_concurrency + 1))
    assert not too_many.fits_with_headroom
    at_limit = make_capacity_plan(_inputs(concurrency=plan.max_concurrency))
    assert at_limit.fits_with_headroom


def test_headroom_is_kept_even_when_vllm_would_allocate_it() -> None:
    # At utilisation 0.95 vLLM takes 95 % of the GPU; the plan still keeps 10 % free.
    loose = make_capacity_plan(_inputs(gpu_memory_utilization=0.95))
    strict = make_capacity_plan(_inputs(gpu_memory_utilization=0.90))
    assert loose.kv.num_blocks > strict.kv.num_blocks
    assert loose.max_concurrency == pytest.approx(strict.max_concurrency, abs=1)


def test_length_cap_leaves_room_for_the_others() -> None:
    plan = make_capacity_plan(_inputs(concurrency=222, input_len=1500, output_len=500))
    per_request_blocks = 2000 // 16
    spare = plan.kv.usable_blocks - 221 * per_request_blocks
    assert spare > 0
    assert plan.length_cap == min(8192, spare * 16)
    assert plan.length_cap < 8192


def test_kv_pressure_names_the_knob_that_helps_most() -> None:
    plan = make_capacity_plan(_inputs(gpu=get_gpu("L4"), concurrency=200))
    assert not plan.fits
    knobs = {k.knob: k for k in plan.knobs}
    assert knobs["kv-dtype"].max_concurrency > plan.max_concurrency
    assert knobs["tp"].max_concurrency > knobs["kv-dtype"].max_concurrency
    assert knobs["max-num-seqs"].max_concurrency == plan.max_concurrency
    assert plan.knobs[0].max_concurrency == max(k.max_concurrency for k in plan.knobs)


def test_tp_divides_weights_and_kv_heads_per_gpu() -> None:
    one = make_capacity_plan(_inputs(model=load_model("llama-3.1-70b"), tp=4))
    assert one.kv_bytes_per_token == kv_bytes_per_token(load_model("llama-3.1-70b"), tp=4)
    assert one.kv_bytes_per_token == 327_680 // 4
    assert one.memory.weights == pytest.approx(70.55e9 * 2 / 4, rel=0.005)


def test_pipeline_parallelism_splits_layers_and_has_a_bubble() -> None:
    plan = make_capacity_plan(_inputs(model=load_model("llama-3.1-70b"), tp=4, pp=2))
    assert plan.kv_bytes_per_token == 327_680 // 8
    assert plan.roofline.pp_bubble == pytest.approx(1 / 3)


def test_roofline_summary_is_consistent() -> None:
    r = make_capacity_plan(_inputs()).roofline
    assert r.prefill.bound == "compute" and r.decode.bound == "memory"
    assert r.throughput_tok_s == pytest.approx(r.batch_size / r.itl_s)
    assert r.kv_bound_throughput_tok_s > r.throughput_tok_s


def test_weights_larger_than_the_gpu_is_one_clear_error() -> None:
    with pytest.raises(UserError, match=r"needs .* GiB per GPU before any KV cache"):
        make_capacity_plan(_inputs(model=load_model("llama-3.1-70b")))


def test_weights_larger_than_all_gpus_is_one_clear_error() -> None:
    inputs = _inputs(model=load_model("deepseek-v3"), num_gpus=4, tp=1)
    with pytest.raises(UserError, match=r"weights alone but 4 × H100-SXM hold"):
        advise_parallelism(inputs)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("concurrency", 0, "concurrency must be at least 1"),
        ("num_gpus", 1, "only 1 were given"),
        ("kv_dtype", "fp3", "fp3"),
    ],
)
def test_bad_inputs_are_user_errors(field: str, value: object, message: str) -> None:
    overrides = {field: value}
    if field == "num_gpus":
        overrides["tp"] = 2
    with pytest.raises(UserError, match=message):
        make_capacity_plan(_inputs(**overrides))


def test_known_vllm_case_through_the_kv_allocator() -> None:
    """vLLM: Llama-3.1-8B, 23.58 GiB GPU, util 0.90, 17.41 GiB non-KV → 1,952 blocks (±1)."""
    kv = vllm_kv_cache(23.58 * GIB, 0.90, (17.06 + 0.35) * GIB, 16, 131_072)
    assert abs(kv.num_blocks - 1952) <= 1


def test_what_if_sweeps_the_cartesian_product() -> None:
    rows = sweep(_inputs(), ["concurrency=8,64", "kv-dtype=bf16,fp8"])
    assert [dict(r.values) for r in rows] == [
        {"concurrency": "8", "kv-dtype": "bf16"},
        {"concurrency": "8", "kv-dtype": "fp8"},
        {"concurrency": "64", "kv-dtype": "bf16"},
        {"concurrency": "64", "kv-dtype": "fp8"},
    ]
    assert all(r.plan is not None for r in rows)
    assert rows[1].plan and rows[0].plan
    assert rows[1].plan.kv.num_blocks == pytest.approx(2 * rows[0].plan.kv.num_blocks, abs=1)


def test_what_if_row_that_cannot_run_says_why() -> None:
    rows = sweep(_inputs(), ["model=llama-3.1-8b,llama-3.1-70b"])
    assert rows[0].plan is not None
    assert rows[1].plan is None and "before any KV cache" in rows[1].error


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("concurrency", "is not KEY=V1,V2"),
        ("speed=1,2", "key 'speed' is unknown"),
        ("concurrency=8,x", "'x' is not a valid value"),
        ("gpu=H900", "H900"),
    ],
)
def test_bad_what_if_is_a_user_error(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        sweep(_inputs(), [spec])
