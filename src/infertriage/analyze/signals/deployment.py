"""analyze.signals, level 1: signals from what is known of the deployment: settings and plan.

Takes the server's reported configuration (run.json `server_config`), the
deployment as the user or the twin's scenario gave it (model, GPU, tensor
parallelism, interconnect, `max_num_seqs`, draft tokens) and, when a plan was
computed, the roofline's figures at the measured batch; gives `config.*` and
`plan.*` signals. A fleet read from Prometheus (raw/fleet.json) gives
`fleet.replicas` and `fleet.imbalance`: the busiest replica's share of the
work over the mean replica's, on the most uneven work figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infertriage.schemas import Signal

__all__ = ["config_signals", "fleet_signals"]

# the fleet figures that measure work: how evenly the replicas share the load
_WORK_FIGURES = ("tokens.generation rate", "requests.finished rate", "queue.running mean")

# signal name → (key in the deployment or server config, unit)
_CONFIG_KEYS = {
    "config.max_num_seqs": ("max_num_seqs", "requests"),
    "config.num_gpu_blocks": ("num_gpu_blocks", "1"),
    "config.block_size": ("block_size", "tokens"),
    "config.gpu_memory_utilization": ("gpu_memory_utilization", "fraction"),
    "config.max_model_len": ("max_model_len", "tokens"),
    "config.max_num_batched_tokens": ("max_num_batched_tokens", "tokens"),
    "config.tensor_parallel": ("tensor_parallel", "1"),
    "spec.num_draft_tokens": ("num_draft_tokens", "tokens"),
    "fleet.replicas": ("replicas", "1"),
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def config_signals(server_config: Mapping[str, Any], deployment: Mapping[str, Any]) -> list[Signal]:
    """What the server reported wins over what the deployment claims."""
    out: list[Signal] = []
    graphs = server_config.get("cuda_graphs")  # as the engine's adapter read it
    if isinstance(graphs, bool):
        out.append(Signal("config.cuda_graphs", float(graphs), "bool", "server"))
    for name, (key, unit) in _CONFIG_KEYS.items():
        value = _number(server_config.get(key))
        source = "server"
        if value is None:
            value, source = _number(deployment.get(key)), "deployment"
        if value is not None:
            out.append(Signal(name=name, value=value, unit=unit, source=source))
    interconnect = deployment.get("interconnect")
    if isinstance(interconnect, str):
        pcie = 1.0 if interconnect == "pcie" else 0.0
        out.append(Signal("config.interconnect_pcie", pcie, "bool", "deployment"))
    return out


def fleet_signals(fleet: Mapping[str, Any]) -> list[Signal]:
    """`fleet.replicas` and the worst `fleet.imbalance` among the work figures of a fleet view."""
    instances = fleet.get("instances") or []
    if not instances:
        return []
    window = fleet.get("window_ts")
    span = (float(window[0]), float(window[1])) if window else None
    out = [Signal("fleet.replicas", float(len(instances)), "1", "prometheus", span)]
    uneven = [
        (float(figure["imbalance"]), f"{figure['name']} {figure['figure']}")
        for figure in fleet.get("figures", [])
        if f"{figure.get('name')} {figure.get('figure')}" in _WORK_FIGURES
        and figure.get("imbalance") is not None
    ]
    if uneven:
        ratio, which = max(uneven)
        out.append(Signal("fleet.imbalance", ratio, "1", f"prometheus: {which}", span))
    return out
