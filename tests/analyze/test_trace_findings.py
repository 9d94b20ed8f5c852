"""The trace's verdicts are the diagnose rules' over its signals alone: one rule engine.

Each trace-borne rule fires past its threshold, stays quiet under it and is
skipped without its evidence; `trace` and `diagnose` give one trace the same
findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.analyze.trace import derive_rule_signals
from infertriage.api.trace import analyze_trace
from infertriage.diagnose import RULES, Evidence, diagnose_evidence, trace_findings
from infertriage.schemas import Layer, Signal, Status, Thresholds
from infertriage_testing.tracesynth import SynthSpec, trace_chunks

HEALTHY = {
    "gpu_span_s": 1.0,
    "gpu_busy_fraction": 0.95,
    "gpu_idle_fraction": 0.05,
    "idle.host_wait_fraction": 0.02,
    "idle.host_wait_s": 0.02,
    "idle.kernel_to_kernel_s": 0.01,
    "short_kernel_fraction": 0.1,
    "cuda_graph_fraction": 0.9,
    "cuda_graph_launches": 10.0,
    "kernels_per_step": 300.0,
    "launches_per_step": 5.0,
    "launch_cpu_p50_s": 5e-6,
    "sync_calls_per_step": 1.0,
    "sync_host_s": 0.001,
    "recompilations": 0.0,
    "nccl_fraction": 0.05,
    "comm_overlap_fraction": 0.9,
    "comm_exposed_s": 0.01,
    "rank_skew_fraction": 0.02,
    "memcpy.pageable_fraction": 0.0,
    "memcpy_s": 0.001,
    "mix.elementwise_fraction": 0.2,
    "attention_backend.flash_attn_2": 1.0,
}


def make_signals(**overrides: float | None) -> list[Signal]:
    """Signals of a healthy trace (and the derived ones); `name=None` removes one."""
    values: dict[str, float | None] = dict(HEALTHY)
    values.update({k.replace("__", "."): v for k, v in overrides.items()})
    measured = [
        Signal(f"trace.{name}", value, "1", "trace", (0.0, 1.0))
        for name, value in values.items()
        if value is not None
    ]
    return measured + derive_rule_signals(measured)


def _ids(signals: list[Signal]) -> set[str]:
    return {f.id for f in trace_findings(Evidence.of(signals), Thresholds())}


# (rule id, overrides that make it fire, the measured signal whose absence silences it);
# every check the trace command had is one of these (its no-CUDA-graphs check is
# kernel.launch_bound; its GPU-idle check has no rule: see test_an_idle_gpu_alone_...)
CASES = [
    ("kernel.host_wait", {"idle__host_wait_fraction": 0.5}, "idle__host_wait_fraction"),
    (
        "kernel.short_kernels",
        {"short_kernel_fraction": 0.9, "cuda_graph_fraction": 0.0, "gpu_idle_fraction": 0.4},
        "short_kernel_fraction",
    ),
    (
        "kernel.launch_bound",
        {"cuda_graph_fraction": 0.0, "idle__kernel_to_kernel_s": 0.3},
        "kernels_per_step",
    ),
    (
        "kernel.unfused_attention",
        {"attention_backend__flash_attn_2": None, "attention_backend__math": 1.0},
        "attention_backend__math",
    ),
    ("kernel.recompilations", {"recompilations": 4.0}, "recompilations"),
    ("kernel.sync_every_step", {"sync_calls_per_step": 12.0}, "sync_calls_per_step"),
    ("parallelism.communication_share", {"nccl_fraction": 0.5}, "nccl_fraction"),
    (
        "parallelism.poor_overlap",
        {"nccl_fraction": 0.2, "comm_overlap_fraction": 0.1},
        "comm_overlap_fraction",
    ),
    ("parallelism.rank_skew", {"rank_skew_fraction": 0.4}, "rank_skew_fraction"),
    (
        "scheduling.step_cpu_gap",
        {"idle__host_wait_s": 0.5, "cuda_graph_fraction": 1.0},
        "idle__host_wait_s",
    ),
    (
        "hardware.pageable_memcpy",
        {"memcpy__pageable_fraction": 1.0, "memcpy_s": 0.2},
        "memcpy_s",
    ),
]


def test_a_healthy_trace_has_no_finding() -> None:
    assert trace_findings(Evidence.of(make_signals()), Thresholds()) == ()


@pytest.mark.parametrize(("rule_id", "fire", "needed"), CASES, ids=[c[0] for c in CASES])
def test_rule_table(rule_id: str, fire: dict[str, float | None], needed: str) -> None:
    assert rule_id not in _ids(make_signals())
    assert rule_id in _ids(make_signals(**fire))
    silenced = {**fire, needed: None}
    if needed == "attention_backend__math":
        silenced["attention_backend__flash_attn_2"] = 1.0
    assert rule_id not in _ids(make_signals(**silenced))


def test_every_trace_borne_rule_is_covered() -> None:
    """Every rule a trace's signals alone can run has a case here."""
    signals = make_signals(attention_backend__math=1.0)
    evidence = Evidence.of(signals)
    # a rule that needs no signal (evidence.metric_artefact) runs on any evidence: not trace-borne
    runnable = {r.id for r in RULES.values() if r.needs and not r.missing(evidence)}
    assert runnable == {c[0] for c in CASES}
    layers = {RULES[c[0]].layer for c in CASES}
    assert layers == {Layer.KERNEL, Layer.SCHEDULING, Layer.PARALLELISM, Layer.HARDWARE}


def test_findings_are_sorted_and_show_the_threshold_applied() -> None:
    signals = make_signals(idle__host_wait_fraction=0.6, nccl_fraction=0.6, rank_skew_fraction=0.3)
    findings = trace_findings(Evidence.of(signals), Thresholds())
    assert [f.score for f in findings] == sorted((f.score for f in findings), reverse=True)
    top = findings[0]
    assert top.score == pytest.approx(top.severity * top.explains)
    assert top.status is Status.BOTTLENECK  # the communication share past its bound
    by_id = {f.id: f for f in findings}
    host = by_id["kernel.host_wait"].evidence[0]
    assert (host.signal, host.threshold) == ("trace.host_wait_fraction", 0.30)
    strict = trace_findings(Evidence.of(signals), Thresholds(host_wait_fraction=0.55))
    host = next(f for f in strict if f.id == "kernel.host_wait").evidence[0]
    assert host.threshold == 0.55


def test_the_samplers_one_sync_per_step_is_no_finding() -> None:
    assert "kernel.sync_every_step" not in _ids(make_signals(sync_calls_per_step=1.0))
    assert "kernel.sync_every_step" in _ids(make_signals(sync_calls_per_step=2.0))


def test_an_idle_gpu_alone_is_no_finding() -> None:
    """Idle with nothing to run is low load, not a fault; the idle a fault causes is
    split into host waits and launch gaps, which the kernel rules judge."""
    assert _ids(make_signals(gpu_busy_fraction=0.3, gpu_idle_fraction=0.7)) == set()


def _write(path: Path, spec: SynthSpec) -> Path:
    with path.open("wb") as out:
        for chunk in trace_chunks(spec):
            out.write(chunk)
    return path


def test_trace_and_diagnose_agree_on_one_trace(tmp_path: Path) -> None:
    path = _write(tmp_path / "eager.json", SynthSpec(num_steps=10, num_layers=8))
    report = analyze_trace([path])
    assert report.findings
    diagnosis = diagnose_evidence(Evidence.of(report.signals), Thresholds())
    diagnosed = {f.id for layer in diagnosis.layers for f in layer.findings}
    assert {f.id for f in report.findings} == diagnosed
