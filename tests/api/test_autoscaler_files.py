"""`plan --traffic --hpa FILE`: the HPA, and beside it the prometheus-adapter rules that serve
its Pods metrics; with `--keda URL`, a KEDA ScaledObject instead.

Each file is checked against its consumer: the HPA by the kubernetes client's
models, the adapter's rules by a typed copy of prometheus-adapter v0.12.0's
config structs (unknown fields refused, as its strict YAML loader does), the
ScaledObject by KEDA's v1alpha1 types and its Prometheus scaler's metadata
keys (`tests/autoscaling_schemas.py` cites each source). Then the names
agree end to end: each HPA metric is the API name of exactly one adapter rule,
whose series is one `monitor-config` records per namespace and pod.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infertriage.cli import main
from infertriage.engines import VLLM
from infertriage.report.monitoring import AlertLimits, Timing, make_monitor_config
from infertriage.schemas import Thresholds
from infertriage.schemas.recorded import POD_LABELS

from ..autoscaling_schemas import AdapterConfig, ScaledObject, api_name, strict_kubernetes

pytest.importorskip("kubernetes.client", reason="the kubernetes client (dev extra)")

ARGS = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--input-len", "512"]
CURVE = "time,requests_per_s\n00:00,5\n06:00,120\n12:00,300\n18:00,40\n"


def _plan(tmp_path: Path, *extra: str) -> Path:
    curve = tmp_path / "day.csv"
    curve.write_text(CURVE, encoding="utf-8")
    hpa = tmp_path / "hpa.yaml"
    args = [*ARGS, "--output-len", "256", "--traffic", str(curve), "--hpa", str(hpa)]
    assert main([*args, "--deployment", "llama-8b", "--namespace", "serving", *extra]) == 0
    return hpa


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _quantity(text: str) -> float:
    """A Kubernetes quantity as the HPA writes them: `3`, `850m`."""
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _recorded_by_pod() -> dict[str, str]:
    """The series monitor-config records for vLLM, with their expressions."""
    config = make_monitor_config(VLLM, AlertLimits.of(Thresholds()), Timing())
    return {r.record.value: r.expr for r in config.recordings}


def test_the_hpa_and_the_adapter_rules_that_serve_its_metrics(tmp_path: Path) -> None:
    hpa_path = _plan(tmp_path)
    hpa = strict_kubernetes(_load(hpa_path), "V2HorizontalPodAutoscaler")
    adapter_path = tmp_path / "hpa-prometheus-adapter.yaml"
    text = adapter_path.read_text(encoding="utf-8")
    assert text.startswith("# prometheus-adapter rules") and "rules.custom" in text
    adapter = AdapterConfig.model_validate(yaml.safe_load(text))
    recorded = _recorded_by_pod()
    for metric in hpa.spec.metrics:
        assert metric.type == "Pods"
        name = metric.pods.metric.name
        # exactly one rule serves it: the adapter's rules must be mutually exclusive
        serving = [
            rule
            for rule in adapter.rules
            for series in recorded
            if rule.series_query.startswith(series + "{") and api_name(rule, series) == name
        ]
        assert len(serving) == 1, (name, serving)
        (rule,) = serving
        series = rule.series_query.split("{", 1)[0]
        # the series is recorded per pod, and the rule maps those labels to the resources
        assert all(label in recorded[series] for label in POD_LABELS), recorded[series]
        overrides = {label: gr.resource for label, gr in rule.resources.overrides.items()}
        assert overrides == {"namespace": "namespace", "pod": "pod"}
        assert all(f'{label}!=""' in rule.series_query for label in POD_LABELS)
        assert "<<.LabelMatchers>>" in rule.metrics_query and "<<.GroupBy>>" in rule.metrics_query


def test_a_misspelt_adapter_field_is_refused_as_the_adapter_refuses_it(tmp_path: Path) -> None:
    """The typed check is strict: the adapter's loader (UnmarshalStrict) stops on these."""
    _plan(tmp_path)
    document = _load(tmp_path / "hpa-prometheus-adapter.yaml")
    rule = document["rules"][0]
    for broken in (
        {**rule, "metricQuery": rule["metricsQuery"]},
        {**rule, "resources": {"overrides": {"pod": {"resources": "pod"}}}},
        {**rule, "name": {"matches": "^(a)(b)$"}},
        {**rule, "metricsQuery": "sum(<<.Metric>>)"},
    ):
        with pytest.raises(ValueError):
            AdapterConfig.model_validate({"rules": [broken]})


def test_keda_writes_a_scaled_object_with_the_hpas_numbers(tmp_path: Path) -> None:
    (tmp_path / "hpa").mkdir()
    (tmp_path / "keda").mkdir()
    hpa_document = _load(_plan(tmp_path / "hpa"))
    hpa_only = strict_kubernetes(hpa_document, "V2HorizontalPodAutoscaler")
    url = "http://prometheus-operated.monitoring.svc:9090"
    path = _plan(tmp_path / "keda", "--keda", url)
    scaled = ScaledObject.model_validate(_load(path))
    assert not (tmp_path / "keda" / "hpa-prometheus-adapter.yaml").exists()  # KEDA queries itself
    spec = scaled.spec
    assert scaled.metadata.namespace == "serving" and spec.scale_target_ref.name == "llama-8b"
    assert (spec.min_replica_count, spec.max_replica_count) == (
        hpa_only.spec.min_replicas,
        hpa_only.spec.max_replicas,
    )
    assert spec.advanced is not None and spec.advanced.horizontal_pod_autoscaler_config
    behavior = spec.advanced.horizontal_pod_autoscaler_config.behavior
    assert behavior == hpa_document["spec"]["behavior"]
    targets = {
        m.pods.metric.name: _quantity(m.pods.target.average_value) for m in hpa_only.spec.metrics
    }
    triggers = {t.name: t for t in spec.triggers}
    assert triggers.keys() == targets.keys()
    for name, trigger in triggers.items():
        assert trigger.type == "prometheus" and trigger.metric_type == "AverageValue"
        assert float(trigger.metadata["threshold"]) == pytest.approx(targets[name])
        assert trigger.metadata["serverAddress"] == url
        query = trigger.metadata["query"]
        assert query.startswith("sum(") and 'namespace="serving"' in query
        assert 'pod=~"llama-8b-[a-z0-9]+-[a-z0-9]+"' in query
        assert trigger.metadata["ignoreNullValues"] == "false"


def test_keda_needs_the_hpa_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    curve = tmp_path / "day.csv"
    curve.write_text(CURVE, encoding="utf-8")
    args = [*ARGS, "--output-len", "256", "--traffic", str(curve), "--keda", "http://p:9090"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "--hpa" in err and "\n" not in err


@pytest.mark.parametrize("flag", [["--hpa", "hpa.yaml"], ["--keda", "http://p:9090"]])
def test_autoscaler_flags_without_traffic_are_refused(
    flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a day of traffic nothing sizes the autoscaler: the flag is refused in one
    sentence (exit 2), not silently ignored."""
    assert main([*ARGS, "--output-len", "256", "--concurrency", "8", *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert "--traffic" in err and flag[0] in err and "\n" not in err


def test_plan_says_which_files_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The terminal names every file `--hpa` wrote, and `--json` lists them."""
    hpa = _plan(tmp_path)
    out = capsys.readouterr().out
    flat = out.replace("\n", "")  # the terminal wraps long paths
    assert "Wrote " in out and str(hpa) in flat and "prometheus-adapter.yaml" in flat
    curve = tmp_path / "day.csv"
    args = [*ARGS, "--output-len", "256", "--traffic", str(curve), "--hpa", str(hpa), "--json"]
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    written = document["traffic"]["written"]
    assert written == [str(hpa), str(hpa.with_name("hpa-prometheus-adapter.yaml"))]
