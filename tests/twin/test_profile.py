"""The twin's simulated trace: the trace analyser finds the steps it wrote, kernel for kernel."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from infertriage.api.trace import analyze_trace
from infertriage.twin.engine import EngineCore, StepResult, VirtualClock
from infertriage.twin.profile import trace_bytes
from infertriage.twin.scenario import load_scenario


def _steps(scenario_name: str, num_steps: int) -> tuple[list[StepResult], object]:
    scenario = load_scenario(scenario_name)
    clock = VirtualClock()
    engine = EngineCore(scenario, clock)
    for i in range(8):
        engine.add_request(f"r{i}", list(range(100 + i, 400 + i)))
    steps = []
    while len(steps) < num_steps and engine.has_unfinished_requests():
        result = engine.step()
        clock.advance_to(result.end_ts + 5e-4)  # scheduling time between steps
        if result.cost.num_kernels:
            steps.append(result)
    return steps, scenario


def _signals(path: Path) -> dict[str, float]:
    return {s.name: s.value for s in analyze_trace([path]).signals}


@pytest.mark.parametrize("name", ["healthy", "launch-bound", "tp-over-pcie"])
def test_detected_steps_equal_steps_written(name: str, tmp_path: Path) -> None:
    steps, scenario = _steps(name, 12)
    path = tmp_path / "twin.pt.trace.json.gz"
    path.write_bytes(trace_bytes(steps, scenario))  # type: ignore[arg-type]
    got = _signals(path)
    assert got["trace.steps"] == len(steps)
    events = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = sum(1 for e in events if e["cat"] == "kernel")
    assert kernels % len(steps) == 0  # every step launches the same kernels
    assert got["trace.kernels_per_step"] == kernels // len(steps)


def test_graphs_launch_bound_and_nccl_show_in_the_trace(tmp_path: Path) -> None:
    found = {}
    for name in ("healthy", "launch-bound", "tp-over-pcie"):
        steps, scenario = _steps(name, 12)
        path = tmp_path / f"{name}.pt.trace.json.gz"
        path.write_bytes(trace_bytes(steps, scenario))  # type: ignore[arg-type]
        found[name] = _signals(path)
    assert found["healthy"]["trace.cuda_graph_fraction"] == pytest.approx(1.0)
    assert found["launch-bound"]["trace.cuda_graph_fraction"] == 0.0
    assert found["launch-bound"]["trace.idle.host_wait_fraction"] > 0.5
    assert found["tp-over-pcie"]["trace.nccl_fraction"] >= 0.3
    assert found["healthy"]["trace.nccl_fraction"] == 0.0
