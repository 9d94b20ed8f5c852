"""collect, level 2: the host and the server's process tree, with psutil.

Takes the server's pid (`--server-pid`) or its URL, whose port leads to the
local process listening on it; gives `HostSample`s: system CPU and memory,
and for the server's process tree its RSS and the CPU of every thread, named
(on Linux from /proc/<pid>/task/<tid>/comm). One thread near 100 % of a core
is a GIL-bound front end or engine loop, and its name says which. Optionally
`py_spy_dump` names the hot Python frames when py-spy is installed.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from infertriage.schemas import RunClock, Sample, UserError

__all__ = [
    "HostSample",
    "HostSampler",
    "PySpyDump",
    "ServerProcess",
    "ThreadCpu",
    "find_server_process",
    "py_spy_dump",
]

_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"})


@dataclass(frozen=True, slots=True)
class ServerProcess:
    pid: int
    name: str
    cmdline: tuple[str, ...]
    found_by: str  # "--server-pid" or "listening on port N"


@dataclass(frozen=True, slots=True)
class ThreadCpu:
    pid: int
    tid: int
    name: str
    cpu: float  # cores: 1.0 is one core busy all the time


@dataclass(frozen=True)
class HostSample:
    t: float
    cpu: float | None  # system CPU busy, fraction of all cores; None on the first sample
    mem_used_bytes: int
    mem_total_bytes: int
    proc_cpu: float | None = None  # server tree, in cores
    rss_bytes: int | None = None  # server tree
    threads: tuple[ThreadCpu, ...] = ()  # busiest first
    num_processes: int = 0
    root_pid: int | None = None  # the server's own process (its children: engine, workers)

    @property
    def hottest(self) -> ThreadCpu | None:
        return self.threads[0] if self.threads else None

    def to_samples(self, top_threads: int = 8) -> list[Sample]:
        """The normalised metrics.jsonl records of this sample."""
        out = [
            Sample(self.t, "host.mem_used_bytes", float(self.mem_used_bytes)),
            Sample(self.t, "host.mem_total_bytes", float(self.mem_total_bytes)),
        ]
        if self.cpu is not None:
            out.append(Sample(self.t, "host.cpu", self.cpu))
        if self.rss_bytes is not None:
            out.append(Sample(self.t, "proc.rss_bytes", float(self.rss_bytes)))
        if self.proc_cpu is not None:
            out.append(Sample(self.t, "proc.cpu", self.proc_cpu))
        for rank, thread in enumerate(self.threads[:top_threads]):
            labels = {"thread": thread.name, "tid": str(thread.tid), "pid": str(thread.pid)}
            if self.root_pid is not None:
                labels["process"] = "server" if thread.pid == self.root_pid else "child"
            if rank == 0:
                out.append(Sample(self.t, "proc.cpu_thread_max", thread.cpu, dict(labels)))
            out.append(Sample(self.t, "proc.cpu_thread", thread.cpu, labels))
        return out


def _is_local(host: str) -> bool:
    if host in _LOCAL_NAMES or host == socket.gethostname():
        return True
    try:
        address = socket.gethostbyname(host)
    except OSError:
        return False
    if address.startswith("127."):
        return True
    ours = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
    return address in ours


def _describe(pid: int, found_by: str) -> ServerProcess:
    try:
        process = psutil.Process(pid)
        return ServerProcess(pid, process.name(), tuple(process.cmdline()), found_by)
    except psutil.NoSuchProcess as err:
        raise UserError(f"no process with pid {pid} ({found_by}).") from err
    except psutil.AccessDenied:
        return ServerProcess(pid, "?", (), found_by)


def _listener(port: int) -> int | None:
    for connection in psutil.net_connections(kind="inet"):
        if (
            connection.status == psutil.CONN_LISTEN
            and connection.laddr
            and connection.laddr.port == port
            and connection.pid
        ):
            return int(connection.pid)
    return None


def find_server_process(
    url: str | None, pid: int | None = None
) -> tuple[ServerProcess | None, str | None]:
    """The server's process and a note when none could be found (not an error: remote servers)."""
    if pid is not None:
        return _describe(pid, "--server-pid"), None
    if url is None:
        return None, "no server URL or --server-pid: host-process metrics not collected."
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not _is_local(host):
        return None, f"{host} is not this machine: pass --server-pid to sample a local process."
    try:
        found = _listener(port)
    except psutil.AccessDenied:
        found = None
    if found is None:
        return None, (
            f"no local process seen listening on port {port} (another user's process needs "
            "root to be seen): pass --server-pid."
        )
    return _describe(found, f"listening on port {port}"), None


def _thread_name(pid: int, tid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text(encoding="utf-8").strip()
    return f"tid-{tid}"


class HostSampler:
    """Samples the host and the server's tree; CPU figures are deltas since the previous sample."""

    def __init__(self, clock: RunClock, process: ServerProcess | None = None) -> None:
        self.clock = clock
        self.process = process
        self.notes: list[str] = []
        self._cpu_times = psutil.cpu_times()
        self._last_t = clock.now_ts()
        self._thread_times, _, _ = self._tree_times()  # prime the per-thread deltas

    def _tree(self) -> list[psutil.Process]:
        if self.process is None:
            return []
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            if f"process {self.process.pid} exited." not in self.notes:
                self.notes.append(f"process {self.process.pid} exited.")
            return []

    def _tree_times(self) -> tuple[dict[tuple[int, int], float], int, int]:
        times: dict[tuple[int, int], float] = {}
        rss, alive = 0, 0
        for proc in self._tree():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                for thread in proc.threads():
                    times[(proc.pid, thread.id)] = thread.user_time + thread.system_time
                rss += proc.memory_info().rss
                alive += 1
        return times, rss, alive

    def _system_cpu(self) -> float | None:
        now = psutil.cpu_times()
        before = self._cpu_times
        self._cpu_times = now
        total = sum(now) - sum(before)
        idle = (now.idle - before.idle) + (
            getattr(now, "iowait", 0.0) - getattr(before, "iowait", 0.0)
        )
        return None if total <= 0 else max(0.0, min(1.0, 1.0 - idle / total))

    def sample(self) -> HostSample:
        t = self.clock.now_ts()
        dt = max(t - self._last_t, 1e-6)
        self._last_t = t
        memory = psutil.virtual_memory()
        cpu = self._system_cpu()
        if self.process is None:
            return HostSample(t, cpu, int(memory.total - memory.available), int(memory.total))
        times, rss, alive = self._tree_times()
        # A thread not seen before was born since the last sample: all its CPU time is new.
        threads = [
            ThreadCpu(pid, tid, _thread_name(pid, tid), max(0.0, (used - before) / dt))
            for (pid, tid), used in times.items()
            for before in (self._thread_times.get((pid, tid), 0.0),)
        ]
        self._thread_times = times
        threads.sort(key=lambda thread: thread.cpu, reverse=True)
        return HostSample(
            t=t,
            cpu=cpu,
            mem_used_bytes=int(memory.total - memory.available),
            mem_total_bytes=int(memory.total),
            proc_cpu=sum(thread.cpu for thread in threads) if alive else None,
            rss_bytes=rss if alive else None,
            threads=tuple(threads),
            num_processes=alive,
            root_pid=self.process.pid,
        )


@dataclass(frozen=True, slots=True)
class PySpyDump:
    text: str | None
    note: str


def py_spy_dump(pid: int, *, timeout_s: float = 15.0) -> PySpyDump:
    """`py-spy dump --pid PID`: the Python stacks of every thread, when py-spy is installed."""
    binary = shutil.which("py-spy")
    if binary is None:
        return PySpyDump(None, "py-spy is not installed (pip install py-spy) to name hot frames.")
    try:
        done = subprocess.run(
            [binary, "dump", "--pid", str(pid)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return PySpyDump(None, f"py-spy dump of {pid} took over {timeout_s:g} s.")
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["unknown error"])[-1]
        return PySpyDump(None, f"py-spy could not dump {pid}: {reason} (ptrace needs root).")
    return PySpyDump(done.stdout, "")
