"""twin, level 2: how long one engine step takes, and what the GPU did during it.

Takes the `Hardware` and the scenario's engine settings, then per step a
`BatchShape` (prefill chunks with their cached context, decode sequences with
theirs, draft tokens); gives a frozen `StepBreakdown`: the wall time split into
host time (GPU idle), kernel time (roofline math, all-reduce, draft model) and
launch gaps, plus the activity integrals that /metrics and /dcgm derive from.

The math is the `plan` cost model's: the attention part of the decode sequences
is one `decode_step_time` at the batch's mean context (interpolated between
64-token grid points and cached), of each prefill chunk one `prefill_time`; the
weights' part (`plan.step_work`) is counted once for the step's tokens
together, the all-reduces carry all of them, and `plan.step_cost` times the
sum, each kernel family under its own roof. On top of `plan`:

- draft tokens are verified like decode tokens (FLOPs scale with 1 + k, KV reads
  do not) and the proposer costs `draft_cost_fraction` of a decode per position;
- `attention_backend: naive` materialises FP32 scores (16 bytes per query-key pair
  and head: write, read, softmax write, read) and gathers the paged KV twice more;
- each kernel runs at least `_KERNEL_FLOOR_S`; with `cuda_graphs` off every kernel
  also costs `launch_us_per_kernel` of host time, and the GPU waits whenever the
  launches are slower than the kernels (the launch gap);
- `plan`'s fixed costs, fitted per GPU generation: of the per-step and per-layer costs,
  up to `_HOST_STEP_S` is host time and the rest kernel time of a CUDA-graph step (an
  eager step pays its launches instead); the per-sequence cost (sampling) is kernel time;
  host time per step is up to `_HOST_STEP_S` of it plus `scheduler_overhead_us_per_seq`
  per scheduled sequence, during which the GPU idles;
- with `async_scheduling` (vLLM's default) the host schedules step k+1 while step k runs:
  the fitted fixed costs are all step time (they were measured that way) and the GPU idles
  only for the host time the step's kernels do not cover, `max(0, host − GPU span)`.

Activity (what DCGM would read): `util_busy_s` counts the step as NVML's coarse
sampler does, gaps under `_UTIL_RESOLUTION_S` between kernels or steps read as
busy, so GPU_UTIL stays high when launch-bound; `sm_active_s` weights roofline
kernels by `_SM_BUSY`, kernel-floor time (tiny kernels) by `_SM_BUSY_TINY` and
NCCL kernels by `_SM_BUSY_NCCL`; `tensor_active_s` and `dram_active_s` are the
compute and memory roofline times at the pipe activity those roofs show.

Expert and pipeline parallelism (the scenario's `expert_parallel` and
`pipeline_parallel`):

- with expert parallelism every MoE layer waits for its busiest EP rank: the routed
  experts' FLOPs cost `hot_expert_skew` times the even share. Only the FLOPs: a
  weight-bound step (small decode batches) reads the same expert weights on the hot
  rank as on the others and pays little, as real hot experts hurt prefill-heavy steps
  most. The all-to-all itself is not modelled apart from the step's all-reduces;
- with `p` pipeline stages and `m` micro-batches in flight (at most one per scheduled
  sequence) one step of the engine is one pipeline round: each micro-batch (a `m`-th
  of the batch) passes every stage once, a stage taking `1/p` of the micro-batch's
  forward, the slowest `stage_imbalance` times that. The round lasts
  `max(p · stage, m · slowest stage)`: with `m < p` each GPU idles `1 − m/p` of it
  (the bubble of a pipeline that never flushes, as vLLM's virtual engines keep
  their micro-batches cycling), with an unbalanced stage the others wait for it.
  The breakdown's activity integrals are the busiest (slowest) stage's GPU;
  `gpu_activity` gives each GPU's share of it for `/dcgm`. The stages' point-to-point
  sends are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

import numpy as np

from infertriage.plan import (
    RooflineParams,
    StepCost,
    StepWork,
    decode_step_time,
    params_for,
    prefill_time,
    step_allreduce_s,
    step_cost,
    step_work,
)
from infertriage.twin.capacity import Hardware
from infertriage.twin.scenario_model import Scenario

__all__ = ["BatchShape", "CostModel", "DecodeRunCost", "StepBreakdown", "gpu_activity"]

Bound = Literal["compute", "memory", "idle"]

_KERNELS_PER_LAYER = 12  # norms, QKV, RoPE, cache write, attention, O, residuals, MLP
_KERNELS_PER_MOE_LAYER = 4  # router, top-k, permute, unpermute
_KERNELS_PER_NAIVE_ATTENTION = 5  # gather, QKᵀ, mask+scale, softmax, PV
_KERNELS_FIXED = 10  # embedding, final norm, lm_head, sampler
_KERNEL_FLOOR_S = 2e-6
_HOST_STEP_S = 2e-4  # host time of a vLLM step at small batch (scheduler + output processing)
_UTIL_RESOLUTION_S = 1e-3
_SM_BUSY = 0.85
_SM_BUSY_TINY = 0.15
_SM_BUSY_NCCL = 0.15
_TENSOR_AT_COMPUTE_ROOF = 0.9
_DRAM_AT_MEMORY_ROOF = 0.85
_SCORE_BYTES = 16
_CONTEXT_GRID = 64
_CACHE_LIMIT = 200_000
_WEIGHTS_CACHE_LIMIT = 4096  # a decode's batch sizes repeat, a prefill step's counts rarely


@dataclass(frozen=True, slots=True)
class BatchShape:
    """The work of one step, as the cost model needs it."""

    prefill_chunks: tuple[tuple[int, int], ...] = ()  # (new tokens, cached context before)
    num_decode_seqs: int = 0
    decode_context_sum: int = 0  # Σ cached tokens over decode sequences
    num_decode_tokens: int = 0  # decode tokens, draft tokens to verify included
    max_draft_tokens: int = 0  # draft positions the proposer ran this step

    @property
    def num_seqs(self) -> int:
        return len(self.prefill_chunks) + self.num_decode_seqs

    @property
    def num_prefill_tokens(self) -> int:
        return sum(n for n, _ in self.prefill_chunks)

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """One step's wall time and its parts, in seconds; activity integrals in seconds too."""

    total_s: float  # = cpu_s + kernel_s + launch_gap_s
    cpu_s: float  # host: scheduling, sampling, bookkeeping (GPU idle)
    kernel_s: float  # some kernel runs: forward + comm + draft
    launch_gap_s: float  # GPU idle between eager launches
    forward_s: float  # the model's kernels: max(compute, memory), floored per kernel
    compute_s: float
    memory_s: float
    comm_s: float  # all-reduce kernels
    draft_s: float  # the draft proposer's kernels
    util_busy_s: float  # what GPU_UTIL counts
    sm_active_s: float
    tensor_active_s: float
    dram_active_s: float
    flops: float
    bytes: float
    comm_bytes: float  # bytes each GPU sends over its link
    num_kernels: int
    bound: Bound

    @property
    def gpu_span_s(self) -> float:
        """First kernel to last: kernels and the launch gaps between them."""
        return self.kernel_s + self.launch_gap_s


@dataclass(frozen=True, slots=True)
class DecodeRunCost:
    """Back-to-back decode steps of one batch: when each ends, and their summed breakdown."""

    step_end_ts: tuple[float, ...]
    total: StepBreakdown
    memory_bound_s: float  # of the steps' time, memory-bound


_SUMMED = tuple(
    name for name in StepBreakdown.__dataclass_fields__ if name not in {"num_kernels", "bound"}
)
_IDLE = StepBreakdown(
    0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, "idle"
)


class CostModel:
    """Step times for one scenario; caches the `plan` calls it interpolates between."""

    def __init__(
        self, hardware: Hardware, scenario: Scenario, params: RooflineParams | None = None
    ) -> None:
        self.hw = hardware
        self.params = params_for(hardware.gpu) if params is None else params
        # Of plan's fixed step cost (per step and per layer), a host part (scheduling,
        # bookkeeping) idles the GPU; the rest (small kernels, graph replay) is GPU time.
        fixed_s = self.params.step_overhead_s + hardware.spec.num_layers * (
            self.params.layer_overhead_s
        )
        self.engine = scenario.engine
        self.overlap_host = scenario.engine.async_scheduling
        # Under async scheduling the host's part runs beside the GPU's: all of it is step time.
        self.host_step_s = 0.0 if self.overlap_host else min(fixed_s, _HOST_STEP_S)
        self.fixed_kernel_s = fixed_s - self.host_step_s
        self.draft_cost_fraction = scenario.speculative.draft_cost_fraction
        spec = hardware.spec
        per_layer = _KERNELS_PER_LAYER + (2 if hardware.tensor_parallel > 1 else 0)
        if self.engine.attention_backend == "naive":
            per_layer += _KERNELS_PER_NAIVE_ATTENTION
        self.num_kernels = (
            per_layer * spec.num_layers + _KERNELS_PER_MOE_LAYER * spec.num_moe_layers
        ) + _KERNELS_FIXED
        self._heads_per_gpu = max(1, spec.num_attention_heads // hardware.tensor_parallel)
        ep = scenario.expert_parallel
        self.expert_skew = ep.hot_expert_skew if ep.size > 1 and spec.is_moe else 1.0
        pipeline = scenario.pipeline_parallel
        self.stages = pipeline.size
        self.micro_batches = pipeline.in_flight
        self.stage_skew = pipeline.stage_imbalance if pipeline.size > 1 else 1.0
        self._decodes: dict[tuple[int, int], tuple[float, float]] = {}
        self._prefills: dict[tuple[int, int], tuple[float, float]] = {}
        self._weights: dict[tuple[int, int], StepWork] = {}  # (tokens, logits) → no attention
        # the last decode run's first step, which a run taken again (one step longer) repeats
        self._last_first: tuple[tuple[int, int], StepBreakdown] | None = None

    # ------------------------------------------------------------------ plan calls
    def _decode_call(self, batch: int, context: int) -> StepCost:
        hw = self.hw
        return decode_step_time(
            hw.spec,
            hw.gpu,
            hw.dtype,
            batch,
            context,
            tp=hw.tensor_parallel,
            kv_dtype=hw.kv_dtype,
            params=self.params,
            interconnect=hw.interconnect,
        )

    def _prefill_call(self, num_tokens: int, context: int) -> StepCost:
        hw = self.hw
        return prefill_time(
            hw.spec,
            hw.gpu,
            hw.dtype,
            num_tokens,
            tp=hw.tensor_parallel,
            kv_dtype=hw.kv_dtype,
            params=self.params,
            context_before=context,
            interconnect=hw.interconnect,
        )

    def _decode_at(self, batch: int, context: int) -> tuple[float, float]:
        """(attention FLOPs, KV bytes) of `batch` decode sequences at `context`, per GPU."""
        key = (batch, context)
        hit = self._decodes.get(key)
        if hit is None:
            if len(self._decodes) >= _CACHE_LIMIT:
                self._decodes.clear()
            work = self._decode_call(batch, context).work
            hit = (work.decode_attention_flops, work.kv_bytes)
            self._decodes[key] = hit
        return hit

    def _prefill_at(self, num_tokens: int, context: int) -> tuple[float, float]:
        """(attention FLOPs, KV bytes) of one prefill chunk, per GPU."""
        key = (num_tokens, context)
        hit = self._prefills.get(key)
        if hit is None:
            if len(self._prefills) >= _CACHE_LIMIT:
                self._prefills.clear()
            work = self._prefill_call(num_tokens, context).work
            hit = (work.prefill_attention_flops, work.kv_bytes)
            self._prefills[key] = hit
        return hit

    def _work(
        self,
        num_tokens: int,
        num_logits: int,
        *,
        prefill_flops: float = 0.0,
        decode_flops: float = 0.0,
        kv_bytes: float = 0.0,
    ) -> StepWork:
        """`plan.step_work` of a step: the weights' part (and the all-reduces) cached by its
        token counts, the attention's given."""
        key = (num_tokens, num_logits)
        weights = self._weights.get(key)
        if weights is None:
            if len(self._weights) >= _WEIGHTS_CACHE_LIMIT:
                self._weights.clear()
            weights = self._weights_call(num_tokens, num_logits)
            self._weights[key] = weights
        return replace(
            weights,
            prefill_attention_flops=prefill_flops,
            decode_attention_flops=decode_flops,
            kv_bytes=kv_bytes,
        )

    def _weights_call(self, num_tokens: int, num_logits: int) -> StepWork:
        hw = self.hw
        return step_work(
            hw.spec,
            hw.dtype,
            tp=hw.tensor_parallel,
            num_tokens=num_tokens,
            num_logit_tokens=num_logits,
            num_seqs=num_logits,
            comm_s=step_allreduce_s(
                hw.spec,
                gpu=hw.gpu,
                tp=hw.tensor_parallel,
                num_tokens=num_tokens,
                params=self.params,
                interconnect=hw.interconnect,
            ),
        )

    def _cost(self, work: StepWork) -> StepCost:
        if self.expert_skew > 1.0:  # the step waits for the busiest EP rank's experts
            work = replace(work, expert_flops=work.expert_flops * self.expert_skew)
        return step_cost(work, self.hw.gpu, self.hw.dtype, self.params)

    # ------------------------------------------------------------------ parts
    def _decode_work(self, shape: BatchShape) -> tuple[float, float, float]:
        """(attention FLOPs, KV bytes, plain-decode forward seconds) of the decode sequences."""
        batch = shape.num_decode_seqs
        if batch == 0:
            return 0.0, 0.0, 0.0
        mean = shape.decode_context_sum / batch
        low = int(mean // _CONTEXT_GRID) * _CONTEXT_GRID
        weight = (mean - low) / _CONTEXT_GRID
        f0, b0 = self._decode_at(batch, low)
        f1, b1 = self._decode_at(batch, low + _CONTEXT_GRID)
        flops, kv_bytes = f0 + weight * (f1 - f0), b0 + weight * (b1 - b0)
        plain_s = 0.0  # a plain decode step's forward, only what the proposer's cost needs
        if shape.max_draft_tokens:
            plain = self._cost(self._work(batch, batch, decode_flops=flops, kv_bytes=kv_bytes))
            plain_s = plain.gemm_s + plain.attention_s
        extra = shape.num_decode_tokens - batch  # draft tokens verified
        flops *= shape.num_decode_tokens / batch
        kv_bytes += extra * self.hw.kv_bytes_per_token
        if self.engine.attention_backend == "naive":
            kv_bytes += self._naive_bytes(
                shape.num_decode_tokens * (mean + 1), shape.decode_context_sum
            )
        return flops, kv_bytes, plain_s

    def _naive_bytes(self, num_pairs: float, context_tokens: float) -> float:
        """Materialised scores for `num_pairs` query-key pairs, and the KV gathered twice more."""
        scores = _SCORE_BYTES * self._heads_per_gpu * self.hw.spec.num_layers * num_pairs
        return scores + 2 * self.hw.kv_bytes_per_token * context_tokens

    def _prefill_work(self, shape: BatchShape) -> tuple[float, float]:
        flops = 0.0
        kv_bytes = 0.0
        naive = self.engine.attention_backend == "naive"
        for num_tokens, context in shape.prefill_chunks:
            f, b = self._prefill_at(num_tokens, context)
            flops += f
            kv_bytes += b
            if naive:
                pairs = num_tokens * context + num_tokens * (num_tokens + 1) / 2
                kv_bytes += self._naive_bytes(pairs, context)
        return flops, kv_bytes

    def _comm_bytes(self, num_tokens: int) -> float:
        tp = self.hw.tensor_parallel
        if tp == 1:
            return 0.0
        message = num_tokens * self.hw.spec.hidden_size * self.params.activation_bytes
        return 2 * self.hw.spec.num_layers * 2 * (tp - 1) / tp * message

    # ------------------------------------------------------------------ the step
    def step_cost(self, shape: BatchShape) -> StepBreakdown:
        """The breakdown of one step (a pipeline round under pipeline parallelism); an empty
        shape costs nothing."""
        if self.stages == 1 or shape.num_tokens == 0:
            return self._flat_cost(shape)
        in_flight = max(1, min(self.micro_batches, shape.num_seqs))
        one = self._flat_cost(_micro_shape(shape, in_flight))
        stage_s = one.gpu_span_s / self.stages
        slowest_s = stage_s * self.stage_skew
        round_s = max(self.stages * stage_s, in_flight * slowest_s)
        # The busiest GPU (the slowest stage's) runs its share of every micro-batch.
        scale = in_flight * self.stage_skew / self.stages
        gap_s = (round_s - in_flight * slowest_s) / in_flight  # its idle time between them
        parts = {
            f.name: getattr(one, f.name) * scale
            for f in fields(StepBreakdown)
            if f.name not in {"total_s", "cpu_s", "util_busy_s", "num_kernels", "bound"}
        }
        busy_s = parts["kernel_s"] + parts["launch_gap_s"]
        idle_s = round_s - busy_s
        parts["launch_gap_s"] += idle_s  # the bubble: the GPU waits on the other stages
        return replace(
            one,
            **parts,
            total_s=one.cpu_s + round_s,
            util_busy_s=busy_s + (idle_s if gap_s < _UTIL_RESOLUTION_S else 0.0),
        )

    def _flat_cost(self, shape: BatchShape) -> StepBreakdown:
        """One step of every layer on one tensor-parallel group."""
        num_tokens = shape.num_tokens
        if num_tokens == 0:
            return _IDLE
        d_flops, d_bytes, plain_decode_s = self._decode_work(shape)
        p_flops, p_bytes = self._prefill_work(shape)
        # Each verified draft token samples, each prefill chunk its last token.
        num_logits = shape.num_decode_tokens + len(shape.prefill_chunks)
        cost = self._cost(
            self._work(
                num_tokens,
                num_logits,
                prefill_flops=p_flops,
                decode_flops=d_flops,
                kv_bytes=d_bytes + p_bytes,
            )
        )
        comm_s, compute_s, memory_s = cost.comm_s, cost.compute_s, cost.memory_s
        roof_s = cost.gemm_s + cost.attention_s
        # The fitted fixed kernel time is what a CUDA-graph step keeps; an eager step pays
        # `launch_us_per_kernel` per kernel instead (the launch gap below).
        fixed_s = self.fixed_kernel_s if self.engine.cuda_graphs else 0.0
        fixed_s += self.params.seq_overhead_s * shape.num_seqs  # sampling, per sequence
        forward_s = max(roof_s + fixed_s, self.num_kernels * _KERNEL_FLOOR_S)
        draft_s = self.draft_cost_fraction * plain_decode_s * shape.max_draft_tokens
        kernel_s = forward_s + comm_s + draft_s
        launch_gap_s = 0.0
        if not self.engine.cuda_graphs:
            num_launches = self.num_kernels * (1 + shape.max_draft_tokens)
            launch_gap_s = max(
                0.0, num_launches * self.engine.launch_us_per_kernel * 1e-6 - kernel_s
            )
        cpu_s = self.host_step_s + (
            self.engine.scheduler_overhead_us_per_seq * 1e-6 * shape.num_seqs
        )
        span_s = kernel_s + launch_gap_s
        if self.overlap_host:
            # Scheduling step k+1 while step k runs: the GPU waits only for what is left over.
            cpu_s = max(0.0, cpu_s - span_s)
        return StepBreakdown(
            total_s=cpu_s + span_s,
            cpu_s=cpu_s,
            kernel_s=kernel_s,
            launch_gap_s=launch_gap_s,
            forward_s=forward_s,
            compute_s=compute_s,
            memory_s=memory_s,
            comm_s=comm_s,
            draft_s=draft_s,
            util_busy_s=span_s + (cpu_s if cpu_s < _UTIL_RESOLUTION_S else 0.0),
            sm_active_s=(min(forward_s, roof_s + fixed_s) + draft_s) * _SM_BUSY
            + max(0.0, forward_s - roof_s - fixed_s) * _SM_BUSY_TINY
            + comm_s * _SM_BUSY_NCCL,
            tensor_active_s=compute_s * _TENSOR_AT_COMPUTE_ROOF,
            dram_active_s=memory_s * _DRAM_AT_MEMORY_ROOF,
            flops=cost.flops,
            bytes=cost.bytes,
            comm_bytes=self._comm_bytes(num_tokens),
            num_kernels=self.num_kernels,
            bound="compute" if compute_s >= memory_s else "memory",
        )

    def decode_run(
        self, batch: int, context_sum: int, max_steps: int, start_ts: float, until_ts: float
    ) -> DecodeRunCost:
        """Up to `max_steps` decode steps of `batch` sequences from `start_ts`, stopping after
        the first that ends at or after `until_ts`.

        Over a run the context grows by one token per sequence and step, and a decode step's
        parts are linear in context, so the steps in between are interpolated between the
        first and the last: two `step_cost` calls whatever the run's length.
        """
        key = (batch, context_sum)
        if self._last_first is not None and self._last_first[0] == key:
            first = self._last_first[1]
        else:
            first = self.step_cost(BatchShape((), batch, context_sum, batch))
            self._last_first = (key, first)
        # one step, or the first reaches `until_ts`: what the arrays below give, without them
        if max_steps == 1 or start_ts + first.total_s >= until_ts:
            memory_bound_s = first.total_s if first.compute_s - first.memory_s < 0 else 0.0
            return DecodeRunCost((start_ts + first.total_s,), first, memory_bound_s)
        last = first
        if max_steps > 1:
            last_context = context_sum + (max_steps - 1) * batch
            last = self.step_cost(BatchShape((), batch, last_context, batch))
        span = max(1, max_steps - 1)
        # Steps only lengthen as the context grows, so the first step's length bounds the count.
        horizon_s = until_ts - start_ts
        if horizon_s < first.total_s * max_steps:
            max_steps = max(1, min(max_steps, int(horizon_s / first.total_s) + 2))
        position = np.arange(max_steps) / span
        durations = first.total_s + (last.total_s - first.total_s) * position
        ends = start_ts + np.cumsum(durations)
        num_steps = min(int(np.searchsorted(ends, until_ts, side="left")) + 1, max_steps)
        weight = num_steps * (num_steps - 1) / 2 / span  # Σ position over the steps taken
        values = [
            num_steps * getattr(first, name) + weight * (getattr(last, name) - getattr(first, name))
            for name in _SUMMED
        ]
        merged = dict(zip(_SUMMED, values, strict=True))
        bound: Bound = "compute" if merged["compute_s"] >= merged["memory_s"] else "memory"
        first_margin = first.compute_s - first.memory_s
        last_margin = last.compute_s - last.memory_s
        # The margin is monotonic over the steps: when its ends agree, so do all the steps.
        end_margin = first_margin + (last_margin - first_margin) * ((num_steps - 1) / span)
        taken = durations[:num_steps]
        if first_margin < 0 and end_margin < 0:
            memory_bound_s = float(taken.sum())
        elif first_margin >= 0 and end_margin >= 0:
            memory_bound_s = 0.0
        else:
            margin = first_margin + (last_margin - first_margin) * position[:num_steps]
            memory_bound_s = float(taken[margin < 0].sum())
        return DecodeRunCost(
            step_end_ts=tuple(ends[:num_steps].tolist()),
            total=StepBreakdown(**merged, num_kernels=first.num_kernels, bound=bound),
            memory_bound_s=memory_bound_s,
        )


def _micro_shape(shape: BatchShape, in_flight: int) -> BatchShape:
    """The largest of `in_flight` micro-batches the step's batch splits into: every
    `in_flight`-th prefill chunk, its share of the decode sequences."""
    seqs = -(-shape.num_decode_seqs // in_flight)
    share = seqs / shape.num_decode_seqs if shape.num_decode_seqs else 0.0
    return BatchShape(
        prefill_chunks=shape.prefill_chunks[::in_flight],
        num_decode_seqs=seqs,
        decode_context_sum=round(shape.decode_context_sum * share),
        num_decode_tokens=round(shape.num_decode_tokens * share),
        max_draft_tokens=shape.max_draft_tokens,
    )


def gpu_activity(scenario: Scenario) -> tuple[float, ...]:
    """Each GPU's activity as a share of the busiest GPU's, stage by stage (a stage's
    tensor-parallel GPUs together): the last stage is the slowest (it also runs the
    logits and the sampler), the others share the rest evenly; 1.0 each without PP."""
    pipeline = scenario.pipeline_parallel
    stages, skew = pipeline.size, pipeline.stage_imbalance
    if stages == 1:
        return (1.0,) * scenario.tensor_parallel
    other = max(0.0, (stages - skew) / (stages - 1)) / skew
    per_stage = [other] * (stages - 1) + [1.0]
    return tuple(share for share in per_stage for _ in range(scenario.tensor_parallel))
