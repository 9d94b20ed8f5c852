"""diagnose, level 3: kernel-layer rules — launches, CUDA graphs, attention, recompiles, syncs."""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.diagnose.symptom import engine_flag, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.KERNEL
_LAUNCH_GAP = 0.3  # share of GPU time idle between kernels
_LAUNCH_BOUND = 0.5  # idle this much, the launches are the bottleneck whatever the SLOs say
_GRAPHS_ON = 0.5
_HOST_WAIT = 0.3


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
    gaps = ev.get("trace.launch_gap_fraction") or 0.0
    graphs = ev.get("trace.cuda_graph_fraction") or 0.0
    if gaps < _LAUNCH_GAP or graphs >= _GRAPHS_ON:
        return None
    kernels = ev.get("trace.kernels_per_step") or 0.0
    return make_finding(
        "kernel.launch_bound",
        _L,
        bottleneck=slo_missed(ev, t) or gaps >= _LAUNCH_BOUND,
        severity=severity_above(gaps, _LAUNCH_GAP, 0.8),
        explains=gaps,
        title=f"{kernels:.0f} kernels per step launched one by one; GPU idle {gaps:.0%} between",
        evidence=ev,
        used=(
            ("trace.launch_gap_fraction", _LAUNCH_GAP),
            ("trace.cuda_graph_fraction", _GRAPHS_ON),
        ),
        explanation=(
            "Without CUDA graphs every kernel pays a host launch; small decode kernels finish "
            "before the next launch arrives, so the GPU waits on the CPU."
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
    if count < 1:
        return None
    return make_finding(
        "kernel.recompilations",
        _L,
        bottleneck=False,
        severity=severity_above(count, 0, 8),
        explains=0.3,
        title=f"torch.compile recompiled {count:.0f} times",
        evidence=ev,
        used=(("trace.recompilations", 0.0),),
        explanation="Each recompilation stalls the engine for seconds.",
        next_steps=(
            "mark dynamic dimensions (`torch._dynamo.mark_dynamic`) and fix the capture sizes",
        ),
    )


@rule("kernel.host_wait", _L, ("trace.host_wait_fraction",))
def host_wait(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("trace.host_wait_fraction") or 0.0
    if share < _HOST_WAIT:
        return None
    return make_finding(
        "kernel.host_wait",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(share, _HOST_WAIT, 0.8),
        explains=share,
        title=f"the GPU waits on the host {share:.0%} of the time",
        evidence=ev,
        used=(("trace.host_wait_fraction", _HOST_WAIT),),
        explanation="Idle time with no kernel queued: the CPU side (scheduling, sampling) is late.",
        next_steps=("look at the scheduling layer's engine-loop CPU; enable async scheduling",),
    )


@rule("kernel.sync_every_step", _L, ("trace.syncs_per_step",))
def sync_every_step(ev: Evidence, t: Thresholds) -> Finding | None:
    syncs = ev.get("trace.syncs_per_step") or 0.0
    if syncs < 1:
        return None
    return make_finding(
        "kernel.sync_every_step",
        _L,
        bottleneck=False,
        severity=severity_above(syncs, 1, 10),
        explains=0.2,
        title=f"{syncs:.1f} device synchronisations per step",
        evidence=ev,
        used=(("trace.syncs_per_step", 1.0),),
        explanation="A synchronisation drains the GPU queue and serialises host and device.",
        next_steps=("remove `.item()`/`.cpu()` calls from the step; use non-blocking copies",),
    )
