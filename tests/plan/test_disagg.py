"""xPyD against colocated serving: directions and crossovers, not figures of the cost model."""

from __future__ import annotations

import math

import pytest

from infertriage.plan import PlanInputs, get_gpu, load_model
from infertriage.plan.disagg import make_disagg_plan
from infertriage.plan.memory import kv_bytes_per_token
from infertriage.plan.pdpools import KvLink, ServingSlo, kv_transfer_s, prefill_instance
from infertriage.plan.servestep import decode_s, max_utilisation, mixed_s, queue_wait_s
from infertriage.schemas import UserError

RDMA = KvLink(bandwidth_bytes_per_s=50e9, latency_s=0.002)


def _inputs(input_len: int, output_len: int) -> PlanInputs:
    return PlanInputs(
        model=load_model("llama-3.1-8b"),
        gpu=get_gpu("H100-SXM"),
        max_model_len=8192,
        concurrency=1,
        input_len=input_len,
        output_len=output_len,
    )


def test_short_prompts_at_a_low_rate_stay_colocated() -> None:
    plan = make_disagg_plan(_inputs(128, 128), 0.5, ServingSlo(0.2, 0.05), RDMA)
    assert plan.winner == "colocated"
    assert plan.colocated_gpus == 1
    assert plan.gpus is not None and plan.gpus >= 2  # one of each pool at the least
    assert "KV transfer" in plan.reason


def test_long_prompts_at_a_high_rate_with_a_tight_itl_disaggregate() -> None:
    plan = make_disagg_plan(_inputs(4000, 500), 60.0, ServingSlo(1.0, 0.012), RDMA)
    assert plan.winner == "disaggregated"
    assert plan.gpus is not None and plan.colocated_gpus is not None
    assert plan.gpus < plan.colocated_gpus
    assert plan.colocated is not None and "interference" in plan.colocated.limited_by
    assert "prefill chunks" in plan.reason


def test_each_pool_holds_its_slo_and_the_rate_with_headroom() -> None:
    slo = ServingSlo(1.0, 0.02)
    plan = make_disagg_plan(_inputs(2000, 200), 30.0, slo, RDMA)
    assert plan.prefill is not None and plan.decode is not None
    assert plan.prefill.ttft_s <= slo.ttft_s + 1e-9
    assert plan.decode.itl_s <= slo.itl_s
    for pool in (plan.prefill_pool, plan.decode_pool):
        assert pool is not None
        assert pool.instances * pool.capacity_req_s * (1 - plan.headroom) >= plan.rate - 1e-9


def test_more_rate_never_needs_fewer_gpus() -> None:
    slo = ServingSlo(1.0, 0.02)
    low = make_disagg_plan(_inputs(2000, 200), 10.0, slo, RDMA)
    high = make_disagg_plan(_inputs(2000, 200), 40.0, slo, RDMA)
    assert low.gpus is not None and high.gpus is not None
    assert high.gpus >= low.gpus
    assert low.colocated_gpus is not None and high.colocated_gpus is not None
    assert high.colocated_gpus >= low.colocated_gpus


def test_a_slow_link_bounds_the_prefill_instance() -> None:
    inputs = _inputs(4000, 200)
    slow = KvLink(bandwidth_bytes_per_s=1e9, latency_s=0.002)  # a 10 GbE-class link
    assert kv_transfer_s(inputs, slow) > kv_transfer_s(inputs, RDMA)
    fast_one = prefill_instance(inputs, ServingSlo(2.0, 0.05), RDMA, 0.01)
    slow_one = prefill_instance(inputs, ServingSlo(2.0, 0.05), slow, 0.01)
    assert fast_one is not None and slow_one is not None
    assert slow_one.limited_by == "KV link"
    # the link carries each rank's shard: bandwidth / (prompt · KV bytes per token per GPU)
    per_prompt = 4000 * kv_bytes_per_token(inputs.model, "bf16", 1)
    assert slow_one.capacity_req_s == pytest.approx(1e9 / per_prompt)
    assert slow_one.capacity_req_s < fast_one.capacity_req_s


def test_a_mixed_step_is_slower_than_its_decode_step() -> None:
    inputs = _inputs(2000, 200)
    assert mixed_s(inputs, 32, 512) > decode_s(inputs, 32)
    assert mixed_s(inputs, 32, 2000) > mixed_s(inputs, 32, 512)


def test_queue_wait_at_a_percentile() -> None:
    # M/M/1: s / (1 − u) · ln(u / (1 − q)); at u = 0.5, s = 1, q = 0.95: 2 · ln 10
    assert queue_wait_s(0.5, 1.0, 0.95) == pytest.approx(2 * math.log(10))
    assert queue_wait_s(0.04, 1.0, 0.95) == 0.0  # 95 % of arrivals find the server free
    assert queue_wait_s(1.0, 1.0, 0.95) == math.inf
    assert max_utilisation(1.0, 2 * math.log(10), 0.95) == pytest.approx(0.5, abs=1e-6)


def test_lengths_are_required() -> None:
    with pytest.raises(UserError, match="--input-len"):
        make_disagg_plan(_inputs(128, 128).replace(input_len=None), 1.0, ServingSlo(1, 1), RDMA)
