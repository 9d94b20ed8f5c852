"""A real Prometheus server (Debian package `prometheus`) on 127.0.0.1 for the fleet tests.

`running_prometheus(workdir, targets)` writes a scrape config for one job
over the given `host:port` targets (scraped every 0.5 s) and the `labelled` ones (each
`(host:port, labels)` its own target in that job, as Kubernetes service
discovery labels a pod's: one address may appear under two label sets), and
for the `more_jobs` given (`(job, metrics_path, targets)`), loads the `rule_files`
(evaluated every 0.5 s), starts the binary, waits until every target is up
(Prometheus hands new targets to its scrapers every 5 s) and yields its
URL; it stops the server afterwards.
Tests skip with the reason when the binary is absent.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import orjson
import pytest

PROMETHEUS = shutil.which("prometheus")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _up_targets(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/api/v1/targets", timeout=2) as response:
            document = orjson.loads(response.read())
    except (OSError, orjson.JSONDecodeError):
        return 0
    return sum(1 for t in document["data"]["activeTargets"] if t["health"] == "up")


def _wait_scraping(url: str, process: subprocess.Popen[bytes], log: Path, count: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited: {log.read_text()[-2000:]}")
        if _up_targets(url) == count:
            return
        time.sleep(0.2)
    pytest.fail(f"prometheus did not scrape {count} targets within 20 s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def running_prometheus(
    workdir: Path,
    targets: Sequence[str],
    job: str = "vllm",
    metrics_path: str = "/metrics",
    *,
    more_jobs: Sequence[tuple[str, str, Sequence[str]]] = (),
    rule_files: Sequence[Path] = (),
    labelled: Sequence[tuple[str, Mapping[str, str]]] = (),
) -> Iterator[str]:
    """Prometheus scraping `targets` (host:port) as `job` every 0.5 s; yields its base URL."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install prometheus)")
    config = workdir / "prometheus.yml"
    text = "global: {scrape_interval: 500ms, scrape_timeout: 400ms, evaluation_interval: 500ms}\n"
    if rule_files:
        text += "rule_files: [" + ", ".join(f"'{p}'" for p in rule_files) + "]\n"
    text += "scrape_configs:\n"
    for name, path, hosts in [(job, metrics_path, targets), *more_jobs]:
        listed = ", ".join(f"'{t}'" for t in hosts)
        text += f"  - job_name: {name}\n    metrics_path: {path}\n    static_configs:\n"
        if hosts:
            text += f"      - targets: [{listed}]\n"
        if name == job:
            for host, labels in labelled:
                pairs = ", ".join(f"{k}: '{v}'" for k, v in labels.items())
                text += f"      - targets: ['{host}']\n        labels: {{{pairs}}}\n"
    config.write_text(text)
    count = len(targets) + len(labelled) + sum(len(hosts) for _, _, hosts in more_jobs)
    port = _port()
    log = workdir / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_scraping(url, process, log, count)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
