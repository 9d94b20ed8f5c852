"""The `trace` report's idle breakdown on screen and in JSON, on a real fixture (AlexNet
inference on an A100, ../shared/fixtures/SOURCES.md): the causes with their shares, the
host-starved line naming the operators that kept the GPU waiting, queueing apart from
launch overhead, and graph replays by module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from infertriage.api.trace import analyze_trace
from infertriage.report.trace import render_trace, trace_to_json

Fixture = Callable[[str], Path]


def _text(paths: list[Path]) -> tuple[str, dict[str, object]]:
    report = analyze_trace(paths)
    console = Console(width=120, record=True, color_system=None)
    render_trace(report, console)
    return console.export_text(), trace_to_json(report)


def test_idle_by_cause_names_the_host_work(shared_fixture: Fixture) -> None:
    text, document = _text(
        [shared_fixture("traces/pytorch/alexnet_single_gpu_a100_inference.json.gz")]
    )
    assert "Idle GPU time by cause" in text
    # AlexNet's forward pass launches each convolution from aten::conv2d
    assert "host-starved (CPU busy) in aten::conv2d" in text
    assert "queueing p50 / queued / depth p50" in text
    assert "CUDA-graph replays by module" not in text  # no graphs in this trace
    ops = document["idle_host_ops"]
    assert isinstance(ops, list) and ops[0]["name"] == "aten::conv2d"
    assert document["hta_convention"] is False
    assert document["graph_modules"] == []


def test_graph_replays_by_module_on_screen(shared_fixture: Fixture) -> None:
    text, document = _text(
        [shared_fixture("traces/pytorch/trace_diff_test_2rank_rank1_v100_cudagraph.json.gz")]
    )
    assert "CUDA-graph replays by module" in text
    assert "CompiledFunctionBackward" in text
    modules = document["graph_modules"]
    assert isinstance(modules, list)
    assert sum(m["kernels"] for m in modules) == 4464
