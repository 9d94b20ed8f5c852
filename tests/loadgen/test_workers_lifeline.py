"""No load outlives bench: `--workers` processes and Locust's master and workers stop when
bench is SIGKILLed (`schemas.lifeline`), where none of bench's own clean-up runs.

bench runs as a real process against a test server; once records arrive, it is killed
and its children are waited for, with a bound, never timed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

SLOW = Behavior(ttft_s=0.01, itl_s=0.002)  # 400 tokens: about 0.8 s per request
# Locust's master waits for its lost workers' heartbeats (about 3 s) before it ends
BOUND_S = {"--workers": 10.0, "--locust-workers": 30.0}


def _wait_for_records(path: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} first: {proc.communicate()[1]}")
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} records")


@pytest.mark.parametrize(
    "flag",
    [
        "--workers",
        pytest.param(
            "--locust-workers",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("locust") is None, reason="locust is not installed"
            ),
        ),
    ],
)
def test_killing_bench_stops_every_load_process(tmp_path: Path, flag: str) -> None:
    out = tmp_path / "run"
    with serve_in_thread(ServerConfig(behavior=SLOW)) as (base, _):
        proc = subprocess.Popen(
            [sys.executable, "-m", "infertriage", "bench", "--url", base, "--concurrency", "4",
             "--duration", "30s", "--workload", "synthetic:input=8,output=400",
             "--out", str(out), flag, "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0,
        )  # fmt: skip
        children: list[psutil.Process] = []
        try:
            _wait_for_records(out / "requests.jsonl", 2, proc)
            children = psutil.Process(proc.pid).children(recursive=True)
            assert len(children) >= 2
            proc.kill()  # bench alone: its children are in its group, but not sent anything
            proc.communicate(timeout=10)
            _, alive = psutil.wait_procs(children, timeout=BOUND_S[flag])
            assert not alive, [child.cmdline() for child in alive]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
            for child in children:  # a failed test leaves none behind either
                with contextlib.suppress(psutil.Error):
                    child.kill()
