"""analyze, level 1: kernel launches, CUDA graphs, synchronisation and memcpy traffic.

Takes a `TraceTable`; gives `Launches`, `Graphs`, `Syncs` and `Copies`.
Statistics are per *launch* (one runtime call), not per kernel: a
`cudaGraphLaunch` replays many kernels, so its latency is call start → its
first kernel's start and its GPU time is the sum over the kernels it replays.
That keeps launch latency and the short-kernel test (GPU time below the CPU
time of the call, HTA's definition) right when one launch maps to many
kernels, where a per-kernel join would count one call hundreds of times.

Launch latency is two things, told apart per launch: *queueing*, the part
during which the kernel's stream was still busy with earlier work (the CPU
ran ahead: a deep queue, harmless while the GPU is busy), and *overhead*,
the rest (kernel start − max(call start, the stream's previous op end)).
Queue depth at a launch is how many launched ops had not yet started. A
graph launch's kernels are attributed to their launch (correlation) and to
the module the host was in when it launched (`nn.Module: …` Python frame,
else the innermost operator or annotation around the call).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.names import is_graph_launch, is_sync
from infertriage.analyze.trace.table import CopyKind, CpuKind, GpuOpKind, TraceTable

__all__ = [
    "Copies",
    "GraphModule",
    "Graphs",
    "Launches",
    "Syncs",
    "calls_named",
    "get_copies",
    "get_graphs",
    "get_launches",
    "get_syncs",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Launches:
    """Launch calls that put at least one kernel on the GPU."""

    latency_s: F64  # per launch: call start → first kernel start
    cpu_s: F64  # per launch: duration of the call
    gpu_s: F64  # per launch: summed duration of its kernels
    num_kernels_unlaunched: int  # kernels with no runtime call in the trace
    queue_s: F64  # per launch: latency while its stream ran earlier work
    queued: npt.NDArray[np.bool_]  # per launch: its stream was busy when the call returned
    depth: I64  # per launch: launched ops not yet started when the call began

    @property
    def overhead_s(self) -> F64:
        """Per launch: latency not spent queueing (the launch path's own delay)."""
        return np.maximum(self.latency_s - self.queue_s, 0.0)

    @property
    def count(self) -> int:
        return len(self.latency_s)

    @property
    def num_short(self) -> int:
        return int((self.gpu_s < self.cpu_s).sum())


@dataclass(frozen=True, slots=True)
class GraphModule:
    """The graph replays launched from one module: launches, kernels, their GPU time."""

    module: str
    num_launches: int
    num_kernels: int
    kernel_ns: int


@dataclass(frozen=True, slots=True)
class Graphs:
    num_launches: int
    num_kernels: int  # kernels replayed by the graph launches
    kernel_ns: int  # their summed GPU time
    total_kernel_ns: int  # all kernels' summed GPU time
    modules: tuple[GraphModule, ...] = ()  # by GPU time, heaviest first


@dataclass(frozen=True, slots=True)
class Syncs:
    count: int
    host_ns: int  # host time blocked in the calls


@dataclass(frozen=True, slots=True)
class Copies:
    """Bytes and GPU time of memcpys by direction, and the share from pageable host memory."""

    bytes_by_kind: dict[CopyKind, int]
    ns_by_kind: dict[CopyKind, int]
    pageable_bytes: int
    pageable_count: int
    memset_bytes: int


def calls_named(table: TraceTable, test: object) -> npt.NDArray[np.bool_]:
    """Per runtime call: whether `test(name)` holds (evaluated once per distinct name)."""
    ids = np.unique(table.runtime.name)
    hits = np.array([bool(test(table.strings[i])) for i in ids.tolist()], dtype=np.bool_)  # type: ignore[operator]
    lookup = np.zeros(len(table.strings), dtype=np.bool_)
    lookup[ids] = hits
    return lookup[table.runtime.name]


def _stream_ready_ns(table: TraceTable) -> I64:
    """Per GPU op: when its stream finished every earlier op (min int64 for a stream's first)."""
    gpu = table.gpu
    order = np.lexsort((gpu.start_ns, gpu.stream, gpu.device))
    ends = gpu.end_ns[order]
    device = gpu.device[order]
    same = np.r_[False, (device[1:] == device[:-1])]
    del device  # each temporary let go once used: a large trace's peak memory
    stream = gpu.stream[order]
    same[1:] &= stream[1:] == stream[:-1]
    del stream
    ready = np.full(len(gpu), np.iinfo(np.int64).min, dtype=np.int64)
    starts = np.flatnonzero(~same)  # each stream's first row in `order`
    del same
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(order)], strict=True):
        reach = np.maximum.accumulate(ends[lo:hi])  # one running max per stream
        ready[order[lo + 1 : hi]] = reach[:-1]
    return ready


def _depth(call_start: I64, first: I64) -> I64:
    """Per launch: earlier launches whose first op had not started when this call began."""
    launched = np.searchsorted(np.sort(call_start), call_start, side="left")
    started = np.searchsorted(np.sort(first), call_start, side="right")
    depth: I64 = np.maximum(launched - started, 0).astype(np.int64)
    return depth


def get_launches(table: TraceTable) -> Launches:
    gpu, runtime = table.gpu, table.runtime
    is_kernel = gpu.kind == GpuOpKind.KERNEL
    unlaunched = int((is_kernel & (table.launcher < 0)).sum())
    joined = np.flatnonzero(is_kernel & (table.launcher >= 0))
    del is_kernel  # each temporary let go once used: a large trace's peak memory
    calls, inverse = np.unique(table.launcher[joined], return_inverse=True)
    starts = gpu.start_ns[joined]
    first = np.full(len(calls), np.iinfo(np.int64).max)
    np.minimum.at(first, inverse, starts)
    first_op = np.zeros(len(calls), dtype=np.int64)  # the kernel that starts each launch
    by_start = np.lexsort((starts, inverse))
    first_op[inverse[by_start][::-1]] = joined[by_start][::-1]
    del by_start
    durations = gpu.end_ns[joined] - starts
    del starts, joined
    gpu_ns = np.bincount(inverse, weights=durations, minlength=len(calls))
    del durations, inverse
    call_start, call_end = runtime.start_ns[calls], runtime.end_ns[calls]
    ready = _stream_ready_ns(table)[first_op] if len(calls) else first_op
    ready = np.maximum(ready, call_start)  # a stream's first op: ready since ever
    queue_ns = np.minimum(ready, first) - call_start
    return Launches(
        latency_s=(first - call_start) / 1e9,
        cpu_s=(call_end - call_start) / 1e9,
        gpu_s=gpu_ns / 1e9,
        num_kernels_unlaunched=unlaunched,
        queue_s=queue_ns / 1e9,
        queued=ready > call_end,
        depth=_depth(call_start, first),
    )


class _Modules:
    """The host events that can name a module: `nn.Module: …` frames, and operators and
    annotations (not steps), each kept apart so a frame wins over an operator."""

    def __init__(self, table: TraceTable) -> None:
        cpu = table.cpu
        names = table.strings
        module = np.array([n.startswith("nn.Module:") for n in names], dtype=np.bool_)
        step = np.array([n.startswith("ProfilerStep") for n in names], dtype=np.bool_)
        if not len(names):
            module = step = np.zeros(1, dtype=np.bool_)
        is_module = module[cpu.name] if len(cpu) else np.zeros(0, dtype=np.bool_)
        is_op = (cpu.kind != CpuKind.PYTHON) & ~(step[cpu.name] if len(cpu) else is_module)
        self.table = table
        self.pools = (np.flatnonzero(is_module), np.flatnonzero(is_op))

    def of(self, call: int) -> str:
        """The innermost module frame (else operator) around a call on its thread."""
        cpu, runtime = self.table.cpu, self.table.runtime
        at, tid = runtime.start_ns[call], runtime.tid[call]
        for pool in self.pools:
            rows = pool[(cpu.tid[pool] == tid) & (cpu.start_ns[pool] <= at)]
            rows = rows[cpu.end_ns[rows] >= at]
            if len(rows):
                innermost = int(rows[np.argmax(cpu.start_ns[rows])])
                name: str = self.table.strings[int(cpu.name[innermost])]
                return name.removeprefix("nn.Module: ")
        return "unknown"


def _graph_modules(table: TraceTable, kernels: npt.NDArray[np.bool_]) -> tuple[GraphModule, ...]:
    calls, inverse = np.unique(table.launcher[kernels], return_inverse=True)
    durations = (table.gpu.end_ns - table.gpu.start_ns)[kernels]
    counts = np.bincount(inverse, minlength=len(calls))
    ns = np.bincount(inverse, weights=durations, minlength=len(calls))
    modules = _Modules(table)
    totals: dict[str, list[int]] = {}
    for i, call in enumerate(calls.tolist()):
        row = totals.setdefault(modules.of(call), [0, 0, 0])
        row[0] += 1
        row[1] += int(counts[i])
        row[2] += int(ns[i])
    found = [GraphModule(m, *row) for m, row in totals.items()]
    return tuple(sorted(found, key=lambda g: -g.kernel_ns))


def get_graphs(table: TraceTable) -> Graphs:
    gpu = table.gpu
    is_kernel = gpu.kind == GpuOpKind.KERNEL
    durations = gpu.end_ns - gpu.start_ns
    graph_call = calls_named(table, is_graph_launch)
    under = is_kernel & (table.launcher >= 0)
    under[under] = graph_call[table.launcher[under]]
    return Graphs(
        num_launches=int(graph_call.sum()),
        num_kernels=int(under.sum()),
        kernel_ns=int(durations[under].sum()),
        total_kernel_ns=int(durations[is_kernel].sum()),
        modules=_graph_modules(table, under) if under.any() else (),
    )


def get_syncs(table: TraceTable) -> Syncs:
    sync = calls_named(table, is_sync)
    runtime = table.runtime
    return Syncs(
        count=int(sync.sum()),
        host_ns=int((runtime.end_ns[sync] - runtime.start_ns[sync]).sum()),
    )


def get_copies(table: TraceTable) -> Copies:
    gpu = table.gpu
    copy = gpu.kind == GpuOpKind.MEMCPY
    durations = gpu.end_ns - gpu.start_ns
    bytes_by: dict[CopyKind, int] = {}
    ns_by: dict[CopyKind, int] = {}
    for kind in CopyKind:
        mask = copy & (gpu.copy_kind == kind)
        if mask.any():
            bytes_by[kind] = int(gpu.num_bytes[mask].sum())
            ns_by[kind] = int(durations[mask].sum())
    pageable = copy & gpu.pageable
    return Copies(
        bytes_by_kind=bytes_by,
        ns_by_kind=ns_by,
        pageable_bytes=int(gpu.num_bytes[pageable].sum()),
        pageable_count=int(pageable.sum()),
        memset_bytes=int(gpu.num_bytes[gpu.kind == GpuOpKind.MEMSET].sum()),
    )
