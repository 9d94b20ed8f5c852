"""loadgen, level 2: the scheduler — one event loop sending a schedule, open or closed loop.

Takes a `LoadPlan` (a schedule with absolute deadlines, or a closed loop of N
users with think time; an optional `max_concurrency`; the run's bounds), a
`ClientConfig` and a sink for records; gives a `WorkerReport` (CPU, wall time,
event-loop lag samples, whether it was interrupted). Each request's record
goes to the sink the moment it finishes. An open loop is one pacing loop: it
sleeps until the next `load_start + offset`, releases every request due by then
(each keeps its deadline as its scheduled time, so a late wake-up shows in every
dispatch lag it caused) and encodes the next bodies while it waits, so a late
send never delays the next; under `max_concurrency` the wait for a slot is the
request's client queue time, recorded, never hidden. Issuing stops at the duration; in-flight
requests then get `drain_timeout_s` before they are cancelled and recorded as
`timeout:run_deadline`, or less when the plan lets the drain settle
(`drain_deadline_ns`, the one rule the Locust worker applies too). Cancelling
the run (Ctrl-C, or `stop()` turning true) records every in-flight request as
`client:cancelled` with what it measured. An open loop whose plan asks
(`stop_on_saturation`) feeds a `saturation.SaturationDetector` each record and a look
every `TICK_S` (requests due, finished, streaming); on its verdict it stops issuing as at
the duration's end (the drain as above) and the report carries the verdict. A schedule
of sessions (agentic workloads) sends each session's steps in order, a step once the
previous one is answered and its delay has passed: an open loop starts a session at its
first request's deadline, a closed loop's user runs one session at a time; no step
starts after the duration (sessions are not watched for saturation).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from infertriage.loadgen.client import ClientConfig, RequestClient, StreamState, make_session
from infertriage.loadgen.saturation import TICK_S, Saturation, SaturationDetector
from infertriage.schemas import ErrorKind, RequestRecord
from infertriage.workload import RequestSpec, Schedule, Session, TextRenderer, TokenCounter

__all__ = [
    "DRAIN_POLL_S",
    "LoadPlan",
    "WorkerReport",
    "backoff_s",
    "blocking",
    "drain_deadline_ns",
    "drain_poll",
    "drain_settled",
    "failed_fast",
    "have_uvloop",
    "run_load",
    "run_sync",
]

T = TypeVar("T")
P = ParamSpec("P")
Sink = Callable[[RequestRecord], None]
_LAG_INTERVAL_S = 0.010
# What the load keeps (its records, above all) is frozen every second (`gc.freeze`, which
# costs nothing), so the collector's full pass never walks it: one pass of 18 ms was seen
# by 10,000 records at 1,000 req/s, longer with every record kept, and a pass is a late
# send for every request due meanwhile. The cost: a cycle alive at a freeze that dies
# later waits for the load's end to be collected (about 0.08 unreachable objects a
# request against a loopback server).
_FREEZE_EVERY = 100
_STOP_POLL_S = 0.05
_TIMER_TICK_S = 0.001
# The open loop encodes a request's body ahead of its deadline, in the time it would sleep:
# up to this far ahead, and only while the next deadline is further than the margin away.
_ENCODE_AHEAD_S, _ENCODE_MARGIN_S = 0.05, 0.0005
# A released request stamps its send on its second turn of the loop (`RequestClient.fetch`
# yields once before it): the pacing loop yields this many turns before encoding ahead.
_SEND_TURNS = 2
# A closed-loop user whose request failed fast, before any token (a refused connection, a
# 5xx, a 429), waits before its next: 50 ms, doubling to 1 s, until one succeeds. Without
# it, a failing server takes the whole budget in a second.
_BACKOFF_S, _BACKOFF_MAX_S, _INSTANT_FAILURE_S = 0.05, 1.0, 1.0
# A drain that may settle looks this often whether it has (a first token ends no task);
# once it has, the streams left get this long to end on their own before they are cut (a
# short one about to end is not cut for nothing).
DRAIN_POLL_S = 0.05
DRAIN_SETTLE_GRACE_S = 1.0
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """What one load level sends: open loop when the schedule has offsets, else closed."""

    schedule: Schedule
    concurrency: int | None = None  # closed loop: this many users
    max_concurrency: int | None = None  # open loop: in-flight cap (the wait is client queue)
    think_time_s: float = 0.0  # closed loop: pause between a user's requests
    duration_s: float | None = None  # stop issuing after this
    drain_timeout_s: float = 30.0  # then wait this long for in-flight requests
    drain_settle_share: float | None = None  # or less, once this share finished (`drain_settled`)
    id_prefix: str = "r"
    labels: tuple[tuple[str, str], ...] = ()  # added to every record (the level's name)
    stop_on_saturation: bool = False  # open loop of requests: stop issuing once over-saturated

    @property
    def watches_saturation(self) -> bool:
        """The plan is an open loop of requests (not sessions) that asks to be watched."""
        return self.stop_on_saturation and not self.closed and self.schedule.sessions is None

    @property
    def closed(self) -> bool:
        return self.schedule.offsets_s is None


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """One event loop's view of its own health during the load."""

    worker: int
    num_records: int
    cpu_s: float
    wall_s: float
    loop_lag_s: tuple[float, ...]
    interrupted: bool
    exhausted: bool  # a closed loop ran out of requests before its duration
    uvloop: bool
    num_reads: int = 0  # socket reads of streamed bodies
    num_events: int = 0  # SSE events those reads carried
    num_backoffs: int = 0  # closed loop: waits after a fast failure
    saturation: Saturation | None = None  # the verdict that stopped its issuing


def have_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401, PLC0415  # optional: probing for it is the point
    except ImportError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T], *, use_uvloop: bool = True) -> T:
    """Run a coroutine on a fresh loop (uvloop where installed); Ctrl-C cancels its task."""
    factory = None
    if use_uvloop and have_uvloop():
        import uvloop  # noqa: PLC0415  # optional dependency

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


def blocking(ask: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """`ask` as a blocking call: each call runs to its end on a stdlib loop of its own (an
    HTTP exchange before or after the load, whose own loop has ended)."""

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(ask(*args, **kwargs), use_uvloop=False)

    return call


def failed_fast(state: StreamState) -> bool:
    """The request failed before any token, within a second (refused, a 5xx, a 429)."""
    took_s = (time.perf_counter_ns() - state.sent_ns) * 1e-9
    failed = state.error_kind is not ErrorKind.NONE and not state.chunks
    return failed and took_s < _INSTANT_FAILURE_S


def drain_settled(
    settle_share: float | None, *, num_finished: int, running: Collection[StreamState]
) -> bool:
    """The drain may stop waiting for the streams still running (after its grace).

    True once `settle_share` of the requests sent (finished + running) has finished and
    every stream still running has had its first token: its TTFT and ITL are measured,
    only a long output's tail is left. While a larger share runs (a slow server, whose
    streams the server's finish-observed histograms need) or one still waits for its
    first token (a queued request: its TTFT is the evidence), the drain waits as before,
    up to `drain_timeout_s`. None: never settle, wait for every stream. Once true, it
    stays so: the drain sends nothing new, so the share finished only grows.
    """
    if settle_share is None or not running:
        return False
    if not all(state.chunks for state in running):
        return False
    return num_finished >= settle_share * (num_finished + len(running))


def drain_deadline_ns(
    plan: LoadPlan,
    deadline_ns: int,
    *,
    now_ns: int,
    num_finished: int,
    running: Collection[StreamState],
) -> int:
    """The drain's deadline as of `now_ns`: `deadline_ns` (its start + `drain_timeout_s`),
    brought in to `DRAIN_SETTLE_GRACE_S` from the first look at which it has settled."""
    if not drain_settled(plan.drain_settle_share, num_finished=num_finished, running=running):
        return deadline_ns
    return min(deadline_ns, now_ns + round(DRAIN_SETTLE_GRACE_S * 1e9))


def drain_poll(
    plan: LoadPlan, deadline_ns: int, *, num_finished: int, running: Collection[StreamState]
) -> tuple[int, float]:
    """One look of a drain: (its deadline now, how long to wait before the next look; 0 or
    less: the deadline has passed, cut what runs). Both runners' drains loop on this."""
    now_ns = time.perf_counter_ns()
    deadline_ns = drain_deadline_ns(
        plan, deadline_ns, now_ns=now_ns, num_finished=num_finished, running=running
    )
    left_s = (deadline_ns - now_ns) * 1e-9
    return deadline_ns, left_s if plan.drain_settle_share is None else min(left_s, DRAIN_POLL_S)


def backoff_s(failures: int) -> float:
    """A closed-loop user's wait after `failures` fast failures in a row (0: none)."""
    if not failures:
        return 0.0
    # the exponent capped: a long outage must not overflow a float
    return min(_BACKOFF_MAX_S, _BACKOFF_S * 2.0 ** min(failures - 1, 16))


async def sleep_until(deadline_ns: int) -> None:
    """Sleep until `perf_counter_ns() >= deadline_ns`: late by at most a timer tick, never early.

    uvloop's timers have millisecond resolution and may fire up to a tick early.
    """
    delay = deadline_ns - time.perf_counter_ns()
    while delay > 0:
        await asyncio.sleep(max(delay * 1e-9, _TIMER_TICK_S))
        delay = deadline_ns - time.perf_counter_ns()


class _Run:
    def __init__(
        self,
        plan: LoadPlan,
        client: RequestClient,
        *,
        clock_start_ns: int,
        load_start_ns: int,
        sink: Sink,
        tokenizer: TokenCounter | None,
    ) -> None:
        self.plan = plan
        self.client = client
        self.clock_start_ns = clock_start_ns
        self.load_start_ns = load_start_ns
        self.sink = sink
        self.tokenizer = tokenizer
        self.tasks: set[asyncio.Task[Any]] = set()
        self.running: dict[str, StreamState] = {}  # sent (or queued for a slot), not finished
        self.cancel_fault = "cancelled"
        self.num_records = 0
        self.exhausted = False
        self.num_backoffs = 0
        self.saturation: Saturation | None = None
        self.lag: list[float] = []
        self.detector = SaturationDetector() if plan.watches_saturation else None
        cap = plan.max_concurrency if not plan.closed else None
        self.slots = asyncio.Semaphore(cap) if cap else None
        duration = plan.duration_s
        self.issue_until_ns = None if duration is None else load_start_ns + round(duration * 1e9)

    def _emit(self, state: Any, request_id: str) -> None:
        record = state.record(request_id, self.clock_start_ns, self.tokenizer, self.plan.labels)
        self.sink(record)
        self.num_records += 1
        if self.detector is not None:  # the detector counts from the level's start
            origin = (self.load_start_ns - self.clock_start_ns) * 1e-9
            first, end = record.first_token_ts, record.end_ts
            self.detector.finished(
                record.scheduled_ts - origin,
                None if first is None else first - origin,
                None if end is None else end - origin,
            )

    async def watch_saturation(self, issuing: asyncio.Task[Any]) -> None:
        """Look every `TICK_S` while the open loop issues; cancel its issuing on a verdict."""
        detector, offsets = self.detector, self.plan.schedule.offsets_s
        assert detector is not None and offsets is not None
        while not issuing.done():
            await asyncio.sleep(TICK_S)
            now_s = (time.perf_counter_ns() - self.load_start_ns) * 1e-9
            verdict = detector.tick(
                now_s,
                due=int(np.searchsorted(offsets, now_s, side="right")),
                finished=self.num_records,
                streaming=sum(1 for state in self.running.values() if state.chunks),
            )
            if verdict is not None:
                self.saturation = verdict
                issuing.cancel()
                return

    async def one(self, spec: RequestSpec, scheduled_ns: int, body: bytes | None = None) -> bool:
        """Send one request (its body, when encoded ahead) and emit its record; true when it
        failed fast, before any token."""
        state = self.client.new_state(spec, scheduled_ns)
        request_id = f"{self.plan.id_prefix}-{spec.index}"
        self.running[request_id] = state
        acquired = False
        try:
            if self.slots is not None:
                waited = time.perf_counter_ns()
                await self.slots.acquire()
                acquired = True
                state.queue_s = (time.perf_counter_ns() - waited) * 1e-9
            await self.client.fetch(state, request_id, body)
        except asyncio.CancelledError:
            deadline = self.cancel_fault == "run_deadline"
            kind = ErrorKind.TIMEOUT if deadline else ErrorKind.CLIENT
            state.fail(kind, self.cancel_fault, "the run ended before the request finished")
            self._emit(state, request_id)
            raise
        except Exception as exc:  # a defect of the client itself: the request stays, failed
            state.fail(ErrorKind.CLIENT, "internal_error", f"infertriage's client failed: {exc!r}")
        finally:
            self.running.pop(request_id, None)
            if acquired and self.slots is not None:
                self.slots.release()
        self._emit(state, request_id)
        return failed_fast(state)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def open_loop(self) -> None:
        offsets = self.plan.schedule.offsets_s
        assert offsets is not None
        start, limit = self.load_start_ns, self.issue_until_ns
        if self.plan.schedule.sessions is not None:
            started = []
            for session in self.plan.schedule.sessions:
                deadline = start + round(offsets[session[0].indices[0]] * 1e9)
                if limit is not None and deadline >= limit:
                    break
                await sleep_until(deadline)
                started.append(self._spawn(self._session(session, deadline)))
            if limit is None and started:
                # bounded by a count: every session runs to its end (as a closed loop's users
                # do), so no drain cuts a session's later steps
                await asyncio.wait(started)
            return
        await self._pace(offsets)

    async def _pace(self, offsets: npt.NDArray[np.float64]) -> None:
        """One pacing loop for a schedule of requests: at each wake-up it releases every
        request due by then, each to a task of its own, lets them send, then encodes the
        bodies of the next ones (up to `_ENCODE_AHEAD_S` ahead) while their deadline is more
        than `_ENCODE_MARGIN_S` away, and sleeps until the next deadline. A late wake-up releases
        all that is due at once; each keeps its deadline as its scheduled time, so its
        lateness is in its dispatch lag, never hidden."""
        specs, client = self.plan.schedule.specs, self.client
        deadlines = np.round(offsets * 1e9).astype(np.int64) + self.load_start_ns
        if self.issue_until_ns is not None:  # issuing ends at the first deadline past it
            late = np.flatnonzero(deadlines >= self.issue_until_ns)
            deadlines = deadlines[: late[0] if len(late) else len(deadlines)]
        due_ns, count = deadlines.tolist(), len(deadlines)
        ahead_ns, margin_ns = round(_ENCODE_AHEAD_S * 1e9), round(_ENCODE_MARGIN_S * 1e9)
        bodies: deque[bytes | None] = deque()  # encoded ahead: requests next, next + 1, …
        next_ = 0
        while next_ < count:
            now, released = time.perf_counter_ns(), next_
            while next_ < count and due_ns[next_] <= now:
                body = bodies.popleft() if bodies else None
                self._spawn(self.one(specs[next_], due_ns[next_], body))
                next_ += 1
            if next_ == count:
                return
            if next_ > released:  # those just released send before any body is encoded
                for _ in range(_SEND_TURNS):
                    await asyncio.sleep(0)
                continue
            until, last = due_ns[next_] - margin_ns, next_ + len(bodies)
            while last < count and due_ns[last] <= now + ahead_ns and now < until:
                bodies.append(client.prepare(specs[last]))
                last, now = last + 1, time.perf_counter_ns()
            await sleep_until(due_ns[next_])

    async def _user(self, specs: Iterator[RequestSpec]) -> None:
        think = self.plan.think_time_s
        limit = self.issue_until_ns
        scheduled, failures = time.perf_counter_ns(), 0
        for spec in specs:
            if limit is not None and time.perf_counter_ns() >= limit:
                return
            failures = failures + 1 if await self.one(spec, scheduled) else 0
            pause = think + backoff_s(failures)
            if failures:
                self.num_backoffs += 1
            if limit is not None:
                pause = min(pause, max(0.0, (limit - time.perf_counter_ns()) * 1e-9))
            if pause > 0:
                await asyncio.sleep(pause)
            scheduled = time.perf_counter_ns()
        self.exhausted = self.issue_until_ns is not None

    async def _session(self, session: Session, scheduled: int) -> bool:
        """A session's steps in order, each `delay_s` after the previous one's answers (a
        step's requests together); false when the run's issuing ended before its last."""
        specs, limit, failures = self.plan.schedule.specs, self.issue_until_ns, 0
        for n, step in enumerate(session):
            if n:
                pause_s = step.delay_s + backoff_s(failures)
                scheduled = time.perf_counter_ns() + round(pause_s * 1e9)
                if limit is not None and scheduled >= limit:
                    return False
                await sleep_until(scheduled)
            sent = (self.one(specs[i], scheduled) for i in step.indices)
            failures = failures + 1 if all(await asyncio.gather(*sent)) else 0
            self.num_backoffs += 1 if failures else 0
        return True

    async def _session_user(self, sessions: Iterator[Session]) -> None:
        for session in sessions:
            limit = self.issue_until_ns
            if limit is not None and time.perf_counter_ns() >= limit:
                return
            if not await self._session(session, time.perf_counter_ns()):
                return
        self.exhausted = self.issue_until_ns is not None

    async def closed_loop(self) -> None:
        specs = iter(self.plan.schedule.specs)  # shared: each user takes the next request
        sessions = self.plan.schedule.sessions
        shared = None if sessions is None else iter(sessions)  # each user takes the next one
        users = [
            self._spawn(self._user(specs) if shared is None else self._session_user(shared))
            for _ in range(self.plan.concurrency or 1)
        ]
        if self.issue_until_ns is not None:
            remaining = (self.issue_until_ns - time.perf_counter_ns()) * 1e-9
            await asyncio.wait(users, timeout=max(remaining, 0.0))
        else:
            await asyncio.wait(users)

    async def drain(self) -> None:
        """Wait for what is in flight until its deadline (`drain_deadline_ns`); cut the rest."""
        plan = self.plan
        deadline_ns = time.perf_counter_ns() + round(plan.drain_timeout_s * 1e9)
        pending = set(self.tasks)
        while pending:
            deadline_ns, poll_s = drain_poll(
                plan, deadline_ns, num_finished=self.num_records, running=self.running.values()
            )
            if poll_s <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=poll_s)
        if pending:
            await self.cancel_all("run_deadline")

    async def cancel_all(self, fault: str) -> None:
        self.cancel_fault = fault
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def monitor_lag(self) -> None:
        """Sample the loop's lag every `_LAG_INTERVAL_S`; freeze what the collector holds
        every `_FREEZE_EVERY` samples (`run_load`: what survived a second stays)."""
        interval_ns = round(_LAG_INTERVAL_S * 1e9)
        while True:
            before = time.perf_counter_ns()
            await asyncio.sleep(_LAG_INTERVAL_S)
            self.lag.append(max(0, time.perf_counter_ns() - before - interval_ns) * 1e-9)
            if not len(self.lag) % _FREEZE_EVERY:
                gc.collect(1)  # the young generations' dead cycles (a failed request's
                gc.freeze()  # traceback) first: frozen, they would stay to the level's end


async def _watch(stop: Callable[[], bool], task: asyncio.Task[Any]) -> None:
    while not stop():
        await asyncio.sleep(_STOP_POLL_S)
    task.cancel()


async def run_load(
    plan: LoadPlan,
    config: ClientConfig,
    *,
    clock_start_ns: int,
    load_start_ns: int,
    sink: Sink,
    stop: Callable[[], bool] | None = None,
    worker: int = 0,
    renderer: TextRenderer | None = None,
    tokenizer: TokenCounter | None = None,
) -> WorkerReport:
    """Send the plan from `load_start_ns` (perf_counter_ns); every record goes to `sink`."""
    me = asyncio.current_task()
    assert me is not None
    async with make_session(config) as session:
        client = RequestClient(config, session, renderer)
        run = _Run(
            plan,
            client,
            clock_start_ns=clock_start_ns,
            load_start_ns=load_start_ns,
            sink=sink,
            tokenizer=tokenizer,
        )
        helpers = [asyncio.create_task(run.monitor_lag())]
        if stop is not None:
            helpers.append(asyncio.create_task(_watch(stop, me)))
        interrupted = False
        # What the process holds so far (modules, the schedule) stays: the collector leaves
        # it alone during the load, as vLLM's `bench serve` does. A full pass over it took
        # 45 ms of CPU on a 2-core host, added to every stamp in flight. What the load keeps
        # is frozen as it goes (`monitor_lag`).
        gc.freeze()
        _log.info("worker %d: %s %s", worker, _describe(plan), dict(plan.labels) or "")
        cpu0, wall0 = time.process_time(), time.perf_counter_ns()
        try:
            await sleep_until(load_start_ns)
            await _issue(run, me, helpers)
            await run.drain()
        except asyncio.CancelledError:
            me.uncancel()
            interrupted = True
            await run.cancel_all("cancelled")
        finally:
            for helper in helpers:
                helper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*helpers, return_exceptions=True)
            await client.aclose()
            # everything back in the collector's reach, the CLI's own freeze included: a
            # freeze made again here would outlive a level run beside this one (compare's
            # arms) and keep garbage out of reach for good (a run directory's lock in a cycle)
            gc.unfreeze()
        cpu_s, wall_s = time.process_time() - cpu0, (time.perf_counter_ns() - wall0) * 1e-9
    _log.info(
        "worker %d: %d records in %.1f s (client CPU %.2f s)%s",
        *(worker, run.num_records, wall_s, cpu_s, ", interrupted" if interrupted else ""),
    )
    return WorkerReport(
        worker=worker,
        num_records=run.num_records,
        cpu_s=cpu_s,
        wall_s=wall_s,
        loop_lag_s=tuple(run.lag),
        interrupted=interrupted,
        exhausted=run.exhausted,
        uvloop=type(asyncio.get_running_loop()).__module__.startswith("uvloop"),
        num_reads=run.client.num_reads,
        num_events=run.client.num_events,
        num_backoffs=run.num_backoffs,
        saturation=run.saturation,
    )


def _describe(plan: LoadPlan) -> str:
    offsets = plan.schedule.offsets_s
    if offsets is None:
        return f"closed loop, {plan.concurrency} users"
    return f"open loop, {len(offsets)} sends scheduled"


async def _issue(run: _Run, me: asyncio.Task[Any], helpers: list[asyncio.Task[Any]]) -> None:
    """Send the plan; an open loop that is watched stops early on an over-saturated verdict."""
    if run.detector is None:
        await (run.closed_loop() if run.plan.closed else run.open_loop())
        return
    issuing = asyncio.create_task(run.open_loop())
    helpers.append(asyncio.create_task(run.watch_saturation(issuing)))
    try:
        await issuing
    except asyncio.CancelledError:
        if me.cancelling() or run.saturation is None:  # Ctrl-C or stop(): not the detector's
            raise
