"""A twin a command started never outlives the command (`twin.process`, `schemas.lifeline`).

The command's process is SIGKILLed, so none of its own clean-up runs: the twin, told
its parent's pid, gets SIGTERM from the kernel and stops listening. The wait is bounded.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from urllib.parse import urlsplit

import psutil

PARENT = """
from infertriage.twin.process import TwinProcess
import time
twin = TwinProcess("healthy", load_time_s=0.0)
twin.start()
print(twin.pid, twin.url, flush=True)
time.sleep(60)
"""


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=1):
            return True
    except OSError:
        return False


def test_a_twin_stops_when_the_command_that_started_it_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid, url = parent.stdout.readline().split()
        twin = psutil.Process(int(pid))
        assert f"--parent-pid {parent.pid}" in " ".join(twin.cmdline()) and _listening(url)
        parent.kill()
        parent.wait(timeout=10)
        gone, _ = psutil.wait_procs([twin], timeout=10)
        assert gone and not _listening(url)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.communicate()
