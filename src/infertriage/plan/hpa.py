"""plan, level 1: a Kubernetes HorizontalPodAutoscaler (autoscaling/v2) for a traffic plan.

Takes a `TrafficPlan` (replicas per interval, the measured cold start) and
the Deployment's name; gives the manifest as a plain mapping (the api writes
it as YAML). The HPA scales on metrics that lead latency — requests waiting
per replica and KV-cache usage per replica (`SCALING_METRICS`), read through
prometheus-adapter as Pods metrics (`plan.adapter` writes the adapter's
rules) — with min/max replicas from the curve's trough and peak, and a
scale-down stabilisation window no shorter than the time a new replica takes
to serve its first token, so a dip shorter than a cold start never removes a
replica that the next rise would wait for. Pure; no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from infertriage.plan.traffic import TrafficPlan
from infertriage.schemas import UserError
from infertriage.schemas.recorded import Recorded

__all__ = [
    "HPA_METRICS",
    "SCALING_METRICS",
    "HpaTargets",
    "PodsMetric",
    "check_names",
    "hpa_behavior",
    "hpa_targets",
    "make_hpa_manifest",
    "object_metadata",
]


@dataclass(frozen=True, slots=True)
class PodsMetric:
    """A per-replica series the HPA scales on (`monitor-config` records it), as
    prometheus-adapter serves it: a Pods metric under `name`."""

    recorded: Recorded
    aggregate: str  # how one pod's series combine (a pod scraped twice): sum or max

    @property
    def name(self) -> str:
        """Its custom-metrics API name: `infertriage:kv_usage:per_replica` →
        `infertriage_kv_usage` (a Pods metric is per pod; colons are Prometheus's mark of
        a recorded series, not an API name's)."""
        _, middle, _ = self.recorded.value.split(":")
        return f"infertriage_{middle}"


# The series the HPA reads, by role: requests waiting (summed over a pod) and KV-cache
# usage (its fullest cache); `plan.adapter` serves them, `plan.keda` queries them.
SCALING_METRICS = {
    "waiting": PodsMetric(Recorded.WAITING, "sum"),
    "kv_usage": PodsMetric(Recorded.KV_USAGE, "max"),
}
HPA_METRICS = {role: metric.name for role, metric in SCALING_METRICS.items()}


@dataclass(frozen=True, slots=True)
class HpaTargets:
    min_replicas: int
    max_replicas: int
    waiting_per_replica: int  # requests queued per replica before TTFT leaves its SLO
    kv_usage: float  # the KV share a replica holds at its planned concurrency
    scale_down_window_s: int
    scale_up_window_s: int


def hpa_targets(plan: TrafficPlan) -> HpaTargets:
    """The HPA's numbers from the curve: min/max replicas, metric targets, windows.

    Waiting target: each request queued ahead of a new one delays its first token
    by about one prefill, so a replica absorbs as many as the TTFT SLO leaves room for.
    """
    peak = plan.peak
    capacity = peak.capacity
    prefill_s = max(capacity.ttft_s - capacity.itl_s, 1e-6)
    slack_s = max(0.0, plan.ttft_slo_s - capacity.ttft_s)
    waiting = max(1, math.floor(slack_s / prefill_s))
    window = math.ceil(plan.scale_down_window_s)
    return HpaTargets(
        min_replicas=max(1, plan.trough.replicas),
        max_replicas=max(1, peak.replicas),
        waiting_per_replica=waiting,
        kv_usage=round(min(capacity.kv_usage, 1 - plan.headroom), 2),
        scale_down_window_s=window,
        scale_up_window_s=0,
    )


def _pods_metric(name: str, average_value: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": name},
            "target": {"type": "AverageValue", "averageValue": average_value},
        },
    }


def _milli(value: float) -> str:
    """A Kubernetes quantity: 0.85 → '850m'."""
    return f"{round(value * 1000)}m"


def hpa_behavior(targets: HpaTargets) -> dict[str, Any]:
    """The HPA's `behavior`: scale up at once (doubling, or 4 pods, a minute), scale down
    one pod each 2 minutes after the stabilisation window."""
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": targets.scale_up_window_s,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 60},
                {"type": "Pods", "value": 4, "periodSeconds": 60},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": targets.scale_down_window_s,
            "selectPolicy": "Min",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
        },
    }


def object_metadata(name: str, namespace: str | None) -> dict[str, Any]:
    """A Kubernetes object's `metadata`: its name, and its namespace when one is given."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return metadata


def make_hpa_manifest(
    plan: TrafficPlan, deployment: str, namespace: str | None = None
) -> dict[str, Any]:
    """The autoscaling/v2 HorizontalPodAutoscaler of `deployment` for `plan`."""
    targets = hpa_targets(plan)
    metadata = object_metadata(deployment, namespace)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicas": targets.min_replicas,
            "maxReplicas": targets.max_replicas,
            "metrics": [
                _pods_metric(HPA_METRICS["waiting"], str(targets.waiting_per_replica)),
                _pods_metric(HPA_METRICS["kv_usage"], _milli(targets.kv_usage)),
            ],
            "behavior": hpa_behavior(targets),
        },
    }


# Kubernetes' names (apimachinery's validation): a Deployment's a DNS-1123 subdomain, a
# namespace's a DNS-1123 label; so the only regex character a Deployment's name holds is `.`
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_NAMESPACE = re.compile(_LABEL)


def check_names(deployment: str, namespace: str | None) -> None:
    """`UserError` unless Kubernetes takes `deployment` and `namespace` as names."""
    if len(deployment) > 253 or not _SUBDOMAIN.fullmatch(deployment):
        raise UserError(
            f"--deployment {deployment!r} is not a Kubernetes name: lowercase letters, digits, "
            "'-' and '.', starting and ending with a letter or digit, at most 253 characters."
        )
    if namespace is not None and (len(namespace) > 63 or not _NAMESPACE.fullmatch(namespace)):
        raise UserError(
            f"--namespace {namespace!r} is not a Kubernetes namespace: lowercase letters, "
            "digits and '-', starting and ending with a letter or digit, at most 63 characters."
        )
