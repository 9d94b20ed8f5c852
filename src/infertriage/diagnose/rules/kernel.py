"""diagnose, level 3: kernel-layer rules — launches, CUDA graphs, attention, recompiles, syncs."""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.diagnose.symptom import engine_flag, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.KERNEL


def _graphs_unused(ev: Evidence, t: Thresholds) -> str:
    """How CUDA graphs are off: "off" (the server says so), "not used" (the trace's kernels
    ran outside graphs: off, or a batch beyond the capture sizes), or "" when in use."""
    reported = ev.get("config.cuda_graphs")
    if reported is not None and reported < 1:
        return "off"
    if (ev.get("trace.cuda_graph_fraction") or 0.0) < t.cuda_graph_fraction_on:
        return "off" if reported is None else "not used"
    return ""


def roofline_gap_explained(ev: Evidence, idle: float) -> float | None:
    """The share of the gap to the roofline that `idle` GPU time explains: removing it
    would raise throughput by 1/(1 − idle), up to the roofline. None without a roofline."""
    measured = ev.get("client.throughput_tok_s")
    ceiling = ev.get("plan.throughput_roofline_tok_s")
    if measured is None or not ceiling or measured >= ceiling or idle >= 1:
        return None
    return (min(measured / (1 - idle), ceiling) - measured) / (ceiling - measured)


def _graphs_on(ev: Evidence) -> str:
    eager = engine_flag(ev, Knob.EAGER)
    if eager is None:  # the engine is not known: the two that have such a flag
        return (
            "turn CUDA graphs on: drop `--enforce-eager` (vLLM) / `--disable-cuda-graph` (SGLang)"
        )
    return f"turn CUDA graphs on: drop `{eager}`"


@rule(
    "kernel.launch_bound",
    _L,
    ("trace.launch_gap_fraction", "trace.cuda_graph_fraction", "trace.kernels_per_step"),
)
def launch_bound(ev: Evidence, t: Thresholds) -> Finding | None:
    """CUDA graphs off and the GPU idle between kernels: the seeds' case study.

    A bottleneck when an SLO is missed, when the idle time explains at least
    `launch_gap_roofline_share` of the gap to the roofline, or when it reaches
    `launch_bound_fraction` of the GPU's time; otherwise a warning.
    """
    gaps = ev.get("trace.launch_gap_fraction") or 0.0
    unused = _graphs_unused(ev, t)
    if gaps < t.launch_gap_fraction or not unused:
        return None
    kernels = ev.get("trace.kernels_per_step") or 0.0
    explained = roofline_gap_explained(ev, gaps)
    bottleneck = (
        slo_missed(ev, t)
        or gaps >= t.launch_bound_fraction
        or (explained is not None and explained >= t.launch_gap_roofline_share)
    )
    share = "" if explained is None else f", {explained:.0%} of the gap to the roofline"
    return make_finding(
        "kernel.launch_bound",
        _L,
        bottleneck=bottleneck,
        severity=severity_above(gaps, t.launch_gap_fraction, 0.8),
        explains=gaps if explained is None else max(gaps, explained),
        title=(
            f"CUDA graphs {unused}: {kernels:.0f} kernels per step launched one by one, the GPU "
            f"idle {gaps:.0%} of its time between them{share}"
        ),
        evidence=ev,
        used=(
            ("trace.launch_gap_fraction", t.launch_gap_fraction),
            ("trace.cuda_graph_fraction", t.cuda_graph_fraction_on),
        ),
        explanation=(
            "Without CUDA graphs every kernel pays a host launch; small decode kernels finish "
            "before the next launch arrives, so the GPU waits on the CPU. GPU 'utilisation' "
            "counts that time as busy."
        ),
        next_steps=(
            _graphs_on(ev),
            "widen the capture sizes (`--cuda-graph-sizes`) to cover the running batch",
        ),
    )


@rule("kernel.unfused_attention", _L, ("trace.attention_unfused",))
def unfused_attention(ev: Evidence, t: Thresholds) -> Finding | None:
    if (ev.get("trace.attention_unfused") or 0.0) < 1:
        return None
    return make_finding(
        "kernel.unfused_attention",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=0.7,
        explains=0.5,
        title="attention runs the unfused math path",
        evidence=ev,
        used=(("trace.attention_unfused", 0.0),),
        explanation="Materialising the score matrix moves far more bytes than a fused kernel.",
        next_steps=("select a fused backend (`VLLM_ATTENTION_BACKEND=FLASH_ATTN` or FLASHINFER)",),
    )


@rule("kernel.recompilations", _L, ("trace.recompilations",))
def recompilations(ev: Evidence, t: Thresholds) -> Finding | None:
    count = ev.get("trace.recompilations") or 0.0
    if count < t.recompilations:
        return None
    return make_finding(
        "kernel.recompilations",
        _L,
        bottleneck=False,
        severity=severity_above(count, 0, t.recompilations_full),
        explains=0.3,
        title=f"torch.compile recompiled {count:.0f} times",
        evidence=ev,
        used=(("trace.recompilations", t.recompilations),),
        explanation="Each recompilation stalls the engine for seconds.",
        next_steps=(
            "mark dynamic dimensions (`torch._dynamo.mark_dynamic`) and fix the capture sizes",
        ),
    )


@rule("kernel.host_wait", _L, ("trace.host_wait_fraction",))
def host_wait(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("trace.host_wait_fraction") or 0.0
    if share < t.host_wait_fraction:
        return None
    return make_finding(
        "kernel.host_wait",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(share, t.host_wait_fraction, 0.8),
        explains=share,
        title=f"the GPU waits on the host {share:.0%} of the time",
        evidence=ev,
        used=(("trace.host_wait_fraction", t.host_wait_fraction),),
        explanation=(
            "Idle time with no kernel queued: the CPU side (scheduling, sampling, or an API "
            "server sharing the engine's process or host) is late."
        ),
        next_steps=(
            "look at the scheduling layer's engine-loop CPU; enable async scheduling",
            "look at the application layer's API-server CPU per streamed token",
        ),
    )


@rule("kernel.sync_every_step", _L, ("trace.syncs_per_step",))
def sync_every_step(ev: Evidence, t: Thresholds) -> Finding | None:
    syncs = ev.get("trace.syncs_per_step") or 0.0
    if syncs < t.syncs_per_step:  # one per step is the sampler's (see Thresholds)
        return None
    return make_finding(
        "kernel.sync_every_step",
        _L,
        bottleneck=False,
        severity=severity_above(syncs, t.syncs_per_step, 10),
        explains=0.2,
        title=f"{syncs:.1f} device synchronisations per step",
        evidence=ev,
        used=(("trace.syncs_per_step", t.syncs_per_step),),
        explanation="A synchronisation drains the GPU queue and serialises host and device.",
        next_steps=("remove `.item()`/`.cpu()` calls from the step; use non-blocking copies",),
    )


@rule(
    "kernel.short_kernels",
    _L,
    ("trace.short_kernel_fraction", "trace.cuda_graph_fraction", "trace.gpu_idle_fraction"),
)
def short_kernels(ev: Evidence, t: Thresholds) -> Finding | None:
    """Most launches finish on the GPU before the host has launched the next, outside graphs.

    A warning: when the GPU is idle between them `kernel.launch_bound` says so.
    """
    short = ev.get("trace.short_kernel_fraction") or 0.0
    graphs = ev.get("trace.cuda_graph_fraction") or 0.0
    if short < t.short_kernel_fraction or graphs >= short:
        return None
    return make_finding(
        "kernel.short_kernels",
        _L,
        bottleneck=False,
        severity=severity_above(short, t.short_kernel_fraction, 1.0),
        explains=ev.get("trace.gpu_idle_fraction") or 0.0,
        title=f"{short:.0%} of kernels run shorter than their launch call",
        evidence=ev,
        used=(
            ("trace.short_kernel_fraction", t.short_kernel_fraction),
            ("trace.cuda_graph_fraction", None),
            ("trace.gpu_idle_fraction", None),
        ),
        explanation=(
            "When a kernel takes less GPU time than the CPU needs to launch it, launch overhead "
            "sets the pace; CUDA graphs or fusion (torch.compile) remove it."
        ),
        next_steps=(
            "turn CUDA graphs on: drop `--enforce-eager` (vLLM) / `--disable-cuda-graph` (SGLang)",
            "fuse small ops (torch.compile, fused kernels)",
        ),
    )
