"""loadgen, level 2: a Locust worker's side of `--locust-workers` — its users send its share.

Takes the job the master sends (`wire`: this worker's part of the plan, the client
config, the run's clock as a wall-clock start instant); gives one `RequestRecord`
message per finished request (`infertriage_record`: the record's JSON, labelled
`locust_worker`, sent the moment it finishes, so the master keeps it even if this worker
dies later) and a `WorkerReport` message at the end. A closed loop's users are the
Locust users Locust gave this worker, each taking the next request of the share as
`runner`'s users do; an open loop's first user issues the share on its absolute
deadlines, one greenlet per request, so a slow answer never delays the next send. Each
request runs in a greenlet of its own (`stream.GeventClient`), so the run's end
(`drain_timeout_s`, or less where the plan lets it settle: `runner.drain_deadline_ns`;
then `timeout:run_deadline`) and a stop (`client:cancelled`) record
what was in flight. Imported only in a Locust process (gevent), never where asyncio
runs.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import gevent.lock
import gevent.pool
import orjson
from locust import User, constant, task
from locust.env import Environment

from infertriage.loadgen.client import StreamState
from infertriage.loadgen.locust.stream import GeventClient
from infertriage.loadgen.locust.wire import decode_config, decode_plan, encode_report
from infertriage.loadgen.runner import (
    LoadPlan,
    WorkerReport,
    backoff_s,
    drain_poll,
    failed_fast,
)
from infertriage.schemas import ErrorKind, UserError
from infertriage.schemas.redact import Redactor
from infertriage.workload import LocalTokenizer, RequestSpec, TextRenderer

__all__ = ["WorkerNode", "make_user_class"]

_LAG_INTERVAL_S = 0.010
_RECONNECT_AFTER_S = 1.0


class _Cancel(gevent.GreenletExit):  # type: ignore[misc]  # gevent ships no types
    """Raised into a request's greenlet: the run stopped (Ctrl-C) before it finished."""

    fault = "cancelled"


class _Deadline(_Cancel):
    """Raised into a request's greenlet: the drain after the run's duration ran out."""

    fault = "run_deadline"


def make_user_class(node: WorkerNode | None) -> type[User]:
    """The one Locust user class; the master's copy (no node) only names it for dispatch."""

    class InfertriageUser(User):
        wait_time = constant(0)

        @task
        def load(self) -> None:
            if node is None:
                raise RuntimeError("the master runs no users")
            node.run_user()

    return InfertriageUser


def _sleep_until(deadline_ns: int) -> None:
    delay = deadline_ns - time.perf_counter_ns()
    while delay > 0:
        gevent.sleep(max(delay * 1e-9, 0.0005))
        delay = deadline_ns - time.perf_counter_ns()


class WorkerNode:
    """One worker process's share of the run: its plan, client, in-flight requests and tallies."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        self.ready = gevent.event.Event()
        self.users_done = gevent.event.Event()
        self.requests = gevent.pool.Group()
        self.running: dict[str, StreamState] = {}  # sent (or queued for a slot), not finished
        self.plan: LoadPlan | None = None
        self.client: GeventClient | None = None
        self.tokenizer: LocalTokenizer | None = None
        self.redact = Redactor()
        self.index = 0
        self.clock_start_ns = self.load_start_ns = 0
        self.issue_until_ns: int | None = None
        self.specs: Any = iter(())
        self.slots: gevent.lock.Semaphore | None = None
        self.issuing = self.stopping = self.exhausted = False
        self.active_users = 0
        self.num_records = self.num_backoffs = 0
        self.lag: list[float] = []

    def attach(self) -> None:
        """Listen for the master's job and stop, once the environment has its runner."""
        runner = self.env.runner
        assert runner is not None
        runner.register_message("infertriage_job", self._on_job)
        runner.register_message("infertriage_start", self._on_start)
        runner.register_message("infertriage_stop", self._on_stop)

    def _send(self, kind: str, data: Any) -> None:
        runner = self.env.runner
        assert runner is not None
        runner.send_message(kind, data)

    def _on_job(self, environment: Environment, msg: Any) -> None:
        try:
            self._take_job(msg.data)
        except (UserError, ValueError, KeyError, TypeError) as err:
            self._send("infertriage_error", f"{type(err).__name__}: {err}")
            return
        self._send("infertriage_ready", None)

    def _take_job(self, job: dict[str, Any]) -> None:
        key = os.environ.get("OPENAI_API_KEY") or None
        if job["config"]["needs_key"] and key is None:
            raise UserError("the run sends an API key: set OPENAI_API_KEY on this worker")
        config = decode_config(job["config"], key if job["config"]["needs_key"] else None)
        if job["tokenizer"] is not None:
            self.tokenizer = LocalTokenizer(Path(job["tokenizer"]))
        self.plan = plan = decode_plan(job["plan"])
        self.index = int(job["worker"])
        self.client = GeventClient(config, TextRenderer(self.tokenizer))
        self.redact = Redactor.of(config.api_key, config.headers)
        self.specs = iter(plan.schedule.specs)
        cap = plan.max_concurrency if not plan.closed else None
        self.slots = gevent.lock.Semaphore(cap) if cap else None

    def _on_start(self, environment: Environment, msg: Any) -> None:
        """Every worker has its job: start on the master's instant, on the run's clock."""
        plan = self.plan
        if plan is None:
            return
        # From a wall-clock instant: exact on one host, as close as NTP keeps hosts across.
        now_ns, now_s = time.perf_counter_ns(), time.time()
        self.load_start_ns = now_ns + round((float(msg.data["start_wall_s"]) - now_s) * 1e9)
        self.clock_start_ns = self.load_start_ns - round(float(msg.data["start_run_s"]) * 1e9)
        if plan.duration_s is not None:
            self.issue_until_ns = self.load_start_ns + round(plan.duration_s * 1e9)
        gevent.spawn(self._supervise)
        self.ready.set()

    def _on_stop(self, environment: Environment, msg: Any) -> None:
        self.stopping = True
        self.requests.kill(exception=_Cancel, block=False)

    def run_user(self) -> None:
        """One Locust user's whole life in this run; it then idles until the master quits."""
        self.ready.wait()
        plan = self.plan
        assert plan is not None
        if plan.closed:
            self.active_users += 1
            try:
                self._closed_user(plan)
            finally:
                self.active_users -= 1
                if not self.active_users:
                    self.users_done.set()
        elif not self.issuing:
            self.issuing = True
            try:
                self._open_loop(plan)
            finally:
                self.users_done.set()
        gevent.event.Event().wait()

    def _closed_user(self, plan: LoadPlan) -> None:
        _sleep_until(self.load_start_ns)
        limit = self.issue_until_ns
        scheduled, failures = time.perf_counter_ns(), 0
        for spec in self.specs:
            if self.stopping or (limit is not None and time.perf_counter_ns() >= limit):
                return
            failed = self.requests.spawn(self._one, spec, scheduled).get()
            failures = failures + 1 if failed else 0
            pause = plan.think_time_s + backoff_s(failures)
            if failures:
                self.num_backoffs += 1
            if limit is not None:
                pause = min(pause, max(0.0, (limit - time.perf_counter_ns()) * 1e-9))
            if pause > 0:
                gevent.sleep(pause)
            scheduled = time.perf_counter_ns()
        self.exhausted = limit is not None

    def _open_loop(self, plan: LoadPlan) -> None:
        offsets = plan.schedule.offsets_s
        assert offsets is not None
        limit = self.issue_until_ns
        for spec, offset in zip(plan.schedule.specs, offsets.tolist(), strict=True):
            deadline = self.load_start_ns + round(offset * 1e9)
            if self.stopping or (limit is not None and deadline >= limit):
                return
            _sleep_until(deadline)
            self.requests.spawn(self._one, spec, deadline)

    def _one(self, spec: RequestSpec, scheduled_ns: int) -> bool:
        """Send one request and send its record; true when it failed fast, before any token."""
        plan, client = self.plan, self.client
        assert plan is not None and client is not None
        chat = client.config.endpoint.value == "chat"
        state = StreamState(spec, scheduled_ns, chat=chat, redact=self.redact)
        if client.config.keep_text:
            state.texts = []
        request_id = f"{plan.id_prefix}-{spec.index}"
        self.running[request_id] = state
        acquired = False
        try:
            if self.slots is not None:
                waited = time.perf_counter_ns()
                self.slots.acquire()
                acquired = True
                state.queue_s = (time.perf_counter_ns() - waited) * 1e-9
            client.fetch(state, request_id)
        except _Cancel as stop:
            kind = ErrorKind.TIMEOUT if stop.fault == "run_deadline" else ErrorKind.CLIENT
            state.fail(kind, stop.fault, "the run ended before the request finished")
        finally:
            self.running.pop(request_id, None)
            if acquired and self.slots is not None:
                self.slots.release()
        self._emit(state, request_id, plan)
        return failed_fast(state)

    def _emit(self, state: StreamState, request_id: str, plan: LoadPlan) -> None:
        labels = (*plan.labels, ("locust_worker", str(self.index)))  # which host was slow
        record = state.record(request_id, self.clock_start_ns, self.tokenizer, labels)
        self._send("infertriage_record", orjson.dumps(record))
        self.num_records += 1
        took_ms = ((record.end_ts or record.sent_ts) - record.sent_ts) * 1e3
        self.env.events.request.fire(  # type: ignore[no-untyped-call]  # Locust's hook
            request_type="POST",
            name=_stats_name(state),
            response_time=took_ms,
            response_length=record.output_tokens or 0,
            exception=None if record.ok else f"{record.error_kind}:{record.fault}",
            context={},
        )

    def _monitor_lag(self) -> None:
        interval_ns = round(_LAG_INTERVAL_S * 1e9)
        while True:
            before = time.perf_counter_ns()
            gevent.sleep(_LAG_INTERVAL_S)
            self.lag.append(max(0, time.perf_counter_ns() - before - interval_ns) * 1e-9)

    def _drain(self, plan: LoadPlan) -> bool:
        """Wait for what is in flight until the drain's deadline (`runner.drain_poll`,
        as the asyncio runner does); true when every request finished, false: cut the rest."""
        deadline_ns = time.perf_counter_ns() + round(plan.drain_timeout_s * 1e9)
        while self.requests:
            deadline_ns, poll_s = drain_poll(
                plan, deadline_ns, num_finished=self.num_records, running=self.running.values()
            )
            if poll_s <= 0:
                return False
            if self.requests.join(timeout=poll_s):
                return True
        return True

    def _supervise(self) -> None:
        """Wait for the users, drain what is in flight, then report."""
        plan = self.plan
        assert plan is not None
        _sleep_until(self.load_start_ns)
        cpu0, wall0 = time.process_time(), time.perf_counter_ns()
        monitor = gevent.spawn(self._monitor_lag)
        remaining = None
        if self.issue_until_ns is not None:
            remaining = max(0.0, (self.issue_until_ns - time.perf_counter_ns()) * 1e-9)
        self.users_done.wait(timeout=remaining)
        if not self._drain(plan):
            self.requests.kill(exception=_Deadline, block=True)
        self.users_done.wait(timeout=1.0)
        monitor.kill()
        report = WorkerReport(
            worker=self.index,
            num_records=self.num_records,
            cpu_s=time.process_time() - cpu0,
            wall_s=(time.perf_counter_ns() - wall0) * 1e-9,
            loop_lag_s=tuple(self.lag),
            interrupted=self.stopping,
            exhausted=self.exhausted,
            uvloop=False,
            num_reads=self.client.num_reads if self.client else 0,
            num_events=self.client.num_events if self.client else 0,
            num_backoffs=self.num_backoffs,
        )
        if self.client is not None:
            self.client.close()
        self._send("infertriage_report", encode_report(report))


def _stats_name(state: StreamState) -> str:
    """The name Locust's own statistics file the request under."""
    return "/v1/chat/completions" if state.chat else "/v1/completions"


def run_worker(master_host: str, master_port: int, *, once: bool) -> int:
    """Serve the master's runs: one (`once`, bench's own local workers), else run after run
    (every level of a sweep, every load of `diagnose`) until the process is stopped."""
    while True:
        env = Environment()
        node = WorkerNode(env)
        env.user_classes = [make_user_class(node)]
        try:
            runner = env.create_worker_runner(master_host, master_port)
        except ConnectionError:
            logging.getLogger(__name__).error(
                "no Locust master at %s:%d; giving up", master_host, master_port
            )
            return 1
        node.attach()
        runner.greenlet.join()
        if once:
            return 0
        gevent.sleep(_RECONNECT_AFTER_S)  # the last master is gone before the next is asked
