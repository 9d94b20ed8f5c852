"""api, level 5: Ctrl-C — one path for every command that drives load.

`with interruptible() as interrupt:` installs a SIGINT handler for the
length of the block. The first Ctrl-C (to the process, or to its group, as
a terminal sends it) only sets `interrupt.requested`: the load loops poll it
(`stop=interrupt.is_requested`), stop sending and cancel what is in flight,
and the command skips its remaining phases, writes what it measured with
the run status `interrupted`, stops the servers it started and returns; the
CLI then says so in one line and exits 130 (`schemas.Interrupted`). The
second Ctrl-C does not wait: it kills this process's children (a twin, load
workers) and exits 130 at once.

Blocks nest: an inner `interruptible()` (diagnose's three `run_bench`
calls) shares the outer one's state, which lives in the process's signal
table rather than in a global. Off the main thread, where no handler can be
installed, the block gets an interrupt that is never requested.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import psutil

from infertriage.schemas import EXIT_INTERRUPTED

__all__ = ["Interrupt", "interruptible"]


class Interrupt:
    """Whether Ctrl-C was pressed during an `interruptible()` block."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._count = 0

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def is_requested(self) -> bool:
        """`requested`, as a callable for the load loops' `stop=`."""
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, less when Ctrl-C comes; True when it came."""
        return self._event.wait(seconds)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The SIGINT handler: the first asks to stop, the second exits now."""
        self._count += 1
        if self._count == 1:
            self._event.set()
            return
        exit_now()


def exit_now() -> None:
    """Kill every child of this process (a twin, load workers), then exit 130 at once."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    with contextlib.suppress(OSError):
        sys.stderr.write("infertriage: interrupted again; stopped at once.\n")
        sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def interruptible() -> Iterator[Interrupt]:
    """Ctrl-C within the block sets `requested`; see the module docstring."""
    if threading.current_thread() is not threading.main_thread():
        yield Interrupt()
        return
    previous = signal.getsignal(signal.SIGINT)
    outer = getattr(previous, "__self__", None)
    if isinstance(outer, Interrupt):
        yield outer
        return
    interrupt = Interrupt()
    signal.signal(signal.SIGINT, interrupt.handle)
    try:
        yield interrupt
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
