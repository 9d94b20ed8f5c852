"""The API server's per-token work, end to end on the twin (issue 32, part 1).

The twin's API server is the main thread of its process (HTTP, tokenising, detokenising and
serialising every chunk), its engine core a thread named `engine-core`; the host sampler
reads each thread's CPU, the engines' `host_roles` tell them apart, and the API server's CPU
over the tokens the server streamed is its cost per token. A front end 20× (8B on an H100)
or 150× (70B at TP 2 on H200s) the healthy one's makes the application layer the primary;
the same deployment with a healthy front end holds no such finding, and an engine core
whose scheduling costs 1.5 ms a sequence is named in the scheduling or kernel layer, not the
application's. Assertions are on findings and layers, never on timings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.diagnose import DiagnoseSpec, diagnose
from infertriage.schemas import Diagnosis, Layer

_DEPLOYMENTS = {
    "8b-h100-tp1": "model: llama-3.1-8b\ngpu: H100-SXM\ntensor_parallel: 1\n",
    "70b-h200-tp2": "model: llama-3.1-70b\ngpu: H200\ntensor_parallel: 2\n",
}
_FRONT_END = "frontend: {{tokenize_us_per_token: {0}, detokenize_us_per_token: {1}, " \
    "serialize_us_per_chunk: {2}}}\n"  # fmt: skip
_HEALTHY_FRONT_END = (1, 2, 20)  # the twin's defaults
_SLO = {
    "8b-h100-tp1": "ttft_p95=0.3s,itl_p95=0.012s",
    "70b-h200-tp2": "ttft_p95=1.2s,itl_p95=0.05s",
}


def _run(tmp_path: Path, name: str, scenario: str, slo: str) -> Diagnosis:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"description: {name}\nseed: 0\n{scenario}")
    spec = DiagnoseSpec(
        scenario=str(path),
        duration_s=6.0,
        out=tmp_path / name,
        workload="synthetic:input=512,output=128",
        slo=slo,
    )
    return diagnose(spec).diagnosis


def _ids(d: Diagnosis) -> dict[str, Layer]:
    return {f.id: f.layer for layer in d.layers for f in layer.findings}


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(("deployment", "factor"), [("8b-h100-tp1", 20), ("70b-h200-tp2", 150)])
def test_per_token_front_end_work_is_the_application_layers(
    tmp_path: Path, deployment: str, factor: int
) -> None:
    costs = tuple(c * factor for c in _HEALTHY_FRONT_END)
    scenario = _DEPLOYMENTS[deployment] + _FRONT_END.format(*costs)
    d = _run(tmp_path, "front", scenario, _SLO[deployment])
    assert d.primary is not None, d.unexplained
    # the API server's work is the primary: per token, or (at ×150, when a busy host leaves
    # its thread at a core) the saturated front end it amounts to, with the per-token beside
    assert d.primary.finding in {"application.frontend_per_token", "application.frontend_saturated"}
    application = {f.id: f for f in d.layer(Layer.APPLICATION).findings}
    finding = application.get("application.frontend_per_token")
    if finding is None:
        # so saturated that the chunks of the load's window were still being written seconds
        # after the engine made them: its token counter did not grow over the window (no rate
        # to divide the API server's CPU by), and the saturated front end says what to do
        assert d.primary.finding == "application.frontend_saturated"
        finding = application["application.frontend_saturated"]
    else:
        assert "µs of CPU per streamed token" in finding.title
    assert any("--api-server-count" in step for step in finding.next_steps)


@pytest.mark.slow
def test_a_healthy_front_end_is_no_finding(tmp_path: Path) -> None:
    d = _run(tmp_path, "healthy", _DEPLOYMENTS["8b-h100-tp1"], _SLO["8b-h100-tp1"])
    assert "application.frontend_per_token" not in _ids(d)


@pytest.mark.slow
def test_an_engine_core_bound_host_is_the_engines(tmp_path: Path) -> None:
    scenario = _DEPLOYMENTS["8b-h100-tp1"] + "engine: {scheduler_overhead_us_per_seq: 1500}\n"
    d = _run(tmp_path, "engine", scenario, _SLO["8b-h100-tp1"])
    found = _ids(d)
    assert "application.frontend_per_token" not in found
    assert found.get("kernel.host_wait") is Layer.KERNEL or "scheduling.step_cpu_gap" in found
    assert d.primary is not None and d.primary.layer in {Layer.SCHEDULING, Layer.KERNEL}
