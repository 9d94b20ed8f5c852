"""analyze, level 1: find the steps of a trace and count kernels per step.

Takes a `TraceTable`; gives `Steps`: where each step starts and how many
kernels it ran. Sources, best first:

1. `ProfilerStep#N` annotations (what `torch.profiler.schedule` writes);
2. NVTX ranges or user annotations named like a step (`execute_model`,
   `step`, `iteration`, `decode`…), when they repeat;
3. the repeating kernel pattern, so that inference traces without markers
   (vLLM, SGLang) work: the period is the shift at which the sequence of
   kernel names best matches itself (candidates are the common distances
   between repeats of one name; the smallest period within `PERIOD_SLACK` of
   the best match wins, so a 2-step period does not beat a 1-step one); the
   phase is where the idle gap before a kernel is largest on average (the
   host's scheduling work between steps). Only whole periods count as steps.

With markers a kernel belongs to the step during which its launching call
started (HTA's rule); kernels with no call fall back to their GPU start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.analyze.trace.table import GpuOpKind, RangeKind, TraceTable

__all__ = [
    "MIN_PATTERN_MATCH",
    "PERIOD_SLACK",
    "Steps",
    "find_steps",
    "trim_to_complete_steps",
]

MIN_PATTERN_MATCH = 0.6  # below this share of matching kernels there is no pattern to trust
PERIOD_SLACK = 0.01
_MAX_CANDIDATES = 24
_PROFILER_STEP = re.compile(r"^ProfilerStep\s*#\s*\d+")
_STEP_NAME = re.compile(
    r"^(execute_model|model_step|engine_step|decode_step|prefill_step|forward_step|step|"
    r"iteration|iter|decode|prefill)\b",
    re.IGNORECASE,
)
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Steps:
    """`source` is `profiler_step`, `nvtx`, `annotation` or `pattern`."""

    source: str
    start_ns: I64  # per step
    end_ns: I64
    kernels: I64  # kernels per step
    match: float = 1.0  # for `pattern`: share of kernels that repeat one period later

    @property
    def count(self) -> int:
        return len(self.kernels)


def _kernel_order(table: TraceTable) -> npt.NDArray[np.intp]:
    """Indices of the kernels of the busiest device, in start order."""
    gpu = table.gpu
    is_kernel = gpu.kind == GpuOpKind.KERNEL
    if not is_kernel.any():
        return np.zeros(0, dtype=np.intp)
    devices, counts = np.unique(gpu.device[is_kernel], return_counts=True)
    return np.flatnonzero(is_kernel & (gpu.device == devices[np.argmax(counts)]))


def _ranges_named(
    table: TraceTable, kinds: tuple[RangeKind, ...], pattern: re.Pattern[str]
) -> npt.NDArray[np.intp]:
    ranges = table.ranges
    wanted = np.isin(ranges.kind, [int(k) for k in kinds])
    ids = np.unique(ranges.name[wanted])
    hits = [i for i in ids.tolist() if pattern.search(table.strings[i])]
    return np.flatnonzero(wanted & np.isin(ranges.name, hits))


def _from_markers(table: TraceTable, rows: npt.NDArray[np.intp], source: str) -> Steps:
    ranges, gpu = table.ranges, table.gpu
    order = rows[np.argsort(ranges.start_ns[rows], kind="stable")]
    start, end = ranges.start_ns[order], ranges.end_ns[order]
    kernels = _kernel_order(table)
    launcher = table.launcher[kernels]
    when = np.where(
        launcher >= 0, table.runtime.start_ns[np.maximum(launcher, 0)], gpu.start_ns[kernels]
    )
    step = np.searchsorted(start, when, side="right") - 1
    inside = (step >= 0) & (when < end[np.maximum(step, 0)])
    counts = np.bincount(step[inside], minlength=len(start)).astype(np.int64)
    return Steps(source=source, start_ns=start, end_ns=end, kernels=counts)


def _match(seq: npt.NDArray[np.int32], period: int) -> float:
    return float(np.mean(seq[:-period] == seq[period:]))


def _candidate_periods(seq: npt.NDArray[np.int32]) -> list[int]:
    """The most common distances between consecutive occurrences of one kernel name."""
    order = np.argsort(seq, kind="stable")
    same = seq[order][1:] == seq[order][:-1]
    distances = (order[1:] - order[:-1])[same]
    distances = distances[(distances > 0) & (distances <= len(seq) // 2)]
    if not len(distances):
        return []
    values, counts = np.unique(distances, return_counts=True)
    best = values[np.argsort(-counts, kind="stable")][:_MAX_CANDIDATES]
    return sorted(int(v) for v in best)


def _period(seq: npt.NDArray[np.int32]) -> tuple[int, float]:
    scored = [(p, _match(seq, p)) for p in _candidate_periods(seq)]
    if not scored:
        return 0, 0.0
    best = max(score for _, score in scored)
    return next((p, s) for p, s in scored if s >= best - PERIOD_SLACK)


def _from_pattern(table: TraceTable) -> Steps | None:
    kernels = _kernel_order(table)
    seq = table.gpu.name[kernels]
    period, match = _period(seq)
    if period == 0 or match < MIN_PATTERN_MATCH:
        return None
    start, end = table.gpu.start_ns[kernels], table.gpu.end_ns[kernels]
    gaps = np.r_[0, start[1:] - np.maximum.accumulate(end)[:-1]].astype(np.float64)
    usable = len(gaps) - len(gaps) % period
    phase = int(np.argmax(gaps[:usable].reshape(-1, period).mean(axis=0))) if usable else 0
    first = np.arange(phase, len(seq) - period + 1, period)
    if not len(first):
        return None
    block = end[phase : phase + len(first) * period]
    return Steps(
        source="pattern",
        start_ns=start[first],
        end_ns=np.maximum.reduceat(block, np.arange(0, len(block), period)),
        kernels=np.full(len(first), period, dtype=np.int64),
        match=match,
    )


def find_steps(table: TraceTable) -> Steps | None:
    """The steps of one table, from markers when it has them, else from the kernel pattern."""
    rows = _ranges_named(table, (RangeKind.ANNOTATION,), _PROFILER_STEP)
    if len(rows):
        return _from_markers(table, rows, "profiler_step")
    for kind, source in ((RangeKind.NVTX, "nvtx"), (RangeKind.ANNOTATION, "annotation")):
        rows = _ranges_named(table, (kind,), _STEP_NAME)
        if len(rows) >= 2:
            return _from_markers(table, rows, source)
    return _from_pattern(table)


def trim_to_complete_steps(table: TraceTable) -> TraceTable:
    """HTA's window: only GPU ops launched before the last ProfilerStep began.

    HTA drops the last (possibly incomplete) profiler step and every GPU op
    it cannot join to a launching call when a trace has two or more steps;
    the benchmark uses this to compare figures on the same events. Tables
    with fewer than two steps come back unchanged.
    """
    rows = _ranges_named(table, (RangeKind.ANNOTATION,), _PROFILER_STEP)
    if len(rows) < 2:
        return table
    cutoff = table.ranges.start_ns[rows].max()
    launched = table.launcher >= 0
    keep = launched.copy()
    keep[launched] = table.runtime.start_ns[table.launcher[launched]] < cutoff
    return table.select_gpu(keep)
