"""diagnose, level 3: parallelism-layer rules for expert parallelism (hot experts: one EP
rank carries more of the routed tokens) and pipeline parallelism (bubbles: stages idle for
too few micro-batches, or waiting on one slower stage)."""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above, severity_below
from infertriage.diagnose.symptom import current, flag, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.PARALLELISM


@rule("parallelism.expert_imbalance", _L, ("ep.hot_rank_ratio",))
def expert_imbalance(ev: Evidence, t: Thresholds) -> Finding | None:
    """The busiest expert-parallel rank routes `ep_hot_rank` × the mean rank's tokens or more
    (the engine's EPLB balancedness, mean over max, at or under its inverse): every MoE
    layer's all-to-all waits for that rank. A bottleneck when an SLO is missed or the skew
    reaches `ep_hot_rank_bound` (half the EP GPUs' expert time spent waiting)."""
    ratio = ev.get("ep.hot_rank_ratio") or 1.0
    if ratio < t.ep_hot_rank:
        return None
    balance = 1.0 / ratio
    worst = ev.get("ep.balancedness_worst")
    said = f", the worst MoE layer at {worst:.2f}" if worst is not None else ""
    ep = ev.get("config.expert_parallel")
    ranks = f" of {ep:.0f}" if ep is not None and ep >= 2 else ""
    return make_finding(
        "parallelism.expert_imbalance",
        _L,
        bottleneck=slo_missed(ev, t) or ratio >= t.ep_hot_rank_bound,
        severity=severity_above(ratio, t.ep_hot_rank, 2 * t.ep_hot_rank_bound),
        explains=min(1.0, 1.0 - balance),
        title=(
            f"hot experts: the busiest expert-parallel rank{ranks} routes {ratio:.1f}× the "
            f"mean rank's tokens (EPLB balancedness {balance:.2f}{said})"
        ),
        evidence=ev,
        used=(
            ("ep.hot_rank_ratio", t.ep_hot_rank),
            ("ep.balancedness_mean", 1.0 / t.ep_hot_rank),
            ("ep.balancedness_worst", None),
            ("config.expert_parallel", None),
        ),
        explanation=(
            "With expert parallelism each MoE layer sends every token to the ranks holding its "
            "experts and waits for all of them in the all-to-all: the rank with the hot experts "
            f"sets the pace of every layer, and the others wait {1.0 - balance:.0%} of their "
            "expert time. Balancing the experts over the ranks (replicating the hot ones) "
            "shortens every step."
        ),
        next_steps=(
            f"balance the experts: vLLM `{flag(ev, Knob.EXPERT_BALANCER)}` (with "
            "`--enable-expert-parallel`) and `--eplb-config '{\"num_redundant_experts\": N}'` "
            "so the hottest experts are replicated on other ranks; SGLang `--enable-eplb` "
            "with `--ep-num-redundant-experts N`",
            "rebalance as often as the traffic shifts: vLLM `--eplb-config` `window_size` / "
            "`step_interval` (steps of load recorded / between rearrangements); SGLang "
            "`--eplb-rebalance-num-iterations`, or start from a recorded distribution with "
            "`--init-expert-location`",
            "watch the balance: vLLM `vllm:eplb_balancedness_min` / `_avg` (or `--eplb-config "
            "'{\"log_balancedness\": true}'` and its `EPLB step: … balancedness=` log lines), "
            "SGLang `sglang:eplb_balancedness` (SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC=1)",
        ),
    )


@rule("parallelism.pipeline_bubble", _L, ("config.pipeline_parallel", "gpu.busy_by_gpu_mean"))
def pipeline_bubble(ev: Evidence, t: Thresholds) -> Finding | None:
    """With two pipeline stages or more, the stages' GPUs idle in a pattern the pipeline
    explains: one GPU (a stage) busy `pp_stage_imbalance` × the mean GPU or more while busy
    at least `pp_busy_stage` (the others wait for that stage), or every GPU busy under
    `pp_bubble_busy` on average while at least one request per stage runs (too few
    micro-batches fill the pipeline). A bottleneck when an SLO is missed."""
    stages = ev.get("config.pipeline_parallel") or 1.0
    mean = ev.get("gpu.busy_by_gpu_mean")
    busiest = ev.get("gpu.busy_by_gpu_max")
    if stages < 2 or mean is None or busiest is None or mean <= 0:
        return None
    in_flight = ev.get("pp.requests_in_flight")
    spread = busiest / mean
    unbalanced = spread >= t.pp_stage_imbalance and busiest >= t.pp_busy_stage
    starved = mean <= t.pp_bubble_busy and in_flight is not None and in_flight >= stages
    if not unbalanced and not starved:
        return None
    idlest = ev.get("gpu.busy_by_gpu_min")
    low = f", the idlest {idlest:.0%}" if idlest is not None else ""
    if unbalanced:
        title = (
            f"an unbalanced pipeline stage: its GPU is busy {busiest:.0%} against the mean "
            f"GPU's {mean:.0%}{low} ({stages:.0f} stages): the other stages wait for it"
        )
        severity = severity_above(spread, t.pp_stage_imbalance, 2.0)  # half of each round lost
        explains = 1.0 - mean / busiest
    else:
        title = (
            f"pipeline bubbles: the GPUs are busy {mean:.0%} on average with "
            f"{in_flight:.0f} requests in flight over {stages:.0f} stages"
        )
        severity = severity_below(mean, t.pp_bubble_busy, 0.1)
        explains = 1.0 - mean
    return make_finding(
        "parallelism.pipeline_bubble",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity,
        explains=min(1.0, max(0.0, explains)),
        title=title,
        evidence=ev,
        used=(
            ("config.pipeline_parallel", 2.0),
            ("gpu.busy_by_gpu_max", t.pp_busy_stage),
            ("gpu.busy_by_gpu_mean", t.pp_bubble_busy),
            ("gpu.busy_by_gpu_min", None),
            ("pp.requests_in_flight", stages),
        ),
        explanation=(
            "Pipeline parallelism runs each batch through the stages in turn; a stage's GPUs "
            "work only while a micro-batch is at that stage. With fewer micro-batches in "
            "flight than stages each GPU idles the rest of the round (the bubble), and a "
            "stage slower than the others sets the pace while they wait for it."
        ),
        next_steps=_bubble_steps(ev, unbalanced),
    )


def _bubble_steps(ev: Evidence, unbalanced: bool) -> tuple[str, ...]:
    fewer = (
        f"use fewer stages: tensor parallelism inside a node (`{flag(ev, Knob.TENSOR_PARALLEL)}`"
        f"), pipeline stages across nodes only (`{flag(ev, Knob.PIPELINE_PARALLEL)}`"
        + current(ev, "config.pipeline_parallel")
        + ")"
    )
    if unbalanced:
        return (
            "rebalance the layers over the stages: vLLM's `VLLM_PP_LAYER_PARTITION` (layers "
            "per stage, comma-separated; give the last stage fewer, it also runs the logits "
            "and the sampler)",
            fewer,
            "read each GPU apart under load (dcgm-exporter's `DCGM_FI_PROF_GR_ENGINE_ACTIVE` by "
            "`gpu`): the busiest is the slow stage's",
        )
    return (
        "keep at least one micro-batch per stage in flight: more requests at once (`"
        f"{flag(ev, Knob.MAX_SEATS)}`{current(ev, 'config.max_num_seqs')}, the client's "
        "concurrency); SGLang sizes its micro-batches with `--pp-max-micro-batch-size` and "
        "`--pp-async-batch-depth`",
        fewer,
    )
