"""Pipeline depth and micro-batches; what a CPU KV-offload tier buys. Directions, and the
bubble formula by hand."""

from __future__ import annotations

import dataclasses

import pytest

from infertriage.plan import PlanInputs, get_gpu, load_model, make_capacity_plan
from infertriage.plan.capacity import interconnect_of, micro_batches_for
from infertriage.plan.offload import make_offload_plan
from infertriage.plan.pipeline import make_pipeline_plan
from infertriage.schemas import UserError
from infertriage.schemas.units import GIB


def _inputs(model: str, input_len: int = 2000, **changes: object) -> PlanInputs:
    base = PlanInputs(
        model=load_model(model),
        gpu=get_gpu("H100-SXM"),
        max_model_len=8192,
        concurrency=16,
        input_len=input_len,
        output_len=300,
    )
    return base.replace(**changes)


def test_a_model_that_fits_one_node_needs_no_pipeline() -> None:
    assert make_pipeline_plan(_inputs("llama-3.1-70b")) is None
    assert make_pipeline_plan(_inputs("llama-3.1-8b")) is None


def test_a_model_beyond_one_node_gets_stages_of_a_whole_node() -> None:
    plan = make_pipeline_plan(_inputs("llama-3.1-405b"))
    assert plan is not None
    assert plan.tp == 8 and plan.pp >= 2
    # the prompt's stages run one after another: slower than one NVLink domain of all GPUs,
    # faster than a TP whose all-reduces cross nodes
    assert plan.ttft_one_domain_s < plan.ttft_s < plan.ttft_wide_tp_s
    assert plan.hops_s > 0


def test_the_bubble_falls_with_micro_batches() -> None:
    plan = make_pipeline_plan(_inputs("llama-3.1-405b"))
    assert plan is not None
    bubbles = [bubble for _, bubble in plan.bubbles]
    assert bubbles == sorted(bubbles, reverse=True)
    # (p − 1) / (m + p − 1) by hand: p = 2, m = 2 → 1/3; m = 9 → 1/10
    assert micro_batches_for(2, 0.10) == 9
    assert micro_batches_for(4, 0.10) == 27
    assert micro_batches_for(1, 0.10) == 1
    assert dict(plan.bubbles)[plan.micro_batches] <= plan.target_bubble + 1e-12


def test_all_reduces_stay_on_nvlink_while_the_tp_group_fits_a_node() -> None:
    inputs = _inputs("llama-3.1-405b")
    assert interconnect_of(inputs.replace(tp=8, pp=2)) == "nvlink"  # PP crosses nodes, TP not
    assert interconnect_of(inputs.replace(tp=16, pp=1)) == "pcie"


def test_a_longer_prefix_saves_more_per_hit() -> None:
    plan = make_capacity_plan(_inputs("llama-3.1-8b", input_len=4000))
    short = make_offload_plan(plan, 100 * GIB, 0.2)
    long = make_offload_plan(plan, 100 * GIB, 0.9)
    assert long.saved_s > short.saved_s > 0
    assert long.prefix_tokens > short.prefix_tokens
    assert long.pays and short.pays


def test_the_tier_adds_tokens_in_proportion_to_its_size() -> None:
    plan = make_capacity_plan(_inputs("llama-3.1-8b", input_len=4000))
    small = make_offload_plan(plan, 10 * GIB, 0.5)
    big = make_offload_plan(plan, 100 * GIB, 0.5)
    assert big.tier_tokens == pytest.approx(10 * small.tier_tokens, rel=1e-3)
    # 10 GiB of bf16 KV at 131,072 B per token (Llama-3.1-8B: 32 layers × 8 heads × 128 × 2 × 2)
    assert small.tier_tokens == 10 * GIB // (32 * 8 * 128 * 2 * 2)


def test_a_slow_host_link_does_not_pay() -> None:
    inputs = _inputs("llama-3.1-8b", input_len=4000)
    slow = inputs.replace(gpu=dataclasses.replace(inputs.gpu, pcie_bw_bytes_per_s=1e8))
    plan = make_offload_plan(make_capacity_plan(slow), 100 * GIB, 0.8, rate=2.0)
    assert not plan.pays
    assert plan.max_saved_s_per_s is None
    assert "does not pay" in plan.verdict


def test_no_reuse_buys_nothing() -> None:
    plan = make_offload_plan(make_capacity_plan(_inputs("llama-3.1-8b")), 10 * GIB, 0.0)
    assert not plan.pays and plan.prefix_tokens == 0
    assert "no prefix" in plan.verdict


def test_prefix_reuse_is_a_fraction() -> None:
    with pytest.raises(UserError, match="--prefix-reuse"):
        make_offload_plan(make_capacity_plan(_inputs("llama-3.1-8b")), 10 * GIB, 1.5)
