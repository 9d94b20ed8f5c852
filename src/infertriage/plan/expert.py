"""plan, level 1: expert parallelism with data-parallel attention, on the roofline.

Takes `PlanInputs` of a mixture-of-experts model and `ep` ranks; gives one rank's memory
(`ep_memory`: the attention and dense weights whole, the routed experts one `ep`-th, its
own sequences' KV cache at full heads, none replicated) and one rank's decode step
(`ep_decode_s`): its attention over its own `batch` sequences, and the routed experts it
holds fed by every rank's tokens (`ep · batch`, balanced), with an all-to-all that sends
each token to its experts and back twice per MoE layer (over the GPU's link inside a node,
PCIe-class links across nodes). The step is the cost model's
(`plan.roofline.step_cost`) on that work: the GEMMs at TP 1 with the expert weights the
rank reads, its attention, and the all-to-all at the interconnect's fitted latency and
efficiency. Routing is taken as uniform; hot experts (a skewed router) are not modelled.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from infertriage.plan.capacity import (
    CUDA_GRAPH_POOL_BYTES,
    PlanInputs,
    activation_peak_bytes,
    interconnect_of,
    runtime_bytes,
)
from infertriage.plan.memory import (
    kv_bytes_per_token,
    linear_bytes_per_param,
    param_breakdown,
    weight_bytes,
)
from infertriage.plan.roofline import decode_step_time, moe_experts_touched, step_cost
from infertriage.plan.servestep import decode_context

__all__ = ["EpMemory", "all_to_all_s", "ep_decode_s", "ep_memory"]


@dataclass(frozen=True, slots=True)
class EpMemory:
    """One rank of EP with DP attention, in bytes; `max_batch` requests fit with headroom."""

    weights: int
    non_kv: int
    kv_bytes_per_token: int  # full heads: the rank's own sequences only
    kv_tokens: int  # the rank's KV cache with the headroom kept, in tokens
    max_batch: int


def _expert_bytes_per_expert(inputs: PlanInputs) -> float:
    """One routed expert across all MoE layers, in the weights' dtype."""
    parts = param_breakdown(inputs.model)
    return parts.expert * parts.num_moe_layers * linear_bytes_per_param(inputs.dtype)


def ep_memory(inputs: PlanInputs, ep: int) -> EpMemory:
    """One rank's memory: the model less `(ep − 1)/ep` of its routed experts."""
    parts = param_breakdown(inputs.model)
    experts = parts.num_experts * _expert_bytes_per_expert(inputs)
    weights = math.ceil(weight_bytes(inputs.model, inputs.dtype) - experts * (ep - 1) / ep)
    activation = activation_peak_bytes(
        inputs.model, 1, inputs.max_num_batched_tokens, inputs.max_num_seqs
    )
    graphs = CUDA_GRAPH_POOL_BYTES if inputs.cuda_graphs else 0
    non_kv = weights + activation + graphs + runtime_bytes(ep)
    total = inputs.gpu.memory_bytes
    budget = min(total * inputs.gpu_memory_utilization, total * (1 - inputs.headroom)) - non_kv
    per_token = kv_bytes_per_token(inputs.model, inputs.kv_dtype, 1)
    blocks = -(-inputs.tokens_per_request // inputs.block_size)
    per_request = blocks * inputs.block_size * per_token
    fit = max(0, math.floor(budget / per_request)) if budget > 0 else 0
    tokens = max(0, math.floor(budget / per_token)) if budget > 0 else 0
    return EpMemory(weights, non_kv, per_token, tokens, min(fit, inputs.max_num_seqs))


def all_to_all_s(inputs: PlanInputs, ep: int, batch: int) -> float:
    """A decode step's all-to-alls on one rank: dispatch and combine per MoE layer, each
    sending the rank's `batch · top_k` token copies, `(ep − 1)/ep` of them to other ranks."""
    if ep <= 1:
        return 0.0
    parts = param_breakdown(inputs.model)
    params = inputs.cost_params
    kind = interconnect_of(inputs.replace(tp=ep, pp=1))  # PCIe-class beyond one node
    link = params.link(kind)
    bandwidth = inputs.gpu.pcie_bw_bytes_per_s if kind == "pcie" else inputs.gpu.link_bw_bytes_per_s
    message = batch * parts.num_experts_per_tok * inputs.model.hidden_size
    message_bytes = message * params.activation_bytes * (ep - 1) / ep
    one = link.latency_s(ep) + message_bytes / (bandwidth * link.bw_efficiency)
    return 2 * parts.num_moe_layers * one


def ep_decode_s(inputs: PlanInputs, ep: int, batch: int) -> float:
    """One rank's decode step with `batch` sequences of its own and `ep` ranks in all."""
    batch = max(1, batch)
    parts = param_breakdown(inputs.model)
    alone = decode_step_time(
        inputs.model,
        inputs.gpu,
        inputs.dtype,
        batch,
        decode_context(inputs),
        tp=1,
        kv_dtype=inputs.kv_dtype,
        params=inputs.cost_params,
        interconnect=interconnect_of(inputs),
    ).work
    per_expert = _expert_bytes_per_expert(inputs)
    own = moe_experts_touched(parts.num_experts, parts.num_experts_per_tok, batch)
    # the experts this rank holds that the whole step's tokens reach
    held = moe_experts_touched(parts.num_experts, parts.num_experts_per_tok, ep * batch) / ep
    work = dataclasses.replace(
        alone,
        weight_bytes=alone.weight_bytes - own * per_expert + held * per_expert,
        expert_tokens=batch * parts.num_experts_per_tok / max(held, 1e-9),
        comm_s=all_to_all_s(inputs, ep, batch),
    )
    return step_cost(work, inputs.gpu, inputs.dtype, inputs.cost_params).total_s
