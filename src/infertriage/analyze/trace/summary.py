"""analyze, level 1: every trace analysis over a set of ranks, as `Signal`s.

Takes the `TraceTable`s of one capture (one per rank) and, optionally, a
`RecompileLog`; gives a `TraceReport`: per-rank summaries, the merged kernel
mix and every signal (the findings are filled in by `api.trace`, from the
diagnose rules). Times add up over ranks (and over the devices of a rank), so a
fraction is a share of all GPUs' time. Units: "s", "fraction" (0..1),
"bytes", "1" (a count or a flag). Source "trace", except the step figures
("trace:profiler_step|nvtx|annotation|pattern", how the steps were found)
and a log's recompilations ("log"). Window: (0, longest rank's span) s.

| signal | meaning |
|---|---|
| trace.num_ranks, trace.kernels, trace.comm_kernels | counts |
| trace.gpu_span_s | first GPU op start → last GPU op end, summed over devices |
| trace.gpu_busy_s / _fraction | union of kernels, memcpys, memsets over all streams |
| trace.gpu_idle_s / _fraction | span − busy |
| trace.idle.host_wait_s, .kernel_to_kernel_s, .other_s | idle split as HTA does (timeline) |
| trace.idle.host_wait_fraction | host wait / span (both left out without runtime calls) |
| trace.idle.cause.<cause>_s / _fraction | idle time by cause (`idle.py`); share of idle |
| trace.compute_s / _fraction | union of computation kernels (HTA's compute time) |
| trace.comm_s, trace.comm_exposed_s | union of communication kernels; not overlapped |
| trace.comm_overlap_fraction | comm time while computation runs / comm time (HTA) |
| trace.nccl_fraction | communication kernels' share of summed GPU-op time |
| trace.mix.{gemm,attention,memory,elementwise,other}_fraction | the rest of that split |
| trace.launches | runtime calls that launched ≥ 1 kernel (a graph launch is one) |
| trace.launch_latency_{p50,p95,p99,mean}_s | call start → its first kernel's start |
| trace.launch_cpu_p50_s | duration of a launch call |
| trace.launch_queue_p50_s | latency spent behind earlier work on the stream |
| trace.launch_queued_fraction | launches whose stream was busy when the call returned |
| trace.launch_overhead_{p50,p95}_s | latency not spent queueing (the launch path itself) |
| trace.queue_depth_{p50,max} | launched ops not yet started when a launch call begins |
| trace.short_kernels / trace.short_kernel_fraction | launches whose GPU time < call time |
| trace.cuda_graph_launches, trace.cuda_graph_kernels | graph launches; kernels replayed |
| trace.cuda_graph_fraction | replayed kernels' share of kernel time |
| trace.kernels_per_graph_launch | mean |
| trace.steps, trace.kernels_per_step | steps found; median kernels per step (mean of ranks) |
| trace.step_time_p50_s, trace.launches_per_step, trace.sync_calls_per_step | per step |
| trace.step_pattern_match | for pattern steps: share of kernels that repeat a period on |
| trace.sync_calls, trace.sync_host_s | host-blocking synchronise calls; time in them |
| trace.memcpy.{htod,dtoh,dtod,ptop}_bytes, trace.memcpy_s | copies by direction |
| trace.memcpy.pageable_bytes / _fraction | from pageable host memory / HtoD+DtoH bytes |
| trace.compiled_regions, trace.recompilations | torch.compile (trace, or `--log`) |
| trace.recompile_limit_hits | with `--log`: frames that hit dynamo's limit |
| trace.rank_skew_fraction | (max − min) / max of the ranks' compute time, ≥ 2 ranks |
| trace.achieved_occupancy | busy-weighted estimated achieved occupancy (Kineto) |
| trace.attention_backend.<id> | value 1 for the dominant backend (`ATTENTION_BACKENDS`) |

`analyze_tables` adds the signals the diagnose rules read (`derived.py`):
trace.host_wait_fraction, trace.syncs_per_step (renamed), trace.launch_gap_fraction,
trace.step_cpu_gap_fraction, trace.memcpy_fraction and trace.attention_unfused.

A fraction whose denominator is zero is left out, as are the step signals
when no steps are found and the overlap when there is no communication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from infertriage.analyze.trace.compiled import Compiled, RecompileLog, get_compiled
from infertriage.analyze.trace.idle import IdleCause, IdleCauses, get_idle_causes
from infertriage.analyze.trace.launches import (
    Copies,
    GraphModule,
    Graphs,
    Launches,
    Syncs,
    get_copies,
    get_graphs,
    get_launches,
    get_syncs,
)
from infertriage.analyze.trace.mix import Mix, get_mix, merge_mixes
from infertriage.analyze.trace.names import Category
from infertriage.analyze.trace.steps import Steps, find_steps
from infertriage.analyze.trace.table import CopyKind, GpuOpKind, TraceTable
from infertriage.analyze.trace.timeline import Timeline, category_column, get_timeline
from infertriage.schemas.records import Signal

if TYPE_CHECKING:  # a name only: importing pydantic's models costs a short trace's run
    from infertriage.schemas.diagnosis import Finding

__all__ = [
    "RankAnalysis",
    "RankSummary",
    "TraceReport",
    "analyze_rank",
    "make_report",
    "make_signals",
]

_NS = 1e-9
_MIX_NAMES = {
    Category.GEMM: "gemm",
    Category.ATTENTION: "attention",
    Category.MEMORY: "memory",
    Category.ELEMENTWISE: "elementwise",
    Category.OTHER: "other",
}
_COPY_NAMES = {
    CopyKind.HTOD: "htod",
    CopyKind.DTOH: "dtoh",
    CopyKind.DTOD: "dtod",
    CopyKind.PTOP: "ptop",
}


@dataclass(frozen=True, slots=True)
class RankAnalysis:
    """Everything measured on one table, before ranks are merged."""

    table: TraceTable
    timeline: Timeline
    launches: Launches
    graphs: Graphs
    syncs: Syncs
    copies: Copies
    mix: Mix
    steps: Steps | None
    compiled: Compiled
    occupancy: float | None  # time-weighted estimated achieved occupancy of kernels
    idle: IdleCauses


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One rank on screen and in JSON."""

    rank: int
    path: str
    fmt: str
    devices: tuple[str, ...]
    num_kernels: int
    span_s: float
    busy_s: float
    compute_s: float
    comm_s: float
    steps: int
    step_source: str
    kernels_per_step: float | None


@dataclass(frozen=True, slots=True)
class TraceReport:
    """The result of `infertriage trace`: signals for the rules, and what the screen shows."""

    paths: tuple[str, ...]
    ranks: tuple[RankSummary, ...]
    signals: tuple[Signal, ...]
    mix: Mix
    attention_backend: str
    log_path: str | None = None
    findings: tuple[Finding, ...] = ()  # the diagnose rules' over `signals`, worst first
    idle_host_ops: tuple[tuple[str, float], ...] = ()  # host-starved idle (s) by host work
    graph_modules: tuple[GraphModule, ...] = ()  # CUDA-graph replays by launching module
    hta_convention: bool = False  # the last ProfilerStep left out, as HTA does
    notes: tuple[str, ...] = ()  # what of the input gave nothing (a --log no line of is read)

    def signal(self, name: str) -> Signal | None:
        return next((s for s in self.signals if s.name == name), None)

    def value(self, name: str) -> float | None:
        found = self.signal(name)
        return None if found is None else found.value


def _occupancy(table: TraceTable) -> float | None:
    gpu = table.gpu
    known = (gpu.kind == GpuOpKind.KERNEL) & ~np.isnan(gpu.occupancy)
    if not known.any():
        return None
    weights = (gpu.end_ns - gpu.start_ns)[known].astype(np.float64)
    if weights.sum() <= 0:
        return None
    return float(np.average(gpu.occupancy[known], weights=weights))


def analyze_rank(table: TraceTable) -> RankAnalysis:
    """Run every analysis on one table.

    The idle classification runs first: its temporaries are the largest of any analysis,
    and at that point no other analysis's per-launch arrays are held beside them (the
    command's peak memory on a large trace)."""
    cats = category_column(table)
    steps = find_steps(table)
    idle = get_idle_causes(table, steps)
    return RankAnalysis(
        table=table,
        timeline=get_timeline(table, cats),
        launches=get_launches(table),
        graphs=get_graphs(table),
        syncs=get_syncs(table),
        copies=get_copies(table),
        mix=get_mix(table, cats),
        steps=steps,
        compiled=get_compiled(table),
        occupancy=_occupancy(table),
        idle=idle,
    )


def _summary(a: RankAnalysis) -> RankSummary:
    t = a.timeline
    kernels = a.steps.kernels if a.steps is not None else np.zeros(0, dtype=np.int64)
    return RankSummary(
        rank=a.table.rank,
        path=a.table.path,
        fmt=a.table.fmt,
        devices=tuple(
            a.table.device_names.get(int(d), f"device {int(d)}")
            for d in np.unique(a.table.gpu.device)
        ),
        num_kernels=int((a.table.gpu.kind == GpuOpKind.KERNEL).sum()),
        span_s=t.span_ns * _NS,
        busy_s=t.busy_ns * _NS,
        compute_s=t.compute_ns * _NS,
        comm_s=t.comm_ns * _NS,
        steps=len(kernels),
        step_source=a.steps.source if a.steps is not None else "none",
        kernels_per_step=float(np.median(kernels)) if len(kernels) else None,
    )


class _Signals:
    """Collects signals with one source and window."""

    def __init__(self, window: tuple[float, float]) -> None:
        self.window = window
        self.items: list[Signal] = []

    def add(self, name: str, value: float, unit: str, source: str = "trace") -> None:
        self.items.append(Signal(f"trace.{name}", float(value), unit, source, self.window))

    def ratio(self, name: str, part: float, whole: float) -> None:
        if whole > 0:
            self.add(name, part / whole, "fraction")


def _timeline_signals(out: _Signals, ranks: list[RankAnalysis]) -> None:
    def total(field: str) -> float:
        return float(sum(getattr(r.timeline, field) for r in ranks)) * _NS

    span = total("span_ns")
    out.add("gpu_span_s", span, "s")
    out.add("gpu_busy_s", total("busy_ns"), "s")
    out.ratio("gpu_busy_fraction", total("busy_ns"), span)
    out.add("gpu_idle_s", total("idle_ns"), "s")
    out.ratio("gpu_idle_fraction", total("idle_ns"), span)
    if any(r.launches.count for r in ranks):  # no runtime calls (GPU activity alone): unknown
        out.add("idle.host_wait_s", total("host_wait_ns"), "s")
        out.ratio("idle.host_wait_fraction", total("host_wait_ns"), span)
    out.add("idle.kernel_to_kernel_s", total("kernel_to_kernel_ns"), "s")
    out.add("idle.other_s", total("other_idle_ns"), "s")
    idle = sum(r.idle.idle_ns for r in ranks)
    for cause in IdleCause:
        part = sum(r.idle.ns_by_cause[cause] for r in ranks)
        out.add(f"idle.cause.{cause.label}_s", part * _NS, "s")
        out.ratio(f"idle.cause.{cause.label}_fraction", part, idle)
    out.add("compute_s", total("compute_ns"), "s")
    out.ratio("compute_fraction", total("compute_ns"), span)
    comm = total("comm_ns")
    out.add("comm_s", comm, "s")
    if comm > 0:
        overlap = total("comm_overlap_ns")
        out.ratio("comm_overlap_fraction", overlap, comm)
        out.add("comm_exposed_s", comm - overlap, "s")


def _launch_signals(out: _Signals, ranks: list[RankAnalysis]) -> None:
    latency = np.concatenate([r.launches.latency_s for r in ranks])
    cpu = np.concatenate([r.launches.cpu_s for r in ranks])
    gpu = np.concatenate([r.launches.gpu_s for r in ranks])
    out.add("launches", len(latency), "1")
    if len(latency):
        for q in (50, 95, 99):
            out.add(f"launch_latency_p{q}_s", float(np.percentile(latency, q)), "s")
        out.add("launch_latency_mean_s", float(latency.mean()), "s")
        out.add("launch_cpu_p50_s", float(np.percentile(cpu, 50)), "s")
        _queue_signals(out, ranks)
        short = int((gpu < cpu).sum())
        out.add("short_kernels", short, "1")
        out.ratio("short_kernel_fraction", short, len(latency))
    graphs = [r.graphs for r in ranks]
    launches = sum(g.num_launches for g in graphs)
    out.add("cuda_graph_launches", launches, "1")
    out.add("cuda_graph_kernels", sum(g.num_kernels for g in graphs), "1")
    out.ratio(
        "cuda_graph_fraction",
        sum(g.kernel_ns for g in graphs),
        sum(g.total_kernel_ns for g in graphs),
    )
    if launches:
        out.add("kernels_per_graph_launch", sum(g.num_kernels for g in graphs) / launches, "1")
    out.add("sync_calls", sum(r.syncs.count for r in ranks), "1")
    out.add("sync_host_s", sum(r.syncs.host_ns for r in ranks) * _NS, "s")


def _queue_signals(out: _Signals, ranks: list[RankAnalysis]) -> None:
    """Queueing (the stream busy with earlier work) apart from the launch path's overhead."""
    queue = np.concatenate([r.launches.queue_s for r in ranks])
    overhead = np.concatenate([r.launches.overhead_s for r in ranks])
    queued = np.concatenate([r.launches.queued for r in ranks])
    depth = np.concatenate([r.launches.depth for r in ranks])
    out.add("launch_queue_p50_s", float(np.percentile(queue, 50)), "s")
    out.ratio("launch_queued_fraction", int(queued.sum()), len(queued))
    for q in (50, 95):
        out.add(f"launch_overhead_p{q}_s", float(np.percentile(overhead, q)), "s")
    out.add("queue_depth_p50", float(np.percentile(depth, 50)), "1")
    out.add("queue_depth_max", int(depth.max()), "1")


def _step_signals(out: _Signals, ranks: list[RankAnalysis]) -> None:
    pairs = [(r, r.steps) for r in ranks if r.steps is not None and r.steps.count]
    if not pairs:
        return
    first = pairs[0][1]
    source = f"trace:{first.source}"
    steps_total = sum(steps.count for _, steps in pairs)
    out.add("steps", first.count, "1", source)
    per_rank = [float(np.median(steps.kernels)) for _, steps in pairs]
    out.add("kernels_per_step", float(np.mean(per_rank)), "1", source)
    durations = np.concatenate([(s.end_ns - s.start_ns) * _NS for _, s in pairs])
    out.add("step_time_p50_s", float(np.percentile(durations, 50)), "s", source)
    launches = sum(r.launches.count for r, _ in pairs)
    syncs = sum(r.syncs.count for r, _ in pairs)
    out.add("launches_per_step", launches / steps_total, "1", source)
    out.add("sync_calls_per_step", syncs / steps_total, "1", source)
    if first.source == "pattern":
        out.add("step_pattern_match", first.match, "fraction", source)


def _mix_signals(out: _Signals, mix: Mix, num_steps: int) -> str:
    total = mix.total_ns
    out.add("comm_kernels", mix.count_by_category.get(Category.COMMUNICATION, 0), "1")
    out.ratio("nccl_fraction", mix.ns_by_category.get(Category.COMMUNICATION, 0), total)
    for cat, name in _MIX_NAMES.items():
        out.ratio(f"mix.{name}_fraction", mix.ns_by_category.get(cat, 0), total)
    backend = mix.attention_backend(num_steps)
    out.add(f"attention_backend.{backend}", 1.0, "1")
    return backend


def _copy_signals(out: _Signals, ranks: list[RankAnalysis]) -> None:
    copies = [r.copies for r in ranks]
    for kind, name in _COPY_NAMES.items():
        out.add(f"memcpy.{name}_bytes", sum(c.bytes_by_kind.get(kind, 0) for c in copies), "bytes")
    memcpy_ns = sum(sum(c.ns_by_kind.values()) for c in copies)
    out.add("memcpy_s", memcpy_ns * _NS, "s")
    pageable = sum(c.pageable_bytes for c in copies)
    host = sum(
        c.bytes_by_kind.get(CopyKind.HTOD, 0) + c.bytes_by_kind.get(CopyKind.DTOH, 0)
        for c in copies
    )
    out.add("memcpy.pageable_bytes", pageable, "bytes")
    out.ratio("memcpy.pageable_fraction", pageable, host)


def _compile_signals(out: _Signals, ranks: list[RankAnalysis], log: RecompileLog | None) -> None:
    out.add("compiled_regions", sum(r.compiled.num_regions for r in ranks), "1")
    if log is not None:
        out.add("recompilations", log.recompilations, "1", "log")
        out.add("recompile_limit_hits", log.limit_hits, "1", "log")
    else:
        out.add("recompilations", max(r.compiled.recompilations for r in ranks), "1")


def _rank_signals(out: _Signals, ranks: list[RankAnalysis]) -> None:
    out.add("num_ranks", len(ranks), "1")
    kernels = sum(int((r.table.gpu.kind == GpuOpKind.KERNEL).sum()) for r in ranks)
    out.add("kernels", kernels, "1")
    if len(ranks) >= 2:
        compute = np.array([r.timeline.compute_ns for r in ranks], dtype=np.float64)
        if compute.max() > 0:
            out.add(
                "rank_skew_fraction", (compute.max() - compute.min()) / compute.max(), "fraction"
            )
    weights = [(r.occupancy, r.timeline.busy_ns) for r in ranks if r.occupancy is not None]
    if weights and sum(w for _, w in weights) > 0:
        value = sum(o * w for o, w in weights) / sum(w for _, w in weights)
        out.add("achieved_occupancy", value, "fraction")


def make_signals(
    ranks: list[RankAnalysis], log: RecompileLog | None
) -> tuple[list[Signal], Mix, str]:
    span = max((r.timeline.last_ns - r.timeline.first_ns for r in ranks), default=0) * _NS
    out = _Signals((0.0, span))
    _rank_signals(out, ranks)
    _timeline_signals(out, ranks)
    _launch_signals(out, ranks)
    _step_signals(out, ranks)
    mix = merge_mixes([r.mix for r in ranks])
    steps = sum(r.steps.count for r in ranks if r.steps is not None)
    backend = _mix_signals(out, mix, steps)
    _copy_signals(out, ranks)
    _compile_signals(out, ranks, log)
    return out.items, mix, backend


def make_report(
    ranks: list[RankAnalysis],
    *,
    signals: list[Signal],
    mix: Mix,
    backend: str,
    log_path: str | None = None,
    hta_convention: bool = False,
) -> TraceReport:
    return TraceReport(
        paths=tuple(r.table.path for r in ranks),
        ranks=tuple(_summary(r) for r in ranks),
        signals=tuple(signals),
        mix=mix,
        attention_backend=backend,
        log_path=log_path,
        idle_host_ops=_host_ops(ranks),
        graph_modules=_graph_modules(ranks),
        hta_convention=hta_convention,
    )


def _host_ops(ranks: list[RankAnalysis], top: int = 8) -> tuple[tuple[str, float], ...]:
    totals: dict[str, int] = {}
    for r in ranks:
        for name, ns in r.idle.host_ns_by_op.items():
            totals[name] = totals.get(name, 0) + ns
    ordered = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return tuple((name, ns * _NS) for name, ns in ordered)


def _graph_modules(ranks: list[RankAnalysis]) -> tuple[GraphModule, ...]:
    totals: dict[str, list[int]] = {}
    for r in ranks:
        for g in r.graphs.modules:
            row = totals.setdefault(g.module, [0, 0, 0])
            row[0] += g.num_launches
            row[1] += g.num_kernels
            row[2] += g.kernel_ns
    found = [GraphModule(m, *row) for m, row in totals.items()]
    return tuple(sorted(found, key=lambda g: -g.kernel_ns))
