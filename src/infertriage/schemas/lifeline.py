"""schemas, level 0: a child process never outlives its parent.

`die_with_parent(parent_pid)`, called early in a child that infertriage starts (a twin,
a `--workers` load process, a Locust master or worker), asks Linux to send the child
SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`), however the parent died: a
SIGKILL or an out-of-memory kill included, where the parent's own clean-up never runs.
Where prctl is missing (macOS), a daemon thread polls the parent's pid instead and sends
the same signal. A parent already gone by then (it died while the child started) means
the signal at once. What stopping means is the child's own SIGTERM handling: the twin
stops serving, a load worker exits.

Linux sends the signal when the *thread* that started the child ends, so a parent starts
its children from the thread that stops them (the main thread, here).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["die_with_parent", "parent_is_gone"]

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.5
_sleep = time.sleep  # bound before a Locust child patches `time` for gevent


def die_with_parent(parent_pid: int, signum: int = signal.SIGTERM) -> None:
    """Have `signum` sent to this process when `parent_pid`, its parent, is gone."""
    if not _set_death_signal(signum):
        watch = threading.Thread(
            target=_watch, args=(parent_pid, signum), name="infertriage-lifeline", daemon=True
        )
        watch.start()
    if parent_is_gone(parent_pid):  # it died before the kernel was asked
        os.kill(os.getpid(), signum)


def parent_is_gone(parent_pid: int) -> bool:
    """Has the process that started this one ended (the child was re-parented)?"""
    return os.getppid() != parent_pid


def _set_death_signal(signum: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    return False


def _watch(parent_pid: int, signum: int) -> None:
    while not parent_is_gone(parent_pid):
        _sleep(_POLL_S)
    os.kill(os.getpid(), signum)
