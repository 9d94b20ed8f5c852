"""loadgen, level 2: the Locust master's side of `--locust-workers` — one run, N workers.

Takes the job bench wrote (`wire`: the plan, the client config, the run's clock, how
many workers to wait for) and a pipe to bench; gives bench, one line each, every record
a worker sends (`R <record JSON>`) and the run's events (`E <JSON>`: connected, report,
lost, error). It waits for the workers, has Locust spread the users over them (a closed
loop's C users; one issuer per worker for an open loop), gives each worker its share of
the schedule (`wire.share_plan`), and once every worker has decoded its share, one wall-
clock start instant; then it waits until each worker has reported or is lost: a worker
whose heartbeats stop (Locust's own liveness, about 3 s) is reported with the number of
records it had sent, which bench keeps. SIGTERM from bench (Ctrl-C) stops every worker,
which records what it had in flight.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import IO, Any

import gevent
import orjson
from locust.env import Environment
from locust.runners import STATE_MISSING, MasterRunner

from infertriage.loadgen.locust.wire import decode_plan, encode_plan, share_plan
from infertriage.loadgen.locust.worker import make_user_class

__all__ = ["run_master"]

_POLL_S = 0.1
# Workers start this long after the last has its job: each hears of the instant before it.
_START_MARGIN_S = 0.2
_SPAWN_TIMEOUT_S = 30.0


class _Master:
    def __init__(self, runner: MasterRunner, out: IO[bytes], job: dict[str, Any]) -> None:
        self.runner = runner
        self.out = out
        self.job = job
        self.pending: dict[str, int] = {}  # client id → worker index, until it reports
        self.sent: dict[str, int] = {}  # client id → records received
        self.stopped = False
        self.ready: set[str] = set()  # client ids that decoded their job
        runner.register_message("infertriage_ready", self._on_ready)
        runner.register_message("infertriage_record", self._on_record)
        runner.register_message("infertriage_report", self._on_report)
        runner.register_message("infertriage_error", self._on_error)

    def event(self, kind: str, **fields: Any) -> None:
        self._line(b"E " + orjson.dumps({"kind": kind, **fields}))

    def _line(self, line: bytes) -> None:
        self.out.write(line + b"\n")
        self.out.flush()

    def _on_record(self, environment: Environment, msg: Any) -> None:
        self.sent[msg.node_id] = self.sent.get(msg.node_id, 0) + 1
        self._line(b"R " + bytes(msg.data))

    def _on_ready(self, environment: Environment, msg: Any) -> None:
        self.ready.add(msg.node_id)

    def _on_report(self, environment: Environment, msg: Any) -> None:
        worker = self.pending.pop(msg.node_id, None)
        if worker is not None:
            self.event("report", worker=worker, report=msg.data)

    def _on_error(self, environment: Environment, msg: Any) -> None:
        worker = self.pending.pop(msg.node_id, None)
        self.event("error", worker=worker, text=str(msg.data))

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.runner.send_message("infertriage_stop", None)

    def wait_for_workers(self, expect: int, timeout_s: float) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while len(self.runner.clients.ready) < expect:
            if time.monotonic() > deadline or self.stopped:
                have = len(self.runner.clients.ready)
                self.event("error", worker=None, text=f"{have} of {expect} workers connected")
                return []
            gevent.sleep(_POLL_S)
        return sorted(self.runner.clients, key=lambda cid: self.runner.worker_indexes.get(cid, 0))

    def start(self, workers: list[str]) -> None:
        plan = decode_plan(self.job["plan"])
        users = (plan.concurrency or 1) if plan.closed else len(workers)
        self.runner.start(users, spawn_rate=max(users, 1))
        wait_until = time.monotonic() + _SPAWN_TIMEOUT_S
        while self.runner.user_count < users and time.monotonic() < wait_until:
            gevent.sleep(_POLL_S)
        counts = [self.runner.clients[cid].user_count for cid in workers]
        self.event("connected", workers=len(workers), users=counts)
        for index, (cid, share) in enumerate(zip(workers, share_plan(plan, counts), strict=True)):
            if share is None:
                continue
            payload = {
                "worker": index,
                "plan": encode_plan(share),
                "config": self.job["config"],
                "tokenizer": self.job["tokenizer"],
            }
            self.pending[cid] = index
            self.runner.send_message("infertriage_job", payload, client_id=cid)
        wait_until = time.monotonic() + _SPAWN_TIMEOUT_S
        while not self.ready >= set(self.pending) and time.monotonic() < wait_until:
            gevent.sleep(_POLL_S / 10)
        # One instant for all, a little ahead, so none starts late.
        start_ns = time.perf_counter_ns() + round(_START_MARGIN_S * 1e9)
        start_wall_s = time.time() + (start_ns - time.perf_counter_ns()) * 1e-9
        start_run_s = (start_ns - int(self.job["clock_start_ns"])) * 1e-9
        instant = {"start_wall_s": start_wall_s, "start_run_s": start_run_s}
        for cid in self.pending:
            self.runner.send_message("infertriage_start", instant, client_id=cid)

    def watch(self) -> None:
        """Until every worker with a share has reported, failed or gone missing."""
        while self.pending:
            gevent.sleep(_POLL_S)
            for cid, index in list(self.pending.items()):
                node = self.runner.clients.get(cid)
                if node is None or node.state == STATE_MISSING:
                    del self.pending[cid]
                    host = cid.rsplit("_", 1)[0]
                    self.event("lost", worker=index, host=host, records=self.sent.get(cid, 0))


def run_master(job_path: Path, bind_host: str, port: int, out: IO[bytes]) -> int:
    """Run one load as the Locust master; 0 when every worker with a share reported."""
    job = orjson.loads(job_path.read_bytes())
    env = Environment(user_classes=[make_user_class(None)])
    runner = env.create_master_runner(master_bind_host=bind_host, master_bind_port=port)
    master = _Master(runner, out, job)
    gevent.signal_handler(signal.SIGTERM, master.stop)
    try:
        workers = master.wait_for_workers(int(job["expect"]), float(job["connect_timeout_s"]))
        if not workers:
            return 1
        master.start(workers)
        master.watch()
    finally:
        runner.quit()
        master.event("end")
    return 0
