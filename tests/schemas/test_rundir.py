"""Run-directory IO: append-only JSONL survives a kill; malformed lines name file and line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infertriage.schemas import (
    Chunk,
    ErrorKind,
    JsonlWriter,
    RequestRecord,
    RunDir,
    RunInfo,
    Sample,
    TokenSource,
    UserError,
    read_jsonl,
)

WRITER = """
import sys, time
from pathlib import Path
from infertriage.schemas import JsonlWriter, Sample
writer = JsonlWriter(Path(sys.argv[1]))
i = 0
while True:
    writer.write(Sample(t=float(i), name="queue.waiting", value=float(i)))
    i += 1
    if i == 50:
        print("ready", flush=True)
    time.sleep(0.001)
"""


def test_killed_writer_keeps_every_finished_record(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    command = [sys.executable, "-c", WRITER, str(path)]
    with subprocess.Popen(command, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    samples = list(read_jsonl(path, Sample))
    assert len(samples) >= 50
    assert [s.value for s in samples] == [float(i) for i in range(len(samples))]


def test_request_record_round_trips(tmp_path: Path) -> None:
    record = RequestRecord(
        id="r1",
        scheduled_ts=0.0,
        sent_ts=0.001,
        first_token_ts=0.05,
        last_token_ts=0.2,
        end_ts=0.21,
        chunks=(Chunk(0.05, 1), Chunk(0.1, 2, reasoning=True)),
        prompt_tokens=10,
        output_tokens=3,
        prompt_tokens_source=TokenSource.USAGE,
        http_status=200,
        labels={"step": "c4"},
    )
    path = tmp_path / "requests.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(record)
    (back,) = read_jsonl(path, RequestRecord)
    assert back == record
    assert back.ttft_s == pytest.approx(0.049)
    assert back.error_kind is ErrorKind.NONE and back.ok


def test_malformed_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"t": 0, "name": "kv.usage", "value": 0.5}\n{"t": 1, "name"\n{"t": 2}\n')
    with pytest.raises(UserError, match=r"metrics\.jsonl:2: malformed JSON"):
        list(read_jsonl(path, Sample))


def test_invalid_record_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    good = '{"t": 0, "name": "kv.usage", "value": 0.5}'
    path.write_text(good + '\n{"t": "x", "name": "a", "value": 1}\n')
    with pytest.raises(UserError, match=r"metrics\.jsonl:2: invalid record \(t:"):
        list(read_jsonl(path, Sample))


def test_partial_last_line_is_dropped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"t": 0, "name": "kv.usage", "value": 0.5}\n{"t": 1, "na')
    assert len(list(read_jsonl(path, Sample))) == 1
    with pytest.raises(UserError, match=":2:"):
        list(read_jsonl(path, Sample, skip_partial_tail=False))


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        list(read_jsonl(tmp_path / "nope.jsonl", Sample))


def test_run_dir_layout_and_info(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "r")
    assert run.raw.is_dir()
    run.write_info(RunInfo(command="bench", wall_anchor_s=123.0, config={"rate": 4}))
    info = RunDir.open(run.root).read_info()
    assert info.command == "bench" and info.wall_anchor_s == 123.0
    assert info.schema_id == "infertriage.run/v1"
    assert list(run.iter_records(run.metrics, Sample)) == []


def test_open_rejects_a_plain_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a run directory"):
        RunDir.open(tmp_path)


def test_create_names_a_fresh_directory(tmp_path: Path) -> None:
    first = RunDir.create(None, base=tmp_path)
    second = RunDir.create(None, base=tmp_path)
    assert first.root != second.root and first.root.parent == tmp_path


def test_create_refuses_a_directory_that_holds_a_run(tmp_path: Path) -> None:
    """Two runs never share one requests.jsonl: an existing run is refused in one sentence."""
    for name in ("run.json", "requests.jsonl"):
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        (folder / name).write_text("{}\n")
        with pytest.raises(UserError, match=r"already holds a run.*--force") as caught:
            RunDir.create(folder)
        assert "\n" not in str(caught.value)
        assert (folder / name).read_text() == "{}\n"  # untouched


def test_create_with_force_empties_the_old_run(tmp_path: Path) -> None:
    old = RunDir.create(tmp_path / "r")
    old.write_info(RunInfo(command="bench", wall_anchor_s=1.0))
    old.requests.write_text("{}\n")
    (old.raw / "arm-A").mkdir()
    run = RunDir.create(old.root, force=True)
    assert run.root == old.root and run.raw.is_dir()
    assert sorted(p.name for p in run.root.rglob("*")) == ["raw"]


def test_create_accepts_an_existing_folder_without_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    run = RunDir.create(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine" and run.raw.is_dir()


def test_runs_started_together_get_folders_of_their_own(tmp_path: Path) -> None:
    # two bench runs from two threads in the same second (the monitoring test's twins) once
    # raced to one name: the second found the first's run in it and stopped
    made: list[Path] = []
    barrier = threading.Barrier(8)

    def one() -> None:
        barrier.wait()
        made.append(RunDir.create(None, prefix="bench", base=tmp_path).root)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == 8
