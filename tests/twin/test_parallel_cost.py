"""twin.costmodel, dcgm, eplb: expert and pipeline parallelism in the step cost and the
evidence the twin exposes (per-GPU DCGM activity, vLLM's EPLB balancedness gauges)."""

from __future__ import annotations

from typing import Any

import pytest

from infertriage.schemas import UserError
from infertriage.twin.capacity import make_hardware
from infertriage.twin.costmodel import BatchShape, CostModel, StepBreakdown, gpu_activity
from infertriage.twin.dcgm import DcgmExporter, GpuIdentity
from infertriage.twin.engine import GpuCounters
from infertriage.twin.eplb import eplb_metrics
from infertriage.twin.scenario_model import Scenario

DECODE = BatchShape((), 64, 64 * 1000, 64)
MIXED = BatchShape(((2048, 0), (1024, 0)), 32, 32 * 800, 32)


def cost(shape: BatchShape, **settings: Any) -> StepBreakdown:
    scenario = Scenario.model_validate(settings)
    return CostModel(make_hardware(scenario), scenario).step_cost(shape)


def moe(**ep: Any) -> dict[str, Any]:
    return {"model": "mixtral-8x7b", "tensor_parallel": 4, "expert_parallel": {"size": 4, **ep}}


def pp(size: int, **settings: Any) -> dict[str, Any]:
    return {"model": "llama-3.1-70b", "pipeline_parallel": {"size": size, **settings}}


@pytest.mark.parametrize("shape", [DECODE, MIXED])
def test_hot_experts_lengthen_the_step_and_an_even_router_costs_nothing(shape: BatchShape) -> None:
    plain = cost(shape, model="mixtral-8x7b", tensor_parallel=4)
    even = cost(shape, **moe())
    hot = cost(shape, **moe(hot_expert_skew=2.5))
    assert even.total_s == pytest.approx(plain.total_s)
    assert hot.total_s > 1.3 * even.total_s
    assert hot.compute_s > even.compute_s and hot.memory_s == pytest.approx(even.memory_s)


def test_expert_parallel_needs_a_moe_model_over_the_tensor_parallel_group() -> None:
    with pytest.raises(UserError, match="tensor_parallel"):
        make_hardware(Scenario.model_validate(moe() | {"tensor_parallel": 2}))
    with pytest.raises(UserError, match="mixture-of-experts"):
        make_hardware(
            Scenario.model_validate({"tensor_parallel": 2, "expert_parallel": {"size": 2}})
        )


def test_pipeline_stages_hold_their_share_of_weights_and_kv() -> None:
    one = make_hardware(Scenario.model_validate({"model": "llama-3.1-70b", "tensor_parallel": 4}))
    two = make_hardware(Scenario.model_validate(pp(2, micro_batches=2) | {"tensor_parallel": 2}))
    assert two.num_gpus == 4 and two.pipeline_parallel == 2
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu, rel=0.01)
    assert two.kv_bytes_per_token == pytest.approx(one.kv_bytes_per_token, rel=0.01)


@pytest.mark.parametrize("shape", [DECODE, MIXED])
def test_a_full_pipeline_keeps_every_stage_busy(shape: BatchShape) -> None:
    full = cost(shape, **pp(4))
    assert full.util_busy_s == pytest.approx(full.total_s, rel=0.02)
    assert full.total_s == pytest.approx(full.cpu_s + full.kernel_s + full.launch_gap_s)


@pytest.mark.parametrize(("micro", "busy"), [(1, 0.25), (2, 0.5), (4, 1.0)])
def test_too_few_micro_batches_leave_the_bubble_idle(micro: int, busy: float) -> None:
    step = cost(DECODE, **pp(4, micro_batches=micro))
    assert step.kernel_s / step.total_s == pytest.approx(busy, rel=0.05)


def test_one_request_fills_one_micro_batch_only() -> None:
    step = cost(BatchShape((), 1, 1000, 1), **pp(4))
    assert step.kernel_s / step.total_s == pytest.approx(0.25, rel=0.05)


def test_an_unbalanced_stage_sets_the_pace_and_the_others_wait() -> None:
    even = cost(DECODE, **pp(4))
    slow = cost(DECODE, **pp(4, stage_imbalance=2.0))
    assert slow.total_s == pytest.approx(2 * even.total_s, rel=0.02)
    scenario = Scenario.model_validate(pp(4, stage_imbalance=2.0) | {"tensor_parallel": 2})
    shares = gpu_activity(scenario)
    assert len(shares) == 8 and shares[-2:] == (1.0, 1.0)
    assert shares[0] == pytest.approx(1 / 3)  # (4 − 2) / 3 of the mean, over 2× the mean
    assert gpu_activity(Scenario.model_validate({"tensor_parallel": 2})) == (1.0, 1.0)


def _dcgm(scenario: Scenario) -> str:
    busy = GpuCounters(num_steps=1, step_s=1.0, util_busy_s=1e6, sm_active_s=1e6)
    identity = GpuIdentity(
        "NVIDIA H100", 8, 80 << 30, 60 << 30, 700.0, "nvlink", gpu_activity(scenario)
    )
    counters = iter([GpuCounters(), busy])
    return DcgmExporter(identity, lambda: next(counters)).render().decode()


def _field(text: str, name: str) -> list[float]:
    return [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name)]


def test_dcgm_reports_each_stage_gpu_its_own_activity() -> None:
    text = _dcgm(Scenario.model_validate(pp(4, stage_imbalance=2.0) | {"tensor_parallel": 2}))
    # the waiting stages spin in NCCL: busy to GPU_UTIL, their SMs at their own share
    assert _field(text, "DCGM_FI_DEV_GPU_UTIL{") == [100] * 8
    sm = _field(text, "DCGM_FI_PROF_SM_ACTIVE{")
    assert sm[-2:] == [1.0, 1.0]
    assert sm[:6] == pytest.approx([1 / 3 + 2 / 3 * 0.15] * 6)


def test_eplb_gauges_only_with_expert_parallelism_and_eplb() -> None:
    hot = eplb_metrics(Scenario.model_validate(moe(hot_expert_skew=2.5, eplb=True)), "m")
    assert 'vllm:eplb_balancedness_avg{engine="0",model_name="m"} 0.400000' in hot
    assert "vllm:eplb_balancedness_min{" in hot
    assert eplb_metrics(Scenario.model_validate(moe(hot_expert_skew=2.5)), "m") == ""
    assert eplb_metrics(Scenario(), "m") == ""
