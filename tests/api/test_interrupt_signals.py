"""SIGTERM and SIGHUP take Ctrl-C's path (`api.interrupt`): `timeout`, `docker stop`,
Kubernetes and a closed terminal stop a command as Ctrl-C does.

In-process: in a block the first signal only asks to stop and says which it was;
outside one it raises `Stopped` (a KeyboardInterrupt); a SIGHUP the process was
started ignoring (`nohup`) stays ignored. Real processes: `diagnose` against its twin
and `bench --workers 2`, sent SIGTERM (to the process, as `docker stop` does, or to
its group, as `timeout` does) or SIGHUP (to the group, as a closing terminal does),
exit 143 or 129 with one line, run.json's status `interrupted`, every finished request
kept, and no child left; a second SIGTERM exits at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from infertriage.api.interrupt import Stopped, interruptible, stop_signals
from infertriage.schemas import RequestRecord, RunDir
from infertriage.schemas.errors import EXIT_HANGUP, EXIT_TERMINATED
from infertriage.schemas.rundir import LOCK_NAME
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

from ..workloads import SHORT_OUTPUTS

CODES = {signal.SIGTERM: EXIT_TERMINATED, signal.SIGHUP: EXIT_HANGUP}


@pytest.fixture(autouse=True)
def _sighup_as_a_terminal_leaves_it() -> Iterator[None]:
    """A suite run under `nohup` starts with SIGHUP ignored, which these tests (and their
    children, which inherit it) would keep ignored by design: each test starts from the
    default a terminal's shell gives."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, before)


def _wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)  # the handler runs between bytecodes of the main thread


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_in_a_block_the_first_signal_only_asks_to_stop_and_says_which(signum: int) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with interruptible() as interrupt:
        os.kill(os.getpid(), signum)
        _wait_for(lambda: interrupt.requested)
        assert interrupt.requested and interrupt.signum == signum
        assert interrupt.exit_code == CODES[signum]
    assert {s: signal.getsignal(s) for s in before} == before


def test_outside_a_block_a_signal_raises_stopped_as_ctrl_c_raises_keyboard_interrupt() -> None:
    with stop_signals() as stop:
        with pytest.raises(Stopped) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        assert isinstance(caught.value, KeyboardInterrupt) and caught.value.signum == 15
        with interruptible() as interrupt:  # a block inside shares the one Interrupt
            assert interrupt is stop
        assert stop.exit_code == EXIT_TERMINATED and not stop.requested


def test_a_sighup_the_process_ignores_stays_ignored() -> None:
    """`nohup infertriage …` keeps running when its terminal closes."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interruptible() as interrupt:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == interrupt.handle
    finally:
        signal.signal(signal.SIGHUP, before)


TWICE = """
import subprocess, sys, time
from infertriage.api.interrupt import interruptible
with interruptible():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             process_group=0)
    print(child.pid, flush=True)
    time.sleep(60)
"""


def _gone(proc: psutil.Process, timeout: float = 10.0) -> bool:
    try:
        proc.wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return proc.status() == psutil.STATUS_ZOMBIE
    return True


def test_a_second_sigterm_kills_the_children_and_exits_at_once() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TWICE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    child = psutil.Process(int(proc.stdout.readline()))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert proc.poll() is None  # the first only asked
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == EXIT_TERMINATED
    assert stderr.strip() == "infertriage: interrupted again; stopped at once."
    assert _gone(child)


# --- real commands -------------------------------------------------------------------------


def _start(args: list[str]) -> subprocess.Popen[str]:
    """The CLI in a process group of its own, as a shell starts a foreground job."""
    return subprocess.Popen(
        [sys.executable, "-m", "infertriage", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, process_group=0,
    )  # fmt: skip


def _wait_for_records(path: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} first: {proc.communicate()[1]}")
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} records")


def _send(proc: subprocess.Popen[str], signum: int, to: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        if to == "group":
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("infertriage:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def killed_at_the_end() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "to"),
    [(signal.SIGTERM, "process"), (signal.SIGHUP, "group")],
    ids=["sigterm-docker-stop", "sighup-terminal-closed"],
)
def test_a_stop_signal_in_diagnose_keeps_the_run_and_stops_the_twin(
    tmp_path: Path, killed_at_the_end: list[subprocess.Popen[str]], signum: int, to: str
) -> None:
    out = tmp_path / "run"
    proc = _start(["diagnose", "--duration", "20", "--workload", SHORT_OUTPUTS, "--out", str(out)])
    killed_at_the_end.append(proc)
    _wait_for_records(out / "requests.jsonl", 3, proc)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert any("twin" in " ".join(child.cmdline()) for child in children)
    _send(proc, signum, to)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == CODES[signum], stderr
    name = signal.Signals(signum).name
    assert _one_line(stderr).startswith(f"infertriage: interrupted by {name}; the map judges")
    run = RunDir.open(out)
    assert run.read_info().summary.status == "interrupted"
    assert len(list(run.iter_records(run.requests, RequestRecord))) >= 3
    assert run.diagnosis.is_file() and "Bottleneck map" in stdout
    assert all(_gone(child) for child in children)  # the twin no longer listens
    assert not (out / LOCK_NAME).exists()  # the claim was let go


@pytest.mark.parametrize(("signum", "to"), [(signal.SIGTERM, "group"), (signal.SIGHUP, "group")])
def test_a_stop_signal_to_bench_with_workers_keeps_every_finished_request(
    tmp_path: Path, killed_at_the_end: list[subprocess.Popen[str]], signum: int, to: str
) -> None:
    """`timeout` sends SIGTERM to the whole group: the workers too, which leave the stop
    to the parent, as for Ctrl-C."""
    slow = Behavior(ttft_s=0.01, itl_s=0.002)  # 400 tokens: about 0.8 s per request
    out = tmp_path / "run"
    with serve_in_thread(ServerConfig(behavior=slow)) as (base, srv):
        proc = _start(["bench", "--url", base, "--concurrency", "4", "--duration", "30s",
                       "--workload", "synthetic:input=8,output=400", "--out", str(out),
                       "--workers", "2"])  # fmt: skip
        killed_at_the_end.append(proc)
        _wait_for_records(out / "requests.jsonl", 4, proc)
        children = psutil.Process(proc.pid).children(recursive=True)
        _send(proc, signum, to)
        _, stderr = proc.communicate(timeout=60)
        sent = srv.num_requests
    assert proc.returncode == CODES[signum], stderr
    name = signal.Signals(signum).name
    assert _one_line(stderr).startswith(f"infertriage: interrupted by {name}; the records")
    run = RunDir.open(out)
    assert len(list(run.iter_records(run.requests, RequestRecord))) == sent
    assert run.read_info().summary.status == "interrupted"
    assert all(_gone(child) for child in children)


def test_a_second_sigterm_in_bench_exits_at_once(
    tmp_path: Path, killed_at_the_end: list[subprocess.Popen[str]]
) -> None:
    slow = Behavior(ttft_s=0.01, itl_s=0.002)
    out = tmp_path / "run"
    with serve_in_thread(ServerConfig(behavior=slow)) as (base, _):
        proc = _start(["bench", "--url", base, "--concurrency", "4", "--duration", "30s",
                       "--workload", "synthetic:input=8,output=400", "--out", str(out),
                       "--workers", "2"])  # fmt: skip
        killed_at_the_end.append(proc)
        _wait_for_records(out / "requests.jsonl", 2, proc)
        children = psutil.Process(proc.pid).children(recursive=True)
        _send(proc, signal.SIGTERM, "process")
        time.sleep(0.05)
        _send(proc, signal.SIGTERM, "process")
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_TERMINATED, stderr
    assert "Traceback" not in stderr
    assert all(_gone(child) for child in children)
