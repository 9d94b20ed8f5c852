"""Host sampling against a real child process: found by its port, its hot thread named."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from infertriage.collect import HostSampler, find_server_process, py_spy_dump
from infertriage.collect.host import HostSample, ThreadCpu
from infertriage.schemas import VOCABULARY, RunClock, UserError

# A stand-in server: listens on an ephemeral port, prints it, and spins one named thread.
CHILD = r"""
import socket, threading, time, sys
def spin():
    import threading as t
    with open(f"/proc/self/task/{t.get_native_id()}/comm", "w") as f:
        f.write("busy-engine")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pass
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
threading.Thread(target=spin, daemon=True).start()
print(sock.getsockname()[1], flush=True)
sys.stdin.read()
"""


@pytest.fixture
def busy_server() -> Iterator[tuple[subprocess.Popen[str], int]]:
    if not sys.platform.startswith("linux"):
        pytest.skip("thread names come from /proc: Linux only")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield child, port
    finally:
        child.kill()
        child.wait(timeout=10)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def test_the_process_listening_on_the_url_port_is_found(busy_server) -> None:  # type: ignore[no-untyped-def]
    child, port = busy_server
    process, note = find_server_process(f"http://127.0.0.1:{port}/v1")
    assert note is None and process is not None
    assert process.pid == child.pid and process.found_by == f"listening on port {port}"


def test_the_busiest_thread_is_named(busy_server) -> None:  # type: ignore[no-untyped-def]
    child, _ = busy_server
    process, _ = find_server_process(None, pid=child.pid)
    assert process is not None
    sampler = HostSampler(RunClock(), process)
    time.sleep(0.6)
    sample = sampler.sample()
    assert sample.hottest is not None
    assert sample.hottest.name == "busy-engine"
    assert sample.hottest.cpu > 0.3  # a spinning thread: most of a core, even on a busy CI box
    assert sample.rss_bytes is not None and sample.rss_bytes > 1_000_000
    assert sample.cpu is not None and 0.0 <= sample.cpu <= 1.0
    assert sample.proc_cpu is not None and sample.proc_cpu >= sample.hottest.cpu
    samples = sample.to_samples()
    assert {s.name for s in samples} <= VOCABULARY.keys()
    top = next(s for s in samples if s.name == "proc.cpu_thread_max")
    assert top.labels["thread"] == "busy-engine" and top.labels["pid"] == str(child.pid)


def test_host_without_a_server_process() -> None:
    sampler = HostSampler(RunClock())
    sample = sampler.sample()
    assert sample.mem_total_bytes > sample.mem_used_bytes > 0
    assert sample.threads == () and sample.rss_bytes is None
    assert {s.name for s in sample.to_samples()} <= {
        "host.cpu",
        "host.mem_used_bytes",
        "host.mem_total_bytes",
        "host.cores",
        "host.run_queue",
        "host.client_cpu",
        "host.server_local",
    }
    assert not sample.server_local and sample.proc_wait is None


def test_a_remote_server_is_a_note_not_an_error() -> None:
    process, note = find_server_process("http://203.0.113.7:8000")
    assert process is None and note is not None and "--server-pid" in note


def test_nothing_listening_is_a_note(free_port: int) -> None:
    process, note = find_server_process(f"http://127.0.0.1:{free_port}")
    assert process is None and note is not None and str(free_port) in note


def test_a_bad_pid_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no process with pid"):
        find_server_process(None, pid=2**22 + 12345)


def test_py_spy_absent_is_a_note() -> None:
    if shutil.which("py-spy"):
        pytest.skip("py-spy is installed here")
    dump = py_spy_dump(1)
    assert dump.text is None and "py-spy is not installed" in dump.note


def test_py_spy_dump_names_frames(busy_server) -> None:  # type: ignore[no-untyped-def]
    if not shutil.which("py-spy"):
        pytest.skip("py-spy is not installed (pip install py-spy)")
    child, _ = busy_server
    dump = py_spy_dump(child.pid, timeout_s=20)
    if dump.text is None:
        pytest.skip(dump.note)  # ptrace not permitted in this sandbox
    assert "spin" in dump.text


HOG = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end:\n    pass\n"


def test_a_server_sharing_a_saturated_host_waits_for_a_cpu(busy_server) -> None:  # type: ignore[no-untyped-def]
    child, port = busy_server
    if not os.path.exists(f"/proc/{child.pid}/schedstat"):
        pytest.skip("the kernel keeps no schedstat")
    process, _ = find_server_process(f"http://127.0.0.1:{port}")
    assert process is not None
    sampler = HostSampler(RunClock(), process)
    assert sampler.server_local and HostSampler(RunClock()).server_local is False
    cores = psutil.cpu_count() or 1
    # the load client's side: one process per core spinning, and this one too
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(cores)]
    try:
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass
        sample = sampler.sample()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=10)
    assert sample.server_local and sample.num_cores == cores
    assert sample.run_queue is not None and sample.run_queue >= cores  # more runnable than cores
    # the server's spinning thread is always runnable: with more spinners than cores it waits
    assert sample.proc_wait is not None and sample.proc_wait > 0.1
    assert sample.client_cpu is not None and sample.client_cpu > 0.0  # ours and our hogs'
    names = {s.name for s in sample.to_samples()}
    assert {"host.run_queue", "proc.cpu_wait", "host.client_cpu", "host.server_local"} <= names


def test_every_threads_cpu_is_summed_by_role() -> None:
    # vLLM V1 at TP 8: eight spinning workers and the engine core outrank the API server,
    # which the top threads alone would leave out
    workers = [ThreadCpu(300 + k, 300 + k, f"VLLM::Worker_TP{k}", 1.0) for k in range(8)]
    threads = (
        *workers,
        ThreadCpu(200, 200, "VLLM::EngineCor", 0.99),
        ThreadCpu(100, 100, "vllm", 0.3),
        ThreadCpu(100, 101, "python", 0.05),
        ThreadCpu(300, 309, "pt_nccl_watchdg", 0.01),
    )
    sample = HostSample(0.0, 0.5, 1, 2, threads=threads, root_pid=100)
    roles = {s.labels["role"]: s.value for s in sample.to_samples() if s.name == "proc.cpu_role"}
    assert roles == pytest.approx({"frontend": 0.35, "engine": 0.99, "worker": 8.01})
    assert "proc.cpu_role" in VOCABULARY
