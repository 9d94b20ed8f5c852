"""plan's cost model: the fitted table against the published measurements it was fitted on,
its terms one by one, and what `plan` says about its own error."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from infertriage.plan import (
    LinkParams,
    RooflineParams,
    allreduce_s,
    calibration_for,
    decode_step_time,
    get_gpu,
    load_model,
    params_for,
    prefill_time,
    ttft_itl,
)

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fit_costmodel.py"


def _fit_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_costmodel", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fit_costmodel"] = module
    spec.loader.exec_module(module)
    return module


def test_packaged_constants_reproduce_hopper_batch_one_and_saturation(
    shared_fixture: Callable[[str], Path],
) -> None:
    fit = _fit_script()
    points = [
        p
        for p in fit.load_points(shared_fixture("calibration/trtllm_0.9.0_static_batch.csv"))
        if p.gpu.generation == "hopper" and not p.spec.is_moe
    ]
    regimes = fit._regimes(points)
    for regime, bound_median, bound_max in (("batch 1", 0.10, 0.20), ("saturation", 0.10, 0.55)):
        for metric in ("TTFT", "ITL"):
            chosen = [points[i] for i in regimes[regime] if points[i].metric == metric]
            errors = [abs(fit.predict(p, params_for(p.gpu)) / p.measured_s - 1) for p in chosen]
            assert len(errors) >= 80
            assert statistics.median(errors) <= bound_median, (regime, metric)
            assert max(errors) <= bound_max, (regime, metric)


def test_held_out_nim_point_within_ten_percent() -> None:
    # Published (NIM, not in the fit): Llama-3.3-70B FP8, TP 2, H100-SXM, 5,000 in / 500 out.
    est = ttft_itl(
        load_model("llama-3.3-70b"), get_gpu("H100-SXM"), "fp8", 2, 5000, 500, kv_dtype="fp8"
    )
    assert est.ttft_s == pytest.approx(0.40677, rel=0.10)
    assert est.itl_s == pytest.approx(0.01858, rel=0.10)


def test_each_generation_has_its_constants_and_uncovered_ones_say_so() -> None:
    h100, a100, l40s, mi300x = (get_gpu(n) for n in ("H100-SXM", "A100-80GB", "L40S", "MI300X"))
    assert params_for(h100) != params_for(a100) != params_for(l40s)
    assert params_for(get_gpu("H200")) == params_for(h100)
    assert calibration_for(h100).covered and calibration_for(h100).num_points > 1000
    assert "published points" in calibration_for(h100).statement()
    uncovered = calibration_for(mi300x)
    assert not uncovered.covered and uncovered.num_points == 0
    assert "no published measurements cover cdna3" in uncovered.statement()
    assert params_for(mi300x) == params_for(h100)  # borrowed, and said


def test_allreduce_latency_grows_with_ranks_and_bandwidth_term_with_size() -> None:
    gpu = get_gpu("H100-SXM")
    p = RooflineParams(nvlink=LinkParams(10e-6, 5e-6, 0.5), pcie=LinkParams(30e-6, 0.0, 0.5))
    assert allreduce_s(gpu, 1, 1e6, p, "nvlink") == 0.0
    assert allreduce_s(gpu, 2, 0, p, "nvlink") == pytest.approx(10e-6)
    assert allreduce_s(gpu, 8, 0, p, "nvlink") == pytest.approx(20e-6)
    size = 64e6
    ring = 2 * 7 / 8 * size / (gpu.link_bw_bytes_per_s * 0.5)
    assert allreduce_s(gpu, 8, size, p, "nvlink") == pytest.approx(20e-6 + ring)
    assert allreduce_s(gpu, 8, size, p, "pcie") > allreduce_s(gpu, 8, size, p, "nvlink")


def test_fixed_costs_add_where_a_reader_expects_them() -> None:
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    bare = RooflineParams(step_overhead_s=0.0)
    fixed = RooflineParams(step_overhead_s=1e-3, layer_overhead_s=10e-6, request_overhead_s=5e-3)
    step = decode_step_time(spec, gpu, "bf16", 1, 100, params=fixed).total_s
    assert step - decode_step_time(spec, gpu, "bf16", 1, 100, params=bare).total_s == (
        pytest.approx(1e-3 + 32 * 10e-6)
    )
    a = ttft_itl(spec, gpu, "bf16", 1, 200, 10, params=fixed)
    assert a.ttft_s == pytest.approx(5e-3 + a.prefill.total_s)
    assert a.e2e_s == pytest.approx(a.ttft_s + 9 * a.itl_s)


def _gemm_compute_s(num_tokens: int, params: RooflineParams) -> float:
    """A prefill's compute roof less its attention (which the GEMM ramp does not touch)."""
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    cost = prefill_time(spec, gpu, "bf16", num_tokens, params=params)
    attention = cost.work.prefill_attention_flops / (
        gpu.bf16_flops_per_s * params.compute_efficiency
    )
    return cost.compute_s - attention


def test_gemm_ramp_slows_small_prefills_only() -> None:
    flat, ramp = RooflineParams(), RooflineParams(compute_half_tokens=100)
    assert _gemm_compute_s(100, ramp) == pytest.approx(2 * _gemm_compute_s(100, flat))
    assert _gemm_compute_s(10_000, ramp) == pytest.approx(1.01 * _gemm_compute_s(10_000, flat))


def test_batched_prefill_reads_weights_once() -> None:
    spec, gpu = load_model("llama-3.1-8b"), get_gpu("H100-SXM")
    one = prefill_time(spec, gpu, "bf16", 512)
    four = prefill_time(spec, gpu, "bf16", 512, num_seqs=4)
    assert four.flops == pytest.approx(4 * one.flops)
    kv = one.bytes - prefill_time(spec, gpu, "bf16", 1).bytes  # not exact: weights touched
    assert four.bytes < 4 * one.bytes and four.bytes > one.bytes + 2 * kv
