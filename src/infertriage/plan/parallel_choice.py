"""plan, level 1: data vs tensor vs expert parallelism for a model on N GPUs, with the reason.

Takes `PlanInputs` (model, GPU, lengths, the deployed TP and the concurrency per replica),
the GPU count, the SLOs (`ServingSlo`) and optionally a rate; gives a `LayoutChoice`: each
layout that fits memory — TP `t` × `N/t` replicas (DP), TP inside one node; TP × PP when
no node holds the model (`pipeline.pipeline_stages`); and for a mixture-of-experts model
EP `N` with data-parallel attention, across nodes too — with its batch per replica
at the load, its ITL and TTFT there, and its capacity within the SLOs in output tokens/s
per GPU; the pick and one sentence why. The load is the rate when given (each replica's
batch by Little's law), else the deployed layout's: `concurrency` per replica of `--tp`,
split evenly over each layout's replicas. The pick is the layout with the most tokens/s per
GPU among those that meet the SLOs at the load; when none does, the one with the lowest ITL.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from infertriage.plan.advice import fits_one_request, tp_candidates
from infertriage.plan.capacity import PlanInputs, make_capacity_plan
from infertriage.plan.expert import ep_decode_s, ep_memory
from infertriage.plan.pdpools import ServingSlo
from infertriage.plan.pipeline import pipeline_stages
from infertriage.plan.servestep import largest_batch, prefill_s
from infertriage.plan.traffic import replica_capacity
from infertriage.schemas.errors import UserError
from infertriage.schemas.units import format_seconds as _ms

__all__ = ["LayoutChoice", "LayoutOption", "choose_layout"]

_LITTLE_ROUNDS = 30


@dataclass(frozen=True, slots=True)
class LayoutOption:
    name: str  # "TP 2 × 4 replicas", "EP 8 with DP attention"
    tp: int
    dp: int  # replicas (EP: the attention's data-parallel ranks)
    pp: int  # pipeline stages per replica
    ep: int  # 1: experts sliced by TP (or none)
    kv_tokens_per_gpu: int  # KV cache each GPU holds, in tokens of the whole model
    batch: int  # sequences per replica at the load
    itl_s: float  # at the load
    ttft_s: float  # a request alone plus one decode step it waits for
    tok_s_per_gpu: float  # output tokens/s per GPU at the largest batch within the SLOs
    meets_slo: bool  # at the load: ITL, TTFT and the KV cache
    fits_load: bool  # the load's sequences fit the KV cache with the headroom kept


@dataclass(frozen=True, slots=True)
class LayoutChoice:
    num_gpus: int
    load: str  # what each layout serves, in words
    slo: ServingSlo
    options: tuple[LayoutOption, ...]
    pick: LayoutOption | None
    reason: str


def _little_batch(rate_per_replica: float, output_len: int, step_at: Callable[[int], float]) -> int:
    """A replica's batch at `rate_per_replica`: `B = λ · (output + 1) · ITL(B)` (the prefill
    counted as one more step): the fixed point, from one sequence up."""
    batch = 1.0
    for _ in range(_LITTLE_ROUNDS):
        settled = rate_per_replica * (output_len + 1) * step_at(max(1, math.ceil(batch)))
        if abs(settled - batch) < 0.01:  # a hundredth of a sequence
            break
        batch = settled
    return max(1, math.ceil(batch))


@dataclass(frozen=True, slots=True)
class _Load:
    rate: float | None  # requests/s over all GPUs
    in_flight: int  # requests in flight over all GPUs, when no rate


def _batch(load: _Load, replicas: int, output_len: int, step_at: Callable[[int], float]) -> int:
    if load.rate is not None:
        return _little_batch(load.rate / replicas, output_len, step_at)
    return max(1, -(-load.in_flight // replicas))


def _tp_option(
    inputs: PlanInputs, tp: int, num_gpus: int, load: _Load, slo: ServingSlo, *, pp: int = 1
) -> LayoutOption:
    """TP `tp` (× PP `pp`) × `num_gpus / (tp · pp)` replicas: each replica a plain instance."""
    dp = num_gpus // (tp * pp)
    layout = inputs.replace(tp=tp, pp=pp, num_gpus=None)
    output = inputs.output_len or 1

    def itl_at(batch: int) -> float:
        return make_capacity_plan(layout.replace(concurrency=batch)).roofline.itl_s

    batch = _batch(load, dp, output, itl_at)
    plan = make_capacity_plan(layout.replace(concurrency=batch))
    ttft = plan.roofline.ttft_s + plan.roofline.itl_s
    try:
        capacity = replica_capacity(layout, slo.ttft_s, slo.itl_s)
        per_gpu = capacity.requests_per_s * output / (tp * pp)
    except UserError:
        per_gpu = 0.0
    fits = plan.fits_with_headroom
    return LayoutOption(
        name=f"TP {tp}{f' PP {pp}' if pp > 1 else ''} × {dp} replica{'s' if dp > 1 else ''}",
        tp=tp,
        dp=dp,
        pp=pp,
        ep=1,
        kv_tokens_per_gpu=plan.kv.num_tokens // (tp * pp),  # the replica's tokens, spread
        batch=batch,
        itl_s=plan.roofline.itl_s,
        ttft_s=ttft,
        tok_s_per_gpu=per_gpu,
        meets_slo=fits and plan.roofline.itl_s <= slo.itl_s and ttft <= slo.ttft_s,
        fits_load=fits,
    )


def _ep_option(
    inputs: PlanInputs, num_gpus: int, load: _Load, slo: ServingSlo
) -> LayoutOption | None:
    """EP `num_gpus` with DP attention: every GPU an attention rank of its own sequences."""
    memory = ep_memory(inputs, num_gpus)
    if memory.max_batch < 1:
        return None
    output = inputs.output_len or 1

    def step_at(batch: int) -> float:
        return ep_decode_s(inputs, num_gpus, batch)

    batch = _batch(load, num_gpus, output, step_at)
    itl = step_at(batch)
    prefill = inputs.cost_params.request_overhead_s + prefill_s(inputs.replace(tp=1, pp=1))
    ttft = prefill + itl
    best = largest_batch(step_at, slo.itl_s, memory.max_batch)
    per_gpu = best / step_at(best) if best and prefill + step_at(best) <= slo.ttft_s else 0.0
    fits = batch <= memory.max_batch
    return LayoutOption(
        name=f"EP {num_gpus} with DP attention",
        tp=1,
        dp=num_gpus,
        pp=1,
        ep=num_gpus,
        kv_tokens_per_gpu=memory.kv_tokens,
        batch=batch,
        itl_s=itl,
        ttft_s=ttft,
        tok_s_per_gpu=per_gpu,
        meets_slo=fits and itl <= slo.itl_s and ttft <= slo.ttft_s,
        fits_load=fits,
    )


def _why(
    pick: LayoutOption, options: list[LayoutOption], slo: ServingSlo, inputs: PlanInputs
) -> str:
    """One sentence: what the pick does better than the widest alternative, and what it gives up."""
    others = [o for o in options if o is not pick]
    if pick.ep > 1:
        head = (
            f"{pick.name}: the routed experts shard {pick.ep} ways and each GPU keeps the KV "
            f"cache of its own sequences only ({pick.kv_tokens_per_gpu:,} tokens per GPU), "
            "none of it replicated"
        )
    elif pick.tp == 1:
        head = f"{pick.name}: the model fits one GPU, so no all-reduce is paid"
    elif pick.pp > 1:
        head = (
            f"{pick.name}: no node holds the model, so TP {pick.tp} inside each node and PP "
            f"{pick.pp} across nodes"
        )
    else:
        head = f"{pick.name}: the model fits in {pick.tp} GPUs"
    if not others:
        return head + "; it is the only layout that fits."
    rival = max(others, key=lambda o: (o.tp * o.ep, o.tok_s_per_gpu))
    if rival.tok_s_per_gpu > 0 and pick.tok_s_per_gpu > 0:
        ratio = pick.tok_s_per_gpu / rival.tok_s_per_gpu
        gain = f"; it serves {ratio:.1f}× the tokens/s per GPU of {rival.name} within the SLOs"
    elif rival.tok_s_per_gpu <= 0:
        gain = f"; {rival.name} meets no batch within the SLOs"
    else:
        gain = ""
    if rival.itl_s < pick.itl_s:
        gain += (
            f"; {rival.name} only lowers ITL from {_ms(pick.itl_s)} to {_ms(rival.itl_s)}, "
            f"which the ITL SLO ({_ms(slo.itl_s)}) does not need"
        )
    return head + gain + "."


def choose_layout(
    inputs: PlanInputs, num_gpus: int, slo: ServingSlo, rate: float | None = None
) -> LayoutChoice:
    """Every layout of `num_gpus` GPUs inside one node that fits, and the pick (module doc)."""
    if num_gpus < 1:
        raise UserError(f"--num-gpus must be at least 1, not {num_gpus}.")
    deployed = max(1, num_gpus // inputs.gpus_per_instance)
    load = _Load(rate, inputs.concurrency * deployed)
    words = (
        f"{rate:g} req/s"
        if rate is not None
        else f"{load.in_flight} requests in flight ({inputs.concurrency} per replica of "
        f"TP {inputs.tp} PP {inputs.pp})"
    )
    in_node = min(num_gpus, inputs.gpus_per_node)
    options: list[LayoutOption] = []
    for tp in tp_candidates(inputs, in_node):
        if num_gpus % tp or not fits_one_request(inputs.replace(tp=tp, pp=1)):
            continue
        options.append(_tp_option(inputs, tp, num_gpus, load, slo))
    stages = pipeline_stages(inputs)
    if stages is not None and num_gpus % (stages[0] * stages[1]) == 0:
        options.append(_tp_option(inputs, stages[0], num_gpus, load, slo, pp=stages[1]))
    if inputs.model.is_moe and num_gpus > 1:  # across nodes too: its all-to-all crosses them
        ep = _ep_option(inputs, num_gpus, load, slo)
        if ep is not None:
            options.append(ep)
    if not options:
        return LayoutChoice(
            num_gpus,
            words,
            slo,
            (),
            None,
            (
                f"no layout of {num_gpus} GPU(s) fits {inputs.model.name} with one "
                f"{inputs.max_model_len}-token request."
            ),
        )
    meeting = [o for o in options if o.meets_slo]
    if meeting:
        pick = max(meeting, key=lambda o: (o.tok_s_per_gpu, -o.tp))
        reason = _why(pick, options, slo, inputs)
    else:
        # the layout that serves most of the load within the SLOs, not the lowest ITL: a layout
        # whose KV cache holds only a few of the requests runs a small batch at a low ITL
        pick = max(options, key=lambda o: (o.fits_load, o.tok_s_per_gpu, -o.itl_s))
        reason = (
            f"no layout meets the SLOs at {words}; {pick.name} serves the most of it "
            f"({pick.tok_s_per_gpu:,.0f} tokens/s per GPU within the SLOs, ITL "
            f"{_ms(pick.itl_s)}, TTFT {_ms(pick.ttft_s)}): add GPUs or loosen --slo."
        )
    return LayoutChoice(num_gpus, words, slo, tuple(options), pick, reason)
