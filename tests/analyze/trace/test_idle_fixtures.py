"""Idle time explained on the real traces of ../shared/fixtures (SOURCES.md): the causes add
up to the idle time, "other" stays under 10 %, queueing is named as such, graph replays are
attributed to their module, and HTA's convention leaves the last profiler step out.

The expectations come from the events of each trace (what its launches, syncs and host ops
show), never from what the tool printed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from infertriage.analyze.trace import TraceReport
from infertriage.analyze.trace.idle import IdleCause
from infertriage.api.trace import analyze_trace

Fixture = Callable[[str], Path]
REAL = (
    "traces/pytorch/alexnet_single_gpu_a100_inference.json.gz",
    "traces/pytorch/amd_mi250_rocm62_train.json.gz",
    "traces/pytorch/cuda_event_sync_a100.json.gz",
    "traces/pytorch/ddp_2rank_nccl_rank0_a100.json.gz",
    "traces/pytorch/sampled_128rank_job_rank-0.json.gz",
    "traces/pytorch/sampled_128rank_job_rank-1.json.gz",
    "traces/pytorch/simple_add_overlaid_critical_path_output.json.gz",
    "traces/pytorch/trace_diff_test_2rank_rank1_v100_cudagraph.json.gz",
    "traces/serving/h100_qwen1.5-0.5b_eager.json.gz",
    "traces/serving/mi300x_qwen1.5-0.5b_eager.json.gz",
    "traces/serving/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "traces/serving/vllm_prefilldecode_piecewise/graph_execution.json.gz",
    "traces/nsys/perlmutter-cloverleaf-cuda.sqlite",
)
MAX_OTHER = 0.10


@cache
def _report(path: Path, hta: bool = False) -> TraceReport:
    return analyze_trace([path], hta_convention=hta)


def _causes(report: TraceReport) -> dict[IdleCause, float]:
    return {c: report.value(f"trace.idle.cause.{c.label}_s") or 0.0 for c in IdleCause}


@pytest.mark.parametrize("relative", REAL)
def test_causes_add_up_and_other_is_small(shared_fixture: Fixture, relative: str) -> None:
    report = _report(shared_fixture(relative))
    causes = _causes(report)
    idle = report.value("trace.gpu_idle_s")
    assert idle is not None
    assert sum(causes.values()) == pytest.approx(idle, rel=1e-9, abs=1e-12)
    if idle > 0:
        assert causes[IdleCause.OTHER] / idle < MAX_OTHER
        fractions = [report.value(f"trace.idle.cause.{c.label}_fraction") for c in IdleCause]
        assert sum(f or 0.0 for f in fractions) == pytest.approx(1.0)


def test_alexnet_host_starved_in_its_convolutions(shared_fixture: Fixture) -> None:
    # The forward pass launches each conv from aten::conv2d, and the GPU finishes first.
    report = _report(shared_fixture(REAL[0]))
    assert report.idle_host_ops[0][0] == "aten::conv2d"
    causes = _causes(report)
    assert max(causes, key=lambda c: causes[c]) is IdleCause.HOST_STARVED


def test_event_sync_trace_waits_on_its_syncs(shared_fixture: Fixture) -> None:
    # cuda_event_sync_a100 calls cudaEventSynchronize / cudaStreamSynchronize between kernels
    report = _report(shared_fixture(REAL[2]))
    assert (report.value("trace.idle.cause.sync_s") or 0.0) > 0


def test_nsys_trace_waits_on_its_blocking_copies_and_syncs(shared_fixture: Fixture) -> None:
    # CloverLeaf calls cudaDeviceSynchronize after each of its 1,312 launches and copies with
    # the blocking cudaMemcpy
    report = _report(shared_fixture(REAL[-1]))
    sync = report.value("trace.idle.cause.sync_fraction") or 0.0
    copy = report.value("trace.idle.cause.copy_fraction") or 0.0
    assert sync + copy > 0.9


def test_training_latency_is_queueing_not_overhead(shared_fixture: Fixture) -> None:
    # The CPU runs ahead of the GPU: most launches find their stream busy.
    report = _report(shared_fixture(REAL[7]))
    latency = report.value("trace.launch_latency_p50_s") or 0.0
    queue = report.value("trace.launch_queue_p50_s") or 0.0
    overhead = report.value("trace.launch_overhead_p50_s") or 0.0
    assert latency > 1e-3
    assert queue > 0.9 * latency
    assert overhead < 1e-4
    assert (report.value("trace.launch_queued_fraction") or 0.0) > 0.5
    assert (report.value("trace.queue_depth_p50") or 0.0) > 10


def test_graph_replays_by_module(shared_fixture: Fixture) -> None:
    report = _report(shared_fixture(REAL[7]))
    modules = {g.module: g for g in report.graph_modules}
    # forward and backward graphs, launched from torch.compile's autograd functions
    assert set(modules) == {"CompiledFunction", "CompiledFunctionBackward"}
    assert sum(g.num_kernels for g in modules.values()) == 4464
    assert sum(g.num_launches for g in modules.values()) == 12


def test_vllm_piecewise_graphs_under_their_graph_module(shared_fixture: Fixture) -> None:
    report = _report(shared_fixture(REAL[11]))
    # every hipGraphLaunch runs under the Python frame `nn.Module: GraphModule_0`
    assert [g.module for g in report.graph_modules] == ["GraphModule_0"]
    assert report.graph_modules[0].num_launches == 25


def test_hta_convention_leaves_the_last_step_out(shared_fixture: Fixture) -> None:
    path = shared_fixture(REAL[3])  # DDP: three ProfilerSteps
    ours, hta = _report(path), _report(path, True)
    assert hta.hta_convention and not ours.hta_convention
    assert (hta.value("trace.gpu_span_s") or 0.0) < (ours.value("trace.gpu_span_s") or 0.0)
    causes = _causes(hta)
    assert sum(causes.values()) == pytest.approx(hta.value("trace.gpu_idle_s"), rel=1e-9)
