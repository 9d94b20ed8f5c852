"""report, level 4: the live view of a long command (`diagnose`, `validate`, `bench`, `compare`).

Takes what a `RunObserver` (`loadgen.results`) is told: a phase started with its
plan, each finished request, the phase ended. Gives `LivePhase` (one phase's
figures: requests done and failed, TTFT p50/p95 and ITL p50 over the latest
requests, elapsed and remaining time; pure, tested without a terminal),
`LiveFigures` (a snapshot of them) and `LiveView` (a rich `Live` on the
console it is given — stderr, so stdout stays clean — that redraws the open
phase at most four times a second; each phase that ends leaves one line
above it, and the display is gone once the command's own output is drawn).

Cost in the load loop: `request_finished` appends the record to a queue and
nothing else; the figures are computed on the display's refresh thread from
the queue, the ITL from a sample of the newest requests of each redraw (a
long stream's gaps cost ~50 µs to read). Milliseconds on screen only.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import numpy as np
from rich.console import Console, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from infertriage.analyze.stats.latency import itl_samples
from infertriage.analyze.stats.outcomes import is_incomplete
from infertriage.schemas import RequestRecord
from infertriage.schemas.text import terminal_text

__all__ = ["LiveFigures", "LivePhase", "LiveView", "figures_line"]

_WINDOW = 256  # the TTFT and ITL figures are over this many latest requests…
_GAPS = 4096  # …and at most this many latest inter-token gaps
_ITL_PER_REDRAW = 16  # the ITL sample: the newest requests of each redraw (≤ 4 a second)


@dataclass(frozen=True, slots=True)
class LiveFigures:
    """One phase's figures at one instant; None where no request has said yet."""

    name: str
    num_done: int  # ended on their own: answered, or failed by the server
    num_failed: int
    num_cut: int  # cut by the run (the drain's deadline, Ctrl-C): neither done nor failed
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    itl_p50_s: float | None
    elapsed_s: float
    remaining_s: float | None  # from the planned duration, or the planned count at this pace


class LivePhase:
    """One phase's counts since it began, and TTFT and ITL over its latest requests."""

    def __init__(
        self,
        name: str,
        started_s: float,
        *,
        duration_s: float | None = None,
        num_requests: int | None = None,
    ) -> None:
        self.name = name
        self.started_s = started_s
        self.duration_s = duration_s
        self.num_requests = num_requests
        self.num_done = self.num_failed = self.num_cut = 0
        self._ttft: deque[float] = deque(maxlen=_WINDOW)
        self._gaps: deque[float] = deque(maxlen=_GAPS)

    def add(self, records: Sequence[RequestRecord]) -> None:
        """Count the requests finished since the last redraw; a request the run cut (drain,
        Ctrl-C) is neither done nor a failure. The ITL is read from the newest few: a long stream's
        gaps cost far more than its count, and a live median needs only a sample."""
        for record in records:
            if is_incomplete(record):
                self.num_cut += 1
                continue
            self.num_done += 1
            self.num_failed += not record.ok
            if record.ttft_s is not None:
                self._ttft.append(record.ttft_s)
        for record in records[-_ITL_PER_REDRAW:]:
            self._gaps.extend(itl_samples(record)[-_GAPS:].tolist())

    def _remaining_s(self, elapsed_s: float) -> float | None:
        if self.duration_s is not None:
            return max(0.0, self.duration_s - elapsed_s)
        if self.num_requests is not None and self.num_done:
            return max(0, self.num_requests - self.num_done) * elapsed_s / self.num_done
        return None

    def figures(self, now_s: float) -> LiveFigures:
        elapsed = max(0.0, now_s - self.started_s)
        ttft = np.percentile(self._ttft, (50.0, 95.0)) if self._ttft else None
        return LiveFigures(
            name=self.name,
            num_done=self.num_done,
            num_failed=self.num_failed,
            num_cut=self.num_cut,
            ttft_p50_s=float(ttft[0]) if ttft is not None else None,
            ttft_p95_s=float(ttft[1]) if ttft is not None else None,
            itl_p50_s=float(np.median(self._gaps)) if self._gaps else None,
            elapsed_s=elapsed,
            remaining_s=self._remaining_s(elapsed),
        )


def _ms(value_s: float | None) -> str:
    if value_s is None:
        return "–"
    return f"{value_s * 1e3:,.1f}" if value_s < 0.01 else f"{value_s * 1e3:,.0f}"


def figures_line(f: LiveFigures, *, done: bool = False) -> Text:
    """One line: the phase, its requests, TTFT and ITL in ms, and its time."""
    line = terminal_text(f.name, "bold")
    if f.num_done or f.num_cut:
        line.append(
            f"  {f.num_done:,} done, {f.num_failed:,} failed", style="red" if f.num_failed else ""
        )
        if f.num_cut:
            line.append(f", {f.num_cut:,} cut", style="yellow")
        line.append(
            f"  TTFT p50 {_ms(f.ttft_p50_s)} p95 {_ms(f.ttft_p95_s)} ms"
            f"  ITL p50 {_ms(f.itl_p50_s)} ms"
        )
    if done:
        line.append(f"  in {f.elapsed_s:,.1f} s", style="dim")
    else:
        left = (
            ""
            if f.remaining_s is None
            else f", {f.remaining_s:,.0f} s left"
            if f.remaining_s > 0
            else ", finishing the requests in flight"
        )
        line.append(f"  {f.elapsed_s:,.0f} s{left}", style="dim")
    return line


class LiveView:
    """The live display: a `RunObserver` and a context manager that stops it on any exit."""

    def __init__(
        self,
        console: Console,
        *,
        refresh_per_second: float = 4.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._console = console
        self._clock = clock
        self._began_s = clock()
        self._pending: deque[RequestRecord] = deque()  # append and popleft are atomic
        self._lock = threading.Lock()  # the phase and its figures: the refresh thread vs ours
        self._phase: LivePhase | None = None
        self._spinner = Spinner("dots", style="cyan")
        self._live = Live(
            console=console,
            refresh_per_second=refresh_per_second,
            transient=True,
            get_renderable=self._renderable,
            redirect_stdout=False,
        )
        self._started = False

    def __enter__(self) -> Self:
        return self  # the display starts with the first phase: a refused command draws nothing

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._phase is not None:
            self._end(self._phase.name, stopped=True)
        if self._started:
            self._live.stop()  # the live lines are cleared and the cursor shown again
            self._started = False

    def phase_started(
        self, name: str, *, duration_s: float | None = None, num_requests: int | None = None
    ) -> None:
        with self._lock:
            self._pending.clear()
            self._phase = LivePhase(
                name, self._clock(), duration_s=duration_s, num_requests=num_requests
            )
        if not self._started:
            self._live.start()
            self._started = True
        self._live.refresh()

    def request_finished(self, record: RequestRecord) -> None:
        self._pending.append(record)  # the load loop's only cost; counted at the next redraw

    def phase_ended(self, name: str, *, interrupted: bool = False) -> None:
        self._end(name, stopped=interrupted)

    def _end(self, name: str, *, stopped: bool) -> None:
        with self._lock:
            phase, self._phase = self._phase, None
            if phase is None or phase.name != name:
                return
            self._take(phase)
            line = Text("✗ " if stopped else "✓ ", style="red" if stopped else "green")
            line.append_text(figures_line(phase.figures(self._clock()), done=True))
            if stopped:
                line.append("  (stopped)", style="red")
        self._live.console.print(line)  # above the live area, kept once it is cleared
        self._live.refresh()

    def _take(self, phase: LivePhase) -> None:
        taken: list[RequestRecord] = []
        while self._pending:
            taken.append(self._pending.popleft())
        phase.add(taken)

    def _renderable(self) -> RenderableType:
        with self._lock:
            phase = self._phase
            if phase is None:
                return Text()
            self._take(phase)
            line = figures_line(phase.figures(self._clock()))
        line.append(f"  (total {self._clock() - self._began_s:,.0f} s)", style="dim")
        grid = Table.grid(padding=(0, 1))
        grid.add_row(self._spinner, line)
        return grid
