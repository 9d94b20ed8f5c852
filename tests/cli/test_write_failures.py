"""A write that fails is one sentence and exit 2, never a traceback (`cli.outfail`).

Standard output closed by its reader (`| head -c 0`), full (`> /dev/full`) or not
there at all (`>&-`); a full disk under the run directory, stood in for by
RLIMIT_FSIZE (a write past the limit fails with EFBIG, SIGXFSZ ignored), which leaves
the run directory with every whole record written before it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.schemas import (
    DiagnoseConfig,
    DiagnoseRunInfo,
    DiagnoseSummary,
    Phases,
    RequestRecord,
    RunDir,
    read_jsonl,
)
from infertriage.schemas.rundir import LOCK_NAME
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

CLI = [sys.executable, "-m", "infertriage"]
FAST = ServerConfig(behavior=Behavior(ttft_s=0.002, itl_s=0.001))
SMALL = ["--workload", "synthetic:input=8,output=5", "--concurrency", "2"]


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve_in_thread(FAST) as (url, _):
        yield url


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_a_reader_that_closed_standard_output(base: str, tmp_path: Path, json_out: bool) -> None:
    out = tmp_path / "run"
    args = ["bench", "--url", base, "--num-requests", "6", *SMALL, "--out", str(out)]
    read, write = os.pipe()
    os.close(read)  # `| head -c 0`: the reader is gone before anything is written
    try:
        done = subprocess.run(
            [*CLI, *args, *(["--json"] if json_out else [])],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line.startswith("infertriage: error: cannot write to standard output (Broken pipe)")
    assert len(list(read_jsonl(out / "requests.jsonl", RequestRecord))) == 6  # kept
    assert not (out / LOCK_NAME).exists()


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["--version"]])
def test_a_full_standard_output(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*CLI, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, check=False
        )
    assert done.returncode == 2
    assert "cannot write to standard output (No space left on device)" in _one_line(done.stderr)


def test_a_full_standard_output_after_the_run_keeps_the_run(base: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["bench", "--url", base, "--num-requests", "6", *SMALL, "--out", str(out)]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*CLI, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
            check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert "cannot write to standard output (No space left on device)" in _one_line(done.stderr)
    assert len(list(read_jsonl(out / "requests.jsonl", RequestRecord))) == 6


def test_no_standard_output_at_all_is_refused_before_any_load(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        f'exec {sys.executable} -m infertriage bench --url http://127.0.0.1:9 --out "{out}" >&-',
        shell=True, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "standard output is closed" in _one_line(done.stderr) and not out.exists()


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
from infertriage.cli import main
sys.argv = ["infertriage", *sys.argv[1:]]
main()
"""


def test_a_full_disk_while_writing_the_run(base: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["bench", "--url", base, "--num-requests", "400", *SMALL, "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line.startswith(f"infertriage: error: cannot write {out}") and "File too large" in line
    assert "what was written before it is kept" in line
    # every record written before the failure, whole: no cut line at the end
    kept = list(read_jsonl(out / "requests.jsonl", RequestRecord, skip_partial_tail=False))
    assert 0 < len(kept) < 400
    assert (out / "run.json").is_file()


def test_a_full_disk_while_adding_a_log_to_a_stored_run_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    """`diagnose --from-run RUN --log BIG` past the disk's room: one sentence, and no cut copy
    left in the run (a later `--from-run` of it read the cut copy and failed; review)."""
    run = RunDir.create(tmp_path / "run")
    run.write_info(
        DiagnoseRunInfo(
            wall_anchor_s=0.0,
            config=DiagnoseConfig(target="x"),
            summary=DiagnoseSummary(
                phases=Phases(load_start_ts=0.0, load_end_ts=1.0), main_level="x"
            ),
        )
    )
    run.release()
    big = tmp_path / "server.log"
    big.write_text("INFO 06-16 21:24:15 engine.py:1] a line of the server's log\n" * 1000)
    args = ["diagnose", "--from-run", str(run.root), "--log", str(big)]
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot add" in _one_line(done.stderr) and "File too large" in done.stderr
    assert not [p for p in (run.root / "raw").rglob("*") if p.is_file()]
    again = subprocess.run(
        [*CLI, "diagnose", "--from-run", str(run.root), "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
