"""plan, level 1: a KEDA ScaledObject (keda.sh/v1alpha1) for a traffic plan, instead of the HPA.

Takes a `TrafficPlan`, the Deployment's name (and namespace) and the address
KEDA reaches Prometheus at; gives the ScaledObject as a plain mapping. KEDA
makes the HPA itself (an External metric per trigger), so the ScaledObject
carries the HPA's numbers (`plan.hpa.hpa_targets`): min/max replicas, the
same behaviour, and one `prometheus` trigger per scaling metric whose query
sums the per-pod values over the Deployment's pods and whose threshold is
the per-replica target — with KEDA's default `AverageValue` the HPA divides
the sum by the replicas, as a Pods metric averages over them. Field names as
KEDA's `apis/keda/v1alpha1` types and its Prometheus scaler
(`pkg/scalers/prometheus_scaler.go`) spell them. Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

from infertriage.plan.hpa import (
    SCALING_METRICS,
    PodsMetric,
    hpa_behavior,
    hpa_targets,
    object_metadata,
)
from infertriage.plan.traffic import TrafficPlan
from infertriage.schemas.recorded import POD_LABELS

__all__ = ["keda_query", "make_scaled_object"]


def _pods_of(deployment: str) -> str:
    """A Deployment's pods, `NAME-<replicaset hash>-<suffix>`, as an RE2 regex (a name's
    only regex character, `.`, in a class: no backslash to escape in PromQL)."""
    return deployment.replace(".", "[.]") + "-[a-z0-9]+-[a-z0-9]+"


def keda_query(metric: PodsMetric, deployment: str, namespace: str | None) -> str:
    """One value for the Deployment: the per-pod values (aggregated as the adapter does),
    summed. KEDA refuses a query that returns more than one series."""
    namespace_label, pod_label = POD_LABELS
    matchers = [f'{pod_label}=~"{_pods_of(deployment)}"']
    if namespace:
        matchers.insert(0, f'{namespace_label}="{namespace}"')
    selector = f"{metric.recorded.value}{{{','.join(matchers)}}}"
    return f"sum({metric.aggregate} by ({', '.join(POD_LABELS)}) ({selector}))"


def _threshold(value: float) -> str:
    return f"{value:g}"


def make_scaled_object(
    plan: TrafficPlan, deployment: str, namespace: str | None, server_address: str
) -> dict[str, Any]:
    """The ScaledObject scaling `deployment` for `plan` on Prometheus at `server_address`."""
    targets = hpa_targets(plan)
    thresholds = {"waiting": float(targets.waiting_per_replica), "kv_usage": targets.kv_usage}
    metadata = object_metadata(deployment, namespace)
    triggers = [
        {
            "type": "prometheus",
            "name": metric.name,
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": server_address,
                "query": keda_query(metric, deployment, namespace),
                "threshold": _threshold(thresholds[role]),
                # no series (Prometheus lost the pods): an error, on which the HPA does
                # not scale down, as when prometheus-adapter finds no metric — KEDA's
                # default would read 0 and scale down to the minimum
                "ignoreNullValues": "false",
            },
        }
        for role, metric in SCALING_METRICS.items()
    ]
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
            "minReplicaCount": targets.min_replicas,
            "maxReplicaCount": targets.max_replicas,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(targets)}},
            "triggers": triggers,
        },
    }
