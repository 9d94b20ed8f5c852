"""analyze.signals, level 1: signals from what is known of the deployment: settings and plan.

Takes the server's reported configuration (run.json `server_config`), the
deployment as the user or the twin's scenario gave it (model, GPU, tensor
parallelism, interconnect, `max_num_seqs`, draft tokens) and, when a plan was
computed, the roofline's figures at the measured batch; gives `config.*` and
`plan.*` signals. A fleet read from Prometheus (raw/fleet.json) gives
`fleet.replicas`, `fleet.imbalance` (the busiest replica's share of the work
over the mean replica's, on the most uneven work figure) and two figures that
tell a routing fault from a few arrivals' chance: `fleet.busiest_excess` (the
most requests in flight on one replica over the mean replica's, from the queue
gauges) and `fleet.routing_chance` (how likely an even split of the requests the
window finished would put as many on the busiest replica) with
`fleet.request_imbalance` (the busiest replica's requests over the mean's); a
replica present for part of the window only is counted (`fleet.replicas_partial`)
instead, as replicas are then compared over different spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infertriage.analyze.stats.binomial import regularized_beta
from infertriage.schemas import Deployment, RunServerConfig, Signal

__all__ = ["config_signals", "fleet_signals"]

# the fleet figures that measure work: how evenly the replicas share the load
_WORK_FIGURES = ("tokens.generation rate", "requests.finished rate", "queue.running mean")


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


# a replica whose series cover less than this share of the others' points came or went
# within the window: replicas are then compared over different spans
_PRESENT = 0.8


def _figure_means(fleet: Mapping[str, Any], key: str) -> dict[str, float] | None:
    """Every replica's mean of one figure ("queue.running mean"), a replica of the fleet with
    no series of it at 0 (an engine makes a series on its first use: TGI's requests); None
    when the figure is absent."""
    for figure in fleet.get("figures", []):
        if f"{figure.get('name')} {figure.get('figure')}" == key:
            listed = {str(v["instance"]): float(v["mean"]) for v in figure.get("instances") or []}
            return {str(name): listed.get(str(name), 0.0) for name in fleet.get("instances", [])}
    return None


def _partial(fleet: Mapping[str, Any]) -> int:
    """How many replicas have series over less than `_PRESENT` of the window the others
    cover (by their points in any figure): a replica that came or went mid-window."""
    points: dict[str, int] = {}
    for figure in fleet.get("figures", []):
        for value in figure.get("instances") or []:
            name = str(value["instance"])
            points[name] = max(points.get(name, 0), int(value.get("num_points") or 0))
    most = max(points.values(), default=0)
    return sum(1 for n in points.values() if n < _PRESENT * most)


def _busiest_excess(fleet: Mapping[str, Any]) -> float | None:
    """The most requests in flight on one replica (its running + waiting, each a mean over the
    window) less the mean replica's; None without a running figure."""
    running = _figure_means(fleet, "queue.running mean")
    if not running or len(running) < 2:
        return None
    waiting = _figure_means(fleet, "queue.waiting mean") or {}
    load = {name: value + waiting.get(name, 0.0) for name, value in running.items()}
    return max(load.values()) - sum(load.values()) / len(load)


def _request_counts(fleet: Mapping[str, Any], span: tuple[float, float] | None) -> list[float]:
    """Each replica's requests finished in the window (its request rate times the window's
    length); empty without a request rate, a window or two replicas."""
    rates = _figure_means(fleet, "requests.finished rate")
    if not rates or len(rates) < 2 or span is None or span[1] <= span[0]:
        return []
    return [max(0.0, rate) * (span[1] - span[0]) for rate in rates.values()]


def _routing_chance(counts: list[float]) -> float | None:
    """How likely an even split of the requests the window finished would give one replica as
    many as the busiest got: k · P(X ≥ busiest) for X ~ Binomial(n, 1/k) (a union bound over
    the k replicas). None with no request finished."""
    n, k = sum(counts), len(counts)
    if not counts or n < 1.0:
        return None
    busiest = max(counts)
    if busiest <= n / k:
        return 1.0
    tail = regularized_beta(busiest, n - busiest + 1.0, 1.0 / k)  # P(X ≥ busiest)
    return min(1.0, k * tail)


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
    partial = _partial(fleet)
    if partial:  # the replicas' figures cover different spans: no figure says chance or not
        out.append(Signal("fleet.replicas_partial", float(partial), "1", "prometheus", span))
        return out
    excess = _busiest_excess(fleet)
    if excess is not None:
        source = "prometheus: queue.running + queue.waiting mean"
        out.append(Signal("fleet.busiest_excess", excess, "requests", source, span))
    unix = fleet.get("window")  # the queried window; `window_ts` is the load's on the run clock
    queried = (float(unix[0]), float(unix[1])) if unix else None
    counts = _request_counts(fleet, span or queried)
    chance = _routing_chance(counts)
    if chance is not None:
        source = "prometheus: requests.finished rate × the window"
        out.append(Signal("fleet.routing_chance", chance, "fraction", source, span))
        ratio = max(counts) / (sum(counts) / len(counts))
        out.append(Signal("fleet.request_imbalance", ratio, "1", source, span))
    return out
