"""Step detection and the launch, graph and communication figures on synthetic inference traces.

`infertriage_testing.tracesynth` writes decode steps of a Llama-like model with no step markers, so
the detector must find the steps from the kernel pattern alone; the trace's
truth (`synth_truth`) says what it must find.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.analyze.trace import TraceReport, find_steps, load_traces
from infertriage.api.trace import analyze_trace
from infertriage_testing.tracesynth import SynthSpec, synth_truth, trace_chunks


def _write(path: Path, spec: SynthSpec) -> Path:
    with path.open("wb") as out:
        for chunk in trace_chunks(spec):
            out.write(chunk)
    return path


def _analyze(tmp_path: Path, *specs: SynthSpec) -> TraceReport:
    paths = [_write(tmp_path / f"rank{s.rank}.json", s) for s in specs]
    return analyze_trace(paths)


@pytest.mark.parametrize(
    "spec",
    [
        SynthSpec(num_steps=20, num_layers=4),
        SynthSpec(num_steps=7, num_layers=32, cuda_graphs=True),
        SynthSpec(num_steps=5, num_layers=80, tp=2),
        SynthSpec(num_steps=3, num_layers=2, schedule_us=5.0),  # barely any gap between steps
        SynthSpec(num_steps=2, num_layers=1),
    ],
    ids=["eager", "graphs", "tp2-80-layers", "no-gap", "two-steps"],
)
def test_markerless_steps_are_exact(tmp_path: Path, spec: SynthSpec) -> None:
    truth = synth_truth(spec)
    report = _analyze(tmp_path, spec)
    steps = report.signal("trace.steps")
    assert steps is not None and steps.source == "trace:pattern"
    assert steps.value == truth.num_steps
    assert report.value("trace.kernels_per_step") == truth.kernels_per_step
    assert report.value("trace.kernels") == truth.num_kernels
    assert report.value("trace.step_pattern_match") == 1.0


def test_markers_win_over_the_pattern(tmp_path: Path) -> None:
    spec = SynthSpec(num_steps=4, markers=True)
    table = load_traces([_write(tmp_path / "t.json", spec)])[0]
    steps = find_steps(table)
    assert steps is not None and steps.source == "profiler_step"
    assert steps.kernels.tolist() == [synth_truth(spec).kernels_per_step] * 4


def test_cuda_graph_launch_statistics_count_launches_not_kernels(tmp_path: Path) -> None:
    spec = SynthSpec(num_steps=6, num_layers=8, cuda_graphs=True)
    truth = synth_truth(spec)
    report = _analyze(tmp_path, spec)
    assert report.value("trace.cuda_graph_launches") == truth.graph_launches == 6
    assert report.value("trace.cuda_graph_kernels") == truth.graph_kernels
    # per step: the embedding, one graph launch, the three tail kernels
    assert report.value("trace.launches") == 6 * 5
    assert report.value("trace.launches_per_step") == 5
    assert report.value("trace.kernels_per_graph_launch") == truth.graph_kernels / 6
    assert 0.9 < report.value("trace.cuda_graph_fraction") < 1.0  # type: ignore[operator]
    assert report.value("trace.sync_calls_per_step") == 1


def test_eager_decode_waits_on_the_host(tmp_path: Path) -> None:
    eager = _analyze(tmp_path, SynthSpec(num_steps=10, num_layers=8))
    assert eager.value("trace.idle.host_wait_fraction") > 0.2  # type: ignore[operator]
    assert eager.value("trace.cuda_graph_launches") == 0
    # Never under the 4 µs the trace's driver takes; above it once kernels queue behind GEMMs.
    assert eager.value("trace.launch_latency_p50_s") > 4e-6  # type: ignore[operator]
    assert eager.value("trace.launch_cpu_p50_s") == pytest.approx(5e-6)
    assert eager.attention_backend == "flash_attn_2"
    assert eager.value("trace.attention_backend.flash_attn_2") == 1
    # the host's waits are launch gaps with CUDA graphs off: the diagnose rules' case study
    assert {f.id for f in eager.findings} >= {"kernel.launch_bound"}


def test_tensor_parallel_ranks(tmp_path: Path) -> None:
    specs = [SynthSpec(num_steps=4, num_layers=4, tp=2, rank=r, slowdown=1 + r) for r in (0, 1)]
    report = _analyze(tmp_path, *specs)
    assert report.value("trace.num_ranks") == 2
    assert report.value("trace.comm_kernels") == 2 * synth_truth(specs[0]).comm_kernels
    assert report.value("trace.comm_overlap_fraction") == 0.0  # one stream: nothing overlaps
    assert report.value("trace.nccl_fraction") > 0.05  # type: ignore[operator]
    assert report.value("trace.rank_skew_fraction") == pytest.approx(0.5, rel=1e-6)
    assert {f.id for f in report.findings} >= {"parallelism.poor_overlap", "parallelism.rank_skew"}
