"""Fleets: a real Prometheus server (Debian package `prometheus`) scraping two replicas.

The replicas are real HTTP servers serving the real vLLM capture with a
generation counter that grows at 200 and 20 tokens/s; Prometheus, started
here on 127.0.0.1, scrapes them every 0.5 s. The fleet query must find both
instances and flag the imbalance. Skips when the binary is absent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from infertriage.api.metrics import FleetSpec, fleet_metrics
from infertriage.cli import main
from infertriage.schemas import UserError

from ..prometheus_server import PROMETHEUS, running_prometheus

pytestmark = pytest.mark.slow
GEN = "vllm:generation_tokens_total"
RUNNING = "vllm:num_requests_running"


def _growing(server: Any, base: str, tokens_per_s: float, running: float) -> None:
    started = time.monotonic()

    def body() -> tuple[int, str]:
        tokens = 7.0 + tokens_per_s * (time.monotonic() - started)
        values = {GEN: tokens, "vllm:num_requests_waiting": 5.0, RUNNING: running}
        return 200, server.with_values(base, values)

    server.set("/metrics", make=body)


@pytest.fixture
def prometheus(tmp_path: Path, make_live_server, shared_fixture) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Prometheus on 127.0.0.1 scraping two replicas (200 and 20 tokens/s, 8 and 1 requests
    running) every 0.5 s."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install prometheus)")
    base = shared_fixture("metrics/vllm.txt").read_text()
    fast, slow = make_live_server(), make_live_server()
    _growing(fast, base, 200.0, running=8.0)  # 7 requests in flight more than the slow one
    _growing(slow, base, 20.0, running=1.0)
    targets = [f"127.0.0.1:{fast.port}", f"127.0.0.1:{slow.port}"]
    with running_prometheus(tmp_path, targets) as url:
        yield url


def test_fleet_imbalance_between_replicas(
    prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = prometheus
    time.sleep(2.5)  # five scrapes of each replica
    view = fleet_metrics(
        FleetSpec(
            prometheus_url=url, selector='job="vllm"', window_s=2.0, step_s=0.5, rate_window_s=1.5
        )
    )
    assert view.engine == "vllm" and len(view.instances) == 2
    tokens = next(f for f in view.figures if f.name == "tokens.generation")
    rates = sorted(i.mean for i in tokens.instances)
    assert rates[0] == pytest.approx(20.0, rel=0.35) and rates[1] == pytest.approx(200.0, rel=0.35)
    assert tokens.flagged and tokens.imbalance is not None and tokens.imbalance > 1.5
    waiting = next(f for f in view.figures if f.name == "queue.waiting")
    assert not waiting.flagged and waiting.imbalance == pytest.approx(1.0)
    assert tokens in view.imbalanced
    # One Prometheus start-up costs 5 s (target discovery), so the error case rides along.
    with pytest.raises(UserError, match="no engine metrics match"):
        fleet_metrics(FleetSpec(prometheus_url=url, selector='{job="nope"}', window_s=2.0))
    # the command shows the replicas side by side
    args = ["metrics", "--prometheus", url, "--selector", 'job="vllm"', "--duration", "3s"]
    assert main([*args, "--json"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["schema"] == "infertriage.fleet/v1" and len(document["instances"]) == 2
    assert main(args) == 0
    assert "imbalanced: tokens.generation rate" in capsys.readouterr().out
    assert main(["metrics", "--prometheus", url]) == 2
    assert "--selector" in capsys.readouterr().err


def _two_engine_cores(
    server: Any, base: str, running: tuple[float, float], label: str = "engine"
) -> None:
    """A replica with data parallelism 2: vLLM's running gauge once per engine core
    (`engine="0"`, `engine="1"`), the capture's line made two (how it is made: the capture's
    `vllm:num_requests_running{model_name=…}` line given an engine label and repeated);
    with `label="tp_rank"`, one scheduler's state exported once per tensor-parallel rank."""
    line = next(x for x in base.splitlines() if x.startswith("vllm:num_requests_running{"))
    cores = "\n".join(
        line.replace("{", f'{{{label}="{core}",', 1).rsplit(" ", 1)[0] + f" {value}"
        for core, value in enumerate(running)
    )
    server.set("/metrics", make=lambda: (200, base.replace(line, cores)))


def test_a_replicas_requests_in_flight_are_summed_over_its_engine_cores(
    tmp_path: Path,
    make_live_server,
    shared_fixture,  # type: ignore[no-untyped-def]
) -> None:
    """Two replicas of two engine cores each, 5 + 4 and 1 + 0 requests running: each
    replica's figure is its cores' sum (9 and 1), not their mean (4.5 and 0.5); a third
    replica's one scheduler exported by its two tensor-parallel ranks (3 and 3) is 3, not 6."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install prometheus)")
    base = shared_fixture("metrics/vllm.txt").read_text()
    busy, idle, ranked = make_live_server(), make_live_server(), make_live_server()
    _two_engine_cores(busy, base, (5.0, 4.0))
    _two_engine_cores(idle, base, (1.0, 0.0))
    _two_engine_cores(ranked, base, (3.0, 3.0), label="tp_rank")
    targets = [f"127.0.0.1:{s.port}" for s in (busy, idle, ranked)]
    with running_prometheus(tmp_path, targets) as url:
        time.sleep(2.5)  # five scrapes of each replica
        view = fleet_metrics(
            FleetSpec(prometheus_url=url, selector='job="vllm"', window_s=2.0, step_s=0.5)
        )
    running = next(f for f in view.figures if f.name == "queue.running")
    assert sorted(i.mean for i in running.instances) == pytest.approx([1.0, 3.0, 9.0])
