"""A child never outlives its parent (`schemas.lifeline`).

A process that called `die_with_parent` gets SIGTERM when its parent is SIGKILLed, by
the kernel (`prctl`) or, where that is missing, by its own poll of the parent's pid; a
parent already gone when it is called means the signal at once. Waits are bounded,
never timed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from infertriage.schemas.lifeline import parent_is_gone

CHILD = """
import os, sys, time
from infertriage.schemas import lifeline
if sys.argv[1] == "poll":  # as where prctl is missing
    lifeline._set_death_signal = lambda signum: False
lifeline.die_with_parent(os.getppid())
print("ready", flush=True)
time.sleep(60)
"""

PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(child.pid, flush=True)
time.sleep(60)
"""


def _gone(pid: int, timeout: float = 10.0) -> bool:
    try:
        proc = psutil.Process(pid)
        proc.wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return proc.status() == psutil.STATUS_ZOMBIE
    return True


@pytest.mark.parametrize("how", ["prctl", "poll"])
def test_a_child_stops_when_its_parent_is_killed(how: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, how], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "ready"  # die_with_parent has run
        assert psutil.Process(child).is_running()
        parent.kill()
        parent.wait(timeout=10)
        assert _gone(child)
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.communicate()


def test_a_parent_already_gone_means_the_signal_at_once() -> None:
    code = (
        "from infertriage.schemas.lifeline import die_with_parent\n"
        "import time\n"
        "die_with_parent(1)\n"  # not its parent: as if that one had died and init adopted it
        "time.sleep(30)\n"
    )
    child = subprocess.run([sys.executable, "-c", code], timeout=30, check=False)
    assert child.returncode == -signal.SIGTERM


def test_a_living_parent_is_not_gone() -> None:
    assert not parent_is_gone(os.getppid()) and parent_is_gone(os.getpid())
