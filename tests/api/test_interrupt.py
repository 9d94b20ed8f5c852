"""Ctrl-C, one path for every command (`api.interrupt`).

In-process: the first SIGINT only asks to stop, blocks nest, the handler is
restored. Real processes: `diagnose` against its twin and `bench`, sent
SIGINT to the process group (what a terminal sends) or to the process alone,
stop within a bound with exit 130, one line, run.json's status `interrupted`,
the records kept, a diagnosis written and no twin left alive; a second
SIGINT exits at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from infertriage.api.interrupt import Interrupt, interruptible
from infertriage.cli import main
from infertriage.schemas import RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

from ..workloads import SHORT_OUTPUTS

STOP_BOUND_S = 20.0  # first Ctrl-C to exit: cancel, write, diagnose, stop the twin (2 s idle)
AT_ONCE_S = 3.0  # second Ctrl-C to exit


def _wait_requested(interrupt: Interrupt) -> None:
    deadline = time.monotonic() + 5
    while not interrupt.requested and time.monotonic() < deadline:
        time.sleep(0.01)  # the handler runs between bytecodes of the main thread


def test_first_ctrl_c_only_asks_to_stop_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    with interruptible() as interrupt:
        assert not interrupt.requested
        os.kill(os.getpid(), signal.SIGINT)
        _wait_requested(interrupt)
        assert interrupt.requested and interrupt.wait(10)  # a wait returns at once
    assert signal.getsignal(signal.SIGINT) is before
    assert interrupt.requested  # the command reads it after the block


def test_blocks_nest_and_share_one_state() -> None:
    with interruptible() as outer:
        with interruptible() as inner:
            assert inner is outer
            os.kill(os.getpid(), signal.SIGINT)
            _wait_requested(inner)
        assert outer.requested


def test_off_the_main_thread_nothing_is_installed() -> None:
    seen: list[Interrupt] = []
    before = signal.getsignal(signal.SIGINT)

    def body() -> None:
        with interruptible() as interrupt:
            seen.append(interrupt)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen and not seen[0].requested and signal.getsignal(signal.SIGINT) is before


TWICE = """
import subprocess, sys, time
from infertriage.api.interrupt import interruptible
with interruptible():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             process_group=0)
    print(child.pid, flush=True)
    time.sleep(60)
"""


def test_a_second_ctrl_c_kills_the_children_and_exits_at_once() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TWICE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    child = psutil.Process(int(proc.stdout.readline()))
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    assert proc.poll() is None  # the first only asked
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 130 and time.monotonic() - started < AT_ONCE_S
    assert stderr.strip() == "infertriage: interrupted again; stopped at once."
    assert _gone(child)


def _gone(proc: psutil.Process, timeout: float = 5.0) -> bool:
    try:
        proc.wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return proc.status() == psutil.STATUS_ZOMBIE
    return True


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


def _interrupt(proc: subprocess.Popen[str], to: str) -> None:
    with contextlib.suppress(ProcessLookupError):  # a second one after it stopped
        if to == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("infertriage:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def twin_diagnose(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, psutil.Process]]:
    """`diagnose --duration 20` against its twin, once its first requests have finished
    (outputs of at most 128 tokens: the first three within seconds)."""
    out = tmp_path / "run"
    short = ["--workload", SHORT_OUTPUTS]
    proc = _start(["diagnose", "--duration", "20", *short, "--out", str(out)])
    try:
        _wait_for_records(out / "requests.jsonl", 3, proc)
        twins = psutil.Process(proc.pid).children()
        assert len(twins) == 1 and "twin" in " ".join(twins[0].cmdline())
        yield proc, out, twins[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


@pytest.mark.slow
@pytest.mark.parametrize("to", ["group", "process"])
def test_ctrl_c_in_diagnose_keeps_the_run_diagnoses_it_and_stops_the_twin_last(
    twin_diagnose: tuple[subprocess.Popen[str], Path, psutil.Process], to: str
) -> None:
    proc, out, twin = twin_diagnose
    _interrupt(proc, to)
    started = time.monotonic()
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert time.monotonic() - started < STOP_BOUND_S
    assert _one_line(stderr).startswith("infertriage: interrupted; the map judges only")
    run = RunDir.open(out)
    info = run.read_info()
    assert info.command == "diagnose" and info.summary.status == "interrupted"
    assert info.summary.phases is not None and info.summary.main_level in info.config.levels
    records = list(run.iter_records(run.requests, RequestRecord))
    assert len(records) >= 3 and run.diagnosis.is_file()
    assert "Bottleneck map" in stdout
    assert _gone(twin)
    # the interrupted run is re-diagnosed from its directory
    assert main(["diagnose", "--from-run", str(out), "--json"]) == 0


@pytest.mark.slow
def test_a_second_ctrl_c_in_diagnose_exits_at_once_and_leaves_no_twin(
    twin_diagnose: tuple[subprocess.Popen[str], Path, psutil.Process],
) -> None:
    proc, _, twin = twin_diagnose
    _interrupt(proc, "group")
    time.sleep(0.1)
    _interrupt(proc, "group")
    started = time.monotonic()
    _, stderr = proc.communicate(timeout=30)
    # 130 from the handler; or, when the first Ctrl-C's run had already written everything
    # and Python was finalising (it restores SIGINT's default then), death by the signal —
    # "at once" either way (seen 2 times in 8 on a busy host).
    assert proc.returncode in (130, -signal.SIGINT), stderr
    assert time.monotonic() - started < AT_ONCE_S, stderr
    assert "Traceback" not in stderr
    assert _gone(twin)


@pytest.mark.slow
def test_ctrl_c_before_any_request_finished_says_why_there_is_no_map(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(["diagnose", "--duration", "20", "--out", str(out)])
    try:
        deadline = time.monotonic() + 60
        while not psutil.Process(proc.pid).children() and time.monotonic() < deadline:
            time.sleep(0.02)
        twin = psutil.Process(proc.pid).children()[0]  # starting: no request has finished
        _interrupt(proc, "group")
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "nothing to diagnose" in _one_line(stderr)
    assert not (out / "diagnosis.json").exists()
    assert _gone(twin)
    assert RunDir.open(out).read_info().summary.status == "interrupted"
    assert main(["diagnose", "--from-run", str(out)]) == 2  # one sentence: no request


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_to_the_group_in_bench_stops_the_load_and_keeps_the_records(
    tmp_path: Path, workers: str
) -> None:
    """A terminal's Ctrl-C reaches the workers too; only the parent decides (process alone:
    tests/cli/test_bench_cli.py)."""
    slow = Behavior(ttft_s=0.01, itl_s=0.002)  # 400 tokens: about 0.8 s per request
    out = tmp_path / "run"
    with serve_in_thread(ServerConfig(behavior=slow)) as (base, srv):
        proc = _start(["bench", "--url", base, "--concurrency", "4", "--duration", "30s",
                       "--workload", "synthetic:input=8,output=400", "--out", str(out),
                       "--workers", workers])  # fmt: skip
        try:
            _wait_for_records(out / "requests.jsonl", 4, proc)
            _interrupt(proc, "group")
            started = time.monotonic()
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        sent = srv.num_requests
    assert proc.returncode == 130 and time.monotonic() - started < STOP_BOUND_S, stderr
    assert _one_line(stderr).startswith("infertriage: interrupted; the records")
    run = RunDir.open(out)
    assert len(list(run.iter_records(run.requests, RequestRecord))) == sent
    assert run.read_info().summary.status == "interrupted"


def test_a_second_ctrl_c_in_bench_exits_at_once(tmp_path: Path) -> None:
    slow = Behavior(ttft_s=0.01, itl_s=0.002)
    out = tmp_path / "run"
    with serve_in_thread(ServerConfig(behavior=slow)) as (base, _):
        proc = _start(["bench", "--url", base, "--concurrency", "4", "--duration", "30s",
                       "--workload", "synthetic:input=8,output=400", "--out", str(out),
                       "--workers", "2"])  # fmt: skip
        try:
            _wait_for_records(out / "requests.jsonl", 2, proc)
            workers = psutil.Process(proc.pid).children(recursive=True)
            _interrupt(proc, "group")
            time.sleep(0.05)
            _interrupt(proc, "group")
            started = time.monotonic()
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and time.monotonic() - started < AT_ONCE_S, stderr
    assert "Traceback" not in stderr
    assert all(_gone(worker) for worker in workers)


@pytest.mark.slow
def test_ctrl_c_in_validate_judges_what_ran_and_stops_the_twin_last(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(["validate", "--duration", "30s", "--skip-functional", "--out", str(out)])
    try:
        _wait_for_records(out / "requests.jsonl", 3, proc)
        twin = psutil.Process(proc.pid).children()[0]
        _interrupt(proc, "group")
        started = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and time.monotonic() - started < STOP_BOUND_S, stderr
    assert _one_line(stderr).startswith("infertriage: interrupted; the checklist judges only")
    run = RunDir.open(out)
    assert run.read_info().summary.status == "interrupted"
    assert (out / "validate.json").is_file() and "Go-live checklist" in stdout
    assert _gone(twin)


def test_ctrl_c_in_an_ab_comparison_compares_what_finished(tmp_path: Path) -> None:
    out = tmp_path / "run"
    slow = ServerConfig(behavior=Behavior(ttft_s=0.01, itl_s=0.002))
    with serve_in_thread(slow) as (a, _), serve_in_thread(slow) as (b, _):
        args = ["--duration", "8s", "--blocks", "4", "--workload", "synthetic:input=8,output=100"]
        proc = _start(["compare", "--url", a, "--url", b, *args, "--out", str(out)])
        requests = out / "requests.jsonl"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                requests.exists() and '"B"' in requests.read_text()
            ):
                time.sleep(0.05)
            _interrupt(proc, "group")
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert _one_line(stderr).startswith("infertriage: interrupted; the comparison judges only")
    assert RunDir.open(out).read_info().summary.status == "interrupted"
    assert (out / "compare.json").is_file()
