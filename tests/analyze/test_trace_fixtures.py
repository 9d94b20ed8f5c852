"""`infertriage trace` on the real fixtures: golden signals by key, and the figures the issue names.

Goldens live in goldens/trace_signals.json (regenerate with trace_goldens.py
and review the diff). The hand-checked figures below come from the traces
themselves (SOURCES.md) and, for busy/idle/compute/overlap, agree with HTA
(benchmarks/trace_vs_hta.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from infertriage.analyze.trace import TraceReport, load_traces, trim_to_complete_steps
from infertriage.analyze.trace.timeline import get_timeline
from infertriage.api.trace import analyze_trace

GOLDENS = json.loads((Path(__file__).parent / "goldens" / "trace_signals.json").read_text())
Fixture = Callable[[str], Path]
PT = "traces/pytorch/"


@cache
def _report(*paths: Path) -> TraceReport:
    return analyze_trace(list(paths))


def report_of(shared_fixture: Fixture, key: str) -> TraceReport:
    return _report(*(shared_fixture(part) for part in key.split("+")))


@pytest.mark.parametrize("key", sorted(GOLDENS))
def test_signals_match_goldens(shared_fixture: Fixture, key: str) -> None:
    report = report_of(shared_fixture, key)
    got = {s.name: s.value for s in report.signals}
    expected = GOLDENS[key]
    assert sorted(got) == sorted(expected), "signal names changed: regenerate and review"
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-6, abs=1e-12), name


def test_every_signal_is_si_and_windowed(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, PT + "ddp_2rank_nccl_rank0_a100.json.gz")
    for signal in report.signals:
        assert signal.name.startswith("trace.")
        assert signal.unit in {"s", "fraction", "bytes", "1"}
        assert signal.window is not None and signal.window[1] > 0
        if signal.unit == "fraction":
            assert 0.0 <= signal.value <= 1.0, signal.name


def test_cuda_graph_replay_counts(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, PT + "trace_diff_test_2rank_rank1_v100_cudagraph.json.gz")
    assert report.value("trace.cuda_graph_launches") == 12
    assert report.value("trace.cuda_graph_kernels") == 4464
    assert report.value("trace.kernels_per_graph_launch") == 372
    assert report.value("trace.kernels") == 9876
    assert report.value("trace.steps") == 6  # ProfilerStep#1009 … #1014
    assert report.signal("trace.steps").source == "trace:profiler_step"  # type: ignore[union-attr]
    # One graph launch is one launch however many kernels it replays.
    assert report.value("trace.launches") == 4866 + 12


def test_nccl_kernels_of_ddp(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, PT + "ddp_2rank_nccl_rank0_a100.json.gz")
    assert report.value("trace.comm_kernels") == 21
    assert report.value("trace.kernels") == 2700
    assert report.value("trace.steps") == 3
    assert report.value("trace.kernels_per_step") == 900
    assert report.value("trace.nccl_fraction") == pytest.approx(0.28378, rel=1e-4)


def test_nsys_export(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, "traces/nsys/perlmutter-cloverleaf-cuda.sqlite")
    assert report.value("trace.kernels") == 1312
    assert report.value("trace.launches") == 1312  # every kernel joined to its cudaLaunchKernel
    assert report.value("trace.sync_calls") == 1312  # cudaDeviceSynchronize_v3020
    assert report.ranks[0].fmt == "nsys"
    assert report.ranks[0].devices == ("NVIDIA A100-SXM4-80GB",)
    htod = report.value("trace.memcpy.htod_bytes")
    dtoh = report.value("trace.memcpy.dtoh_bytes")
    assert (htod, dtoh) == (225_065_752, 51_200)
    assert report.value("trace.memcpy.pageable_fraction") == 1.0


def test_rocm_names(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, PT + "amd_mi250_rocm62_train.json.gz")
    assert report.value("trace.kernels") == 14
    assert report.value("trace.launches") == 14  # hipLaunchKernel and hipExtModuleLaunchKernel
    assert report.value("trace.sync_calls") == 1  # hipDeviceSynchronize
    gemm = [k for k in report.mix.top if k.name.startswith("Cijk_")]
    assert gemm and all(k.category.name == "GEMM" for k in gemm)


def test_triton_kernel_through_the_driver_api(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, PT + "triton_kernel_a100.json.gz")
    assert report.value("trace.kernels") == 1
    assert report.value("trace.launches") == 1  # cuLaunchKernel joined
    assert report.mix.top[0].name == "triton_poi_fused_add_cos_sin_0"
    assert report.mix.top[0].category.name == "ELEMENTWISE"
    assert report.value("trace.compiled_regions") == 2  # CompiledFunction and the region


def test_markerless_inference_trace_finds_its_forward_passes(shared_fixture: Fixture) -> None:
    report = report_of(shared_fixture, PT + "alexnet_single_gpu_a100_inference.json.gz")
    steps = report.signal("trace.steps")
    assert steps is not None and steps.source == "trace:pattern"
    assert steps.value == 2 and report.value("trace.kernels_per_step") == 39  # 1 + 2 × 39 kernels


def test_two_ranks_give_skew(shared_fixture: Fixture) -> None:
    key = PT + "sampled_128rank_job_rank-0.json.gz+" + PT + "sampled_128rank_job_rank-1.json.gz"
    report = report_of(shared_fixture, key)
    assert [r.rank for r in report.ranks] == [0, 1]
    assert report.value("trace.num_ranks") == 2
    assert report.value("trace.kernels") == 1154 + 1104
    assert 0.0 < report.value("trace.rank_skew_fraction") < 1.0  # type: ignore[operator]


def test_directory_of_ranks(shared_fixture: Fixture, tmp_path: Path) -> None:
    for rank in (0, 1):
        source = shared_fixture(PT + f"sampled_128rank_job_rank-{rank}.json.gz")
        (tmp_path / source.name).symlink_to(source)
    report = analyze_trace([tmp_path])
    assert report.value("trace.num_ranks") == 2


def test_hta_window_matches_hta_figures(shared_fixture: Fixture) -> None:
    """HTA's temporal breakdown and overlap of this trace, read off HTA 0.5.0 (microseconds)."""
    path = shared_fixture(PT + "trace_diff_test_2rank_rank1_v100_cudagraph.json.gz")
    timeline = get_timeline(trim_to_complete_steps(load_traces([path])[0]))
    assert timeline.span_ns / 1e3 == pytest.approx(628_371, rel=0.01)
    assert timeline.idle_ns / 1e3 == pytest.approx(46_910, rel=0.01)
    assert timeline.compute_ns / 1e3 == pytest.approx(429_216, rel=0.01)
    assert timeline.comm_overlap_ns / timeline.comm_ns == pytest.approx(0.688, rel=0.01)
