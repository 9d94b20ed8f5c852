"""twin, level 2: runs the engine core in real time on a thread of its own.

Takes an `EngineCore` on a `MonotonicClock` and the asyncio loop of the HTTP
server; gives `submit`/`abort` (thread-safe commands the engine takes at its
next step boundary, as vLLM's engine-core process takes them off its input
queue) and delivers each step's `RequestOutput`s to the loop at the step's
end time. It also feeds the Prometheus registry and records how late each
step's outputs were delivered (step slip), the twin's own accuracy figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.twin.engine import EngineCore, StepResult
from infertriage.twin.prom import VllmMetrics
from infertriage.twin.request import SamplingParams
from infertriage.twin.scheduler import RequestOutput, SchedulerStats

__all__ = ["AddCommand", "EngineDriver"]


def _name_os_thread(name: bytes) -> None:
    """Name this thread for the OS (`/proc/PID/task/TID/comm`), as vLLM names its processes,
    so a host sampler can tell the engine loop from the API server's thread."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name[:15]), 0, 0, 0)


_IDLE_WAIT_S = 0.05
_PR_SET_NAME = 15
_MAX_SLIP_SAMPLES = 100_000


@dataclass(frozen=True, slots=True)
class AddCommand:
    request_id: str
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    arrival_ts: float
    output_seed: int | None = None


class EngineDriver:
    """The engine-core thread: drain commands, step, wait until the step ends, deliver."""

    def __init__(
        self,
        engine: EngineCore,
        metrics: VllmMetrics | None,
        deliver: Callable[[Sequence[RequestOutput]], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.engine = engine
        self._metrics = metrics
        self._deliver = deliver
        self._loop = loop
        self._commands: queue.SimpleQueue[AddCommand | tuple[str, ...]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._stats: SchedulerStats = engine.get_stats()
        self._max_tokens: dict[str, int] = {}
        self._arrival_ts: dict[str, float] = {}
        self._last_output_ts: dict[str, float] = {}
        self.step_slip_s: list[float] = []
        self.on_step: Callable[[StepResult], None] | None = None
        self._thread = threading.Thread(target=self._run, name="engine-core", daemon=True)

    # ------------------------------------------------------------ event-loop side
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def now(self) -> float:
        return self.engine.clock.now()

    def submit(self, command: AddCommand) -> None:
        self._commands.put(command)
        self._wake.set()

    def abort(self, request_id: str) -> None:
        self._commands.put((request_id,))
        self._wake.set()

    def stats(self) -> SchedulerStats:
        return self._stats

    # ------------------------------------------------------------ engine thread
    def _drain(self) -> list[RequestOutput]:
        aborted: list[RequestOutput] = []
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return aborted
            if isinstance(command, AddCommand):
                self._max_tokens[command.request_id] = command.params.max_tokens
                self._arrival_ts[command.request_id] = command.arrival_ts
                self.engine.add_request(
                    command.request_id,
                    command.prompt_token_ids,
                    command.params,
                    arrival_ts=command.arrival_ts,
                    output_seed=command.output_seed,
                )
            else:
                aborted.extend(self.engine.abort_requests(command))

    def _run(self) -> None:
        _name_os_thread(b"engine-core")
        while not self._stop.is_set():
            self._drain()
            if not self.engine.has_unfinished_requests():
                self._stats = self.engine.get_stats()
                self._wake.wait(_IDLE_WAIT_S)
                self._wake.clear()
                continue
            result = self.engine.step()
            delay = result.end_ts - self.engine.clock.now()
            if delay > 0:
                time.sleep(delay)
            if len(self.step_slip_s) < _MAX_SLIP_SAMPLES:
                self.step_slip_s.append(self.engine.clock.now() - result.end_ts)
            self._finish_step(result)

    def _observe_tokens(self, metrics: VllmMetrics, output: RequestOutput) -> None:
        rid = output.request_id
        if output.new_token_ids:
            last = self._last_output_ts.get(rid)
            if last is None:
                arrival = self._arrival_ts.get(rid)
                if arrival is not None:
                    metrics.observe_first_token(output.ts - arrival)
            else:
                metrics.observe_token_gap(output.ts - last)
            self._last_output_ts[rid] = output.ts
        if output.finished:
            self._last_output_ts.pop(rid, None)
            self._arrival_ts.pop(rid, None)

    def _finish_step(self, result: StepResult) -> None:
        self._stats = result.stats
        if self._metrics is not None:
            self._metrics.observe_step(result.shape.num_tokens)
            for output in result.outputs:
                self._observe_tokens(self._metrics, output)
                if output.timings is not None:
                    max_tokens = self._max_tokens.pop(output.request_id, 0)
                    self._metrics.observe_finished(output.timings, max_tokens)
        if self.on_step is not None:
            self.on_step(result)
        if result.outputs:
            self._loop.call_soon_threadsafe(self._deliver, result.outputs)
