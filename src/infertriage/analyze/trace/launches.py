"""analyze, level 1: kernel launches, CUDA graphs, synchronisation and memcpy traffic.

Takes a `TraceTable`; gives `Launches`, `Graphs`, `Syncs` and `Copies`.
Statistics are per *launch* (one runtime call), not per kernel: a
`cudaGraphLaunch` replays many kernels, so its latency is call start → its
first kernel's start and its GPU time is the sum over the kernels it replays.
That keeps launch latency and the short-kernel test (GPU time below the CPU
time of the call, HTA's definition) right when one launch maps to many
kernels, where a per-kernel join would count one call hundreds of times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.names import is_graph_launch, is_sync
from infertriage.analyze.trace.table import CopyKind, GpuOpKind, TraceTable

__all__ = [
    "Copies",
    "Graphs",
    "Launches",
    "Syncs",
    "get_copies",
    "get_graphs",
    "get_launches",
    "get_syncs",
]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Launches:
    """Launch calls that put at least one kernel on the GPU."""

    latency_s: F64  # per launch: call start → first kernel start
    cpu_s: F64  # per launch: duration of the call
    gpu_s: F64  # per launch: summed duration of its kernels
    num_kernels_unlaunched: int  # kernels with no runtime call in the trace

    @property
    def count(self) -> int:
        return len(self.latency_s)

    @property
    def num_short(self) -> int:
        return int((self.gpu_s < self.cpu_s).sum())


@dataclass(frozen=True, slots=True)
class Graphs:
    num_launches: int
    num_kernels: int  # kernels replayed by the graph launches
    kernel_ns: int  # their summed GPU time
    total_kernel_ns: int  # all kernels' summed GPU time


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


def _name_mask(table: TraceTable, test: object) -> npt.NDArray[np.bool_]:
    """Per runtime call: whether `test(name)` holds (evaluated once per distinct name)."""
    ids = np.unique(table.runtime.name)
    hits = np.array([bool(test(table.strings[i])) for i in ids.tolist()], dtype=np.bool_)  # type: ignore[operator]
    lookup = np.zeros(len(table.strings), dtype=np.bool_)
    lookup[ids] = hits
    return lookup[table.runtime.name]


def get_launches(table: TraceTable) -> Launches:
    gpu, runtime = table.gpu, table.runtime
    is_kernel = gpu.kind == GpuOpKind.KERNEL
    joined = is_kernel & (table.launcher >= 0)
    calls, inverse = np.unique(table.launcher[joined], return_inverse=True)
    first = np.full(len(calls), np.iinfo(np.int64).max)
    np.minimum.at(first, inverse, gpu.start_ns[joined])
    gpu_ns = np.bincount(inverse, weights=(gpu.end_ns - gpu.start_ns)[joined], minlength=len(calls))
    call_start = runtime.start_ns[calls]
    return Launches(
        latency_s=(first - call_start) / 1e9,
        cpu_s=(runtime.end_ns[calls] - call_start) / 1e9,
        gpu_s=gpu_ns / 1e9,
        num_kernels_unlaunched=int((is_kernel & (table.launcher < 0)).sum()),
    )


def get_graphs(table: TraceTable) -> Graphs:
    gpu = table.gpu
    is_kernel = gpu.kind == GpuOpKind.KERNEL
    durations = gpu.end_ns - gpu.start_ns
    graph_call = _name_mask(table, is_graph_launch)
    under = is_kernel & (table.launcher >= 0)
    under[under] = graph_call[table.launcher[under]]
    return Graphs(
        num_launches=int(graph_call.sum()),
        num_kernels=int(under.sum()),
        kernel_ns=int(durations[under].sum()),
        total_kernel_ns=int(durations[is_kernel].sum()),
    )


def get_syncs(table: TraceTable) -> Syncs:
    sync = _name_mask(table, is_sync)
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
