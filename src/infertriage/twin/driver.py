"""twin, level 2: runs the engine core in real time on a thread of its own.

Takes an `EngineCore` on a `MonotonicClock` and the asyncio loop of the HTTP
server; gives `submit`/`abort` (thread-safe commands the engine takes at its
next step boundary, as vLLM's engine-core process takes them off its input
queue) and delivers each step's `RequestOutput`s to the loop at the step's
end time. It also feeds the Prometheus registry and records how late each
step's outputs were delivered (step slip), the twin's own accuracy figure.
The registry is fed after the loop has written a step's chunks (the chunks go
first); `settled` waits, on the loop, until it holds every step whose outputs
were delivered, so a scrape right after a response counts that response's
step, as vLLM's output handler records a step's stats before its chunks reach
the client.

Steps keep the model's timeline, as a GPU runs them back to back: the next step
starts where the previous one ended, not when this thread got round to it, and a
step after idle starts when its first request reached the engine, not when the
thread woke. So the thread's own wake-up and bookkeeping time (the slip) does not
add to every inter-token gap. A command is taken into the first step that starts
at or after its arrival. When the thread falls more than `_CATCH_UP_S` behind (a
starved host), the timeline restarts at now rather than delivering a burst of
late steps at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.twin.engine import EngineCore, StepResult
from infertriage.twin.prom import EngineMetrics
from infertriage.twin.request import SamplingParams
from infertriage.twin.scheduler import RequestOutput, SchedulerStats

__all__ = ["SETTLE_WAIT_S", "AddCommand", "EngineDriver"]


def _name_os_thread(name: bytes) -> None:
    """Name this thread for the OS (`/proc/PID/task/TID/comm`), as vLLM names its processes,
    so a host sampler can tell the engine loop from the API server's thread; and ask for
    1 µs timer slack (Linux's default, 50 µs, would be added to every step's wake-up)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name[:15]), 0, 0, 0)
        libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(_TIMER_SLACK_NS), 0, 0, 0)


_IDLE_WAIT_S = 0.05
_CATCH_UP_S = 0.005
_HANDOFF_WAIT_S = 0.001
SETTLE_WAIT_S = 0.1  # the most a scrape waits for a delivered step's bookkeeping
_SETTLE_POLL_S = 0.0005
_PR_SET_NAME = 15
_PR_SET_TIMERSLACK = 29
_TIMER_SLACK_NS = 1000
_MAX_SLIP_SAMPLES = 100_000


@dataclass(frozen=True, slots=True)
class AddCommand:
    request_id: str
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    arrival_ts: float
    output_seed: int | None = None
    # P/D: a decode instance's request, its prompt's KV received (all but the last token,
    # which vLLM recomputes), and when the instance got it (TTFT counts from there)
    num_computed_tokens: int = 0
    first_seen_ts: float | None = None


class EngineDriver:
    """The engine-core thread: drain commands, step, wait until the step ends, deliver."""

    def __init__(
        self,
        engine: EngineCore,
        metrics: EngineMetrics | None,
        deliver: Callable[[Sequence[RequestOutput]], None],
        loop: asyncio.AbstractEventLoop,
        thread_name: str = "engine-core",
    ) -> None:
        self.engine = engine
        self._metrics = metrics
        self._deliver = deliver
        self._loop = loop
        self._commands: queue.SimpleQueue[AddCommand | tuple[str, ...]] = queue.SimpleQueue()
        self._held: deque[AddCommand | tuple[str, ...]] = deque()  # arrived after the step began
        self._wake = threading.Event()
        self._handed = threading.Event()
        self._stop = threading.Event()
        self._stats: SchedulerStats = engine.get_stats()
        self._max_tokens: dict[str, int] = {}
        self._arrival_ts: dict[str, float] = {}
        self._last_output_ts: dict[str, float] = {}
        self.step_slip_s: list[float] = []
        self._num_delivered = 0  # steps with outputs: handed to the loop, and recorded since
        self._delivered_seq = 0  # (loop side) the last one the loop delivered
        self._recorded_seq = 0  # (engine thread) the last one whose bookkeeping is done
        self.on_step: Callable[[StepResult], None] | None = None
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

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

    async def settled(self, deadline: float | None = None) -> None:
        """Wait until the metrics hold every step whose outputs the loop delivered (until the
        loop's time `deadline`, else at most `SETTLE_WAIT_S`; at once when they do or the
        thread has stopped)."""
        target = self._delivered_seq
        if deadline is None:
            deadline = self._loop.time() + SETTLE_WAIT_S
        while (
            self._recorded_seq < target and self._thread.is_alive() and self._loop.time() < deadline
        ):
            await asyncio.sleep(_SETTLE_POLL_S)

    # ------------------------------------------------------------ engine thread
    def _next_start_ts(self) -> float:
        """Where the next step starts on the model's timeline (see the module docstring)."""
        engine = self.engine
        while True:
            try:
                self._held.append(self._commands.get_nowait())
            except queue.Empty:
                break
        now = engine.clock.now()
        start = engine.last_end_ts
        if not engine.has_unfinished_requests():
            first = next((c for c in self._held if isinstance(c, AddCommand)), None)
            start = now if first is None else max(start, first.arrival_ts)
        return start if now - start <= _CATCH_UP_S else now

    def _admit(self, start_ts: float) -> None:
        """Take the held commands, in order, that arrived by `start_ts`."""
        held = self._held
        while held:
            command = held[0]
            if isinstance(command, AddCommand):
                if command.arrival_ts > start_ts:
                    return
                self._max_tokens[command.request_id] = command.params.max_tokens
                seen = command.first_seen_ts
                self._arrival_ts[command.request_id] = command.arrival_ts if seen is None else seen
                self.engine.add_request(
                    command.request_id,
                    command.prompt_token_ids,
                    command.params,
                    arrival_ts=command.arrival_ts,
                    output_seed=command.output_seed,
                    num_computed_tokens=command.num_computed_tokens,
                )
            else:
                self.engine.abort_requests(command)
            held.popleft()

    def _run(self) -> None:
        _name_os_thread(self._thread.name.encode())
        engine = self.engine
        while not self._stop.is_set():
            start_ts = self._next_start_ts()
            self._admit(start_ts)
            if not engine.has_unfinished_requests():
                self._stats = engine.get_stats()
                if not self._held:
                    self._wake.wait(_IDLE_WAIT_S)
                    self._wake.clear()
                continue
            result = engine.step(start_ts)
            delay = result.end_ts - engine.clock.now()
            if delay > 0:
                time.sleep(delay)
            if len(self.step_slip_s) < _MAX_SLIP_SAMPLES:
                self.step_slip_s.append(engine.clock.now() - result.end_ts)
            self._finish_step(result)

    def _observe_tokens(self, metrics: EngineMetrics, output: RequestOutput) -> None:
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

    def _hand_over(self, outputs: Sequence[RequestOutput], seq: int) -> None:
        """On the loop: deliver, then tell the engine thread once the woken streams have run."""
        self._deliver(outputs)
        self._delivered_seq = seq
        self._loop.call_soon(self._handed.set)

    def _finish_step(self, result: StepResult) -> None:
        if result.outputs:
            # Both threads need the GIL: leave it to the loop until it has written this
            # step's chunks (at most `_HANDOFF_WAIT_S`), rather than making it wait while
            # this thread does its bookkeeping and schedules the next step.
            self._handed.clear()
            self._num_delivered += 1
            self._loop.call_soon_threadsafe(self._hand_over, result.outputs, self._num_delivered)
            self._handed.wait(_HANDOFF_WAIT_S)
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
        self._recorded_seq = self._num_delivered
