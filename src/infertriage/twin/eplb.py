"""twin, level 2: vLLM's EPLB balancedness gauges, for a scenario with expert parallelism.

Takes the scenario and the served model's name; gives the `/metrics` text vLLM's
`EplbProm` (vllm/distributed/eplb/metrics.py, vLLM main 2026) exports when
`--enable-eplb` is on: `vllm:eplb_balancedness_{min,p50,p90,avg}` labelled
`model_name` and `engine`, each layer's balancedness being the mean over the max
of the EP ranks' routed tokens. The twin routes every MoE layer alike, so all four
read `1 / hot_expert_skew`. Nothing without expert parallelism and EPLB: vLLM
measures the balance only with EPLB on.
"""

from __future__ import annotations

from infertriage.twin.scenario_model import Scenario

__all__ = ["eplb_metrics"]

_GAUGES = (
    (
        "min",
        "Minimum per-layer EPLB balancedness (worst MoE layer, avg/max token load across "
        "EP ranks).",
    ),
    ("p50", "Median per-layer EPLB balancedness across MoE layers."),
    ("p90", "10th-percentile EPLB balancedness (90% of MoE layers are at least this balanced)."),
    ("avg", "Mean EPLB balancedness across MoE layers."),
)


def eplb_balancedness(scenario: Scenario) -> float | None:
    """The balancedness vLLM would read, or None where it reads none."""
    ep = scenario.expert_parallel
    if ep.size <= 1 or not ep.eplb:
        return None
    return 1.0 / ep.hot_expert_skew


def eplb_metrics(scenario: Scenario, model_name: str) -> str:
    """The gauges' exposition text ('' without EPLB)."""
    value = eplb_balancedness(scenario)
    if value is None:
        return ""
    lines: list[str] = []
    for stat, doc in _GAUGES:
        name = f"vllm:eplb_balancedness_{stat}"
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} gauge"]
        lines.append(f'{name}{{engine="0",model_name="{model_name}"}} {value:.6f}')
    return "\n".join(lines) + "\n"
