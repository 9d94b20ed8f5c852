"""analyze, level 1: GPU busy and idle time, its breakdown, and communication overlap.

Takes a `TraceTable`; gives `Timeline` figures per table, summed over its
devices. Busy time is the union of all GPU ops over all streams of a device;
the span runs from its first op's start to its last op's end (HTA's "kernel
time"); idle = span − busy. Each idle gap is charged, as HTA does per stream,
to *host wait* when the call that launched the op ending the gap started after
the gap began (the GPU ran dry because the host was late), else to
*kernel-to-kernel* when the gap is shorter than `consecutive_kernel_delay_ns`
(launch latency between back-to-back ops), else *other*. We apply it to the
union of a device's streams so that the three parts add up to its idle time.
The gaps themselves (`find_gaps`) are the ones `idle.py` classifies by cause.
Communication overlap is HTA's: the time communication kernels run while a
computation kernel runs, over the communication kernels' union.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.names import Category, categorize
from infertriage.analyze.trace.table import GpuOpKind, TraceTable

__all__ = [
    "CONSECUTIVE_KERNEL_DELAY_NS",
    "Gaps",
    "Timeline",
    "category_column",
    "find_gaps",
    "get_timeline",
    "merge_intervals",
    "overlap_ns",
]

CONSECUTIVE_KERNEL_DELAY_NS = 30_000  # HTA's default: 30 µs
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Timeline:
    """Nanosecond totals over a table's devices."""

    span_ns: int
    busy_ns: int
    idle_ns: int
    host_wait_ns: int
    kernel_to_kernel_ns: int
    other_idle_ns: int
    compute_ns: int  # union of computation kernels (not communication, not memcpy/memset)
    comm_ns: int  # union of communication kernels
    comm_overlap_ns: int  # communication time during which computation ran
    first_ns: int
    last_ns: int


def merge_intervals(start: I64, end: I64) -> tuple[I64, I64]:
    """The union of intervals as sorted, disjoint (start, end) arrays."""
    if not len(start):
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    del order  # each temporary let go once used: a large trace's peak memory
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=np.bool_)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    del reach
    group_end = np.maximum.reduceat(e, np.flatnonzero(new))
    return s[new], group_end


def overlap_ns(a: tuple[I64, I64], b: tuple[I64, I64]) -> int:
    """Total length where two unions (from `merge_intervals`) both hold."""
    if not len(a[0]) or not len(b[0]):
        return 0
    times = np.concatenate([a[0], a[1], b[0], b[1]])
    delta = np.concatenate(
        [np.ones(len(a[0])), -np.ones(len(a[1])), np.full(len(b[0]), 2), np.full(len(b[1]), -2)]
    ).astype(np.int8)
    order = np.argsort(times, kind="stable")
    running = np.cumsum(delta[order])
    lengths = np.diff(times[order])
    return int(lengths[running[:-1] == 3].sum())


def category_column(table: TraceTable) -> npt.NDArray[np.int8]:
    """Category of each GPU op: memcpy and memset by kind, kernels by name (each distinct
    kernel name matched once; the table's other strings, host and runtime names, never)."""
    kernel = table.gpu.kind == GpuOpKind.KERNEL
    cats = np.full(len(table.gpu), Category.MEMORY, dtype=np.int8)
    if kernel.any():
        ids, inverse = np.unique(table.gpu.name[kernel], return_inverse=True)
        cats[kernel] = categorize(table.names_of(ids))[inverse]
    return cats


@dataclass(frozen=True, slots=True)
class Gaps:
    """The idle gaps of every device's busy union, and the op that ends each."""

    begin_ns: I64
    end_ns: I64
    next_op: I64  # index into table.gpu: the first op of the stretch the gap ends at

    def __len__(self) -> int:
        return len(self.begin_ns)


def find_gaps(table: TraceTable) -> Gaps:
    """Every gap between busy stretches of each device (all streams merged)."""
    gpu = table.gpu
    parts: list[tuple[I64, I64, I64]] = []
    for device in np.unique(gpu.device):
        idx = np.flatnonzero(gpu.device == device)
        starts, ends = merge_intervals(gpu.start_ns[idx], gpu.end_ns[idx])
        if len(starts) < 2:
            continue
        first = idx[np.searchsorted(gpu.start_ns[idx], starts[1:], side="left")]
        parts.append((ends[:-1], starts[1:], first.astype(np.int64)))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Gaps(empty, empty, empty)
    return Gaps(*(np.concatenate([p[i] for p in parts]) for i in range(3)))


def _idle_parts(table: TraceTable, delay_ns: int) -> tuple[int, int, int]:
    """(host wait, kernel-to-kernel, other) over the gaps of every device's union."""
    gaps = find_gaps(table)
    lengths = gaps.end_ns - gaps.begin_ns
    launcher = table.launcher[gaps.next_op]
    call_start = np.full(len(gaps), np.iinfo(np.int64).min, dtype=np.int64)
    launched = launcher >= 0  # none in a trace without runtime calls (GPU activity alone)
    call_start[launched] = table.runtime.start_ns[launcher[launched]]
    host = call_start > gaps.begin_ns
    short = ~host & (lengths < delay_ns)
    return int(lengths[host].sum()), int(lengths[short].sum()), int(lengths[~host & ~short].sum())


def get_timeline(
    table: TraceTable,
    cats: npt.NDArray[np.int8] | None = None,
    delay_ns: int = CONSECUTIVE_KERNEL_DELAY_NS,
) -> Timeline:
    """Busy, idle (and its parts), compute and communication time of one table."""
    gpu = table.gpu
    cats = category_column(table) if cats is None else cats
    totals = dict.fromkeys(
        ("span", "busy", "host", "k2k", "other", "compute", "comm", "overlap"), 0
    )
    first, last = (int(gpu.start_ns.min()), int(gpu.end_ns.max())) if len(gpu) else (0, 0)
    for device in np.unique(gpu.device):
        mask = gpu.device == device
        merged = merge_intervals(gpu.start_ns[mask], gpu.end_ns[mask])
        totals["span"] += int(merged[1][-1] - merged[0][0])
        totals["busy"] += int((merged[1] - merged[0]).sum())
        is_comm = mask & (cats == Category.COMMUNICATION)
        is_compute = mask & (cats != Category.COMMUNICATION) & (cats != Category.MEMORY)
        comm = merge_intervals(gpu.start_ns[is_comm], gpu.end_ns[is_comm])
        compute = merge_intervals(gpu.start_ns[is_compute], gpu.end_ns[is_compute])
        totals["comm"] += int((comm[1] - comm[0]).sum())
        totals["compute"] += int((compute[1] - compute[0]).sum())
        totals["overlap"] += overlap_ns(comm, compute)
    totals["host"], totals["k2k"], totals["other"] = _idle_parts(table, delay_ns)
    return Timeline(
        span_ns=totals["span"],
        busy_ns=totals["busy"],
        idle_ns=totals["span"] - totals["busy"],
        host_wait_ns=totals["host"],
        kernel_to_kernel_ns=totals["k2k"],
        other_idle_ns=totals["other"],
        compute_ns=totals["compute"],
        comm_ns=totals["comm"],
        comm_overlap_ns=totals["overlap"],
        first_ns=first,
        last_ns=last,
    )
