"""monitor-config's alerts in a real Prometheus (Debian `prometheus`) scraping two real twins.

A KV-starved twin (`kv-pressure`) under 48 concurrent chat requests and a
healthy twin under 2; Prometheus scrapes both `/metrics` and both
`/dcgm/metrics` every 0.5 s and evaluates the generated rules — written by
the api with a 2 s rate window and every `for:` scaled by 1/600 (the
production files keep their minutes) — every 0.5 s. The starved twin must
raise the KV-cache and TTFT alerts (pending or firing); the healthy one must
raise none — but for its latency and GPU alerts when the host starved it (its own
TTFT p95 far above normal: those alerts are then true). About 30 s of wall
time. Skips without the binary.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.monitor import monitor_config
from infertriage.api.specs import BenchSpec, MonitorConfigSpec
from infertriage.loadgen.results import BenchResult
from infertriage.twin.process import TwinProcess

from ..prometheus_server import PROMETHEUS, running_prometheus

pytestmark = pytest.mark.slow
_LOAD_S = 8.0
_WORKLOAD = "synthetic:input=1024,output=128"
# A healthy twin's TTFT p95 under 2 streams is tens of ms; above this the host starved it.
_HEALTHY_TTFT_S = 0.25
# What a starved host makes true of any twin (its latency, its simulated GPU counters).
_HOST_ALERTS = {"InferTriageTTFTHigh", "InferTriageITLHigh", "InferTriageGPUBusySMsIdle"}


def _alerts(prometheus: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(prometheus + "/api/v1/alerts", timeout=2) as response:
        return list(json.loads(response.read())["data"]["alerts"])


def _query(prometheus: str, expr: str) -> list[dict[str, object]]:
    url = f"{prometheus}/api/v1/query?query={urllib.parse.quote(expr)}"
    with urllib.request.urlopen(url, timeout=2) as response:
        return list(json.loads(response.read())["data"]["result"])


def _load(url: str, concurrency: int, results: list[BenchResult], out: Path) -> threading.Thread:
    spec = BenchSpec(
        url=url, concurrencies=(concurrency,), duration_s=_LOAD_S, workload=_WORKLOAD, out=out
    )
    thread = threading.Thread(target=lambda: results.append(run_bench(spec)), daemon=True)
    thread.start()
    return thread


def _starved_host(healthy: list[BenchResult], starved: list[BenchResult]) -> bool:
    """Did the host starve the healthy twin: its own TTFT p95 far above its ~50 ms, or
    either load's client stamping late while mostly idle (`host_busy`: a contended host,
    on which a real-time twin's utilisation and SM activity drift apart)?"""
    if not healthy or not healthy[0].levels:
        return True
    ttft = healthy[0].levels[0].summary.ttft
    busy = any(level.client.host_busy for result in healthy + starved for level in result.levels)
    return busy or ttft is None or ttft.p95 > _HEALTHY_TTFT_S


def test_a_kv_starved_twin_raises_the_kv_and_ttft_alerts_and_a_healthy_one_none(
    tmp_path: Path,
) -> None:
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install prometheus)")
    out = tmp_path / "monitoring"
    monitor_config(
        MonitorConfigSpec(
            engine="vllm",
            out=out,
            rate_window_s=2.0,
            for_scale=1 / 600,
            evaluation_interval_s=0.5,
        )
    )
    rules = [out / "recording_rules.yml", out / "alert_rules.yml"]
    with (
        TwinProcess("kv-pressure", load_time_s=0.2) as starved,
        TwinProcess("healthy", load_time_s=0.2) as healthy,
    ):
        hosts = [twin.url.removeprefix("http://") for twin in (starved, healthy)]
        dcgm = ("dcgm", "/dcgm/metrics", hosts)
        more = [("healthy", "/metrics", hosts[1:]), dcgm]
        with running_prometheus(
            tmp_path, hosts[:1], job="starved", more_jobs=more, rule_files=rules
        ) as prometheus:
            healthy_results: list[BenchResult] = []
            starved_results: list[BenchResult] = []
            threads = [
                _load(starved.url, 48, starved_results, tmp_path / "starved-run"),
                _load(healthy.url, 2, healthy_results, tmp_path / "healthy-run"),
            ]
            seen: dict[tuple[str, str], set[str]] = {}
            # Until the loads end and the starved twin's alerts are seen; a busy machine may
            # start the loads late, so the bound is generous (the healthy twin is watched
            # over its whole load either way).
            wanted = {("InferTriageKVCacheFull", "starved"), ("InferTriageTTFTHigh", "starved")}
            deadline = time.monotonic() + _LOAD_S + 30.0
            while time.monotonic() < deadline and (
                any(t.is_alive() for t in threads) or not wanted <= seen.keys()
            ):
                for alert in _alerts(prometheus):
                    labels = alert["labels"]
                    assert isinstance(labels, dict)
                    where = labels.get("job") if labels.get("job") != "dcgm" else labels["instance"]
                    key = (str(labels["alertname"]), str(where))
                    seen.setdefault(key, set()).add(str(alert["state"]))
                time.sleep(0.5)
            peaks = _query(prometheus, "max_over_time(infertriage:kv_usage:per_replica[20s])")
            kv = {r["metric"]["job"]: float(r["value"][1]) for r in peaks}  # type: ignore[index]
            for thread in threads:
                thread.join(timeout=30)
    assert ("InferTriageKVCacheFull", "starved") in seen, seen
    assert ("InferTriageTTFTHigh", "starved") in seen, seen
    quiet = {key: states for key, states in seen.items() if key[1] in {"healthy", hosts[1]}}
    # A busy CI host: the healthy twin's latency and GPU alerts are true ones; and one that
    # only went pending (true at one evaluation, not for its `for:`) was never raised, which is
    # what `for:` is for (a host stall the load client did not see made the GPU one pending
    # once, 1 run in many: make test on a host running other tests beside it)
    starved = _starved_host(healthy_results, starved_results)
    quiet = {
        key: states
        for key, states in quiet.items()
        if key[0] not in _HOST_ALERTS or (not starved and states != {"pending"})
    }
    assert not quiet, quiet
    assert kv["starved"] > 0.95 and kv["healthy"] < 0.5, kv
