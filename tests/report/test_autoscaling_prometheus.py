"""The HPA's series in a real Prometheus (Debian `prometheus`), per namespace and pod, as
prometheus-adapter and KEDA would read them.

Two real twins scraped as pods the way Kubernetes service discovery labels
them: a KV-starved one (`serving/llm-…-aaaaa`, 48 users for 5 s) and a
healthy idle one (`serving/llm-…-bbbbb`, and the same twin again as
`staging/llm-…-ccccc`, so that a namespace has to tell them apart).
Prometheus evaluates `monitor-config`'s recording rules (2 s windows) and
the test then does what the adapter does with `plan --hpa`'s rules:
discovery (each rule's `seriesQuery` on `/api/v1/series`, the names through
`name.matches`/`as`), association (the `namespace` and `pod` labels), and the
query (`metricsQuery` filled as `metricsQuery.Build` fills it for pods of
one namespace): one value per pod asked for, none from the other namespace.
The KEDA trigger's query, from `plan --hpa --keda`, returns the single series
KEDA requires, the sum of the adapter's per-pod values. Skips without the
binary.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from infertriage.api.bench import run_bench
from infertriage.api.monitor import monitor_config
from infertriage.api.specs import BenchSpec, MonitorConfigSpec
from infertriage.cli import main
from infertriage.plan.hpa import HPA_METRICS, SCALING_METRICS
from infertriage.twin.process import TwinProcess

from ..autoscaling_schemas import AdapterConfig, DiscoveryRule, api_name, fill_metrics_query
from ..prometheus_server import PROMETHEUS, running_prometheus

pytestmark = pytest.mark.slow
_LOAD_S = 5.0
_REPLICASET = "llm-5d9c7b8f4"
LOADED = ("serving", f"{_REPLICASET}-aaaaa")
IDLE = ("serving", f"{_REPLICASET}-bbbbb")
ELSEWHERE = ("staging", f"{_REPLICASET}-ccccc")
CURVE = "time,requests_per_s\n00:00,5\n06:00,120\n12:00,300\n18:00,40\n"


def _get(prometheus: str, path: str, **params: str) -> list[dict[str, Any]]:
    url = f"{prometheus}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as response:
        document = json.loads(response.read())
    assert document["status"] == "success", document
    return list(document["data"] if path.endswith("/series") else document["data"]["result"])


def _query(prometheus: str, expr: str, at: float) -> list[dict[str, Any]]:
    return _get(prometheus, "/api/v1/query", query=expr, time=f"{at:.3f}")


def _pods(results: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["metric"].get("namespace", ""), r["metric"].get("pod", "")) for r in results}


def _write_autoscalers(folder: Path) -> tuple[AdapterConfig, dict[str, Any]]:
    """`plan --hpa` (the adapter's rules) and `plan --hpa --keda` (the ScaledObject)."""
    curve = folder / "day.csv"
    curve.write_text(CURVE, encoding="utf-8")
    args = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--traffic", str(curve)]
    args += ["--input-len", "512", "--output-len", "256", "--deployment", "llm"]
    args += ["--namespace", "serving"]
    assert main([*args, "--hpa", str(folder / "hpa.yaml")]) == 0
    keda = folder / "keda.yaml"
    assert main([*args, "--hpa", str(keda), "--keda", "http://prometheus:9090"]) == 0
    adapter = yaml.safe_load((folder / "hpa-prometheus-adapter.yaml").read_text(encoding="utf-8"))
    return AdapterConfig.model_validate(adapter), yaml.safe_load(keda.read_text(encoding="utf-8"))


def _discover(prometheus: str, rules: list[DiscoveryRule]) -> dict[str, tuple[DiscoveryRule, str]]:
    """The adapter's discovery: API name → (its rule, its Prometheus series), for series
    that carry a pod; each series' labels must name its namespace and pod."""
    found: dict[str, tuple[DiscoveryRule, str]] = {}
    for rule in rules:
        for series in _get(prometheus, "/api/v1/series", **{"match[]": rule.series_query}):
            assert series.get("namespace") and series.get("pod"), series
            name = api_name(rule, series["__name__"])
            if name is not None:
                assert found.get(name, (rule, ""))[0] is rule, f"two rules serve {name}"
                found[name] = (rule, series["__name__"])
    return found


def _load(url: str, out: Path) -> threading.Thread:
    spec = BenchSpec(
        url=url,
        concurrencies=(48,),
        duration_s=_LOAD_S,
        workload="synthetic:input=1024,output=128",
        out=out,
    )
    thread = threading.Thread(target=lambda: run_bench(spec), daemon=True)
    thread.start()
    return thread


def _wait_for_pods(prometheus: str, wanted: set[tuple[str, str]]) -> None:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        seen = [
            _pods(_query(prometheus, metric.recorded.value, time.time()))
            for metric in SCALING_METRICS.values()
        ]
        if all(wanted <= pods for pods in seen):
            return
        time.sleep(0.5)
    pytest.fail(f"the recorded series did not reach every pod {wanted} within 30 s: {seen}")


def test_the_hpas_series_are_served_per_namespace_and_pod(tmp_path: Path) -> None:
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install prometheus)")
    out = tmp_path / "monitoring"
    monitor_config(
        MonitorConfigSpec(
            engine="vllm", out=out, rate_window_s=2.0, for_scale=1 / 600, evaluation_interval_s=0.5
        )
    )
    adapter, scaled = _write_autoscalers(tmp_path)
    with (
        TwinProcess("kv-pressure", load_time_s=0.2) as starved,
        TwinProcess("healthy", load_time_s=0.2) as healthy,
    ):
        hosts = [twin.url.removeprefix("http://") for twin in (starved, healthy)]
        labelled = [
            (hosts[0], {"namespace": LOADED[0], "pod": LOADED[1]}),
            (hosts[1], {"namespace": IDLE[0], "pod": IDLE[1]}),
            (hosts[1], {"namespace": ELSEWHERE[0], "pod": ELSEWHERE[1]}),
        ]
        rules = [out / "recording_rules.yml"]
        with running_prometheus(
            tmp_path, [], job="vllm", labelled=labelled, rule_files=rules
        ) as prometheus:
            load = _load(starved.url, tmp_path / "run")
            _wait_for_pods(prometheus, {LOADED, IDLE, ELSEWHERE})
            load.join(timeout=_LOAD_S + 60)
            at = time.time()
            discovered = _discover(prometheus, adapter.rules)
            served: dict[str, dict[str, float]] = {}
            for role, name in HPA_METRICS.items():
                assert name in discovered, (name, sorted(discovered))
                rule, series = discovered[name]
                assert series == SCALING_METRICS[role].recorded.value
                # the HPA asks for the pods of its Deployment in its namespace
                query = fill_metrics_query(rule, series, "serving", "pod", [LOADED[1], IDLE[1]])
                results = _query(prometheus, query, at)
                assert {r["metric"]["pod"] for r in results} == {LOADED[1], IDLE[1]}, query
                assert all(set(r["metric"]) == {"pod"} for r in results), results
                served[name] = {r["metric"]["pod"]: float(r["value"][1]) for r in results}
                # one pod: `pod="…"`, its own value
                (one,) = _query(
                    prometheus,
                    fill_metrics_query(rule, series, "staging", "pod", [ELSEWHERE[1]]),
                    at,
                )
                assert one["metric"] == {"pod": ELSEWHERE[1]}
            peaks = _query(
                prometheus, f"max_over_time({SCALING_METRICS['kv_usage'].recorded.value}[30s])", at
            )
            kv_peak = {r["metric"]["pod"]: float(r["value"][1]) for r in peaks}
            for trigger in scaled["spec"]["triggers"]:
                keda = _query(prometheus, trigger["metadata"]["query"], at)
                assert len(keda) == 1, keda  # KEDA refuses more than one element
                total = sum(served[trigger["name"]].values())
                assert float(keda[0]["value"][1]) == pytest.approx(total), trigger["name"]
    # the starved pod filled its KV cache under load; the idle one did not
    assert kv_peak[LOADED[1]] > kv_peak[IDLE[1]], kv_peak
