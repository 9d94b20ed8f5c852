"""Fleets: a real Prometheus server (Debian package `prometheus`) scraping two replicas.

The replicas are real HTTP servers serving the real vLLM capture with a
generation counter that grows at 200 and 20 tokens/s; Prometheus, started
here on 127.0.0.1, scrapes them every 0.5 s. The fleet query must find both
instances and flag the imbalance. Skips when the binary is absent.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from infertriage.api.metrics import fleet_metrics
from infertriage.schemas import UserError

pytestmark = pytest.mark.slow

PROMETHEUS = shutil.which("prometheus")
GEN = "vllm:generation_tokens_total"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _growing(server: Any, base: str, tokens_per_s: float) -> None:
    started = time.monotonic()

    def body() -> tuple[int, str]:
        tokens = 7.0 + tokens_per_s * (time.monotonic() - started)
        values = {GEN: tokens, "vllm:num_requests_waiting": 5.0}
        return 200, server.with_values(base, values)

    server.set("/metrics", make=body)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bytes(response.read())


def _up_targets(url: str) -> int:
    try:
        document = orjson.loads(_get(url + "/api/v1/targets"))
    except (OSError, orjson.JSONDecodeError):
        return 0
    return sum(1 for t in document["data"]["activeTargets"] if t["health"] == "up")


def _wait_scraping(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until both replicas are up: Prometheus hands new targets to its scrapers every 5 s."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited: {log.read_text()[-2000:]}")
        if _up_targets(url) == 2:
            return
        time.sleep(0.2)
    pytest.fail(f"prometheus did not scrape both replicas within 20 s: {log.read_text()[-2000:]}")


@pytest.fixture
def prometheus(tmp_path: Path, make_live_server, shared_fixture) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Prometheus on 127.0.0.1 scraping two replicas (200 and 20 tokens/s) every 0.5 s."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install prometheus)")
    base = shared_fixture("metrics/vllm.txt").read_text()
    fast, slow = make_live_server(), make_live_server()
    _growing(fast, base, 200.0)
    _growing(slow, base, 20.0)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 500ms, scrape_timeout: 400ms}\n"
        "scrape_configs:\n"
        "  - job_name: vllm\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{fast.port}', '127.0.0.1:{slow.port}']\n"
    )
    port = _port()
    log = tmp_path / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_scraping(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_fleet_imbalance_between_replicas(prometheus: str) -> None:
    url = prometheus
    time.sleep(2.5)  # five scrapes of each replica
    view = fleet_metrics(url, 'job="vllm"', window_s=2.0, step_s=0.5, rate_window_s=1.5)
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
        fleet_metrics(url, '{job="nope"}', window_s=2.0)
