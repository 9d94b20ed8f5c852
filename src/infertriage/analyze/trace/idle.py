"""analyze, level 1: why the GPU sat idle — every idle gap classified by its cause.

Takes a `TraceTable` (and the steps `find_steps` found); gives `IdleCauses`:
the idle time of each device's busy union (all streams) split by cause, and
the host work named behind host-starved gaps. A gap runs from the end of one
busy stretch to the start of the next; the op that starts it is *the next op*
and its runtime call *the launch*. The launch is *late* when it started after
the gap began: the GPU had run dry and waited for the host. Each gap gets the
first cause that holds, in this order:

1. `sync` — the launch was late and, on the launching thread, a synchronise
   call (`cudaStreamSynchronize`, `cudaDeviceSynchronize`, …) overlaps the
   wait: the host waited on the GPU, then launched late (a sync drain);
2. `copy` — the next op is a memcpy/memset, or the launch was late while the
   launching thread sat in a copy call that returned only after its copy
   finished (a blocking `cudaMemcpy`, a DtoH into pageable memory);
3. `between_steps` — a step boundary (`ProfilerStep#N`, a step range, the
   kernel pattern's step start) falls in the gap;
4. `host_starved` — the launch was late and the launching thread was busy in
   traced host work (operators, annotations, Python, runtime calls) for at
   least half of the wait: the CPU was the bottleneck, in the ops named;
5. `launch_overhead` — the launch was issued before the gap began, and the
   gap is shorter than `CONSECUTIVE_KERNEL_DELAY_NS` or the launch call was
   still running when the GPU ran dry (the runtime's own cost); a short gap
   before an op with no launch in the trace counts too when a host thread sat
   in a synchronise call all through it (the op was queued before the
   capture began);
6. `held` — the launch was long issued and had returned, the gap is not
   short, and yet the op started only after it: the op was queued and held
   back by something the trace does not show (an event or another stream it
   waits on, a peer, another process's work, GPU events filtered out of the
   trace). Named apart from `untraced` because the host did its part;
7. `untraced` — host time the profiler did not see: the next op has no
   launch in a trace that records launches, or the launch was late and the
   launching thread shows no traced work for most of the wait;
8. `other` — none of these: in practice a trace with no runtime calls at all
   (GPU activity alone), where nothing tells a late host from a missing one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.launches import calls_named
from infertriage.analyze.trace.names import is_sync
from infertriage.analyze.trace.steps import Steps
from infertriage.analyze.trace.table import CpuKind, GpuOpKind, TraceTable
from infertriage.analyze.trace.timeline import (
    CONSECUTIVE_KERNEL_DELAY_NS,
    Gaps,
    find_gaps,
    merge_intervals,
)

__all__ = ["Gaps", "IdleCause", "IdleCauses", "classify_gaps", "find_gaps", "get_idle_causes"]

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
_NO_TID = np.iinfo(np.int64).min
_STEP_NAME = re.compile(r"^ProfilerStep\s*#")
PYTHON = "python"  # the name of host work seen only as Python frames


class IdleCause(IntEnum):
    """In priority order: the first that holds is a gap's cause."""

    SYNC = 0
    COPY = 1
    BETWEEN_STEPS = 2
    HOST_STARVED = 3
    LAUNCH_OVERHEAD = 4
    HELD = 5
    UNTRACED = 6
    OTHER = 7

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class IdleCauses:
    """Idle nanoseconds by cause (every cause present, zeros included) and the host's names."""

    idle_ns: int
    ns_by_cause: dict[IdleCause, int]
    gaps_by_cause: dict[IdleCause, int]
    host_ns_by_op: dict[str, int]  # host-starved time by the host work that filled it


class _Threads:
    """Disjoint busy intervals per thread, to measure how much of a window a thread was busy.

    Takes one or more sets of events, each its (start, end, tid) columns: a thread's
    intervals are gathered from each set in turn, so no copy of every set joined is held
    beside the per-thread union (the idle analysis's peak memory on a large trace)."""

    def __init__(self, *events: tuple[I64, I64, I64]) -> None:
        self._by_tid: dict[int, tuple[I64, I64, I64]] = {}
        threads = sorted(set().union(*(np.unique(tid).tolist() for _, _, tid in events)))
        for thread in threads:
            masks = [tid == thread for _, _, tid in events]
            start = np.concatenate([s[m] for (s, _, _), m in zip(events, masks, strict=True)])
            end = np.concatenate([e[m] for (_, e, _), m in zip(events, masks, strict=True)])
            del masks
            s, e = merge_intervals(
                start.astype(np.int64, copy=False), end.astype(np.int64, copy=False)
            )
            del start, end
            self._by_tid[thread] = (s, e, np.r_[0, np.cumsum(e - s)].astype(np.int64))

    def covered_ns(self, tid: I64, begin: I64, end: I64) -> I64:
        """Per query, the time within [begin, end) that thread `tid` was busy."""
        out = np.zeros(len(tid), dtype=np.int64)
        for thread in np.unique(tid).tolist():
            found = self._by_tid.get(thread)
            if found is None:
                continue
            rows = np.flatnonzero(tid == thread)
            out[rows] = _before(found, end[rows]) - _before(found, begin[rows])
        return np.maximum(out, 0)


def _before(union: tuple[I64, I64, I64], t: I64) -> I64:
    """Busy time of a disjoint union before each time `t`."""
    starts, ends, cum = union
    i = np.searchsorted(starts, t, side="right") - 1
    inside = np.clip(t - starts[np.maximum(i, 0)], 0, (ends - starts)[np.maximum(i, 0)])
    return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0)


def _blocking_copies(table: TraceTable) -> Bools:
    """Per runtime call: it launched a memcpy/memset and returned only after it finished."""
    gpu, runtime = table.gpu, table.runtime
    out = np.zeros(len(runtime), dtype=np.bool_)
    copy = (gpu.kind != GpuOpKind.KERNEL) & (table.launcher >= 0)
    calls = table.launcher[copy]
    out[calls[runtime.end_ns[calls] >= gpu.end_ns[copy]]] = True
    return out


@dataclass(frozen=True, slots=True)
class _Context:
    """Per gap: the launch of its next op, and the window the host was late by."""

    known: Bools  # the next op has a launch in the trace
    late: Bools  # … which started after the gap began
    tid: I64
    call_end: I64
    wait_end: I64  # min(launch start, gap end): the end of the host's lateness


def _of_launch(column: I64, launcher: I64, fill: int) -> I64:
    """`column[launcher]`, `fill` where the launcher is unknown (-1)."""
    padded: I64 = np.r_[column, fill].astype(np.int64)
    picked: I64 = padded[np.where(launcher >= 0, launcher, len(column))]
    return picked


def _context(table: TraceTable, gaps: Gaps) -> _Context:
    launcher = table.launcher[gaps.next_op]
    known = launcher >= 0
    runtime, never = table.runtime, int(np.iinfo(np.int64).min)
    call_start = _of_launch(runtime.start_ns, launcher, never)
    return _Context(
        known=known,
        late=known & (call_start > gaps.begin_ns),
        tid=_of_launch(runtime.tid, launcher, _NO_TID),
        call_end=_of_launch(runtime.end_ns, launcher, never),
        wait_end=np.minimum(np.maximum(call_start, gaps.begin_ns), gaps.end_ns),
    )


def _during_wait(table: TraceTable, calls: Bools, gaps: Gaps, ctx: _Context) -> Bools:
    """Late launches whose thread was in one of `calls` during the wait."""
    runtime = table.runtime
    threads = _Threads((runtime.start_ns[calls], runtime.end_ns[calls], runtime.tid[calls]))
    return ctx.late & (threads.covered_ns(ctx.tid, gaps.begin_ns, ctx.wait_end) > 0)


def sync_gaps(table: TraceTable, gaps: Gaps, ctx: _Context) -> Bools:
    return _during_wait(table, calls_named(table, is_sync), gaps, ctx)


def copy_gaps(table: TraceTable, gaps: Gaps, ctx: _Context) -> Bools:
    next_is_copy: Bools = table.gpu.kind[gaps.next_op] != GpuOpKind.KERNEL
    return next_is_copy | _during_wait(table, _blocking_copies(table), gaps, ctx)


def step_gaps(gaps: Gaps, steps: Steps | None) -> Bools:
    """A step start falls in (begin, end]: the gap is the host's time between two steps."""
    if steps is None or steps.count < 2:
        return np.zeros(len(gaps), dtype=np.bool_)
    bounds = np.sort(steps.start_ns[1:])
    first_after = np.searchsorted(bounds, gaps.begin_ns, side="right")
    return (first_after < len(bounds)) & (
        bounds[np.minimum(first_after, len(bounds) - 1)] <= gaps.end_ns
    )


def _host_busy(table: TraceTable) -> _Threads:
    cpu, runtime = table.cpu, table.runtime
    return _Threads(
        (cpu.start_ns, cpu.end_ns, cpu.tid), (runtime.start_ns, runtime.end_ns, runtime.tid)
    )


def host_starved_gaps(table: TraceTable, gaps: Gaps, ctx: _Context) -> Bools:
    """Late launches whose thread was busy in traced host work for ≥ half of the wait."""
    busy = _host_busy(table).covered_ns(ctx.tid, gaps.begin_ns, ctx.wait_end)
    return ctx.late & (2 * busy >= ctx.wait_end - gaps.begin_ns)


def _inside_sync(table: TraceTable, gaps: Gaps) -> Bools:
    """Gaps that lie inside a synchronise call (any thread): what ends them was queued before."""
    sync = calls_named(table, is_sync)
    start, end = table.runtime.start_ns[sync], table.runtime.end_ns[sync]  # sorted by start
    if not len(start):
        return np.zeros(len(gaps), dtype=np.bool_)
    reach = np.maximum.accumulate(end)
    i = np.searchsorted(start, gaps.begin_ns, side="right") - 1
    inside: Bools = (i >= 0) & (reach[np.maximum(i, 0)] >= gaps.end_ns)
    return inside


def launch_overhead_gaps(
    table: TraceTable, gaps: Gaps, ctx: _Context, delay_ns: int = CONSECUTIVE_KERNEL_DELAY_NS
) -> Bools:
    """The next op was already issued — its launch came before the gap, or the host sat in a
    synchronise call all through it (a launch from before the capture) — and the gap is short
    or the launch call was still running."""
    issued = ctx.known & ~ctx.late
    short = (gaps.end_ns - gaps.begin_ns) < delay_ns
    queued_before = ~ctx.known & _inside_sync(table, gaps)
    return (issued & (short | (ctx.call_end > gaps.begin_ns))) | (queued_before & short)


def held_gaps(ctx: _Context, overhead: Bools) -> Bools:
    """Launched in time and returned, not a short hop, yet the op started late: held back."""
    return ctx.known & ~ctx.late & ~overhead


def untraced_gaps(table: TraceTable, ctx: _Context, starved: Bools, overhead: Bools) -> Bools:
    """No launch in a trace that records launches, or a late launch with no traced host work."""
    unlaunched = ~ctx.known & ~overhead & (len(table.runtime) > 0)
    return unlaunched | (ctx.late & ~starved)


def classify_gaps(
    table: TraceTable,
    gaps: Gaps,
    steps: Steps | None,
    delay_ns: int = CONSECUTIVE_KERNEL_DELAY_NS,
) -> npt.NDArray[np.int8]:
    """The `IdleCause` of each gap (the first that holds, in the class's order)."""
    ctx = _context(table, gaps)
    starved = host_starved_gaps(table, gaps, ctx)
    overhead = launch_overhead_gaps(table, gaps, ctx, delay_ns)
    tests = [
        sync_gaps(table, gaps, ctx),
        copy_gaps(table, gaps, ctx),
        step_gaps(gaps, steps),
        starved,
        overhead,
        held_gaps(ctx, overhead),
        untraced_gaps(table, ctx, starved, overhead),
    ]
    causes = np.select(tests, [int(c) for c in IdleCause][: len(tests)], int(IdleCause.OTHER))
    return causes.astype(np.int8)


def _top_level(start: I64, end: I64) -> Bools:
    """Events not inside an earlier one (input sorted by start, one thread)."""
    if not len(start):
        return np.zeros(0, dtype=np.bool_)
    reach = np.maximum.accumulate(end)
    top: Bools = np.r_[True, start[1:] >= reach[:-1]]
    return top


_Layer = dict[int, tuple[I64, I64, list[str]]]


def _layer(table: TraceTable, rows: Bools, *, cpu: bool, fixed: str | None = None) -> _Layer:
    """Top-level events per thread among `rows` of `table.cpu` (or of `table.runtime`)."""
    events = table.cpu if cpu else table.runtime
    s, e, t = events.start_ns[rows], events.end_ns[rows], events.tid[rows]
    ids = events.name[rows]
    out: _Layer = {}
    for thread in np.unique(t).tolist():
        mine = np.flatnonzero(t == thread)
        top = mine[_top_level(s[mine], e[mine])]
        names = [fixed] * len(top) if fixed is not None else table.names_of(ids[top])
        out[thread] = (s[top], e[top], names)
    return out


class _Namer:
    """Names the host work on a thread during a window: its top-level operator, else its
    annotation, else "python", else the runtime call it was in."""

    def __init__(self, table: TraceTable) -> None:
        cpu = table.cpu
        steps = np.array([bool(_STEP_NAME.match(s)) for s in table.strings], dtype=np.bool_)
        keep = ~steps[cpu.name] if len(steps) else np.zeros(len(cpu), dtype=np.bool_)
        self.layers = [
            _layer(table, keep & (cpu.kind == CpuKind.OP), cpu=True),
            _layer(table, keep & (cpu.kind == CpuKind.ANNOTATION), cpu=True),
            _layer(table, keep & (cpu.kind == CpuKind.PYTHON), cpu=True, fixed=PYTHON),
            _layer(table, np.ones(len(table.runtime), dtype=np.bool_), cpu=False),
        ]

    def name(self, tid: int, begin: int, end: int) -> str | None:
        for layer in self.layers:
            found = layer.get(tid)
            if found is None:
                continue
            starts, ends, names = found
            lo = max(0, int(np.searchsorted(starts, begin, side="right")) - 1)
            hi = int(np.searchsorted(starts, end, side="left"))
            if hi <= lo:
                continue
            overlap = np.minimum(ends[lo:hi], end) - np.maximum(starts[lo:hi], begin)
            best = int(np.argmax(overlap))
            if overlap[best] > 0:
                return names[lo + best]
        return None


def _host_ops(table: TraceTable, gaps: Gaps, starved: Bools) -> dict[str, int]:
    if not starved.any():
        return {}
    ctx = _context(table, gaps)
    namer = _Namer(table)
    out: dict[str, int] = {}
    for i in np.flatnonzero(starved).tolist():
        begin, wait_end = int(gaps.begin_ns[i]), int(ctx.wait_end[i])
        name = namer.name(int(ctx.tid[i]), begin, wait_end) or PYTHON
        out[name] = out.get(name, 0) + int(gaps.end_ns[i] - gaps.begin_ns[i])
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def get_idle_causes(
    table: TraceTable, steps: Steps | None, delay_ns: int = CONSECUTIVE_KERNEL_DELAY_NS
) -> IdleCauses:
    """Idle time of one table by cause; the causes add up to its idle time."""
    gaps = find_gaps(table)
    causes = classify_gaps(table, gaps, steps, delay_ns)
    lengths = gaps.end_ns - gaps.begin_ns
    return IdleCauses(
        idle_ns=int(lengths.sum()),
        ns_by_cause={c: int(lengths[causes == c].sum()) for c in IdleCause},
        gaps_by_cause={c: int((causes == c).sum()) for c in IdleCause},
        host_ns_by_op=_host_ops(table, gaps, causes == IdleCause.HOST_STARVED),
    )
