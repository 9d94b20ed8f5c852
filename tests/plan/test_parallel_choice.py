"""DP vs TP vs EP: which layouts are offered, which is picked, and the reason's direction."""

from __future__ import annotations

from infertriage.plan import PlanInputs, get_gpu, load_model
from infertriage.plan.expert import all_to_all_s, ep_decode_s, ep_memory
from infertriage.plan.memory import weight_bytes
from infertriage.plan.parallel_choice import choose_layout
from infertriage.plan.pdpools import ServingSlo

SLO = ServingSlo(ttft_s=0.5, itl_s=0.05)


def _inputs(model: str, *, tp: int = 1, dtype: str = "bf16", gpu: str = "H100-SXM") -> PlanInputs:
    return PlanInputs(
        model=load_model(model),
        gpu=get_gpu(gpu),
        max_model_len=8192,
        concurrency=16,
        input_len=1000,
        output_len=300,
        tp=tp,
        dtype=dtype,
    )


def test_a_model_that_fits_one_gpu_runs_one_replica_per_gpu() -> None:
    choice = choose_layout(_inputs("llama-3.1-8b"), 8, SLO)
    assert choice.pick is not None
    assert (choice.pick.tp, choice.pick.dp) == (1, 8)
    wide = next(o for o in choice.options if o.tp == 8)
    assert choice.pick.tok_s_per_gpu > wide.tok_s_per_gpu
    assert "TP 8 × 1 replica" in choice.reason and "does not need" in choice.reason


def test_a_model_that_does_not_fit_one_gpu_never_gets_tp_1() -> None:
    choice = choose_layout(_inputs("llama-3.1-70b", tp=4), 8, SLO)
    assert all(o.tp > 1 for o in choice.options)
    assert choice.pick is not None and choice.pick.tp > 1
    assert choice.pick.dp * choice.pick.tp == 8


def test_a_rate_sets_each_replicas_batch_by_littles_law() -> None:
    low = choose_layout(_inputs("llama-3.1-8b"), 8, SLO, rate=1.0)
    high = choose_layout(_inputs("llama-3.1-8b"), 8, SLO, rate=40.0)
    for a, b in zip(low.options, high.options, strict=True):
        assert b.batch >= a.batch
    assert "req/s" in high.load


def test_an_slo_no_layout_meets_says_so() -> None:
    choice = choose_layout(_inputs("llama-3.1-70b", tp=4), 8, ServingSlo(0.5, 0.001))
    assert choice.pick is not None  # the closest
    assert not any(o.meets_slo for o in choice.options)
    assert "no layout meets" in choice.reason


def test_moe_offers_expert_parallelism_with_dp_attention() -> None:
    choice = choose_layout(_inputs("qwen3-30b-a3b"), 8, SLO)
    ep = [o for o in choice.options if o.ep == 8]
    assert len(ep) == 1 and ep[0].dp == 8
    assert choice.pick is not None and choice.pick.ep == 8
    assert "not replicated" in choice.reason or "none of it replicated" in choice.reason


def test_dense_models_get_no_expert_option() -> None:
    choice = choose_layout(_inputs("llama-3.1-8b"), 8, SLO)
    assert all(o.ep == 1 for o in choice.options)


def test_expert_parallelism_shards_only_the_experts() -> None:
    inputs = _inputs("mixtral-8x7b")
    one, eight = ep_memory(inputs, 1), ep_memory(inputs, 8)
    assert one.weights == weight_bytes(inputs.model, "bf16")
    assert eight.weights < one.weights
    assert eight.weights > one.weights / 8  # attention and dense parts stay whole
    assert eight.kv_tokens > one.kv_tokens  # memory freed goes to the KV cache


def test_the_all_to_all_grows_with_the_batch_and_vanishes_on_one_rank() -> None:
    inputs = _inputs("mixtral-8x7b")
    assert all_to_all_s(inputs, 1, 64) == 0.0
    assert all_to_all_s(inputs, 8, 256) > all_to_all_s(inputs, 8, 16) > 0
    assert ep_decode_s(inputs, 8, 64) > ep_decode_s(inputs, 8, 1)


def test_a_model_beyond_one_node_is_offered_tp_times_pp() -> None:
    choice = choose_layout(_inputs("llama-3.1-405b", tp=8).replace(pp=2), 16, SLO)
    assert [(o.tp, o.pp, o.dp) for o in choice.options] == [(8, 2, 1)]
    assert choice.pick is not None and choice.pick.pp == 2


def test_when_none_meets_the_slos_the_pick_serves_the_most_not_the_lowest_itl() -> None:
    # 70B at 20 req/s of 8,000-token prompts: every layout is short of KV cache; the smallest TP
    # runs the smallest batch at the lowest ITL, which is not the layout that serves the most
    inputs = _inputs("llama-3.1-70b", tp=4).replace(input_len=8000, concurrency=64)
    choice = choose_layout(inputs, 8, ServingSlo(2.0, 0.03), rate=20.0)
    assert not any(o.meets_slo for o in choice.options)
    assert choice.pick is not None
    assert choice.pick.tok_s_per_gpu == max(o.tok_s_per_gpu for o in choice.options)
    assert "serves the most" in choice.reason
