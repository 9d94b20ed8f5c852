"""collect, level 2: the host and the server's process tree, with psutil.

Takes the server's pid (`--server-pid`) or its URL, whose port leads to the
local process listening on it; gives `HostSample`s: system CPU and memory,
and for the server's process tree its RSS and the CPU of every thread, named
(on Linux from /proc/<pid>/task/<tid>/comm). One thread near 100 % of a core
is a GIL-bound front end or engine loop, and its name says which. Optionally
`py_spy_dump` names the hot Python frames when py-spy is installed.

When the server shares this host with the load client, each sample also says
how contended the CPU was: the threads runnable on the host (`procs_running`
of /proc/stat) against its cores, how long the server's threads waited for a
CPU while runnable (/proc/<pid>/task/<tid>/schedstat), and the load client's
own CPU (this process and its children, the server's tree left out).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from infertriage.engines import host_role
from infertriage.schemas import RunClock, Sample, UserError

__all__ = [
    "HostSample",
    "HostSampler",
    "PySpyDump",
    "ServerProcess",
    "ThreadCpu",
    "find_server_process",
    "is_local_url",
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
    num_cores: int = 0  # logical CPUs of the host
    run_queue: float | None = None  # threads runnable on the host now, the sampler left out
    proc_wait: float | None = None  # server tree: runnable but waiting for a CPU, in cores
    client_cpu: float | None = None  # the load client (this process tree), in cores
    server_local: bool = False  # the server runs on this host, beside the load client

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
        out += self._contention_samples()
        if self.rss_bytes is not None:
            out.append(Sample(self.t, "proc.rss_bytes", float(self.rss_bytes)))
        if self.proc_cpu is not None:
            out.append(Sample(self.t, "proc.cpu", self.proc_cpu))
        out += self._role_samples()
        for rank, thread in enumerate(self.threads[:top_threads]):
            labels = {"thread": thread.name, "tid": str(thread.tid), "pid": str(thread.pid)}
            if self.root_pid is not None:
                labels["process"] = "server" if thread.pid == self.root_pid else "child"
            if rank == 0:
                out.append(Sample(self.t, "proc.cpu_thread_max", thread.cpu, dict(labels)))
            out.append(Sample(self.t, "proc.cpu_thread", thread.cpu, labels))
        return out

    def _role_samples(self) -> list[Sample]:
        """Every thread's CPU summed by role (API server, engine core, workers), in cores:
        the top threads alone would leave a busy API server out beside eight busy workers."""
        if self.root_pid is None or not self.threads:
            return []
        cores: dict[str, float] = dict.fromkeys(("frontend", "engine", "worker"), 0.0)
        for thread in self.threads:
            cores[host_role(thread.name, child=thread.pid != self.root_pid)] += thread.cpu
        return [Sample(self.t, "proc.cpu_role", v, {"role": r}) for r, v in cores.items()]

    def _contention_samples(self) -> list[Sample]:
        out = [Sample(self.t, "host.server_local", 1.0 if self.server_local else 0.0)]
        if self.num_cores:
            out.append(Sample(self.t, "host.cores", float(self.num_cores)))
        named = (
            ("host.run_queue", self.run_queue),
            ("proc.cpu_wait", self.proc_wait),
            ("host.client_cpu", self.client_cpu),
        )
        return out + [Sample(self.t, name, value) for name, value in named if value is not None]


def is_local_url(url: str | None) -> bool:
    """Does `url` name this host (loopback, our hostname or one of our addresses)?"""
    return url is not None and _is_local(urlsplit(url).hostname or "")


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


def _thread_wait_s(pid: int, tid: int) -> float | None:
    """Seconds the thread has spent runnable but waiting for a CPU (Linux schedstat)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        text = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text(encoding="ascii")
        return int(text.split()[1]) * 1e-9
    return None


def _runnable_threads() -> float | None:
    """Threads runnable on the host now (/proc/stat `procs_running`), this reader left out."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/stat").read_text(encoding="ascii").splitlines():
            if line.startswith("procs_running "):
                return max(0.0, float(line.split()[1]) - 1.0)
    return None


def _own_cpu_times(server_pids: set[int]) -> dict[int, float]:
    """CPU seconds of this process and its children (the load client), the server's left out."""
    me = psutil.Process()
    times: dict[int, float] = {}
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        for proc in [me, *me.children(recursive=True)]:
            if proc.pid in server_pids:
                continue
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                used = proc.cpu_times()
                times[proc.pid] = used.user + used.system
    return times


@dataclass(frozen=True, slots=True)
class _TreeTimes:
    """The server tree's cumulative per-thread CPU and run-queue wait, in seconds."""

    cpu_s: dict[tuple[int, int], float]
    wait_s: dict[tuple[int, int], float]
    rss_bytes: int = 0
    num_alive: int = 0
    pids: frozenset[int] = frozenset()


class HostSampler:
    """Samples the host and the server's tree; CPU figures are deltas since the previous sample.

    `server_local` (default: a server process was found) says the server shares
    this host with the load client, so its CPU contention is worth a caveat.
    """

    def __init__(
        self,
        clock: RunClock,
        process: ServerProcess | None = None,
        *,
        server_local: bool | None = None,
    ) -> None:
        self.clock = clock
        self.process = process
        self.server_local = process is not None if server_local is None else server_local
        self.notes: list[str] = []
        self._num_cores = psutil.cpu_count() or 0
        self._cpu_times = psutil.cpu_times()
        self._last_t = clock.now_ts()
        self._tree_before = self._tree_times()  # prime the per-thread deltas
        self._own_before = _own_cpu_times(set(self._tree_before.pids))

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

    def _tree_times(self) -> _TreeTimes:
        cpu: dict[tuple[int, int], float] = {}
        wait: dict[tuple[int, int], float] = {}
        rss, pids = 0, set()
        for proc in self._tree():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                for thread in proc.threads():
                    cpu[(proc.pid, thread.id)] = thread.user_time + thread.system_time
                    waited = _thread_wait_s(proc.pid, thread.id)
                    if waited is not None:
                        wait[(proc.pid, thread.id)] = waited
                rss += proc.memory_info().rss
                pids.add(proc.pid)
        return _TreeTimes(cpu, wait, rss, len(pids), frozenset(pids))

    def _system_cpu(self) -> float | None:
        now = psutil.cpu_times()
        before = self._cpu_times
        self._cpu_times = now
        total = sum(now) - sum(before)
        idle = (now.idle - before.idle) + (
            getattr(now, "iowait", 0.0) - getattr(before, "iowait", 0.0)
        )
        return None if total <= 0 else max(0.0, min(1.0, 1.0 - idle / total))

    def _contention(self, tree: _TreeTimes, dt: float) -> tuple[float | None, float]:
        """(the server tree's run-queue wait, the load client's CPU), both in cores."""
        before, own_before = self._tree_before, self._own_before
        own = _own_cpu_times(set(tree.pids))
        self._own_before = own
        client = sum(max(0.0, used - own_before.get(pid, 0.0)) for pid, used in own.items())
        if not tree.wait_s:
            return None, client / dt
        # A thread not seen before was born since the last sample: all its wait is new.
        waited = sum(max(0.0, w - before.wait_s.get(key, 0.0)) for key, w in tree.wait_s.items())
        return waited / dt, client / dt

    def sample(self) -> HostSample:
        t = self.clock.now_ts()
        dt = max(t - self._last_t, 1e-6)
        self._last_t = t
        memory = psutil.virtual_memory()
        tree = self._tree_times()
        proc_wait, client_cpu = self._contention(tree, dt)
        host = HostSample(
            t=t,
            cpu=self._system_cpu(),
            mem_used_bytes=int(memory.total - memory.available),
            mem_total_bytes=int(memory.total),
            num_cores=self._num_cores,
            run_queue=_runnable_threads(),
            client_cpu=client_cpu,
            server_local=self.server_local,
        )
        before, self._tree_before = self._tree_before, tree
        if self.process is None:
            return host
        # A thread not seen before was born since the last sample: all its CPU time is new.
        threads = [
            ThreadCpu(pid, tid, _thread_name(pid, tid), max(0.0, (used - earlier) / dt))
            for (pid, tid), used in tree.cpu_s.items()
            for earlier in (before.cpu_s.get((pid, tid), 0.0),)
        ]
        threads.sort(key=lambda thread: thread.cpu, reverse=True)
        alive = tree.num_alive > 0
        return dataclasses.replace(
            host,
            proc_cpu=sum(thread.cpu for thread in threads) if alive else None,
            rss_bytes=tree.rss_bytes if alive else None,
            threads=tuple(threads),
            num_processes=tree.num_alive,
            root_pid=self.process.pid,
            proc_wait=proc_wait if alive else None,
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
