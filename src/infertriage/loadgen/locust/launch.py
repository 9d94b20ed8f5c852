"""loadgen, level 2: `--locust-workers N` from bench's side — a Locust master and its workers.

Takes a `LoadPlan`, a `ClientConfig`, a worker count, where the master listens
and a sink; gives every record to the sink as the master passes it on, one
`WorkerReport` per worker that finished, and a note per worker lost. It starts
the master (`python -m infertriage.loadgen.locust master`) and, unless a master
host is given, N local workers, all as processes of their own (Locust patches
its process for gevent; bench's asyncio never shares one with it). With a
master host, bench starts the master only and waits for N workers started on
other hosts (`python -m infertriage.loadgen.locust worker --master-host H`).
Their logs go to `log_dir`. Ctrl-C (or `stop()`) stops the workers, which
record what they had in flight; a worker that dies mid-run costs only its
requests in flight: every record it had sent is kept.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter

from infertriage.loadgen.locust.wire import (
    DEFAULT_PORT,
    decode_report,
    encode_config,
    encode_plan,
)
from infertriage.loadgen.request import ClientConfig
from infertriage.loadgen.runner import LoadPlan, WorkerReport
from infertriage.schemas import RequestRecord, UserError

__all__ = ["LocustRun", "parse_master_host", "run_locust"]

_MODULE = "infertriage.loadgen.locust"
_LOCAL_WAIT_S = 60.0  # local workers connect within seconds; a slow host is given a minute
_REMOTE_WAIT_S = 600.0  # workers on other hosts are started by hand
_POLL_S = 0.1
_EXIT_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class LocustRun:
    """What the master told: each finished worker's report, and the workers it lost."""

    reports: list[WorkerReport]
    interrupted: bool
    lost: tuple[str, ...] = ()  # one sentence per worker lost mid-run


@dataclass(slots=True)
class _Reader:
    sink: Callable[[RequestRecord], None]
    on_note: Callable[[str], None]
    reports: list[WorkerReport] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    connected: bool = False
    buffer: bytes = b""
    adapter: TypeAdapter[RequestRecord] = field(default_factory=lambda: TypeAdapter(RequestRecord))

    def feed(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"R "):
                self.sink(self.adapter.validate_json(line[2:]))
            elif line.startswith(b"E "):
                self.event(orjson.loads(line[2:]))

    def event(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "connected":
            self.connected = True
        elif kind == "report":
            self.reports.append(decode_report(event["report"]))
        elif kind == "error":
            self.errors.append(str(event["text"]))
            if event["worker"] is not None:  # the others ran: this one's share was not sent
                note = f"Locust worker {event['worker']} failed: {event['text']}"
                self.lost.append(note)
                self.on_note(f"warning: {note}.")
        elif kind == "lost":
            note = (
                f"Locust worker {event['worker']} ({event['host']}) was lost mid-run (no "
                f"heartbeat); the {event['records']} records it had sent are kept, its "
                "requests in flight are not recorded"
            )
            self.lost.append(note)
            self.on_note(f"warning: {note}.")


def parse_master_host(value: str) -> tuple[str, int]:
    """`HOST` or `HOST:PORT` (Locust's port 5557 by default)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        return value, DEFAULT_PORT
    return host, int(port)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _spawn(args: list[str], log: Path, env: dict[str, str], **kw: Any) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(  # our own module, no shell
            # the child stops when bench dies without stopping it (`schemas.lifeline`)
            [sys.executable, "-m", _MODULE, "--parent-pid", str(os.getpid()), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # Ctrl-C reaches bench only, which stops them in order
            **kw,
        )


def _worker_env(config: ClientConfig) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    if config.api_key:
        env["OPENAI_API_KEY"] = config.api_key
    return env


def _read(
    pipe: int,
    reader: _Reader,
    procs: list[subprocess.Popen[bytes]],
    stop: Callable[[], bool] | None,
) -> bool:
    """Pass on what the master says until it ends; true when the run was stopped.

    A local worker that exits before the workers are all connected (it could not start)
    ends the wait at once, instead of the master's minute.
    """
    master, local_workers = procs[0], procs[1:]
    interrupted = gave_up = False
    while True:
        try:
            ready, _, _ = select.select([pipe], [], [], _POLL_S)
            if ready:
                data = os.read(pipe, 1 << 16)
                if not data:
                    return interrupted
                reader.feed(data)
            if not (reader.connected or gave_up) and any(
                proc.poll() is not None for proc in local_workers
            ):
                gave_up = True
                reader.errors.insert(0, "a worker on this host exited before it joined the master")
                _terminate(master)
            if not interrupted and stop is not None and stop():
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = True
                _terminate(master)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)


def _end(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        try:
            proc.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_EXIT_WAIT_S)


def _start(
    job_path: Path,
    address: tuple[str, int],
    log_dir: Path,
    num_local: int,
    config: ClientConfig,
) -> tuple[list[subprocess.Popen[bytes]], int]:
    """The master (its pipe's reading end returned) and `num_local` workers on this host."""
    bind, port = address
    read_fd, write_fd = os.pipe()
    args = ["master", "--job", str(job_path), "--bind", bind, "--port", str(port)]
    try:
        master = _spawn(
            [*args, "--out-fd", str(write_fd)],
            log_dir / "master.log",
            dict(os.environ),
            pass_fds=(write_fd,),
        )
    finally:
        os.close(write_fd)
    workers = [
        _spawn(
            ["worker", "--master-host", "127.0.0.1", "--master-port", str(port), "--once"],
            log_dir / f"worker-{w}.log",
            _worker_env(config),
        )
        for w in range(num_local)
    ]
    return [master, *workers], read_fd


def run_locust(
    plan: LoadPlan,
    config: ClientConfig,
    num_workers: int,
    *,
    master_host: str | None,
    clock_start_ns: int,
    sink: Callable[[RequestRecord], None],
    log_dir: Path,
    tokenizer: Path | None = None,
    stop: Callable[[], bool] | None = None,
    on_note: Callable[[str], None] = lambda text: None,
) -> LocustRun:
    """Run the plan on a Locust master and `num_workers` workers; see the module docstring."""
    if importlib.util.find_spec("locust") is None:  # looked up, never imported here
        raise UserError("--locust-workers needs Locust: pip install 'infertriage[distributed]'.")
    log_dir.mkdir(parents=True, exist_ok=True)
    local = master_host is None
    bind, port = ("127.0.0.1", _free_port()) if local else parse_master_host(str(master_host))
    job = {
        "plan": encode_plan(plan),
        "config": encode_config(config),
        "tokenizer": str(tokenizer) if tokenizer is not None else None,
        "clock_start_ns": clock_start_ns,
        "expect": num_workers,
        "connect_timeout_s": _LOCAL_WAIT_S if local else _REMOTE_WAIT_S,
    }
    reader = _Reader(sink, on_note)
    # The job holds the header values: sent, never stored (a private temporary folder).
    with tempfile.TemporaryDirectory(prefix="infertriage-locust-") as private:
        job_path = Path(private) / "job.json"
        job_path.write_bytes(orjson.dumps(job))
        procs, read_fd = _start(
            job_path, (bind, port), log_dir, num_workers if local else 0, config
        )
        if not local:
            on_note(f"waiting for {num_workers} Locust workers to join {bind}:{port}")
        try:
            interrupted = _read(read_fd, reader, procs, stop)
        finally:
            os.close(read_fd)
            _end(procs)
    master = procs[0]
    if not reader.reports and not interrupted and (reader.errors or not reader.lost):
        why = reader.errors[0] if reader.errors else f"the master exited ({master.returncode})"
        raise UserError(f"the Locust run did not start: {why}; see {log_dir}.")
    return LocustRun(
        sorted(reader.reports, key=lambda r: r.worker),
        interrupted or any(r.interrupted for r in reader.reports),
        tuple(reader.lost),
    )
