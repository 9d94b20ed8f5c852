"""diagnose --prometheus: a fleet of two real twins behind an uneven load balancer.

Two twin processes serve; a real reverse proxy on 127.0.0.1 sends eight of
every nine requests to the first; a real Prometheus (Debian package
`prometheus`) scrapes both twins every 0.5 s. `diagnose --url PROXY
--prometheus P --selector 'job="twins"'` must read the engine metrics from
Prometheus alone (it scrapes no /metrics itself), merge the replicas, and
flag the imbalance. Skips without the prometheus binary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.cli import main
from infertriage.schemas import Layer, RunDir, Sample
from infertriage.twin.process import TwinProcess

from ..loopback_proxy import running_proxy
from ..prometheus_server import running_prometheus
from ..workloads import SHORT_OUTPUTS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the proxy's URL, Prometheus's URL) over two healthy twins; the tests share them (the
    refused selector never loads them)."""
    root = tmp_path_factory.mktemp("fleet")
    with TwinProcess("healthy", load_time_s=0.2) as a, TwinProcess("healthy", load_time_s=0.2) as b:
        targets = [url.removeprefix("http://") for url in (a.url, b.url)]
        with (
            running_prometheus(root, targets, job="twins") as prometheus,
            running_proxy([a.url, b.url], weights=[8, 1]) as proxy,
        ):
            yield proxy.url, prometheus


def test_an_uneven_fleet_is_read_from_prometheus_and_flagged(
    fleet: tuple[str, str], tmp_path: Path
) -> None:
    proxy, prometheus = fleet
    out = tmp_path / "run"
    result = diagnose(
        DiagnoseSpec(
            url=proxy,
            prometheus=prometheus,
            selector='job="twins"',
            duration_s=6.0,
            concurrency=8,
            workload=SHORT_OUTPUTS,  # the fleet is under test, not the default mix
            out=out,
        )
    )
    application = result.diagnosis.layer(Layer.APPLICATION)
    imbalance = [f for f in application.findings if f.id == "application.replica_imbalance"]
    assert imbalance, application
    assert "of 2 replicas" in imbalance[0].title
    fleet_view = json.loads((out / "raw" / "fleet.json").read_text())
    assert len(fleet_view["instances"]) == 2 and fleet_view["engine"] == "vllm"
    # the engine's own figures came through Prometheus, merged over both replicas
    run = RunDir.open(out)
    signals = {s["name"]: s["value"] for s in map(json.loads, run.signals.read_text().splitlines())}
    assert signals["fleet.replicas"] == 2
    assert signals["fleet.imbalance"] >= 1.5
    assert 0 < signals["server.ttft_p50_s"] < 1.0
    assert "kv.usage_max" in signals
    samples = list(run.iter_records(run.metrics, Sample))
    assert any(s.name == "tokens.generation" and s.labels.get("replicas") == "2" for s in samples)
    assert not (out / "raw" / "engine.first.txt").exists(), "nothing may be scraped directly"
    info = run.read_info()
    assert (info.server_config.num_gpu_blocks or 0) > 0
    assert diagnose(DiagnoseSpec(from_run=out)).diagnosis == result.diagnosis


def test_a_selector_that_matches_nothing_fails_before_any_load(
    fleet: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proxy, prometheus = fleet
    out = tmp_path / "run"
    args = ["diagnose", "--url", proxy, "--prometheus", prometheus, "--selector", 'job="nope"']
    code = main([*args, "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "no series match" in err and "\n" not in err
    assert not (out / "requests.jsonl").exists()
