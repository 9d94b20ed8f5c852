"""analyze.signals, level 1: signals from what is known of the deployment: settings and plan.

Takes the server's reported configuration (run.json `server_config`), the
deployment as the user or the twin's scenario gave it (model, GPU, tensor
parallelism, interconnect, `max_num_seqs`, draft tokens) and, when a plan was
computed, the roofline's figures at the measured batch; gives `config.*` and
`plan.*` signals. A fleet read from Prometheus (raw/fleet.json) gives
`fleet.replicas`, `fleet.imbalance` (the busiest replica's share of the work
over the mean replica's, on the most uneven work figure) and
`fleet.busiest_excess` (the most requests in flight on one replica over the
mean replica's, so that a ratio of a few requests is not read as a routing fault).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infertriage.schemas import Deployment, RunServerConfig, Signal

__all__ = ["config_signals", "fleet_signals"]

# the fleet figures that measure work: how evenly the replicas share the load
_WORK_FIGURES = ("tokens.generation rate", "requests.finished rate", "queue.running mean")
# the fleet figures whose sum is a replica's requests in flight (running + waiting)
_LOAD_FIGURES = ("queue.running mean", "queue.waiting mean")


def _settings(
    server: RunServerConfig, deployment: Deployment
) -> dict[str, tuple[str, float | None, float | None]]:
    """signal name → (unit, what the server reported, what the deployment says)."""
    return {
        "config.max_num_seqs": ("requests", server.max_num_seqs, deployment.max_num_seqs),
        "config.num_gpu_blocks": ("1", server.num_gpu_blocks, None),
        "config.block_size": ("tokens", server.block_size, None),
        "config.gpu_memory_utilization": ("fraction", server.gpu_memory_utilization, None),
        "config.max_model_len": ("tokens", server.max_model_len, deployment.max_model_len),
        "config.max_num_batched_tokens": ("tokens", server.max_num_batched_tokens, None),
        "config.tensor_parallel": ("1", None, deployment.tensor_parallel),
        "spec.num_draft_tokens": ("tokens", None, deployment.num_draft_tokens),
        "fleet.replicas": ("1", None, deployment.replicas),
        "config.pipeline_parallel": ("1", None, deployment.pipeline_parallel),
        "config.expert_parallel": ("1", None, deployment.expert_parallel),
    }


def config_signals(server_config: RunServerConfig, deployment: Deployment) -> list[Signal]:
    """What the server reported wins over what the deployment claims."""
    out: list[Signal] = []
    graphs = server_config.cuda_graphs  # as the engine's adapter read it
    if graphs is not None:
        out.append(Signal("config.cuda_graphs", float(graphs), "bool", "server"))
    for name, (unit, reported, claimed) in _settings(server_config, deployment).items():
        if reported is not None:
            out.append(Signal(name=name, value=float(reported), unit=unit, source="server"))
        elif claimed is not None:
            out.append(Signal(name=name, value=float(claimed), unit=unit, source="deployment"))
    interconnect = deployment.interconnect
    if interconnect is not None:
        pcie = 1.0 if interconnect == "pcie" else 0.0
        out.append(Signal("config.interconnect_pcie", pcie, "bool", "deployment"))
    return out


def _busiest_excess(fleet: Mapping[str, Any], instances: list[str]) -> float | None:
    """The most requests in flight on one replica (its running + waiting, each a mean over the
    window) less the mean replica's; None without a running figure. A replica the figures do
    not list holds none."""
    load = dict.fromkeys(instances, 0.0)
    figures = [
        figure
        for figure in fleet.get("figures", [])
        if f"{figure.get('name')} {figure.get('figure')}" in _LOAD_FIGURES
    ]
    if not any(figure.get("name") == "queue.running" for figure in figures):
        return None
    for figure in figures:
        for value in figure.get("instances") or []:
            load[value["instance"]] = load.get(value["instance"], 0.0) + float(value["mean"])
    return max(load.values()) - sum(load.values()) / len(load)


def fleet_signals(fleet: Mapping[str, Any]) -> list[Signal]:
    """`fleet.replicas`, and the worst `fleet.imbalance` among the work figures of a fleet view
    with the busiest replica's excess in requests (`fleet.busiest_excess`)."""
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
    excess = _busiest_excess(fleet, [str(name) for name in instances])
    if excess is not None:
        source = "prometheus: queue.running + queue.waiting mean"
        out.append(Signal("fleet.busiest_excess", excess, "requests", source, span))
    return out
