"""`--out` on a directory that holds a run: refused in one sentence, or replaced with `--force`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas import RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

DEAD = "http://127.0.0.1:9"  # refused before any connection is tried
SMALL = ["--workload", "synthetic:input=8,output=5"]
COMMANDS = {
    "bench": ["bench", "--url", DEAD, "--num-requests", "3"],
    "diagnose": ["diagnose", "--url", DEAD, "--duration", "3"],
    "validate": ["validate", "--url", DEAD, "--duration", "3s"],
    "compare": ["compare", "--url", DEAD, "--url", DEAD, "--num-requests", "4"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("marker", ["run.json", "requests.jsonl"])
def test_an_existing_run_is_refused_before_any_load(
    command: str, marker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / marker).write_text('{"old": true}\n')
    assert main([*COMMANDS[command], "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "already holds a run" in lines[0] and "--force" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == [marker]
    assert (out / marker).read_text() == '{"old": true}\n'


def test_force_replaces_the_old_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    fast = ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))
    with serve_in_thread(fast) as (base, _):
        args = ["bench", "--url", base, *SMALL, "--out", str(out), "--json"]
        assert main([*args, "--num-requests", "5"]) == 0
        (out / "mine.txt").write_text("left from before")
        assert main([*args, "--num-requests", "3"]) == 2
        assert main([*args, "--num-requests", "3", "--force"]) == 0
    run = RunDir.open(out)
    assert len(list(run.iter_records(run.requests, RequestRecord))) == 3
    assert run.read_info().config["num_requests"] == 3
    assert not (out / "mine.txt").exists()


def _bench_process(base: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "infertriage", "bench", "--url", base, "--duration", "3s",
         "--concurrency", "2", *SMALL, "--out", str(out), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_of_two_runs_started_together_with_one_out_exactly_one_writes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    fast = ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))
    with serve_in_thread(fast) as (base, _):
        runs = [_bench_process(base, out) for _ in range(2)]
        errors = [run.communicate(timeout=120)[1] for run in runs]
    codes = sorted(run.returncode for run in runs)
    assert codes == [0, 2], errors
    refused = _one_line(errors[[run.returncode for run in runs].index(2)])
    # it lost the claim (the other held it), or came after the other had written run.json
    assert "is in use by another run" in refused or "already holds a run" in refused
    run = RunDir.open(out)
    records = list(run.iter_records(run.requests, RequestRecord))
    assert records and len({record.id.rsplit("-", 2)[0] for record in records}) == 1


def test_force_never_replaces_a_run_still_being_written(tmp_path: Path) -> None:
    out = tmp_path / "run"
    fast = ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))
    with serve_in_thread(fast) as (base, _):
        first = _bench_process(base, out)
        deadline = time.monotonic() + 60
        while not (out / "requests.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        second = _bench_process(base, out, "--force")
        _, refused = second.communicate(timeout=60)
        _, kept = first.communicate(timeout=60)
    assert second.returncode == 2 and first.returncode == 0, kept
    line = _one_line(refused)
    assert f"is in use by another run (pid {first.pid})" in line and "--out" in line
    assert RunDir.open(out).read_info().summary.status == "complete"
