"""diagnose end to end on the modern-deployment twins (issue 33): each packaged fault of
data-parallel ranks, prefill/decode disaggregation and expert parallelism is named by its
rule, at the workload its scenario documents; the healthy DP, P/D, EP, PP and offload
deployments get no bottleneck. Real-time runs of the whole pipeline (`make test-e2e`).

(pp-bubbles and offload-thrash have their own end-to-end tests:
`test_diagnose_parallel.py`, `test_diagnose_offload.py`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.schemas import Diagnosis, Layer, Status

DURATION_S = 12.0

# scenario → the finding that names its fault, and whether it must be the primary
FAULTS: dict[str, tuple[str, bool]] = {
    "dp-imbalance": ("parallelism.dp_rank_imbalance", True),
    "dp-prefix-blind": ("parallelism.prefix_affinity_lost", False),  # a warning within SLOs
    "pd-slow-link": ("parallelism.kv_transfer_bound", True),
    "pd-ratio": ("parallelism.pd_ratio_mismatch", True),
    "ep-hot-experts": ("parallelism.expert_imbalance", True),
}
HEALTHY = ("healthy-dp", "healthy-pd", "healthy-ep", "healthy-pp", "offload-helps")


def _contended(diagnosis: Diagnosis) -> bool:
    """The twin and the load client starved each other of CPU (a busy 2-core host): the
    application layer says so with a caveat (a warning, never the primary)."""
    return any(f.caveat for f in diagnosis.layer(Layer.APPLICATION).findings)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(FAULTS))
def test_each_topology_fault_is_named_by_its_rule(scenario: str, tmp_path: Path) -> None:
    diagnosis = diagnose(
        DiagnoseSpec(scenario=scenario, duration_s=DURATION_S, out=tmp_path / "run")
    ).diagnosis
    expected, primary = FAULTS[scenario]
    found = {f.id: f for layer in diagnosis.layers for f in layer.findings}
    assert expected in found, (scenario, sorted(found))
    if primary:
        assert found[expected].status is Status.BOTTLENECK
        # the primary is the fault's, or the application layer's where the clients' first
        # tokens came later than the engine's histogram says: a short level whose first
        # burst the server's window does not hold (ep-hot-experts' slow prefill, or a busy
        # host starving the twin)
        assert diagnosis.primary is not None
        assert diagnosis.primary.finding == expected or (
            diagnosis.primary.layer is Layer.APPLICATION
        ), diagnosis.primary
    # no other topology's rule claims this deployment
    others = {rule for rule, _ in FAULTS.values()} - {expected}
    if scenario == "dp-imbalance":  # round robin over ranks also scatters repeated prompts
        others.discard("parallelism.prefix_affinity_lost")
    assert not others & set(found), sorted(others & set(found))


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("scenario", HEALTHY)
def test_a_healthy_modern_deployment_has_no_bottleneck(scenario: str, tmp_path: Path) -> None:
    diagnosis = diagnose(
        DiagnoseSpec(scenario=scenario, duration_s=DURATION_S, out=tmp_path / "run")
    ).diagnosis
    blamed = [
        layer.layer
        for layer in diagnosis.layers
        if layer.status is Status.BOTTLENECK
        and not (layer.layer is Layer.APPLICATION and _contended(diagnosis))
    ]
    assert blamed == [], [(f.id, f.title) for layer in diagnosis.layers for f in layer.findings]
    topology_rules = {rule for rule, _ in FAULTS.values()} | {
        "parallelism.pipeline_bubble",
        "memory.offload_not_paying",
    }
    found = {f.id for layer in diagnosis.layers for f in layer.findings}
    assert not topology_rules & found, sorted(topology_rules & found)
