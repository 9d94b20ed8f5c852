"""diagnose, level 3: memory-layer rules — KV pressure, leaks, headroom, prefix caching."""

from __future__ import annotations

import math

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above, severity_below
from infertriage.diagnose.symptom import current, flag, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.MEMORY


def kv_blocks_short(ev: Evidence, t: Thresholds) -> tuple[float, float] | None:
    """(blocks a typical request needs, blocks free at peak) when the next one cannot fit.

    With coarse blocks (vLLM's CPU build: 128 tokens) and long prompts the cache is
    full well below 95 % used: 9 blocks a request and 5 free is a full cache at 78 %.
    None when it could fit, or when the block count, block size or lengths are unknown.
    """
    total, size = ev.get("config.num_gpu_blocks"), ev.get("config.block_size")
    prompt, output = ev.get("client.mean_prompt_tokens"), ev.get("client.mean_output_tokens")
    usage = ev.get("kv.usage_max")
    if not total or not size or prompt is None or output is None or usage is None:
        return None
    needed = math.ceil((prompt + output) / size)
    free = max(0.0, (1.0 - usage) * total)
    return (float(needed), free) if free + t.kv_usage_rounding * total < needed else None


def few_prompts(ev: Evidence, t: Thresholds) -> bool:
    """The prefix reuse sent was counted over fewer than `prefix_min_prompts` prompts: a hit
    rate held against it (or the ranks' against each other) is a few routings' chance, not a
    cache's. Unknown (no client): judged as read."""
    prompts = ev.get("workload.prompts")
    return prompts is not None and prompts < t.prefix_min_prompts


# preemptions are not needed: SGLang and vLLM V1's log never count them, and a full cache
# with a queue is the finding without them (they make it a bottleneck when present)
@rule("memory.kv_pressure", _L, ("kv.usage_max", "queue.waiting_max"))
def kv_pressure(ev: Evidence, t: Thresholds) -> Finding | None:
    usage = ev.get("kv.usage_max") or 0.0
    preempted = ev.get("preemptions.total") or 0.0
    waiting = ev.get("queue.waiting_max") or 0.0
    short = kv_blocks_short(ev, t)
    if (usage < t.kv_full and short is None) or (preempted <= 0 and waiting <= 0):
        return None
    cause = f"{preempted:.0f} preemptions" if preempted > 0 else f"up to {waiting:.0f} waiting"
    full = f"KV cache full ({usage:.0%} used)"
    if usage < t.kv_full and short is not None:
        full = (
            f"KV cache full for another request ({usage:.0%} used: "
            f"{short[1]:.0f} blocks free, {short[0]:.0f} needed)"
        )
    return make_finding(
        "memory.kv_pressure",
        _L,
        # a preempted request is computed twice: wasted GPU time whatever the SLOs say
        bottleneck=slo_missed(ev, t) or preempted > 0,
        severity=max(severity_above(usage, t.kv_full, 1.0), 0.5 if preempted or short else 0.3),
        explains=0.9 if preempted > 0 else 0.6,
        title=f"{full} with {cause}",
        evidence=ev,
        used=(
            ("kv.usage_max", t.kv_full),
            ("preemptions.total", 0.0),
            ("queue.waiting_max", 0.0),
            ("config.num_gpu_blocks", None),
            ("client.mean_prompt_tokens", None),
        ),
        explanation=(
            "Running sequences fill the KV blocks; new requests wait for blocks and running "
            "ones are preempted and recomputed, which shows up as queueing and high TTFT."
        ),
        next_steps=(
            f"raise `{flag(ev, Knob.MEMORY_FRACTION)}`"
            + current(ev, "config.gpu_memory_utilization"),
            "store the KV cache in FP8: `--kv-cache-dtype fp8`",
            f"lower `{flag(ev, Knob.MAX_SEATS)}`"
            + current(ev, "config.max_num_seqs")
            + " so requests queue instead of being preempted",
            f"lower `{flag(ev, Knob.MAX_CONTEXT)}`" + current(ev, "config.max_model_len"),
            "add GPUs (tensor parallelism or replicas); size it with `infertriage plan`",
        ),
    )


@rule("memory.kv_leak", _L, ("kv.usage_after_drain",))
def kv_leak(ev: Evidence, t: Thresholds) -> Finding | None:
    residue = ev.get("kv.usage_after_drain") or 0.0
    slope = ev.get("kv.usage_idle_slope")
    peak = ev.get("kv.usage_max") or 0.0
    kept = min(1.0, residue / peak) if peak > 0 else 0.0
    if residue < t.kv_drain_residue and (residue < t.kv_leak_floor or kept < t.kv_leak_of_peak):
        return None
    slope_text = f"; usage grows {slope * 3600:.1%} per hour of load" if slope else ""
    kept_text = f" ({kept:.0%} of the load's peak)" if peak > 0 else ""
    return make_finding(
        "memory.kv_leak",
        _L,
        bottleneck=True,
        # how much of the peak never came back is how sure and how bad the leak is
        severity=max(severity_above(residue, t.kv_drain_residue, 0.3), kept),
        explains=0.8,
        title=(
            f"KV blocks not returned: {residue:.1%} still used after load drained"
            f"{kept_text}{slope_text}"
        ),
        evidence=ev,
        used=(
            ("kv.usage_after_drain", t.kv_drain_residue),
            ("kv.usage_max", None),
            ("kv.usage_idle_slope", 0.0),
        ),
        explanation=(
            "With no request running the KV cache should be empty; blocks that stay taken leak, "
            "the free pool shrinks with every request until preemptions start."
        ),
        next_steps=(
            "report the engine version and the request pattern upstream; restart to reclaim",
            "until fixed, restart the server on a schedule and alert on `vllm:kv_cache_usage_perc` "
            "at idle",
        ),
    )


@rule("memory.headroom", _L, ("gpu.fb_used_fraction",))
def headroom(ev: Evidence, t: Thresholds) -> Finding | None:
    used = ev.get("gpu.fb_used_fraction") or 0.0
    # vLLM at utilisation 0.90 takes 90 % to the block, give or take its rounding
    if 1 - used >= t.gpu_memory_headroom - t.kv_usage_rounding:
        return None
    return make_finding(
        "memory.headroom",
        _L,
        bottleneck=False,
        severity=severity_below(1 - used, t.gpu_memory_headroom, 0.0),
        explains=0.1,
        title=f"only {1 - used:.1%} of GPU memory free",
        evidence=ev,
        used=(("gpu.fb_used_fraction", 1 - t.gpu_memory_headroom + t.kv_usage_rounding),),
        explanation="Bursts, fragmentation and CUDA graphs need room; an OOM restarts the server.",
        next_steps=(
            f"lower `{flag(ev, Knob.MEMORY_FRACTION)}`"
            + current(ev, "config.gpu_memory_utilization"),
        ),
    )


@rule("memory.prefix_cache_low", _L, ("prefix_cache.hit_rate", "workload.prefix_reuse"))
def prefix_cache_low(ev: Evidence, t: Thresholds) -> Finding | None:
    """The server's prefix-cache hit rate under `prefix_hit_share` of the prefix reuse the
    client sent (`workload.prefix_reuse`: prompt tokens, in whole blocks, an earlier request
    of the run already sent — the most a prefix cache could hit), over at least
    `prefix_min_prompts` prompts. With the KV cache full
    (`kv_full`) the prefixes were evicted before their reuse; else the cache is off or the
    prefix is not byte-identical. With data-parallel ranks `parallelism.prefix_affinity_lost`
    says whether routing lost them."""
    hit = ev.get("prefix_cache.hit_rate") or 0.0
    reuse = ev.get("workload.prefix_reuse") or 0.0
    if reuse < 0.1 or hit >= t.prefix_hit_share * reuse or few_prompts(ev, t):
        return None
    # vLLM's KV usage counts the blocks running requests hold, not the cached ones a new
    # prompt evicts: a full cache proves eviction, a low one does not rule it out
    full = (ev.get("kv.usage_max") or 0.0) >= t.kv_full
    cause = (
        "the KV cache ran full, so shared prefixes were evicted before they were reused"
        if full
        else "the server recomputed them (prefix caching off, or the prefixes evicted "
        "before their reuse)"
    )
    room = (
        "give the cache room so prefixes outlive their reuse: more KV cache (`"
        + flag(ev, Knob.MEMORY_FRACTION)
        + "`, fewer sequences at once) or a host offload tier (`"
        + flag(ev, Knob.OFFLOAD_SIZE)
        + "`)"
    )
    enable = f"check that prefix caching is on (`{flag(ev, Knob.PREFIX_CACHING)}`)"
    return make_finding(
        "memory.prefix_cache_low",
        _L,
        bottleneck=False,
        severity=severity_below(hit / reuse, t.prefix_hit_share, 0.0),
        explains=reuse - hit,
        title=(
            f"prefix-cache hit rate {hit:.0%} though {reuse:.0%} of prompt tokens repeat an "
            f"earlier prefix: {cause}"
        ),
        evidence=ev,
        used=(
            ("prefix_cache.hit_rate", t.prefix_hit_share * reuse),
            ("workload.prefix_reuse", 0.1),
            ("workload.prompts", t.prefix_min_prompts),
            ("kv.usage_max", t.kv_full),
        ),
        explanation=(
            "A prefix cache computes a shared system prompt or a session's history once; "
            "the clients sent these prefixes again, and the server computed them again. "
            "A prefix is evicted when the prompts sent between two of its uses hold more "
            "tokens than the cache."
        ),
        next_steps=(
            *((room, enable) if full else (enable, room)),
            "keep the shared prefix byte-identical and at the start of the prompt (no "
            "timestamps or request ids before it)",
        ),
    )


@rule("memory.longer_than_plan", _L, ("client.mean_prompt_tokens", "plan.tokens_per_request"))
def longer_than_plan(ev: Evidence, t: Thresholds) -> Finding | None:
    prompt = ev.get("client.mean_prompt_tokens") or 0.0
    planned = ev.get("plan.tokens_per_request") or 0.0
    if planned <= 0 or prompt <= t.plan_slack * planned:
        return None
    return make_finding(
        "memory.longer_than_plan",
        _L,
        bottleneck=False,
        severity=severity_above(prompt / planned, t.plan_slack, 3.0),
        explains=0.3,
        title=f"prompts average {prompt:.0f} tokens; the capacity plan assumed {planned:.0f}",
        evidence=ev,
        used=(("client.mean_prompt_tokens", t.plan_slack * planned),),
        explanation="The KV cache was sized for shorter requests; fewer fit at once.",
        next_steps=("re-plan with `infertriage plan --from-run RUN`",),
    )


@rule("memory.out_of_memory", _L, ("log.oom_errors",))
def out_of_memory(ev: Evidence, t: Thresholds) -> Finding | None:
    errors = ev.get("log.oom_errors") or 0.0
    if errors < 1:
        return None
    return make_finding(
        "memory.out_of_memory",
        _L,
        bottleneck=True,
        severity=1.0,
        explains=1.0,
        title=f"the server's log shows {errors:.0f} out-of-memory error(s)",
        evidence=ev,
        used=(("log.oom_errors", 0.0),),
        explanation=(
            "A forward pass asked for more GPU memory than was left beside the weights and the "
            "KV cache: the requests in it failed, or the engine died."
        ),
        next_steps=(
            "lower `gpu_memory_utilization` a little to leave room for activations, or "
            "`max_num_batched_tokens` (the largest prefill chunk)",
            "`infertriage plan --model … --gpu …` shows the activation peak beside the KV cache",
        ),
    )
