"""plan, level 1: what a CPU KV-offload tier buys — more prefixes cached, each hit loaded over PCIe.

Takes a `CapacityPlan` (the instance's KV cache and the running requests' demand), the
tier's size in bytes, the workload's prefix reuse (the share of each prompt a cached prefix
covers) and optionally the rate; gives an `OffloadPlan`: the prefix tokens the GPU's spare
KV cache holds beside the running requests, the tokens the tier adds (each rank stores its
own shard, so a token costs the instance's per-GPU bytes times its GPUs), how many prefixes
of the workload's length each holds, and for one hit on the tier the prefill it saves (the
whole prompt's prefill less the suffix's after a cached prefix, on the roofline) against
the time to load the prefix's KV cache host → GPU (each rank its shard over its own PCIe
link: `GpuSpec.pcie_bw_bytes_per_s` at the cost model's PCIe efficiency), and whether a hit
pays. How many extra hits the tier gives depends on how many distinct prefixes the workload
cycles through, which a plan does not know: it says between which counts the tier matters.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.plan.capacity import CapacityPlan
from infertriage.plan.memory import kv_bytes_per_token
from infertriage.plan.servestep import prefill_step_s
from infertriage.schemas.errors import UserError

__all__ = ["OffloadPlan", "make_offload_plan"]


@dataclass(frozen=True, slots=True)
class OffloadPlan:
    offload_bytes: float  # the CPU tier, per instance
    prefix_reuse: float  # share of each prompt a cached prefix covers
    prefix_tokens: int  # `prefix_reuse × input_len`
    bytes_per_token: int  # the instance's (all ranks), as the tier stores it
    gpu_spare_tokens: int  # the GPU's KV cache beyond the running requests' peak demand
    tier_tokens: int  # what the tier adds
    gpu_prefixes: int  # prefixes of `prefix_tokens` the GPU cache holds beside the load
    tier_prefixes: int  # ... the tier holds besides
    host_bw_bytes_per_s: float  # host → GPU, per GPU, as the plan takes it
    load_s: float  # one prefix's KV cache host → GPU
    saved_s: float  # the prefill one hit saves
    pays: bool  # a hit on the tier beats recomputing the prefix
    rate: float | None  # requests/s, when given
    # at `rate`, were every prefix a hit on the tier: instance-seconds of prefill saved per
    # second (an upper bound; the hits the tier adds depend on the distinct prefixes)
    max_saved_s_per_s: float | None
    verdict: str


def _verdict(saved: float, load: float, gpu_prefixes: int, tier_prefixes: int) -> str:
    if saved > load:
        return (
            f"pays: a hit on the tier saves {saved * 1e3:.1f} ms of prefill for "
            f"{load * 1e3:.1f} ms of PCIe load ({saved / max(load, 1e-12):.1f}×); it matters for "
            f"a workload cycling through more than {gpu_prefixes:,} and up to "
            f"{gpu_prefixes + tier_prefixes:,} distinct prefixes."
        )
    return (
        f"does not pay: loading a prefix over PCIe ({load * 1e3:.1f} ms) takes longer than "
        f"recomputing it ({saved * 1e3:.1f} ms); keep the tier off for this model."
    )


def make_offload_plan(
    plan: CapacityPlan, offload_bytes: float, prefix_reuse: float, rate: float | None = None
) -> OffloadPlan:
    """What `offload_bytes` of CPU KV tier buys this instance (module docstring)."""
    inputs = plan.inputs
    if inputs.input_len is None:
        raise UserError("what offload buys needs --input-len (the prompt a prefix is part of).")
    if not 0 <= prefix_reuse <= 1:
        raise UserError(f"--prefix-reuse must be a fraction from 0 to 1, not {prefix_reuse}.")
    prompt = inputs.input_len
    prefix = min(prompt - 1, round(prefix_reuse * prompt))
    per_gpu = kv_bytes_per_token(inputs.model, inputs.kv_dtype, inputs.tp)
    bytes_per_token = per_gpu * inputs.tp
    spare = max(0, plan.kv.num_tokens - inputs.concurrency * inputs.tokens_per_request)
    tier = int(offload_bytes // bytes_per_token) if bytes_per_token else 0
    bandwidth = inputs.gpu.pcie_bw_bytes_per_s * inputs.cost_params.pcie.bw_efficiency
    if prefix < 1:
        load = saved = 0.0
    else:
        load = prefix * per_gpu / bandwidth
        saved = prefill_step_s(plan.inputs, prompt) - prefill_step_s(
            plan.inputs, prompt - prefix, before=prefix
        )
    pays = prefix >= 1 and saved > load
    gpu_prefixes = spare // prefix if prefix else 0
    tier_prefixes = tier // prefix if prefix else 0
    verdict = (
        _verdict(saved, load, gpu_prefixes, tier_prefixes)
        if prefix >= 1
        else "no prefix is reused: the tier holds nothing a request reads back."
    )
    return OffloadPlan(
        offload_bytes=offload_bytes,
        prefix_reuse=prefix_reuse,
        prefix_tokens=prefix,
        bytes_per_token=bytes_per_token,
        gpu_spare_tokens=spare,
        tier_tokens=tier,
        gpu_prefixes=gpu_prefixes,
        tier_prefixes=tier_prefixes,
        host_bw_bytes_per_s=bandwidth,
        load_s=load,
        saved_s=saved,
        pays=pays,
        rate=rate,
        max_saved_s_per_s=rate * (saved - load) if rate is not None and pays else None,
        verdict=verdict,
    )
