"""plan, level 1: a roofline model of one engine step.

Takes a `ModelSpec`, a `GpuSpec`, the weight and KV dtypes, the tensor-parallel
degree and the step's shape (prompt tokens for a prefill; batch and context
for a decode); gives the step's `StepWork` (what it does) and its `StepCost`,
per GPU. The GEMMs and the attention are separate kernels, each under its own
roof, and their times add:

    GEMMs     max(FLOPs / (peak · η_c(n)), weight bytes / (BW · η_m))
    attention max(FLOPs / (16-bit peak · η_c(g)), KV bytes / (BW · η_kv))
    + all-reduces + step overhead + layers · layer overhead + sequences · sequence overhead

with `η_c(n) = η_c · n / (n + n½)` over a GEMM's rows (tokens; a routed expert's
tokens, at `η_expert` besides) and, in decode, `η_c · g / (g + g½)` over the query
heads that share one KV head (a decode attention matmul's rows: 1 for MHA, all
heads for MLA); a prefill's attention tiles run at η_c. The fixed costs are the
step's host work (scheduling, the launch or graph replay), each layer's small
kernels (norms, RoPE, cache writes) and each sequence's sampling and bookkeeping;
a request adds `request_overhead_s` once, to its TTFT. The efficiencies and
fixed costs are fitted per GPU generation (`plan.costparams`).

Weight bytes are those the step touches (for MoE, the experts a batch of B tokens
reaches, `E · (1 − (1 − k/E)^B)` per layer under uniform routing, or k when
`Execution(routing="collapsed")`, plus dense and shared parts); KV bytes are the
cache it reads and writes. FLOPs are `2 · active params` per token (logits only
for the tokens that sample) plus attention. Tensor parallelism divides FLOPs and
weight bytes by `tp` and adds two all-reduces of the hidden state per layer,
`α(n) + 2(n−1)/n · M / (BW · η_link)` each, with `α(n) = α₀ + α₁ · log₂(n/2)` per
interconnect (the latency of NCCL's tree and ring algorithms grows with the rank
count; the bandwidth term is the ring's). Pipeline parallelism is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infertriage.plan.costparams import RooflineParams, params_for
from infertriage.plan.gpus import GpuSpec
from infertriage.plan.memory import (
    ParamBreakdown,
    kv_bytes_for_context,
    kv_bytes_per_token,
    linear_bytes_per_param,
    normalize_dtype,
    param_breakdown,
    unquantized_bytes_per_param,
)
from infertriage.plan.models import ModelSpec
from infertriage.schemas.errors import UserError

__all__ = [
    "Execution",
    "LatencyEstimate",
    "Routing",
    "StepCost",
    "StepWork",
    "allreduce_s",
    "decode_step_time",
    "moe_experts_touched",
    "peak_flops_per_s",
    "prefill_time",
    "step_allreduce_s",
    "step_cost",
    "step_work",
    "ttft_itl",
]

Bound = Literal["compute", "memory"]
# How a MoE router spreads a step's tokens: uniformly over the experts (real traffic), or
# every token to the same top-k (a router with synthetic weights, as benchmarks with fake
# weights run).
Routing = Literal["uniform", "collapsed"]


@dataclass(frozen=True, slots=True)
class Execution:
    """How the engine ran the model, where benchmarks differ from real serving.

    The default is real weights. `routing="collapsed"`: every token goes to the same top-k
    experts, as a router with synthetic weights sends them.
    """

    routing: Routing = "uniform"


_REAL = Execution()
_INTERCONNECTS = frozenset({"nvlink", "infinity-fabric", "pcie", "auto"})


@dataclass(frozen=True, slots=True)
class StepWork:
    """What one step does on one GPU before any efficiency applies: the cost model's input.

    The GEMM part (weights) and the attention part (KV cache) run as separate kernels,
    each bounded by its own roof; the twin adds the attention parts of a step's sequences
    and counts the weights once.
    """

    num_tokens: int  # rows through the GEMMs (their ramp)
    num_seqs: int
    gemm_flops: float  # dense layers' GEMMs and the logits
    expert_flops: float  # routed experts' GEMMs
    expert_tokens: float  # rows each expert's GEMM carries (its ramp)
    weight_bytes: float
    prefill_attention_flops: float  # tiled over many query rows (flash attention)
    decode_attention_flops: float  # one query row per sequence and head
    query_group: float  # query heads that share one KV head on a GPU (MLA: all of them)
    kv_bytes: float
    comm_s: float
    num_layers: int


@dataclass(frozen=True, slots=True)
class StepCost:
    """One step on one GPU: its parts in seconds, its work, and which roof bounds it.

    `total_s = gemm_s + attention_s + comm_s + overhead_s`; `compute_s` and `memory_s` are
    the two roofs summed over the kernel families (which one is larger names the bound).
    """

    compute_s: float
    memory_s: float
    gemm_s: float
    attention_s: float
    comm_s: float
    overhead_s: float
    total_s: float
    flops: float
    bytes: float
    bound: Bound
    work: StepWork


@dataclass(frozen=True, slots=True)
class LatencyEstimate:
    """Single-user latency: time to first token (the request's fixed cost included),
    inter-token latency, whole request."""

    ttft_s: float
    itl_s: float
    e2e_s: float
    prefill: StepCost
    decode: StepCost


def moe_experts_touched(num_experts: int, top_k: int, num_tokens: int) -> float:
    """Expected distinct experts that `num_tokens` tokens routed top-`top_k` reach in one layer.

    `E · (1 − (1 − k/E)^B)` under uniform routing: `k` for one token, `E` for many.
    """
    if num_experts <= 0 or top_k <= 0 or num_tokens <= 0:
        return 0.0
    if top_k >= num_experts:
        return float(num_experts)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** num_tokens)


# ---------------------------------------------------------------------------- pieces


def _check_count(value: int, what: str, minimum: int = 1) -> None:
    if value < minimum:
        raise UserError(f"{what} must be {minimum} or more, not {value}.")


def _sum_capped(first: int, last: int, cap: int | None) -> float:
    """`Σ min(x, cap)` for x in first..last: keys each query sees under a window `cap`."""
    if last < first:
        return 0.0
    if cap is None or last <= cap:
        return (first + last) * (last - first + 1) / 2
    if first > cap:
        return float(cap * (last - first + 1))
    return (first + cap) * (cap - first + 1) / 2 + cap * (last - cap)


def _attention_flops(spec: ModelSpec, first: int, last: int, *, absorbed: bool) -> float:
    """FLOPs of QKᵀ and PV for queries that see `first..last` keys, over all layers.

    Per (query, key) pair and head: `2 · (d_qk + d_v)`. MLA in decode runs absorbed, over
    the latent (`kv_lora_rank + rope` for scores, `kv_lora_rank` for values).
    """
    if spec.is_mla and absorbed:
        d_qk, d_v = spec.kv_lora_rank + spec.qk_rope_head_dim, spec.kv_lora_rank
    elif spec.is_mla:
        d_qk, d_v = spec.qk_nope_head_dim + spec.qk_rope_head_dim, spec.v_head_dim
    else:
        d_qk = d_v = spec.head_dim
    pairs = spec.num_full_attention_layers * _sum_capped(first, last, None)
    pairs += spec.num_sliding_layers * _sum_capped(first, last, spec.sliding_window)
    return 2.0 * spec.num_attention_heads * (d_qk + d_v) * pairs


def _expert_rows(parts: ParamBreakdown, num_tokens: int, routing: Routing) -> tuple[float, float]:
    """(experts one MoE layer reads, rows each of their GEMMs carries) for `num_tokens`."""
    if parts.num_experts == 0:
        return 0.0, 0.0
    k, experts = parts.num_experts_per_tok, parts.num_experts
    if routing == "collapsed":
        return float(min(k, experts)), float(num_tokens)
    touched = moe_experts_touched(experts, k, num_tokens)
    return touched, num_tokens * k / touched


def _weights_work(
    spec: ModelSpec, dtype: str, num_tokens: int, num_logit_tokens: int, routing: Routing
) -> tuple[float, float, float, float]:
    """(dense GEMM FLOPs, expert GEMM FLOPs, rows per expert GEMM, weight bytes read) of a
    step of `num_tokens` tokens, on all GPUs together."""
    parts = param_breakdown(spec)
    touched, rows = _expert_rows(parts, num_tokens, routing)
    logits = spec.vocab_size * spec.hidden_size  # lm_head, or the tied embedding
    dense = 2.0 * ((parts.linear + parts.routers) * num_tokens + logits * num_logit_tokens)
    experts = 2.0 * parts.active_routed_experts * num_tokens
    quantised = (parts.linear + parts.expert * parts.num_moe_layers * touched) * (
        linear_bytes_per_param(dtype)
    )
    embedding_rows = min(num_tokens, spec.vocab_size) * spec.hidden_size
    kept = logits + embedding_rows + parts.routers + parts.norms
    return dense, experts, rows, quantised + kept * unquantized_bytes_per_param(dtype)


def peak_flops_per_s(gpu: GpuSpec, dtype: str) -> float:
    # FP8 runs on FP8 tensor cores where there are some; int8/int4 checkpoints are taken as
    # weight-only (W8A16/W4A16), which compute in BF16; FP32 runs at the TF32 rate.
    canonical = normalize_dtype(dtype)
    if canonical == "fp8" and gpu.fp8_flops_per_s is not None:
        return gpu.fp8_flops_per_s
    if canonical == "fp32":
        return gpu.bf16_flops_per_s / 2
    return gpu.bf16_flops_per_s


def _attention_peak(gpu: GpuSpec, dtype: str) -> float:
    """Attention computes in 16 bits whatever the weights (an FP8 cache is dequantised);
    an FP32 model's in FP32."""
    return peak_flops_per_s(gpu, "fp32" if normalize_dtype(dtype) == "fp32" else "bf16")


def _link_kind(gpu: GpuSpec, interconnect: str) -> str:
    """The link an all-reduce runs over: PCIe when asked or when the GPU has nothing else."""
    kind = interconnect.strip().lower()
    if kind not in _INTERCONNECTS:
        known = ", ".join(sorted(_INTERCONNECTS))
        raise UserError(f"unknown interconnect {interconnect!r}; use one of {known}.")
    return "pcie" if kind == "pcie" or gpu.link == "pcie" else "nvlink"


def allreduce_s(
    gpu: GpuSpec, tp: int, message_bytes: float, params: RooflineParams, interconnect: str
) -> float:
    """One all-reduce of `message_bytes` over `tp` ranks: `α(n) + 2(n−1)/n · M / (BW · η)`."""
    kind = _link_kind(gpu, interconnect)
    if tp == 1:
        return 0.0
    link = params.link(kind)
    bandwidth = gpu.pcie_bw_bytes_per_s if kind == "pcie" else gpu.link_bw_bytes_per_s
    busbw = bandwidth * link.bw_efficiency
    return link.latency_s(tp) + 2 * (tp - 1) / tp * message_bytes / busbw


def step_allreduce_s(
    spec: ModelSpec,
    *,
    gpu: GpuSpec,
    tp: int,
    num_tokens: int,
    params: RooflineParams,
    interconnect: str,
) -> float:
    """A step's all-reduces: two of the hidden state per layer (after attention and after
    the MLP), each carrying `num_tokens` tokens."""
    message_bytes = num_tokens * spec.hidden_size * params.activation_bytes
    return 2 * spec.num_layers * allreduce_s(gpu, tp, message_bytes, params, interconnect)


def step_cost(work: StepWork, gpu: GpuSpec, dtype: str, p: RooflineParams) -> StepCost:
    """Time one step's work: each kernel family under its own roof, then the fixed costs.

    GEMMs: `max(FLOPs · ramp / (peak · η_c), weight bytes / (BW · η_m))`, routed experts'
    FLOPs at `η_c · η_expert` with the ramp of their own rows; attention:
    `max(FLOPs / (16-bit peak · η), KV bytes / (BW · η_kv))` with η = η_c for a prefill's
    tiles and `η_c · g / (g + g½)` for a decode's, `g` query heads per KV head.
    """
    peak = peak_flops_per_s(gpu, dtype) * p.compute_efficiency
    half = p.compute_half_tokens
    gemm_compute = work.gemm_flops * _ramp(work.num_tokens, half) / peak
    gemm_compute += (
        work.expert_flops * _ramp(work.expert_tokens, half) / (peak * p.expert_efficiency)
    )
    gemm_memory = work.weight_bytes / (gpu.mem_bw_bytes_per_s * p.mem_efficiency)
    # Attention computes in 16 bits (an FP8 KV cache is dequantised on the fly): a prefill's
    # tiles run at the GEMMs' efficiency; a decode's matmuls have as many rows as query heads
    # share a KV head (1 for MHA, 4-8 for GQA, all for MLA) and ramp over them.
    decode_ramp = _ramp(work.query_group, p.attention_half_rows)
    attention_compute = (
        work.prefill_attention_flops + work.decode_attention_flops * decode_ramp
    ) / (_attention_peak(gpu, dtype) * p.compute_efficiency)
    attention_memory = work.kv_bytes / (gpu.mem_bw_bytes_per_s * p.kv_mem_efficiency)
    gemm_s = max(gemm_compute, gemm_memory)
    attention_s = max(attention_compute, attention_memory)
    overhead_s = (
        p.step_overhead_s + work.num_layers * p.layer_overhead_s + work.num_seqs * p.seq_overhead_s
    )
    compute_s, memory_s = gemm_compute + attention_compute, gemm_memory + attention_memory
    return StepCost(
        compute_s=compute_s,
        memory_s=memory_s,
        gemm_s=gemm_s,
        attention_s=attention_s,
        comm_s=work.comm_s,
        overhead_s=overhead_s,
        total_s=gemm_s + attention_s + work.comm_s + overhead_s,
        flops=work.gemm_flops
        + work.expert_flops
        + work.prefill_attention_flops
        + work.decode_attention_flops,
        bytes=work.weight_bytes + work.kv_bytes,
        bound="compute" if compute_s >= memory_s else "memory",
        work=work,
    )


def _ramp(rows: float, half: float) -> float:
    """1 / (n / (n + n½)): matmuls of few rows leave tensor cores idle."""
    return 1.0 + half / max(1.0, rows)


def _query_group(spec: ModelSpec, tp: int) -> float:
    """Query heads that share one KV head on a GPU: a decode attention matmul's rows."""
    heads = max(1.0, spec.num_attention_heads / tp)
    kv_heads = 1.0 if spec.is_mla else max(1.0, spec.num_kv_heads / tp)
    return heads / kv_heads


def step_work(
    spec: ModelSpec,
    dtype: str,
    *,
    tp: int,
    num_tokens: int,
    num_logit_tokens: int,
    num_seqs: int,
    prefill_attention_flops: float = 0.0,
    decode_attention_flops: float = 0.0,
    kv_bytes: float = 0.0,
    comm_s: float = 0.0,
    execution: Execution = _REAL,
) -> StepWork:
    """A step's work on one GPU: the weights' part for `num_tokens` tokens (logits for
    `num_logit_tokens`), with the attention FLOPs and KV bytes of its sequences, per GPU."""
    dense, experts, rows, weights = _weights_work(
        spec, dtype, num_tokens, num_logit_tokens, execution.routing
    )
    return StepWork(
        num_tokens=num_tokens,
        num_seqs=num_seqs,
        gemm_flops=dense / tp,
        expert_flops=experts / tp,
        expert_tokens=rows,
        weight_bytes=weights / tp,
        prefill_attention_flops=prefill_attention_flops,
        decode_attention_flops=decode_attention_flops,
        query_group=_query_group(spec, tp),
        kv_bytes=kv_bytes,
        comm_s=comm_s,
        num_layers=spec.num_layers,
    )


# ---------------------------------------------------------------------------- steps


def prefill_time(
    spec: ModelSpec,
    gpu: GpuSpec,
    dtype: str,
    num_tokens: int,
    *,
    tp: int = 1,
    kv_dtype: str = "bf16",
    params: RooflineParams | None = None,
    context_before: int = 0,
    interconnect: str = "nvlink",
    num_seqs: int = 1,
    execution: Execution = _REAL,
) -> StepCost:
    """One prefill (or prefill chunk) of `num_tokens` prompt tokens of each of `num_seqs`
    sequences, in one step.

    `context_before` tokens are already cached (prefix hit, or earlier chunks); causal
    attention sees `context_before + i + 1` keys at the i-th new token. Logits are computed
    for the last token only, as engines do. `params` defaults to the GPU's fitted constants.
    """
    _check_count(num_tokens, "prefill tokens")
    _check_count(context_before, "cached context", minimum=0)
    _check_count(tp, "tensor-parallel size")
    _check_count(num_seqs, "prefill sequences")
    p = params_for(gpu) if params is None else params
    first, last = context_before + 1, context_before + num_tokens
    total_tokens = num_tokens * num_seqs
    kv_written = kv_bytes_for_context(spec, last, kv_dtype, tp) - kv_bytes_for_context(
        spec, context_before, kv_dtype, tp
    )
    kv_read = kv_bytes_for_context(spec, context_before, kv_dtype, tp)
    comm_s = step_allreduce_s(
        spec, gpu=gpu, tp=tp, num_tokens=total_tokens, params=p, interconnect=interconnect
    )
    attention = num_seqs * _attention_flops(spec, first, last, absorbed=False) / tp
    work = step_work(
        spec,
        dtype,
        tp=tp,
        num_tokens=total_tokens,
        num_logit_tokens=num_seqs,
        num_seqs=num_seqs,
        prefill_attention_flops=attention,
        kv_bytes=num_seqs * (kv_written + kv_read),
        comm_s=comm_s,
        execution=execution,
    )
    return step_cost(work, gpu, dtype, p)


def decode_step_time(
    spec: ModelSpec,
    gpu: GpuSpec,
    dtype: str,
    batch_size: int,
    context_len: int,
    *,
    tp: int = 1,
    kv_dtype: str = "bf16",
    params: RooflineParams | None = None,
    interconnect: str = "nvlink",
    execution: Execution = _REAL,
) -> StepCost:
    """One decode step: `batch_size` sequences, each with `context_len` tokens cached.

    Each sequence reads its whole cached KV (sliding layers: the window) and writes one
    token's KV; the weights are read once for the batch.
    """
    _check_count(batch_size, "decode batch size")
    _check_count(context_len, "decode context length", minimum=0)
    _check_count(tp, "tensor-parallel size")
    p = params_for(gpu) if params is None else params
    per_sequence = _attention_flops(spec, context_len + 1, context_len + 1, absorbed=True)
    kv_moved = kv_bytes_for_context(spec, context_len, kv_dtype, tp) + kv_bytes_per_token(
        spec, kv_dtype, tp
    )
    comm_s = step_allreduce_s(
        spec, gpu=gpu, tp=tp, num_tokens=batch_size, params=p, interconnect=interconnect
    )
    work = step_work(
        spec,
        dtype,
        tp=tp,
        num_tokens=batch_size,
        num_logit_tokens=batch_size,
        num_seqs=batch_size,
        decode_attention_flops=batch_size * per_sequence / tp,
        kv_bytes=batch_size * kv_moved,
        comm_s=comm_s,
        execution=execution,
    )
    return step_cost(work, gpu, dtype, p)


# The six positionals are the question itself (model, GPU, dtype, TP, prompt, output).
def ttft_itl(  # noqa: PLR0917
    spec: ModelSpec,
    gpu: GpuSpec,
    dtype: str,
    tp: int,
    input_len: int,
    output_len: int,
    *,
    kv_dtype: str = "bf16",
    params: RooflineParams | None = None,
    interconnect: str = "nvlink",
    batch_size: int = 1,
    execution: Execution = _REAL,
) -> LatencyEstimate:
    """`batch_size` users arriving together (1: one user alone): TTFT is the request's fixed
    cost plus one prefill of every prompt; ITL is a decode step of the batch at the mean
    context of decoding, `input_len + output_len // 2`."""
    _check_count(output_len, "output tokens")
    p = params_for(gpu) if params is None else params
    prefill = prefill_time(
        spec,
        gpu,
        dtype,
        input_len,
        tp=tp,
        kv_dtype=kv_dtype,
        params=p,
        interconnect=interconnect,
        num_seqs=batch_size,
        execution=execution,
    )
    decode = decode_step_time(
        spec,
        gpu,
        dtype,
        batch_size,
        input_len + output_len // 2,
        tp=tp,
        kv_dtype=kv_dtype,
        params=p,
        interconnect=interconnect,
        execution=execution,
    )
    ttft_s = p.request_overhead_s + prefill.total_s
    e2e_s = ttft_s + (output_len - 1) * decode.total_s
    return LatencyEstimate(
        ttft_s=ttft_s, itl_s=decode.total_s, e2e_s=e2e_s, prefill=prefill, decode=decode
    )
