"""plan, level 1: a deployment's memory, KV-cache capacity, headroom and roofline, per GPU.

Takes `PlanInputs` (model, GPU, parallelism, lengths, concurrency, engine
knobs); gives a `CapacityPlan`: the memory of one GPU part by part, vLLM's own
KV block count, the peak KV demand of the workload and whether it fits while
keeping the headroom free, the largest concurrency that fits, a per-request
length cap, the knob that relieves KV pressure most, and the roofline's step
times and throughput ceilings. Pure functions; no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from infertriage.plan.costparams import RooflineParams, params_for
from infertriage.plan.gpus import GpuSpec
from infertriage.plan.kvcache import KvCachePlan, vllm_kv_cache
from infertriage.plan.memory import kv_bytes_per_token, normalize_dtype, weight_bytes
from infertriage.plan.models import ModelSpec
from infertriage.plan.roofline import StepCost, decode_step_time, prefill_time
from infertriage.schemas.errors import UserError
from infertriage.schemas.units import GIB

__all__ = [
    "CUDA_GRAPH_POOL_BYTES",
    "DEFAULT_BUBBLE_TARGET",
    "CapacityPlan",
    "KnobEffect",
    "MemoryBreakdown",
    "PlanInputs",
    "RooflineSummary",
    "activation_peak_bytes",
    "interconnect_of",
    "make_capacity_plan",
    "micro_batches_for",
    "pp_bubble",
    "pp_hop_s",
    "runtime_bytes",
]

# vLLM logs "Graph capturing finished ..., took 0.3-0.6 GiB" for 7-70B models with the default
# capture sizes; the CUDA context and NCCL buffers (non-torch memory) take about 0.35 GiB alone
# and 0.25 GiB more per GPU with tensor parallelism.
CUDA_GRAPH_POOL_BYTES = int(0.5 * GIB)
RUNTIME_BYTES = int(0.35 * GIB)
NCCL_BYTES = int(0.25 * GIB)
LOGITS_BYTES_PER_VALUE = 4  # the sampler's fp32 logits
DEFAULT_BUBBLE_TARGET = 0.10  # the share of each pipeline stage's time a plan lets it idle


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """Everything a plan depends on. Lengths in tokens; memory fraction 0..1."""

    model: ModelSpec
    gpu: GpuSpec
    max_model_len: int
    concurrency: int
    input_len: int | None = None
    output_len: int | None = None
    num_gpus: int | None = None  # defaults to tp × pp
    gpus_per_node: int = 8
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    block_size: int = 16
    cuda_graphs: bool = True
    headroom: float = 0.10
    interconnect: str = "auto"
    roofline: RooflineParams | None = None  # None: the GPU generation's fitted constants

    @property
    def cost_params(self) -> RooflineParams:
        return params_for(self.gpu) if self.roofline is None else self.roofline

    def replace(self, **changes: object) -> PlanInputs:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp

    @property
    def tokens_per_request(self) -> int:
        """Tokens a request holds at its peak: prompt + output, or `max_model_len` if unknown."""
        if self.input_len is not None and self.output_len is not None:
            return min(self.max_model_len, self.input_len + self.output_len)
        return self.max_model_len


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """One GPU's memory, in bytes. `kv_cache` is what vLLM allocates from what is left."""

    total: int
    weights: int
    activation_peak: int
    cuda_graphs: int
    runtime: int
    kv_cache: int

    @property
    def non_kv(self) -> int:
        return self.weights + self.activation_peak + self.cuda_graphs + self.runtime


@dataclass(frozen=True, slots=True)
class KnobEffect:
    """What one change does to the largest concurrency that fits."""

    knob: str
    value: str
    max_concurrency: int
    note: str


@dataclass(frozen=True, slots=True)
class RooflineSummary:
    prefill: StepCost  # the whole prompt of one request
    decode: StepCost  # one step at the planned batch and mean decode context
    ttft_s: float  # prefill alone, one user, no queueing
    itl_s: float  # at the planned batch (p2p hops of pipeline parallelism included)
    batch_size: int  # the concurrency, capped by max_num_seqs and by the KV cache
    throughput_tok_s: float  # output tokens per second of one instance at `batch_size`
    kv_bound_batch: int  # the batch the KV cache allows
    kv_bound_throughput_tok_s: float
    pp_bubble: float  # fraction of a pipeline's time its stages idle


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    inputs: PlanInputs
    memory: MemoryBreakdown
    kv: KvCachePlan
    kv_bytes_per_token: int  # per GPU, all its layers
    peak_kv_demand_bytes: int  # per GPU, the whole concurrency at its peak length
    fits: bool  # the demand fits in the cache vLLM allocates
    fits_with_headroom: bool  # ... and ≥ `headroom` of the GPU stays free
    free_fraction: float  # of the GPU at peak demand
    max_concurrency: int  # requests of `tokens_per_request` that fit with the headroom kept
    vllm_max_concurrency: float  # vLLM's log line: KV tokens / max_model_len
    length_cap: int  # longest request that still leaves room for the others
    knobs: tuple[KnobEffect, ...]
    roofline: RooflineSummary


def interconnect_of(inputs: PlanInputs) -> str:
    """The link an instance's all-reduces run over: the GPU's own while its TP group fits one
    node (pipeline stages across nodes only send hidden states, `pp_hop_s`), PCIe beyond."""
    if inputs.interconnect != "auto":
        return inputs.interconnect
    return inputs.gpu.link if inputs.tp <= inputs.gpus_per_node else "pcie"


def activation_peak_bytes(
    spec: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int
) -> int:
    """vLLM's profile run, per GPU: one forward pass of `max_num_batched_tokens` plus the sampler.

    Hidden states, QKV and the MLP's gate/up projections of one layer are live at once
    (2-byte activations); the sampler holds fp32 logits for `max_num_seqs` rows. Used by
    `plan` and by the twin, which sizes its KV cache with it.
    """
    inter = spec.moe_intermediate_size * max(1, spec.num_experts_per_tok) if spec.is_moe else 0
    inter = max(inter, spec.intermediate_size)
    per_token = 4 * spec.hidden_size + 3 * inter // tp
    hidden = max_num_batched_tokens * per_token * 2
    logits = max_num_seqs * spec.vocab_size * LOGITS_BYTES_PER_VALUE // tp
    return hidden + logits


def runtime_bytes(num_gpus: int) -> int:
    """CUDA context and allocator slack, plus NCCL's buffers when there are peers."""
    return RUNTIME_BYTES + (NCCL_BYTES if num_gpus > 1 else 0)


def make_memory(inputs: PlanInputs) -> MemoryBreakdown:
    """Per-GPU memory under TP × PP (EP shards the experts across the same ranks)."""
    total = inputs.gpu.memory_bytes
    weights = math.ceil(weight_bytes(inputs.model, inputs.dtype) / inputs.gpus_per_instance)
    runtime = runtime_bytes(inputs.gpus_per_instance)
    graphs = CUDA_GRAPH_POOL_BYTES if inputs.cuda_graphs else 0
    activation = activation_peak_bytes(
        inputs.model, inputs.tp, inputs.max_num_batched_tokens, inputs.max_num_seqs
    )
    non_kv = weights + activation + graphs + runtime
    kv = max(0, int(total * inputs.gpu_memory_utilization) - non_kv)
    return MemoryBreakdown(total, weights, activation, graphs, runtime, kv)


def _kv_per_token(inputs: PlanInputs) -> int:
    return math.ceil(kv_bytes_per_token(inputs.model, inputs.kv_dtype, inputs.tp) / inputs.pp)


def _blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def _max_concurrency(inputs: PlanInputs, memory: MemoryBreakdown, kv_per_token: int) -> int:
    """Requests at their peak length that fit in the cache without eating the headroom."""
    budget = min(memory.total * inputs.gpu_memory_utilization, memory.total * (1 - inputs.headroom))
    budget -= memory.non_kv
    block_bytes = inputs.block_size * kv_per_token
    usable_blocks = max(0, math.floor(budget / block_bytes) - 1)
    per_request = _blocks_for(inputs.tokens_per_request, inputs.block_size)
    return usable_blocks // per_request


def _length_cap(inputs: PlanInputs, kv: KvCachePlan) -> int:
    """The longest request that leaves room for `concurrency − 1` typical ones beside it."""
    typical = _blocks_for(inputs.tokens_per_request, inputs.block_size)
    spare_blocks = kv.usable_blocks - (inputs.concurrency - 1) * typical
    cap = max(0, spare_blocks) * inputs.block_size
    return min(cap, inputs.max_model_len)


def micro_batches_for(pp: int, target: float = DEFAULT_BUBBLE_TARGET) -> int:
    """The fewest micro-batches `m` with `(p − 1) / (m + p − 1) ≤ target`."""
    if pp <= 1:
        return 1
    return max(1, math.ceil((pp - 1) * (1 - target) / target - 1e-9))


def pp_bubble(pp: int, micro_batches: int) -> float:
    """The share of a stage's time idle with `micro_batches` in flight over `pp` stages:
    `(p − 1) / (m + p − 1)` (GPipe's; 0 without pipeline parallelism)."""
    return (pp - 1) / (micro_batches + pp - 1) if pp > 1 else 0.0


def _decode(inputs: PlanInputs, batch: int, context: int) -> StepCost:
    return decode_step_time(
        inputs.model,
        inputs.gpu,
        inputs.dtype,
        max(1, batch),
        context,
        tp=inputs.tp,
        kv_dtype=inputs.kv_dtype,
        params=inputs.cost_params,
        interconnect=interconnect_of(inputs),
    )


def pp_hop_s(inputs: PlanInputs, num_tokens: int) -> float:
    """Sending hidden states from one stage to the next, per step."""
    if inputs.pp == 1:
        return 0.0
    params = inputs.cost_params
    size = num_tokens * inputs.model.hidden_size * params.activation_bytes
    one_hop = params.pcie.alpha_s + size / inputs.gpu.pcie_bw_bytes_per_s
    return (inputs.pp - 1) * one_hop


def make_roofline(inputs: PlanInputs, kv: KvCachePlan) -> RooflineSummary:
    prompt = inputs.input_len or max(1, inputs.max_model_len // 2)
    output = inputs.output_len or max(1, inputs.max_model_len - prompt)
    context = min(inputs.max_model_len, prompt + output // 2)
    prefill = prefill_time(
        inputs.model,
        inputs.gpu,
        inputs.dtype,
        prompt,
        tp=inputs.tp,
        kv_dtype=inputs.kv_dtype,
        params=inputs.cost_params,
        interconnect=interconnect_of(inputs),
    )
    kv_batch = max(1, kv.usable_blocks // _blocks_for(context, inputs.block_size))
    kv_batch = min(kv_batch, inputs.max_num_seqs)
    # The batch that runs: what is asked for, unless the slots or the KV cache cap it.
    batch = max(1, min(inputs.concurrency, kv_batch))
    decode = _decode(inputs, batch, context)
    itl = decode.total_s + pp_hop_s(inputs, batch)
    kv_step = _decode(inputs, kv_batch, context).total_s + pp_hop_s(inputs, kv_batch)
    # A pipeline keeps `pp` micro-batches in flight, one per stage, as vLLM's virtual engines do.
    bubble = pp_bubble(inputs.pp, inputs.pp)
    pp_gain = inputs.pp * (1 - bubble) if inputs.pp > 1 else 1.0
    return RooflineSummary(
        prefill=prefill,
        decode=decode,
        ttft_s=inputs.cost_params.request_overhead_s + prefill.total_s + pp_hop_s(inputs, prompt),
        itl_s=itl,
        batch_size=batch,
        throughput_tok_s=batch / itl * pp_gain,
        kv_bound_batch=kv_batch,
        kv_bound_throughput_tok_s=kv_batch / kv_step * pp_gain,
        pp_bubble=bubble,
    )


def _check(inputs: PlanInputs) -> None:
    normalize_dtype(inputs.dtype)
    normalize_dtype(inputs.kv_dtype)
    for name in ("max_model_len", "concurrency", "tp", "pp", "ep", "block_size", "max_num_seqs"):
        if getattr(inputs, name) < 1:
            raise UserError(f"{name.replace('_', '-')} must be at least 1.")
    if inputs.num_gpus is not None and inputs.num_gpus < inputs.gpus_per_instance:
        raise UserError(
            f"tp × pp = {inputs.gpus_per_instance} GPUs but only {inputs.num_gpus} were given."
        )
    if not 0 < inputs.headroom < 1:
        raise UserError(f"headroom must be a fraction in (0, 1), not {inputs.headroom}.")


def _core(inputs: PlanInputs) -> tuple[MemoryBreakdown, KvCachePlan, int, int]:
    memory = make_memory(inputs)
    kv_per_token = _kv_per_token(inputs)
    kv = vllm_kv_cache(
        memory.total,
        inputs.gpu_memory_utilization,
        memory.non_kv,
        inputs.block_size,
        kv_per_token,
    )
    return memory, kv, kv_per_token, _max_concurrency(inputs, memory, kv_per_token)


def _knob_effects(inputs: PlanInputs, current: int) -> tuple[KnobEffect, ...]:
    """Each knob that can relieve KV pressure, best first, with the concurrency it allows."""
    options: list[tuple[str, str, PlanInputs, str]] = []
    if normalize_dtype(inputs.kv_dtype) not in {"fp8", "int8"}:
        options.append(("kv-dtype", "fp8", inputs.replace(kv_dtype="fp8"), "halves KV bytes"))
    if inputs.max_model_len > 2 * inputs.block_size and inputs.input_len is None:
        half = inputs.max_model_len // 2
        options.append(("max-model-len", str(half), inputs.replace(max_model_len=half), ""))
    bigger_tp = inputs.tp * 2
    if bigger_tp <= inputs.gpus_per_node:
        options.append(("tp", str(bigger_tp), inputs.replace(tp=bigger_tp), "more GPUs"))
    effects = []
    for knob, value, changed, note in options:
        try:
            allowed = _core(changed)[3]
        except UserError:
            continue
        effects.append(KnobEffect(knob, value, allowed, note))
    if current < inputs.concurrency:
        effects.append(
            KnobEffect(
                "max-num-seqs",
                str(max(1, current)),
                current,
                "caps the batch so requests queue instead of being preempted",
            )
        )
    return tuple(sorted(effects, key=lambda e: -e.max_concurrency))


def make_capacity_plan(inputs: PlanInputs) -> CapacityPlan:
    """The whole plan for one configuration."""
    _check(inputs)
    memory, kv, kv_per_token, max_fit = _core(inputs)
    if memory.non_kv >= memory.total * inputs.gpu_memory_utilization:
        raise UserError(
            f"{inputs.model.name} needs {memory.non_kv / GIB:.1f} GiB per GPU before any KV cache "
            f"but {inputs.gpu.name} × utilisation {inputs.gpu_memory_utilization} gives "
            f"{memory.total * inputs.gpu_memory_utilization / GIB:.1f} GiB; use more GPUs "
            "(--tp/--pp) or a smaller --dtype."
        )
    per_request = _blocks_for(inputs.tokens_per_request, inputs.block_size)
    demand_blocks = per_request * inputs.concurrency
    demand = demand_blocks * kv.bytes_per_block
    free = (memory.total - memory.non_kv - demand) / memory.total
    return CapacityPlan(
        inputs=inputs,
        memory=memory,
        kv=kv,
        kv_bytes_per_token=kv_per_token,
        peak_kv_demand_bytes=demand,
        fits=demand_blocks <= kv.usable_blocks,
        fits_with_headroom=demand_blocks <= kv.usable_blocks and free >= inputs.headroom,
        free_fraction=free,
        max_concurrency=max_fit,
        vllm_max_concurrency=kv.max_concurrency(inputs.max_model_len),
        length_cap=_length_cap(inputs, kv),
        knobs=_knob_effects(inputs, max_fit),
        roofline=make_roofline(inputs, kv),
    )
