"""api.capture: which profiler traces a run takes — by a listing, never by the clock."""

from __future__ import annotations

import os
from pathlib import Path

from infertriage.api.capture import keep_logs, take_profiles, trace_listing
from infertriage.schemas import RunDir


def _write(path: Path, text: str, mtime_unix: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime_unix, mtime_unix))


def test_traces_new_or_changed_since_the_listing_are_taken_whatever_their_time(
    tmp_path: Path,
) -> None:
    # The server's disk keeps its own clock: a trace it wrote during the run may carry a time
    # far before ours (1990 here) or after it; what decides is the folder before and after.
    profiles = tmp_path / "profiles"
    _write(profiles / "old.pt.trace.json.gz", "old", 2_000_000_000)
    _write(profiles / "rewritten.pt.trace.json", "first", 2_000_000_000)
    before = trace_listing(profiles)
    _write(profiles / "worker0" / "new.pt.trace.json.gz", "new", 631_152_000)  # 1990-01-01
    _write(profiles / "rewritten.pt.trace.json", "second, longer", 2_000_000_000)
    _write(profiles / "notes.txt", "not a trace", 631_152_000)
    run = RunDir.create(tmp_path / "run")

    copied = take_profiles(profiles, before, run)

    assert sorted(p.read_text() for p in copied) == ["new", "second, longer"]
    assert all(p.parent == run.raw / "traces" for p in copied)


def test_a_missing_profile_folder_lists_nothing(tmp_path: Path) -> None:
    assert trace_listing(tmp_path / "absent") == {}
    assert trace_listing(None) == {}


_STATS = (
    "INFO 12-06 17:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 900.0 tokens/s, "
    "Avg generation throughput: 120.0 tokens/s, Running: 9 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 42.0%, Prefix cache hit rate: 0.0%\n"
)


def test_a_kept_log_that_gives_no_evidence_is_noted_and_kept(tmp_path: Path) -> None:
    """After the load a log of which infertriage reads no line is a note, not an error: the
    load's measurements stand. A NUL-filled hole (logrotate's copytruncate) before lines read,
    and a log of recompilations alone, give evidence."""
    logs = {
        "holes.log": b"\x00" * 65536,
        "shell.log": b"ls -l\ncd /tmp\n",
        "rotated.log": b"\x00" * 65536 + _STATS.encode() * 2,
        "torch.log": b"V1206 x.py:1] [0/1] [__recompiles] Recompiling function forward in m.py:3\n",
    }
    for name, data in logs.items():
        (tmp_path / name).write_bytes(data)
    run = RunDir.create(tmp_path / "run")

    notes = keep_logs(run, [tmp_path / name for name in logs])

    assert notes == [
        f"--log {tmp_path / name} has no line infertriage reads: it gave the map no evidence"
        for name in ("holes.log", "shell.log")
    ]
    assert len(list((run.raw / "logs").iterdir())) == len(logs)
