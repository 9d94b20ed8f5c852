"""plan.roofline: the step model against a published measurement, and its invariants."""

from __future__ import annotations

import pytest

from infertriage.plan import (
    Execution,
    RooflineParams,
    decode_step_time,
    get_gpu,
    load_model,
    moe_experts_touched,
    param_counts,
    params_for,
    prefill_time,
    ttft_itl,
    weight_bytes,
)
from infertriage.schemas.errors import UserError


def test_llama_3_3_70b_fp8_tp2_h100_single_user_calibration() -> None:
    # Published: one user, 5,000 prompt and 500 output tokens, FP8 weights and KV, TP 2 on
    # H100-SXM: TTFT 406.77 ms, ITL 18.58 ms.
    spec, gpu = load_model("llama-3.3-70b"), get_gpu("H100-SXM")
    est = ttft_itl(spec, gpu, "fp8", 2, 5000, 500, kv_dtype="fp8")
    assert est.ttft_s == pytest.approx(0.40677, rel=0.20)
    assert est.itl_s == pytest.approx(0.01858, rel=0.20)
    assert est.prefill.bound == "compute" and est.decode.bound == "memory"
    assert est.e2e_s == pytest.approx(est.ttft_s + 499 * est.itl_s)


@pytest.mark.parametrize(
    ("experts", "top_k", "tokens", "expected"),
    [(8, 2, 1, 2.0), (256, 8, 1, 8.0), (8, 2, 0, 0.0), (8, 8, 3, 8.0)],
)
def test_moe_experts_touched_exact(experts: int, top_k: int, tokens: int, expected: float) -> None:
    assert moe_experts_touched(experts, top_k, tokens) == pytest.approx(expected)


def test_moe_experts_touched_saturates_at_all_experts() -> None:
    assert moe_experts_touched(256, 8, 10_000) == pytest.approx(256)
    assert moe_experts_touched(8, 2, 2) == pytest.approx(8 * (1 - 0.75**2))
    counts = [moe_experts_touched(128, 8, b) for b in (1, 2, 8, 64, 512)]
    assert counts == sorted(counts) and counts[-1] <= 128


def test_moe_decode_reads_active_weights_at_batch_one_and_all_at_large_batch() -> None:
    spec, gpu = load_model("mixtral-8x7b"), get_gpu("H100")
    one = decode_step_time(spec, gpu, "bf16", 1, 0)
    many = decode_step_time(spec, gpu, "bf16", 4096, 0)
    kv_one = 131_072  # the new token's KV
    assert one.bytes - kv_one == pytest.approx(2 * param_counts(spec).active, rel=0.03)
    weights_many = many.bytes - 4096 * kv_one
    assert weights_many == pytest.approx(weight_bytes(spec, "bf16"), rel=0.01)


def test_decode_grows_with_context_and_batch() -> None:
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    short = decode_step_time(spec, gpu, "bf16", 8, 100)
    long = decode_step_time(spec, gpu, "bf16", 8, 10_000)
    wide = decode_step_time(spec, gpu, "bf16", 64, 100)
    assert short.total_s < long.total_s and short.total_s < wide.total_s
    kv_read = long.bytes - short.bytes
    assert kv_read == 8 * (10_000 - 100) * 131_072


def test_chunked_prefill_adds_up_to_one_prefill() -> None:
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    whole = prefill_time(spec, gpu, "bf16", 2000)
    first = prefill_time(spec, gpu, "bf16", 1000)
    second = prefill_time(spec, gpu, "bf16", 1000, context_before=1000)
    logits = 2 * spec.vocab_size * spec.hidden_size  # each chunk samples once
    assert first.flops + second.flops - logits == pytest.approx(whole.flops)


def test_sliding_window_caps_decode_attention() -> None:
    spec, gpu = load_model("gemma-2-9b"), get_gpu("L4")
    near = decode_step_time(spec, gpu, "bf16", 1, 5000)
    far = decode_step_time(spec, gpu, "bf16", 1, 6000)
    per_layer_token = 2 * 8 * 256 * 2
    assert far.bytes - near.bytes == 21 * 1000 * per_layer_token  # only the full layers grow


def test_tensor_parallel_splits_work_and_adds_all_reduce() -> None:
    spec, gpu = load_model("llama-3.1-70b"), get_gpu("H100-SXM")
    tp1 = decode_step_time(spec, gpu, "bf16", 1, 1000, tp=1)
    tp4 = decode_step_time(spec, gpu, "bf16", 1, 1000, tp=4)
    assert tp1.comm_s == 0 and tp4.comm_s > 0
    assert tp4.flops == pytest.approx(tp1.flops / 4)
    assert tp4.memory_s == pytest.approx(tp1.memory_s / 4, rel=0.02)
    pcie = decode_step_time(spec, gpu, "bf16", 1, 1000, tp=4, interconnect="pcie")
    assert pcie.comm_s > tp4.comm_s


def test_total_is_roof_plus_comm_plus_overhead() -> None:
    params = RooflineParams(step_overhead_s=1e-3)
    cost = decode_step_time(
        load_model("qwen2.5-7b"), get_gpu("A10G"), "bf16", 4, 512, params=params
    )
    assert cost.total_s == pytest.approx(cost.gemm_s + cost.attention_s + cost.comm_s + 1e-3)
    assert cost.total_s >= max(cost.compute_s, cost.memory_s) + cost.comm_s + 1e-3


def test_fp8_prefill_uses_fp8_peak_for_gemms_where_there_is_one() -> None:
    # The GEMMs run at the FP8 peak; attention computes in 16 bits either way.
    spec = load_model("llama-3.1-8b")
    h100, a100 = get_gpu("H100-SXM"), get_gpu("A100-80GB")
    params = RooflineParams()
    fp8 = prefill_time(spec, h100, "fp8", 4096, params=params)
    bf16 = prefill_time(spec, h100, "bf16", 4096, params=params)
    attention = fp8.work.prefill_attention_flops / (
        h100.bf16_flops_per_s * params.compute_efficiency
    )
    assert fp8.compute_s - attention == pytest.approx((bf16.compute_s - attention) / 2, rel=1e-3)
    assert prefill_time(spec, a100, "fp8", 4096).compute_s == pytest.approx(
        prefill_time(spec, a100, "bf16", 4096).compute_s, rel=1e-6
    )


def test_bad_inputs_are_user_errors() -> None:
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    with pytest.raises(UserError, match="interconnect"):
        decode_step_time(spec, gpu, "bf16", 1, 10, tp=2, interconnect="ethernet")
    with pytest.raises(UserError, match="prefill tokens"):
        prefill_time(spec, gpu, "bf16", 0)
    with pytest.raises(UserError, match="mem_efficiency"):
        RooflineParams(mem_efficiency=1.5)


def test_gemms_and_attention_each_run_under_their_own_roof() -> None:
    # A wide long-context decode: the GEMMs are compute-bound, the KV-reading attention is
    # memory-bound; separate kernels, so their times add and neither hides under the other.
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    p = params_for(gpu)
    cost = decode_step_time(spec, gpu, "bf16", 512, 1000)
    kv_s = cost.work.kv_bytes / (gpu.mem_bw_bytes_per_s * p.kv_mem_efficiency)
    ramp = 1 + p.attention_half_rows / cost.work.query_group  # GQA: 4 query heads per KV head
    math_s = cost.work.decode_attention_flops * ramp / (gpu.bf16_flops_per_s * p.compute_efficiency)
    assert cost.attention_s == pytest.approx(max(kv_s, math_s))
    assert cost.gemm_s + cost.attention_s > 1.2 * max(cost.compute_s, cost.memory_s)


def test_collapsed_routing_reads_only_the_top_k_experts() -> None:
    # Synthetic weights send every token to the same experts: a batch reads k of them, where
    # real traffic reaches nearly all eight; one token reads k either way.
    spec, gpu = load_model("mixtral-8x7b"), get_gpu("H100-SXM")
    real = decode_step_time(spec, gpu, "bf16", 64, 100)
    fake = decode_step_time(spec, gpu, "bf16", 64, 100, execution=Execution(routing="collapsed"))
    assert fake.work.weight_bytes < 0.4 * real.work.weight_bytes
    assert fake.work.expert_flops == pytest.approx(real.work.expert_flops)
    assert fake.work.expert_tokens == 64 and real.work.expert_tokens < 64
    one = decode_step_time(spec, gpu, "bf16", 1, 100)
    one_fake = decode_step_time(spec, gpu, "bf16", 1, 100, execution=Execution("collapsed"))
    assert one.work.weight_bytes == pytest.approx(one_fake.work.weight_bytes)
