"""The trace checks: each fires past its limit, stays quiet under it, is silent without evidence."""

from __future__ import annotations

import pytest

from infertriage.analyze.trace.findings import CHECKS, TraceLimits, find_issues
from infertriage.schemas import Layer, Signal, Status

HEALTHY = {
    "gpu_span_s": 1.0,
    "gpu_busy_fraction": 0.95,
    "gpu_idle_fraction": 0.05,
    "idle.host_wait_fraction": 0.02,
    "idle.host_wait_s": 0.02,
    "short_kernel_fraction": 0.1,
    "cuda_graph_fraction": 0.9,
    "cuda_graph_launches": 10.0,
    "launches_per_step": 5.0,
    "launch_cpu_p50_s": 5e-6,
    "sync_calls_per_step": 1.0,
    "sync_host_s": 0.001,
    "recompilations": 0.0,
    "nccl_fraction": 0.1,
    "comm_overlap_fraction": 0.9,
    "comm_exposed_s": 0.01,
    "rank_skew_fraction": 0.02,
    "memcpy.pageable_fraction": 0.0,
    "memcpy_s": 0.001,
    "mix.elementwise_fraction": 0.2,
    "attention_backend.flash_attn_2": 1.0,
}


def make_signals(**overrides: float | None) -> list[Signal]:
    """Signals of a healthy trace; `name=value` changes one, `name=None` removes it."""
    values: dict[str, float | None] = dict(HEALTHY)
    values.update({k.replace("__", "."): v for k, v in overrides.items()})
    return [
        Signal(f"trace.{name}", value, "1", "trace", (0.0, 1.0))
        for name, value in values.items()
        if value is not None
    ]


# (check id, overrides that make it fire, the signal whose absence silences it)
CASES = [
    ("trace.host_wait", {"idle__host_wait_fraction": 0.5}, "idle__host_wait_fraction"),
    (
        "trace.short_kernels",
        {"short_kernel_fraction": 0.9, "cuda_graph_fraction": 0.0, "gpu_idle_fraction": 0.4},
        "short_kernel_fraction",
    ),
    (
        "trace.no_cuda_graphs",
        {"cuda_graph_launches": 0.0, "launches_per_step": 400.0, "gpu_idle_fraction": 0.3},
        "launches_per_step",
    ),
    (
        "trace.unfused_attention",
        {"attention_backend__flash_attn_2": None, "attention_backend__math": 1.0},
        "attention_backend__math",
    ),
    ("trace.recompilations", {"recompilations": 4.0}, "recompilations"),
    ("trace.host_syncs", {"sync_calls_per_step": 12.0, "sync_host_s": 0.3}, "sync_calls_per_step"),
    ("trace.comm_share", {"nccl_fraction": 0.5, "comm_exposed_s": 0.4}, "nccl_fraction"),
    (
        "trace.comm_not_overlapped",
        {"comm_overlap_fraction": 0.1, "comm_exposed_s": 0.09},
        "comm_overlap_fraction",
    ),
    ("trace.rank_skew", {"rank_skew_fraction": 0.4}, "rank_skew_fraction"),
    ("trace.gpu_idle", {"gpu_busy_fraction": 0.3}, "gpu_busy_fraction"),
    ("trace.pageable_memcpy", {"memcpy__pageable_fraction": 1.0, "memcpy_s": 0.2}, "memcpy_s"),
]


def _ids(signals: list[Signal]) -> set[str]:
    return {f.id for f in find_issues(signals)}


def test_a_healthy_trace_has_no_finding() -> None:
    assert find_issues(make_signals()) == ()


@pytest.mark.parametrize(("check_id", "fire", "needed"), CASES, ids=[c[0] for c in CASES])
def test_check_table(check_id: str, fire: dict[str, float | None], needed: str) -> None:
    assert check_id not in _ids(make_signals())
    assert check_id in _ids(make_signals(**fire))
    silenced = {**fire, needed: None}
    if needed == "attention_backend__math":
        silenced["attention_backend__flash_attn_2"] = 1.0
    assert check_id not in _ids(make_signals(**silenced))


def test_every_check_is_covered_and_ids_are_unique() -> None:
    fired = {}
    for _, fire, _ in CASES:
        for finding in find_issues(make_signals(**fire)):
            fired.setdefault(finding.id, finding)
    assert len(CASES) == len(CHECKS) == len({c[0] for c in CASES})
    assert {c[0] for c in CASES} <= set(fired)
    assert {f.layer for f in fired.values()} == {Layer.KERNEL, Layer.PARALLELISM, Layer.HARDWARE}


def test_findings_are_scored_and_sorted() -> None:
    findings = find_issues(make_signals(idle__host_wait_fraction=0.6, gpu_busy_fraction=0.3))
    assert [f.score for f in findings] == sorted((f.score for f in findings), reverse=True)
    top = findings[0]
    assert top.score == pytest.approx(top.severity * top.explains)
    assert top.status is Status.BOTTLENECK
    assert top.evidence and top.evidence[0].threshold is not None
    assert top.next_steps


def test_limits_are_one_frozen_object() -> None:
    strict = TraceLimits(gpu_busy_fraction=0.99, min_score=0.0)
    assert "trace.gpu_idle" in {f.id for f in find_issues(make_signals(), strict)}
    with pytest.raises(AttributeError):
        strict.gpu_busy_fraction = 0.5  # type: ignore[misc]
