"""loadgen, level 2: `--workers N` — one event loop per process, one schedule, one run.

Takes a `LoadPlan`, a `ClientConfig`, a worker count and a sink; gives every
record to the sink (in this process, as each request finishes) and one
`WorkerReport` per worker. The parent splits the precomputed schedule
round-robin (each worker keeps the absolute deadlines of its share, so the
union is the schedule asked for) and the closed loop's users as evenly as it
can. Workers start on one shared `perf_counter_ns` instant (the clock is
system-wide on Linux and macOS), so their records share the run's clock.
Workers ignore SIGINT, and SIGTERM and SIGHUP while the parent lives: the parent
turns each (Ctrl-C, `timeout`'s or a closed terminal's signal to the process group)
into a stop that every worker obeys, recording its in-flight requests, so a partial
run keeps every record. A worker whose parent died without stopping it (SIGKILL) is
sent SIGTERM (`schemas.lifeline`) and exits: no load outlives the run.
A worker sends its records to the parent in batches (`RecordBatch`: every
`_BATCH_RECORDS`, or `_BATCH_WAIT_S` after a batch's first, and at its end, a stop's
cut requests included), each record a flat row: one pickled record cost the worker
about 20 µs and the queue its own wake-up, the send rate's price per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing as mp
import os
import queue
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.synchronize import Event
from typing import Any

from infertriage.loadgen.client import ClientConfig
from infertriage.loadgen.runner import LoadPlan, WorkerReport, run_load, run_sync
from infertriage.schemas import RequestRecord, UserError
from infertriage.schemas.lifeline import die_with_parent, parent_is_gone
from infertriage.schemas.records import Chunk
from infertriage.workload import TextRenderer, TokenCounter

__all__ = ["RecordBatch", "pack_record", "run_parallel", "split_plan", "unpack_record"]

_READY_TIMEOUT_S = 60.0
# Workers begin this long after the last says it is ready, so none starts late.
_START_MARGIN_S = 0.05
_POLL_S = 0.1
# A worker's records go to the parent this many at a time, or this long after a batch's
# first (the live view and the parent's stop check see them that late at most).
_BATCH_RECORDS, _BATCH_WAIT_S = 256, 0.05
_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))
_CHUNKS = _FIELDS.index("chunks")
# the signals a parent turns into a stop; blocked while workers start, as they inherit it
_STOP_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@dataclass(frozen=True, slots=True)
class _Job:
    worker: int
    plan: LoadPlan
    config: ClientConfig
    clock_start_ns: int
    tokenizer: TokenCounter | None
    parent_pid: int


def split_plan(plan: LoadPlan, num_workers: int) -> list[LoadPlan]:
    """Each worker's share: every Nth request or session (deadlines kept), its part of the users."""
    shares = []
    for w in range(num_workers):
        schedule = plan.schedule.share(w, num_workers)
        users = None
        if plan.closed:
            total = plan.concurrency or 1
            users = total // num_workers + (1 if w < total % num_workers else 0)
        cap = plan.max_concurrency
        if cap is not None:
            cap = max(1, cap // num_workers + (1 if w < cap % num_workers else 0))
        shares.append(replace(plan, schedule=schedule, concurrency=users, max_concurrency=cap))
    return [share for share in shares if len(share.schedule) and (share.concurrency or 1) > 0]


def pack_record(record: RequestRecord) -> list[Any]:
    """A record as a flat row of its fields (its chunks as tuples): pickled in a batch, a
    row costs about a tenth of the record's dataclasses, whose state pickle asks of each."""
    row = [getattr(record, name) for name in _FIELDS]
    row[_CHUNKS] = [(c.ts, c.num_tokens, c.reasoning) for c in record.chunks]
    return row


def unpack_record(row: list[Any]) -> RequestRecord:
    """The record `pack_record` flattened, equal to it."""
    row[_CHUNKS] = tuple([Chunk(*chunk) for chunk in row[_CHUNKS]])
    return RequestRecord(*row)


class RecordBatch:
    """A worker's records on their way to the parent: sent `_BATCH_RECORDS` at a time, or
    `_BATCH_WAIT_S` after the first of a batch (a timer on the load's loop, where records
    are added); `flush` sends the rest."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.rows: list[list[Any]] = []
        self.timer: asyncio.TimerHandle | None = None

    def add(self, record: RequestRecord) -> None:
        if not self.rows:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(_BATCH_WAIT_S, self.flush)
        self.rows.append(pack_record(record))
        if len(self.rows) >= _BATCH_RECORDS:
            self.flush()

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.rows:
            self.out.put(("records", self.rows))
            self.rows = []


def _on_stop_signal(parent_pid: int) -> Callable[[int, Any], None]:
    def handle(signum: int, frame: Any) -> None:
        if parent_is_gone(parent_pid):  # no one left to stop this worker in order
            os._exit(128 + signum)
        # else the parent got it too (sent to the group) and stops every worker itself

    return handle


def _worker_main(job: _Job, out: Any, start: Event, start_ns: Any, stop: Event) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in _STOP_SIGNALS - {signal.SIGINT}:
        signal.signal(signum, _on_stop_signal(job.parent_pid))
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS - {signal.SIGINT})
    die_with_parent(job.parent_pid)
    batch = RecordBatch(out)
    try:
        out.put(("ready", job.worker))
        if not start.wait(_READY_TIMEOUT_S * 2):
            return
        renderer = TextRenderer(job.tokenizer)
        report = run_sync(
            run_load(
                job.plan,
                job.config,
                clock_start_ns=job.clock_start_ns,
                load_start_ns=int(start_ns.value),
                sink=batch.add,
                stop=stop.is_set,
                worker=job.worker,
                renderer=renderer,
                tokenizer=job.tokenizer,
            )
        )
        batch.flush()
        out.put(("report", report))
    except Exception as err:  # surfaced in the parent as one sentence
        batch.flush()  # what was measured before it stays
        out.put(("error", f"worker {job.worker} failed: {type(err).__name__}: {err}"))


class _Pool:
    def __init__(self, jobs: list[_Job]) -> None:
        ctx = mp.get_context("spawn")
        self.out: Any = ctx.Queue()
        self.start = ctx.Event()
        self.stop = ctx.Event()
        self.start_ns: Any = ctx.Value("q", 0)
        self.procs = [
            ctx.Process(
                target=_worker_main,
                args=(job, self.out, self.start, self.start_ns, self.stop),
                name=f"infertriage-bench-{job.worker}",
                daemon=True,
            )
            for job in jobs
        ]

    def alive(self) -> bool:
        return any(proc.is_alive() for proc in self.procs)

    def get(self) -> tuple[str, Any] | None:
        try:
            item: tuple[str, Any] = self.out.get(timeout=_POLL_S)
        except queue.Empty:
            return None
        return item

    def close(self) -> None:
        self.stop.set()
        for proc in self.procs:
            if proc.pid is None:  # never started: nothing to join
                continue
            proc.join(timeout=5.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)


@contextlib.contextmanager
def _stops_blocked() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP blocked, a mask the processes started meanwhile inherit:
    the workers and multiprocessing's resource tracker (started with the pool's queue).

    A Ctrl-C (or SIGTERM, SIGHUP) to the process group while they import must not kill
    them: the parent stops the workers, and the tracker ends when the parent does. One
    that reaches the parent meanwhile waits until they are started. A worker unblocks
    SIGTERM and SIGHUP once it handles them.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _await_ready(pool: _Pool) -> None:
    ready, deadline = 0, time.monotonic() + _READY_TIMEOUT_S
    while ready < len(pool.procs):
        if time.monotonic() > deadline or not pool.alive():
            raise UserError("the load-generator workers did not start; try fewer --workers.")
        item = pool.get()
        if item is not None and item[0] == "ready":
            ready += 1
        elif item is not None and item[0] == "error":
            raise UserError(str(item[1]))


def run_parallel(
    plan: LoadPlan,
    config: ClientConfig,
    num_workers: int,
    *,
    clock_start_ns: int,
    sink: Callable[[RequestRecord], None],
    tokenizer: TokenCounter | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[list[WorkerReport], bool]:
    """Run the plan on `num_workers` processes; returns their reports and whether Ctrl-C cut it.

    `stop`, polled, asks every worker to stop as Ctrl-C does (the caller's SIGINT handler).
    """
    jobs = [
        _Job(w, share, config, clock_start_ns, tokenizer, os.getpid())
        for w, share in enumerate(split_plan(plan, num_workers))
    ]
    with _stops_blocked():
        pool = _Pool(jobs)
    reports: list[WorkerReport] = []
    errors: list[str] = []
    interrupted = False
    try:
        with _stops_blocked():
            for proc in pool.procs:
                proc.start()
        _await_ready(pool)
        pool.start_ns.value = time.perf_counter_ns() + round(_START_MARGIN_S * 1e9)
        pool.start.set()
        while len(reports) + len(errors) < len(jobs):
            try:
                item = pool.get()
            except KeyboardInterrupt:
                interrupted = True
                pool.stop.set()
                continue
            if stop is not None and not interrupted and stop():
                interrupted = True
                pool.stop.set()
            if item is None:
                if not pool.alive() and pool.out.empty():
                    break
                continue
            kind, value = item
            if kind == "records":
                for row in value:
                    sink(unpack_record(row))
            elif kind == "report":
                reports.append(value)
            elif kind == "error":
                errors.append(str(value))
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            pool.close()
    if errors and not reports:
        raise UserError(errors[0])
    return sorted(reports, key=lambda r: r.worker), interrupted or any(
        r.interrupted for r in reports
    )
