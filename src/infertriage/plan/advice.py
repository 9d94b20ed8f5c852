"""plan, level 1: which parallel strategy to run a model with, and why.

Takes `PlanInputs` (model, GPU, how many GPUs and per node); gives a
`ParallelAdvice`: one instance per GPU with data parallelism when the model
fits one GPU; otherwise the smallest tensor parallelism that fits inside one
node's NVLink domain; pipeline parallelism only across nodes; expert
parallelism for MoE. Each choice comes with its reason in one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.plan.capacity import (
    DEFAULT_BUBBLE_TARGET,
    PlanInputs,
    make_capacity_plan,
    micro_batches_for,
)
from infertriage.plan.memory import weight_bytes
from infertriage.schemas.errors import UserError
from infertriage.schemas.units import GIB

__all__ = [
    "ParallelAdvice",
    "advise_parallelism",
    "fits_one_request",
    "smallest_replica_tp",
    "tp_candidates",
]


@dataclass(frozen=True, slots=True)
class ParallelAdvice:
    tp: int
    pp: int
    ep: bool
    dp: int  # instances (replicas) the GPUs hold
    reasons: tuple[str, ...]

    @property
    def gpus_per_instance(self) -> int:
        return self.tp * self.pp


def fits_one_request(inputs: PlanInputs) -> bool:
    """Weights, overheads and at least one full-length request fit each GPU."""
    try:
        plan = make_capacity_plan(inputs.replace(concurrency=1, num_gpus=None))
    except UserError:
        return False
    needed = -(-inputs.max_model_len // inputs.block_size)
    return plan.kv.usable_blocks >= needed


def smallest_replica_tp(inputs: PlanInputs) -> int:
    """The smallest tensor-parallel degree, halving from the deployed one, whose replicas each
    still fit their share of the load (`inputs.concurrency`) with the headroom kept: below the
    deployed degree, its all-reduces are a cost replicas would not pay. Stricter than
    `advise_parallelism`'s fit (one full-length request): the replicas carry the same load."""
    tp, smallest = inputs.tp, inputs.tp
    while tp > 1:
        tp //= 2
        share = max(1, inputs.concurrency // (inputs.tp // tp))
        try:
            fits = make_capacity_plan(
                inputs.replace(tp=tp, num_gpus=None, concurrency=share)
            ).fits_with_headroom
        except UserError:
            fits = False
        if not fits:
            break
        smallest = tp
    return smallest


def tp_candidates(inputs: PlanInputs, limit: int) -> list[int]:
    """Tensor-parallel degrees up to `limit` that divide the attention heads (powers of two)."""
    heads = inputs.model.num_attention_heads
    sizes = [size for size in (1, 2, 4, 8, 16) if size <= limit]
    return [size for size in sizes if heads % size == 0] or sizes


def _moe_reason(inputs: PlanInputs) -> tuple[bool, tuple[str, ...]]:
    if not inputs.model.is_moe:
        return False, ()
    return True, (
        f"{inputs.model.name} is a mixture of {inputs.model.num_experts} experts: enable expert "
        "parallelism (--enable-expert-parallel) so each rank holds whole experts instead of "
        "a slice of every one.",
    )


def advise_parallelism(inputs: PlanInputs) -> ParallelAdvice:
    num_gpus = inputs.num_gpus or inputs.gpus_per_instance
    total_weights = weight_bytes(inputs.model, inputs.dtype)
    if total_weights >= num_gpus * inputs.gpu.memory_bytes * inputs.gpu_memory_utilization:
        raise UserError(
            f"{inputs.model.name} in {inputs.dtype} needs {total_weights / GIB:.0f} GiB for its "
            f"weights alone but {num_gpus} × {inputs.gpu.name} hold "
            f"{num_gpus * inputs.gpu.memory_bytes / GIB:.0f} GiB; add GPUs or quantise."
        )
    ep, ep_reasons = _moe_reason(inputs)
    in_node = min(num_gpus, inputs.gpus_per_node)
    base = inputs.replace(pp=1)
    for tp in tp_candidates(inputs, in_node):
        if not fits_one_request(base.replace(tp=tp)):
            continue
        dp = num_gpus // tp
        if tp == 1:
            reason = (
                f"The weights ({total_weights / GIB:.1f} GiB) fit one {inputs.gpu.name}: run one "
                f"instance per GPU and scale throughput with data parallelism ({dp} replicas)."
            )
        else:
            reason = (
                f"The model does not fit one GPU; TP={tp} is the smallest tensor parallelism "
                f"that fits, inside one node ({inputs.gpu.link}); {dp} replica(s)."
            )
        reasons = (reason, *_link_warning(inputs, tp), *ep_reasons)
        return ParallelAdvice(tp=tp, pp=1, ep=ep, dp=dp, reasons=reasons)
    return _across_nodes(inputs, num_gpus, ep, ep_reasons)


def _link_warning(inputs: PlanInputs, tp: int) -> tuple[str, ...]:
    if tp > 1 and inputs.gpu.link == "pcie":
        return (
            f"{inputs.gpu.name} has no NVLink: TP={tp} all-reduces cross PCIe twice per layer; "
            "expect communication to take a large share of each step.",
        )
    return ()


def _across_nodes(
    inputs: PlanInputs, num_gpus: int, ep: bool, ep_reasons: tuple[str, ...]
) -> ParallelAdvice:
    tp = min(inputs.gpus_per_node, num_gpus)
    for pp in range(2, num_gpus // tp + 1):
        if fits_one_request(inputs.replace(tp=tp, pp=pp)):
            reason = (
                f"One node ({tp} GPUs) is not enough: TP={tp} inside each node and PP={pp} across "
                f"nodes; keep at least {micro_batches_for(pp)} micro-batches in flight (enough "
                f"concurrent requests) or the pipeline idles more than "
                f"{DEFAULT_BUBBLE_TARGET:.0%} of the time."
            )
            return ParallelAdvice(
                tp=tp, pp=pp, ep=ep, dp=num_gpus // (tp * pp), reasons=(reason, *ep_reasons)
            )
    raise UserError(
        f"{inputs.model.name} does not fit {num_gpus} × {inputs.gpu.name} with room for one "
        f"{inputs.max_model_len}-token request; add GPUs, quantise or lower --max-model-len."
    )
