"""api, level 5: Ctrl-C, SIGTERM and SIGHUP — one path for every command that drives load.

`with interruptible() as interrupt:` routes SIGINT, SIGTERM and SIGHUP to one
`Interrupt` for the length of the block. The first signal (Ctrl-C to the process or
to its group, as a terminal sends it; SIGTERM from `timeout`, `docker stop` or
Kubernetes; SIGHUP from a closed terminal) only sets `interrupt.requested`: the load
loops poll it (`stop=interrupt.is_requested`), stop sending and cancel what is in
flight, and the command skips its remaining phases, writes what it measured with the
run status `interrupted`, stops the servers it started and returns; the CLI then says
so in one line and exits 128 + the signal's number (130, 143, 129; `schemas.errors`).
The second signal does not wait: it kills this process's children (a twin, load
workers) and exits at once.

The CLI holds one `Interrupt` for the whole command (`stop_signals()`, in `cli.app`):
outside `interruptible()` blocks a signal raises `Stopped`, a `KeyboardInterrupt`, as
Python's own Ctrl-C does, so SIGTERM and SIGHUP unwind the same `finally` blocks, and
the CLI reads which signal came first for its exit code. A signal the process was
started ignoring stays ignored (`nohup`'s SIGHUP), SIGINT aside, which is always taken.

Blocks nest: an inner `interruptible()` (diagnose's three `run_bench` calls) shares the
outer one's state, which lives in the process's signal table rather than in a global.
Off the main thread, where no handler can be installed, the block gets an interrupt
that is never requested.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from infertriage.schemas import EXIT_INTERRUPTED

__all__ = ["Interrupt", "Stopped", "interruptible", "signal_name", "stop_signals"]

# SIGINT first: the signal table's SIGINT entry is where an installed Interrupt is found.
_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_EXIT_BASE = EXIT_INTERRUPTED - signal.SIGINT  # 128: a shell's code for death by a signal


class Stopped(KeyboardInterrupt):
    """A stop signal outside `interruptible()` blocks, raised as Python raises Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


class Interrupt:
    """Whether a stop signal came during an `interruptible()` block, and which came first."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._count = 0
        self._depth = 0  # inside interruptible() blocks: a signal only asks to stop
        self.signum: int | None = None  # the first stop signal

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def exit_code(self) -> int:
        """128 + the first signal's number; 130 (Ctrl-C's) when none came."""
        return _EXIT_BASE + (self.signum or signal.SIGINT)

    def is_requested(self) -> bool:
        """`requested`, as a callable for the load loops' `stop=`."""
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, less when a signal comes; True when it came."""
        return self._event.wait(seconds)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The handler: in a block the first asks to stop and the second exits now;
        outside one, each raises `Stopped`."""
        if self.signum is None:
            self.signum = signum
        if self._depth == 0:
            raise Stopped(signum)
        self._count += 1
        if self._count == 1:
            self._event.set()
            return
        exit_now(_EXIT_BASE + signum)

    @contextlib.contextmanager
    def _block(self) -> Iterator[Interrupt]:
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1


def signal_name(signum: int) -> str:
    """`SIGTERM` for 15; the number where the platform has no name for it."""
    with contextlib.suppress(ValueError):
        return signal.Signals(signum).name
    return str(signum)


def exit_now(code: int = EXIT_INTERRUPTED) -> None:
    """Kill every child of this process (a twin, load workers), then exit `code` at once."""
    import psutil  # noqa: PLC0415  # the second signal alone needs it: not every command's start

    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write("infertriage: interrupted again; stopped at once.\n")
        sys.stderr.flush()
    os._exit(code)


def _installed() -> Interrupt | None:
    outer = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
    return outer if isinstance(outer, Interrupt) else None


@contextlib.contextmanager
def stop_signals() -> Iterator[Interrupt]:
    """Route SIGINT, SIGTERM and SIGHUP to one `Interrupt` for the block (the CLI's whole
    command); outside `interruptible()` blocks they raise `Stopped`. Handlers restored."""
    if threading.current_thread() is not threading.main_thread():
        yield Interrupt()
        return
    installed = _installed()
    if installed is not None:
        yield installed
        return
    interrupt = Interrupt()
    previous = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    for signum, handler in previous.items():
        if handler != signal.SIG_IGN or signum == signal.SIGINT:
            signal.signal(signum, interrupt.handle)
    try:
        yield interrupt
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def interruptible() -> Iterator[Interrupt]:
    """A stop signal within the block sets `requested`; see the module docstring."""
    if threading.current_thread() is not threading.main_thread():
        yield Interrupt()
        return
    with stop_signals() as interrupt, interrupt._block():
        yield interrupt
