"""Idle gaps classified by cause (analyze/trace/idle.py), and launch latency split into queueing.

Small hand-made tables: one per class, where it fires and where it does not. Times are
microseconds in the helpers, nanoseconds in the table. The real fixtures are in
test_idle_fixtures.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from infertriage.analyze.trace.idle import (
    PYTHON,
    IdleCause,
    classify_gaps,
    find_gaps,
    get_idle_causes,
)
from infertriage.analyze.trace.launches import get_launches
from infertriage.analyze.trace.steps import Steps
from infertriage.analyze.trace.table import CpuKind, GpuOpKind, TableBuilder, TraceTable

US = 1000


@dataclass
class Spec:
    """GPU ops (start, end, correlation, kind, stream), runtime calls (start, end, correlation,
    name, tid) and host work (start, end, name, kind, tid), in microseconds."""

    gpu: list[tuple[int, int, int, GpuOpKind, int]] = field(default_factory=list)
    calls: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    cpu: list[tuple[int, int, str, CpuKind, int]] = field(default_factory=list)

    def kernel(self, start: int, end: int, corr: int = -1, stream: int = 7) -> Spec:
        self.gpu.append((start, end, corr, GpuOpKind.KERNEL, stream))
        return self

    def copy(self, start: int, end: int, corr: int = -1) -> Spec:
        self.gpu.append((start, end, corr, GpuOpKind.MEMCPY, 7))
        return self

    def call(self, start: int, end: int, corr: int = -1, name: str = "cudaLaunchKernel") -> Spec:
        self.calls.append((start, end, corr, name, 1))
        return self

    def op(self, start: int, end: int, name: str, kind: CpuKind = CpuKind.OP) -> Spec:
        self.cpu.append((start, end, name, kind, 1))
        return self

    def build(self) -> TraceTable:
        b = TableBuilder()
        g = self.gpu
        b.gpu.append(
            start_ns=[x[0] * US for x in g],
            end_ns=[x[1] * US for x in g],
            kind=[int(x[3]) for x in g],
            device=[0] * len(g),
            stream=[x[4] for x in g],
            correlation=[x[2] for x in g],
            name=[b.strings.intern("memcpy" if x[3] else "gemm") for x in g],
            num_bytes=[0] * len(g),
            copy_kind=[0] * len(g),
            pageable=[False] * len(g),
            occupancy=[np.nan] * len(g),
        )
        if self.calls:
            c = self.calls
            b.runtime.append(
                start_ns=[x[0] * US for x in c],
                end_ns=[x[1] * US for x in c],
                tid=[x[4] for x in c],
                correlation=[x[2] for x in c],
                name=[b.strings.intern(x[3]) for x in c],
            )
        if self.cpu:
            h = self.cpu
            b.cpu.append(
                start_ns=[x[0] * US for x in h],
                end_ns=[x[1] * US for x in h],
                tid=[x[4] for x in h],
                kind=[int(x[3]) for x in h],
                name=[b.strings.intern(x[2]) for x in h],
            )
        return b.build("hand-made", "pytorch", 0)


def late_launch() -> Spec:
    """Kernel A [0, 10]; B launched at 60 (after the GPU ran dry at 10), runs [70, 80]."""
    return Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(70, 80, 2).call(60, 65, 2)


def cause_of(spec: Spec, steps: Steps | None = None) -> IdleCause:
    table = spec.build()
    gaps = find_gaps(table)
    assert len(gaps) == 1
    return IdleCause(int(classify_gaps(table, gaps, steps)[0]))


def test_sync_fires_when_the_host_waited_in_a_synchronise_call() -> None:
    spec = late_launch().call(5, 50, name="cudaStreamSynchronize").op(0, 60, "aten::item")
    assert cause_of(spec) is IdleCause.SYNC


def test_sync_does_not_fire_for_a_sync_before_the_gap() -> None:
    spec = late_launch().call(-9, -6, name="cudaDeviceSynchronize").op(10, 60, "aten::add")
    assert cause_of(spec) is IdleCause.HOST_STARVED


def test_sync_does_not_fire_on_another_thread() -> None:
    spec = late_launch().op(10, 60, "aten::add")
    spec.calls.append((5, 50, -1, "cudaStreamSynchronize", 2))
    assert cause_of(spec) is IdleCause.HOST_STARVED


def test_copy_fires_when_the_next_op_is_a_copy() -> None:
    spec = (
        Spec().kernel(0, 10, 1).call(-5, -2, 1).copy(70, 80, 2).call(60, 65, 2, "cudaMemcpyAsync")
    )
    assert cause_of(spec.op(10, 60, "aten::to")) is IdleCause.COPY


def test_copy_fires_when_the_host_sat_in_a_blocking_copy() -> None:
    # a DtoH copy [0, 10] whose call [−5, 30] returned after it: the host waited on it
    spec = Spec().copy(0, 10, 1).call(-5, 30, 1, "cudaMemcpyAsync")
    spec.kernel(70, 80, 2).call(60, 65, 2)
    assert cause_of(spec) is IdleCause.COPY


def test_copy_does_not_fire_for_an_async_copy_that_returned_at_once() -> None:
    spec = Spec().copy(0, 10, 1).call(-5, -3, 1, "cudaMemcpyAsync")
    spec.kernel(70, 80, 2).call(60, 65, 2).op(10, 60, "aten::add")
    assert cause_of(spec) is IdleCause.HOST_STARVED


def _steps(*starts_us: int) -> Steps:
    start = np.array(starts_us, dtype=np.int64) * US
    return Steps("profiler_step", start, start + 5 * US, np.ones(len(start), dtype=np.int64))


def test_between_steps_fires_when_a_step_starts_in_the_gap() -> None:
    spec = late_launch().op(10, 60, "aten::add")
    assert cause_of(spec, _steps(-10, 40)) is IdleCause.BETWEEN_STEPS


def test_between_steps_does_not_fire_for_a_boundary_outside_the_gap() -> None:
    spec = late_launch().op(10, 60, "aten::add")
    assert cause_of(spec, _steps(-10, 5)) is IdleCause.HOST_STARVED
    assert cause_of(spec, _steps(-10)) is IdleCause.HOST_STARVED  # one step: no boundary


def test_host_starved_names_the_top_level_op_of_the_launching_thread() -> None:
    spec = late_launch().op(5, 62, "aten::linear").op(20, 55, "aten::mm")
    spec.op(0, 90, "ProfilerStep#3", CpuKind.ANNOTATION)  # a step range names nothing
    idle = get_idle_causes(spec.build(), None)
    assert idle.ns_by_cause[IdleCause.HOST_STARVED] == 60 * US
    assert idle.host_ns_by_op == {"aten::linear": 60 * US}


def test_host_starved_in_python_alone_says_python() -> None:
    spec = late_launch().op(0, 62, "model.py(12): forward", CpuKind.PYTHON)
    idle = get_idle_causes(spec.build(), None)
    assert idle.host_ns_by_op == {PYTHON: 60 * US}


def test_host_starved_does_not_fire_when_the_thread_shows_little_work() -> None:
    spec = late_launch().op(10, 20, "aten::add")  # 10 of the 50 µs wait
    assert cause_of(spec) is IdleCause.UNTRACED


def test_launch_overhead_fires_for_a_short_gap_after_an_issued_launch() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(20, 30, 2).call(2, 4, 2)
    assert cause_of(spec) is IdleCause.LAUNCH_OVERHEAD


def test_launch_overhead_fires_while_the_launch_call_still_runs() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(200, 210, 2).call(2, 190, 2)
    assert cause_of(spec) is IdleCause.LAUNCH_OVERHEAD


def test_launch_overhead_does_not_fire_for_a_long_wait_after_a_returned_launch() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(200, 210, 2).call(2, 4, 2)
    assert cause_of(spec) is IdleCause.HELD


def test_held_does_not_fire_for_a_late_launch() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(200, 210, 2).call(150, 160, 2)
    assert cause_of(spec) is IdleCause.UNTRACED  # the host was late, and showed no work


def test_launch_overhead_fires_for_an_op_queued_before_a_sync_it_runs_under() -> None:
    # no launch for B in the trace, but the host sat in cudaDeviceSynchronize throughout:
    # B was queued before the capture; a 5 µs gap is the GPU moving to the next op
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(15, 20, 99)
    spec.call(-1, 30, name="cudaDeviceSynchronize")
    assert cause_of(spec) is IdleCause.LAUNCH_OVERHEAD


def test_launch_overhead_does_not_fire_for_a_long_gap_under_a_sync() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(200, 210, 99)
    spec.call(-1, 300, name="cudaDeviceSynchronize")
    assert cause_of(spec) is IdleCause.UNTRACED


def test_untraced_fires_for_an_op_without_its_launch() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -2, 1).kernel(70, 80, 99)
    assert cause_of(spec) is IdleCause.UNTRACED


def test_other_only_where_the_trace_has_no_launches_at_all() -> None:
    spec = Spec().kernel(0, 10).kernel(70, 80)
    assert cause_of(spec) is IdleCause.OTHER


def test_causes_add_up_to_the_idle_time() -> None:
    spec = late_launch().op(10, 60, "aten::add")
    spec.kernel(200, 210, 3).call(70, 72, 3).kernel(215, 220, 4).call(80, 82, 4)
    idle = get_idle_causes(spec.build(), None)
    assert idle.idle_ns == (60 + 120 + 5) * US
    assert sum(idle.ns_by_cause.values()) == idle.idle_ns
    assert sum(idle.gaps_by_cause.values()) == 3


def test_no_gap_no_idle() -> None:
    idle = get_idle_causes(Spec().kernel(0, 10, 1).call(-5, -2, 1).build(), None)
    assert idle.idle_ns == 0
    assert set(idle.ns_by_cause.values()) == {0}


def test_queueing_is_the_time_the_stream_was_busy() -> None:
    # A runs [0, 100]; B is launched at 10 and waits for A: 90 µs queueing, no overhead
    spec = Spec().kernel(0, 100, 1).call(-5, -3, 1).kernel(100, 110, 2).call(10, 12, 2)
    spec.kernel(110, 120, 3).call(20, 22, 3)
    launches = get_launches(spec.build())
    assert launches.queue_s * 1e6 == pytest.approx([0, 90, 90])
    assert launches.overhead_s * 1e6 == pytest.approx([5, 0, 0])
    assert launches.queued.tolist() == [False, True, True]
    assert launches.depth.tolist() == [0, 0, 1]  # at C's launch, B was launched, not started


def test_overhead_is_the_latency_on_an_idle_stream() -> None:
    spec = Spec().kernel(0, 10, 1).call(-5, -3, 1).kernel(25, 30, 2).call(20, 22, 2)
    launches = get_launches(spec.build())
    assert launches.queue_s.tolist() == [0.0, 0.0]
    assert launches.overhead_s * 1e6 == pytest.approx([5, 5])
    assert not launches.queued.any()


def test_queueing_is_per_stream() -> None:
    # stream 8 is idle while stream 7 runs: the launch on 8 does not queue
    spec = Spec().kernel(0, 100, 1).call(-5, -3, 1).kernel(20, 30, 2, stream=8).call(10, 12, 2)
    assert get_launches(spec.build()).queue_s.tolist() == [0.0, 0.0]
