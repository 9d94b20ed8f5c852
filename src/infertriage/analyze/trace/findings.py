"""analyze, level 1: findings for the kernel, parallelism and hardware layers of a trace.

Takes the `trace.*` signals and `TraceLimits`; gives `Finding`s, worst
first. Each check is one pure function of the signals and the limits (no
literals in the checks); a check whose signals are missing does not fire.
`severity` is how far past its limit a value is (0..1), `explains` the share
of GPU time the problem accounts for. These limits are the trace command's
own until `diagnose` folds them into `schemas.Thresholds`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from infertriage.schemas.diagnosis import EvidenceItem, Finding
from infertriage.schemas.layers import Layer, Status
from infertriage.schemas.records import Signal

__all__ = ["CHECKS", "TraceLimits", "find_issues"]


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """Limits the trace checks hold signals against. Fractions 0..1 and counts."""

    host_wait_fraction: float = 0.10  # of GPU span idle because the host launched late
    short_kernel_fraction: float = 0.50  # of launches whose GPU time < the call's CPU time
    graph_worthy_launches_per_step: float = 100.0  # steps this busy want CUDA graphs
    sync_calls_per_step: float = 2.0  # one per step is the sampler's; more are avoidable
    recompilations: float = 1.0
    recompilations_full: float = 8.0  # dynamo's default recompile limit: severity 1
    recompile_explains: float = 0.05  # a recompile's cost is outside the trace window
    nccl_fraction: float = 0.20
    comm_overlap_fraction: float = 0.50
    min_comm_fraction: float = 0.05  # below this, overlap does not matter
    rank_skew_fraction: float = 0.10
    gpu_busy_fraction: float = 0.80  # as Thresholds.sm_active
    pageable_fraction: float = 0.50
    min_memcpy_fraction: float = 0.01  # of GPU span: copies too small to matter below this
    bottleneck_score: float = 0.10  # a finding scoring this or more is a bottleneck
    min_score: float = 0.01  # findings below this are noise and not reported


Values = Mapping[str, Signal]
Check = Callable[[Values, TraceLimits], Finding | None]


def _v(values: Values, name: str) -> float | None:
    found = values.get(f"trace.{name}")
    return None if found is None else found.value


def _evidence(values: Values, *pairs: tuple[str, float | None]) -> tuple[EvidenceItem, ...]:
    out = []
    for name, threshold in pairs:
        found = values.get(f"trace.{name}")
        if found is not None:
            out.append(
                EvidenceItem(
                    signal=found.name,
                    value=found.value,
                    unit=found.unit,
                    threshold=threshold,
                    source=found.source,
                )
            )
    return tuple(out)


def _over(value: float, limit: float) -> float:
    """Severity of a value above its limit: 0 at the limit, 1 at twice it (or at 1.0)."""
    span = min(limit, max(1.0 - limit, 1e-9)) if limit < 1.0 else limit
    return max(0.0, min(1.0, (value - limit) / span))


def _under(value: float, limit: float) -> float:
    return max(0.0, min(1.0, (limit - value) / max(limit, 1e-9)))


@dataclass(frozen=True, slots=True)
class _Draft:
    id: str
    layer: Layer
    severity: float
    explains: float
    title: str
    evidence: tuple[EvidenceItem, ...]
    explanation: str
    next_steps: tuple[str, ...]

    def finish(self, limits: TraceLimits) -> Finding:
        severity = max(0.0, min(1.0, self.severity))
        explains = max(0.0, min(1.0, self.explains))
        score = severity * explains
        status = Status.BOTTLENECK if score >= limits.bottleneck_score else Status.WARNING
        return Finding(
            id=self.id,
            layer=self.layer,
            status=status,
            severity=severity,
            explains=explains,
            score=score,
            title=self.title,
            evidence=self.evidence,
            explanation=self.explanation,
            next_steps=self.next_steps,
        )


_GRAPH_STEPS = (
    "Run with CUDA graphs (vLLM: drop --enforce-eager; SGLang: drop --disable-cuda-graph).",
    "Profile the host side of a step (py-spy dump --pid <engine-core pid>).",
)


def check_host_wait(values: Values, limits: TraceLimits) -> Finding | None:
    host = _v(values, "idle.host_wait_fraction")
    if host is None or host < limits.host_wait_fraction:
        return None
    return _Draft(
        id="trace.host_wait",
        layer=Layer.KERNEL,
        severity=_over(host, limits.host_wait_fraction),
        explains=host,
        title=f"The GPU waits on the host {host:.0%} of the time",
        evidence=_evidence(
            values,
            ("idle.host_wait_fraction", limits.host_wait_fraction),
            ("gpu_busy_fraction", None),
        ),
        explanation="Kernels were launched after the GPU had gone idle: the CPU side "
        "(Python, scheduling, launch overhead) cannot keep the GPU fed.",
        next_steps=_GRAPH_STEPS,
    ).finish(limits)


def check_short_kernels(values: Values, limits: TraceLimits) -> Finding | None:
    short = _v(values, "short_kernel_fraction")
    graphs = _v(values, "cuda_graph_fraction") or 0.0
    idle = _v(values, "gpu_idle_fraction") or 0.0
    if short is None or short < limits.short_kernel_fraction or graphs >= short:
        return None
    return _Draft(
        id="trace.short_kernels",
        layer=Layer.KERNEL,
        severity=_over(short, limits.short_kernel_fraction),
        explains=idle,
        title=f"{short:.0%} of kernels run shorter than their launch call",
        evidence=_evidence(
            values,
            ("short_kernel_fraction", limits.short_kernel_fraction),
            ("launch_cpu_p50_s", None),
            ("cuda_graph_fraction", None),
        ),
        explanation="When a kernel takes less GPU time than the CPU needs to launch it, "
        "launch overhead sets the pace; CUDA graphs or fusion (torch.compile) remove it.",
        next_steps=(*_GRAPH_STEPS[:1], "Fuse small ops (torch.compile, fused kernels)."),
    ).finish(limits)


def check_no_graphs(values: Values, limits: TraceLimits) -> Finding | None:
    per_step = _v(values, "launches_per_step")
    graphs = _v(values, "cuda_graph_launches")
    if per_step is None or graphs is None or graphs > 0:
        return None
    if per_step < limits.graph_worthy_launches_per_step:
        return None
    return _Draft(
        id="trace.no_cuda_graphs",
        layer=Layer.KERNEL,
        severity=_over(per_step, limits.graph_worthy_launches_per_step),
        explains=_v(values, "gpu_idle_fraction") or 0.0,
        title=f"No CUDA graphs: {per_step:.0f} launches per step",
        evidence=_evidence(
            values,
            ("launches_per_step", limits.graph_worthy_launches_per_step),
            ("cuda_graph_launches", 0.0),
        ),
        explanation="Every kernel of a step is launched one by one from the host.",
        next_steps=_GRAPH_STEPS[:1],
    ).finish(limits)


def check_unfused_attention(values: Values, limits: TraceLimits) -> Finding | None:
    if "trace.attention_backend.math" not in values:
        return None
    return _Draft(
        id="trace.unfused_attention",
        layer=Layer.KERNEL,
        severity=1.0,
        explains=_v(values, "mix.elementwise_fraction") or 0.0,
        title="Attention runs the unfused math path (softmax between batched GEMMs)",
        evidence=_evidence(
            values, ("attention_backend.math", None), ("mix.elementwise_fraction", None)
        ),
        explanation="No fused attention kernel (FlashAttention, FlashInfer, xFormers, cuDNN) "
        "ran; the math path materialises the attention matrix.",
        next_steps=(
            "Select a fused backend (vLLM: VLLM_ATTENTION_BACKEND=FLASH_ATTN or FLASHINFER).",
        ),
    ).finish(limits)


def check_recompilations(values: Values, limits: TraceLimits) -> Finding | None:
    count = _v(values, "recompilations")
    if count is None or count < limits.recompilations:
        return None
    return _Draft(
        id="trace.recompilations",
        layer=Layer.KERNEL,
        severity=min(1.0, count / limits.recompilations_full),
        explains=limits.recompile_explains,
        title=f"torch.compile recompiled {count:.0f} time(s)",
        evidence=_evidence(values, ("recompilations", limits.recompilations)),
        explanation="Each recompilation stalls the step that triggers it; past the limit "
        "dynamo falls back to eager mode.",
        next_steps=(
            "Rerun with TORCH_LOGS=recompiles and pass the log with --log to see the guards.",
            "Mark dynamic dimensions (torch._dynamo.mark_dynamic) or pad shapes.",
        ),
    ).finish(limits)


def check_syncs(values: Values, limits: TraceLimits) -> Finding | None:
    per_step = _v(values, "sync_calls_per_step")
    if per_step is None or per_step < limits.sync_calls_per_step:
        return None
    span = _v(values, "gpu_span_s") or 0.0
    host = _v(values, "sync_host_s") or 0.0
    return _Draft(
        id="trace.host_syncs",
        layer=Layer.KERNEL,
        severity=_over(per_step, limits.sync_calls_per_step),
        explains=host / span if span > 0 else 0.0,
        title=f"The host synchronises with the GPU {per_step:.1f} times per step",
        evidence=_evidence(
            values, ("sync_calls_per_step", limits.sync_calls_per_step), ("sync_host_s", None)
        ),
        explanation="A synchronise call blocks the host until the GPU drains, so the next "
        "launches cannot overlap the running kernels (.item(), .cpu(), printing tensors).",
        next_steps=(
            "Find the calls in the trace (cudaStreamSynchronize / cudaDeviceSynchronize).",
        ),
    ).finish(limits)


def check_comm_share(values: Values, limits: TraceLimits) -> Finding | None:
    share = _v(values, "nccl_fraction")
    if share is None or share < limits.nccl_fraction:
        return None
    span = _v(values, "gpu_span_s") or 0.0
    exposed = _v(values, "comm_exposed_s") or 0.0
    return _Draft(
        id="trace.comm_share",
        layer=Layer.PARALLELISM,
        severity=_over(share, limits.nccl_fraction),
        explains=exposed / span if span > 0 else share,
        title=f"Communication takes {share:.0%} of GPU time",
        evidence=_evidence(
            values, ("nccl_fraction", limits.nccl_fraction), ("comm_overlap_fraction", None)
        ),
        explanation="NCCL kernels (all-reduce, all-gather, …) take a large share of GPU time.",
        next_steps=(
            "Check the interconnect (nvidia-smi topo -m): TP over PCIe is slow.",
            "Try a smaller tensor-parallel size with more replicas (infertriage plan --what-if).",
        ),
    ).finish(limits)


def check_comm_overlap(values: Values, limits: TraceLimits) -> Finding | None:
    overlap = _v(values, "comm_overlap_fraction")
    share = _v(values, "nccl_fraction")
    if overlap is None or share is None or share < limits.min_comm_fraction:
        return None
    if overlap >= limits.comm_overlap_fraction:
        return None
    span = _v(values, "gpu_span_s") or 0.0
    exposed = _v(values, "comm_exposed_s") or 0.0
    return _Draft(
        id="trace.comm_not_overlapped",
        layer=Layer.PARALLELISM,
        severity=_under(overlap, limits.comm_overlap_fraction),
        explains=exposed / span if span > 0 else 0.0,
        title=f"Only {overlap:.0%} of communication overlaps computation",
        evidence=_evidence(
            values,
            ("comm_overlap_fraction", limits.comm_overlap_fraction),
            ("comm_exposed_s", None),
        ),
        explanation="Exposed communication stalls every rank for its whole duration.",
        next_steps=("Enable compute/communication overlap (async TP, micro-batching).",),
    ).finish(limits)


def check_rank_skew(values: Values, limits: TraceLimits) -> Finding | None:
    skew = _v(values, "rank_skew_fraction")
    if skew is None or skew < limits.rank_skew_fraction:
        return None
    return _Draft(
        id="trace.rank_skew",
        layer=Layer.PARALLELISM,
        severity=_over(skew, limits.rank_skew_fraction),
        explains=skew,
        title=f"Ranks are unbalanced: compute time differs by {skew:.0%}",
        evidence=_evidence(values, ("rank_skew_fraction", limits.rank_skew_fraction)),
        explanation="The slowest rank sets the pace; the others wait in collectives.",
        next_steps=("Compare the ranks' top kernels and step times (infertriage trace DIR).",),
    ).finish(limits)


def check_gpu_idle(values: Values, limits: TraceLimits) -> Finding | None:
    busy = _v(values, "gpu_busy_fraction")
    if busy is None or busy >= limits.gpu_busy_fraction:
        return None
    return _Draft(
        id="trace.gpu_idle",
        layer=Layer.HARDWARE,
        severity=_under(busy, limits.gpu_busy_fraction),
        explains=1.0 - busy,
        title=f"The GPU is busy only {busy:.0%} of the traced time",
        evidence=_evidence(
            values, ("gpu_busy_fraction", limits.gpu_busy_fraction), ("idle.host_wait_s", None)
        ),
        explanation="No kernel or copy runs during the rest: the hardware is not the limit.",
        next_steps=("See the kernel-layer findings for why the GPU starves.",),
    ).finish(limits)


def check_pageable(values: Values, limits: TraceLimits) -> Finding | None:
    pageable = _v(values, "memcpy.pageable_fraction")
    copy_s = _v(values, "memcpy_s") or 0.0
    span = _v(values, "gpu_span_s") or 0.0
    if pageable is None or pageable < limits.pageable_fraction or span <= 0:
        return None
    if copy_s / span < limits.min_memcpy_fraction:
        return None
    return _Draft(
        id="trace.pageable_memcpy",
        layer=Layer.HARDWARE,
        severity=_over(pageable, limits.pageable_fraction),
        explains=copy_s / span,
        title=f"{pageable:.0%} of host↔device bytes move through pageable memory",
        evidence=_evidence(
            values, ("memcpy.pageable_fraction", limits.pageable_fraction), ("memcpy_s", None)
        ),
        explanation="Pageable copies are staged by the driver and cannot overlap kernels.",
        next_steps=("Use pinned host memory (tensor.pin_memory(), pin_memory=True).",),
    ).finish(limits)


CHECKS: tuple[Check, ...] = (
    check_host_wait,
    check_short_kernels,
    check_no_graphs,
    check_unfused_attention,
    check_recompilations,
    check_syncs,
    check_comm_share,
    check_comm_overlap,
    check_rank_skew,
    check_gpu_idle,
    check_pageable,
)


def find_issues(signals: list[Signal], limits: TraceLimits | None = None) -> tuple[Finding, ...]:
    """Every check over the signals; findings sorted by score, worst first."""
    limits = limits or TraceLimits()
    values = {s.name: s for s in signals}
    found = [
        f
        for check in CHECKS
        if (f := check(values, limits)) is not None and f.score >= limits.min_score
    ]
    return tuple(sorted(found, key=lambda f: -f.score))
