"""plan, level 1: pipeline parallelism — its depth, the micro-batches it needs, its TTFT cost.

Takes `PlanInputs` (model, GPU, GPUs per node, lengths, concurrency per replica) and the
bubble to plan for; gives a `PipelinePlan` when the model does not fit one node's GPUs at
the largest TP a node's link carries (None when it does: PP is not needed): the stages `p`
(the fewest that fit, TP inside each node), the bubble `(p − 1) / (m + p − 1)` for `m`
micro-batches in flight (requests' batches, one per stage step) over a few `m`, the fewest
`m` that keep the bubble within the target and the requests in flight that takes, the
bubble at the planned concurrency, and TTFT: a prompt crosses the stages one after another
(each holds `1/p` of the layers, so the compute is the whole model's at the stage's TP) plus
`p − 1` hops of its hidden states (`capacity.pp_hop_s`), against a TP over all `tp · p` GPUs
whose all-reduces cross nodes at PCIe-class speed (the alternative PP avoids) and against
the same TP were all the GPUs one NVLink domain (what PP gives up: one request's compute is
never split across stages).
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.plan.advice import fits_one_request, tp_candidates
from infertriage.plan.capacity import (
    DEFAULT_BUBBLE_TARGET,
    PlanInputs,
    micro_batches_for,
    pp_bubble,
    pp_hop_s,
)
from infertriage.plan.roofline import prefill_time

__all__ = [
    "PipelinePlan",
    "make_pipeline_plan",
    "pipeline_stages",
]

_MAX_STAGES = 16


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    tp: int  # inside each node
    pp: int  # stages, one node each
    target_bubble: float
    micro_batches: int  # the fewest in flight that keep the bubble within the target
    bubbles: tuple[tuple[int, float], ...]  # (micro-batches, bubble) for a few depths
    concurrency: int  # the planned requests in flight per replica
    bubble_at_concurrency: float  # each request its own micro-batch at the most
    hops_s: float  # a prompt's `p − 1` stage-to-stage sends
    ttft_s: float  # a request alone through the pipeline
    ttft_wide_tp_s: float  # the same prompt at TP `tp · p`, all-reduces across nodes
    ttft_one_domain_s: float  # ... were all `tp · p` GPUs one NVLink domain (what PP gives up)
    reason: str


def pipeline_stages(inputs: PlanInputs) -> tuple[int, int] | None:
    """(tp, pp): None when one node fits the model; else the node's largest TP, fewest stages."""
    tps = tp_candidates(inputs, inputs.gpus_per_node)
    if any(fits_one_request(inputs.replace(tp=tp, pp=1)) for tp in tps):
        return None
    tp = max(tps)
    for pp in range(2, _MAX_STAGES + 1):
        if fits_one_request(inputs.replace(tp=tp, pp=pp)):
            return tp, pp
    return None


def make_pipeline_plan(
    inputs: PlanInputs, target_bubble: float = DEFAULT_BUBBLE_TARGET
) -> PipelinePlan | None:
    """The pipeline a model too big for one node needs (module docstring); None otherwise."""
    stages = pipeline_stages(inputs)
    if stages is None:
        return None
    tp, pp = stages
    staged = inputs.replace(tp=tp, pp=pp)
    prompt = inputs.input_len or max(1, inputs.max_model_len // 2)
    params = inputs.cost_params

    def prefill(width: int, link: str) -> float:
        cost = prefill_time(
            inputs.model,
            inputs.gpu,
            inputs.dtype,
            prompt,
            tp=width,
            kv_dtype=inputs.kv_dtype,
            params=params,
            interconnect=link,
        )
        return params.request_overhead_s + cost.total_s

    hops = pp_hop_s(staged, prompt)
    ttft = prefill(tp, inputs.gpu.link) + hops
    needed = micro_batches_for(pp, target_bubble)
    depths = sorted({pp, 2 * pp, 4 * pp, 8 * pp, needed})
    return PipelinePlan(
        tp=tp,
        pp=pp,
        target_bubble=target_bubble,
        micro_batches=needed,
        bubbles=tuple((m, pp_bubble(pp, m)) for m in depths),
        concurrency=inputs.concurrency,
        bubble_at_concurrency=pp_bubble(pp, max(1, inputs.concurrency)),
        hops_s=hops,
        ttft_s=ttft,
        ttft_wide_tp_s=prefill(tp * pp, "pcie"),
        ttft_one_domain_s=prefill(tp * pp, inputs.gpu.link),
        reason=(
            f"{inputs.model.name} does not fit one node's {inputs.gpus_per_node} GPUs at TP "
            f"{tp} with one {inputs.max_model_len}-token request: TP {tp} inside each node, "
            f"PP {pp} across nodes."
        ),
    )
