"""plan --hpa: the HorizontalPodAutoscaler manifest parses against the Kubernetes
autoscaling/v2 models (every field name known, every required field there), scales on the
per-replica series monitor-config records, and spans the curve's trough to its peak."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from infertriage.plan import PlanInputs, get_gpu, load_model
from infertriage.plan.hpa import HPA_METRICS, make_hpa_manifest
from infertriage.plan.traffic import make_traffic_plan, parse_traffic_csv

from ..autoscaling_schemas import strict_kubernetes as _strict

client = pytest.importorskip("kubernetes.client", reason="the kubernetes client (dev extra)")

BASE = PlanInputs(
    model=load_model("llama-3.1-8b"),
    gpu=get_gpu("H100-SXM"),
    max_model_len=8192,
    concurrency=1,
    input_len=512,
    output_len=256,
)
CURVE = "time,requests_per_s\n00:00,5\n06:00,120\n12:00,300\n18:00,40\n"


def _manifest(lead_time_s: float = 0.0) -> tuple[dict[str, Any], Any]:
    plan = make_traffic_plan(BASE, parse_traffic_csv(CURVE), (0.2, 0.05), lead_time_s=lead_time_s)
    return make_hpa_manifest(plan, "llama-8b", "serving"), plan


def test_the_manifest_is_a_valid_autoscaling_v2_hpa() -> None:
    manifest, plan = _manifest()
    text = yaml.safe_dump(manifest, sort_keys=False)
    hpa = _strict(yaml.safe_load(text), "V2HorizontalPodAutoscaler")
    assert hpa.api_version == "autoscaling/v2" and hpa.kind == "HorizontalPodAutoscaler"
    assert hpa.spec.scale_target_ref.kind == "Deployment"
    assert hpa.spec.scale_target_ref.name == "llama-8b"
    assert hpa.metadata.namespace == "serving"
    assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (
        plan.trough.replicas,
        plan.peak.replicas,
    )
    assert hpa.spec.min_replicas < hpa.spec.max_replicas


def test_the_strict_check_catches_a_misspelt_field() -> None:
    manifest, _ = _manifest()
    manifest["spec"]["behavior"]["scaleDown"]["stabilisationWindowSeconds"] = 300
    with pytest.raises(AssertionError, match="stabilisationWindowSeconds"):
        _strict(manifest, "V2HorizontalPodAutoscaler")
    manifest, _ = _manifest()
    del manifest["spec"]["metrics"][0]["pods"]["target"]["type"]
    with pytest.raises(ValueError, match="type"):
        _strict(manifest, "V2HorizontalPodAutoscaler")


def test_it_scales_on_the_per_replica_series_that_lead_latency() -> None:
    manifest, _ = _manifest()
    hpa = _strict(manifest, "V2HorizontalPodAutoscaler")
    names = [m.pods.metric.name for m in hpa.spec.metrics]
    assert names == [HPA_METRICS["waiting"], HPA_METRICS["kv_usage"]]
    assert all(m.type == "Pods" and m.pods.target.type == "AverageValue" for m in hpa.spec.metrics)
    waiting, kv = (m.pods.target.average_value for m in hpa.spec.metrics)
    assert int(waiting) >= 1
    assert kv.endswith("m") and 0 < int(kv[:-1]) <= 900  # a KV share below 1 − headroom


def test_scale_down_waits_at_least_one_cold_start() -> None:
    short, _ = _manifest(lead_time_s=45.0)
    long, _ = _manifest(lead_time_s=900.0)
    for manifest, window in ((short, 300), (long, 900)):
        hpa = _strict(manifest, "V2HorizontalPodAutoscaler")
        assert hpa.spec.behavior.scale_down.stabilization_window_seconds == window
        assert hpa.spec.behavior.scale_up.stabilization_window_seconds == 0
