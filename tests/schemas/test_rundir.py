"""Run-directory IO: append-only JSONL survives a kill; malformed lines name file and line."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infertriage.schemas import (
    BenchRunInfo,
    Chunk,
    ErrorKind,
    JsonlWriter,
    RequestRecord,
    RunDir,
    Sample,
    TokenSource,
    UserError,
    check_out,
    read_jsonl,
)
from infertriage.schemas.rundir import LOCK_NAME, read_json

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
    run.write_info(BenchRunInfo(wall_anchor_s=123.0, config={"rate": 4}))
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
    old.write_info(BenchRunInfo(wall_anchor_s=1.0))
    old.requests.write_text("{}\n")
    (old.raw / "arm-A").mkdir()
    old.release()  # the run that wrote it has ended
    run = RunDir.create(old.root, force=True)
    assert run.root == old.root and run.raw.is_dir()
    assert sorted(p.name for p in run.root.rglob("*")) == [LOCK_NAME, "raw"]  # its claim
    run.release()
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


HOLDER = """
import sys, time
from pathlib import Path
from infertriage.schemas import RunDir
run = RunDir.create(Path(sys.argv[1]))
print("claimed", flush=True)
time.sleep(60)
"""


def test_a_directory_another_run_is_writing_is_refused_force_or_not(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-c", HOLDER, str(out)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
        for force in (False, True):
            with pytest.raises(UserError, match=rf"in use by another run \(pid {holder.pid}\)"):
                RunDir.create(out, force=force)
            with pytest.raises(UserError, match="in use by another run") as caught:
                check_out(out, force=force)
            assert "\n" not in str(caught.value)
        holder.kill()  # its lock file stays behind, held by no one
    assert (out / LOCK_NAME).read_text() == f"{holder.pid}\n"
    run = RunDir.create(out)  # taken over
    assert (out / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    run.release()
    assert not (out / LOCK_NAME).exists()


def test_of_runs_claiming_one_directory_together_exactly_one_gets_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    made: list[RunDir] = []
    refused: list[str] = []
    barrier = threading.Barrier(8)

    def one() -> None:
        barrier.wait()
        try:
            made.append(RunDir.create(out))
        except UserError as err:
            refused.append(str(err))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len(refused) == 7
    assert all("in use by another run" in sentence for sentence in refused)


def test_a_run_dir_dropped_lets_go_of_its_claim(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "r")
    lock = run.root / LOCK_NAME
    assert lock.is_file()
    del run
    assert not lock.exists()
    RunDir.create(tmp_path / "r").release()


def test_a_claim_only_garbage_holds_is_collected_for_the_next_run(tmp_path: Path) -> None:
    """A failed command's traceback can keep its RunDir in a reference cycle: the next run
    of this process in that directory collects it instead of refusing."""
    cycle: list[object] = [RunDir.create(tmp_path / "r")]
    cycle.append(cycle)
    gc.disable()  # so that only the claim collects it
    try:
        del cycle
        RunDir.create(tmp_path / "r").release()
    finally:
        gc.enable()


FULL_DISK = """
import errno, resource, signal, sys
from pathlib import Path
from infertriage.schemas import JsonlWriter, Sample, write_json
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
folder = Path(sys.argv[1])
writer = JsonlWriter(folder / "metrics.jsonl")
num = 0
try:
    while True:
        writer.write(Sample(t=float(num), name="queue.waiting", value=float(num)))
        num += 1
except OSError as err:
    print(num, err.errno == errno.EFBIG, err.filename)
try:
    writer.write(Sample(t=0.0, name="queue.waiting", value=0.0))
except OSError as err:
    print("again", err.errno == errno.EFBIG)
write_json(folder / "run.json", {"status": "running"})
try:
    write_json(folder / "run.json", {"status": "complete", "notes": "x" * 2000})
except OSError as err:
    print("json", err.errno == errno.EFBIG, err.filename)
"""


def test_a_full_disk_keeps_every_whole_record_and_names_the_file(tmp_path: Path) -> None:
    """RLIMIT_FSIZE stands in for a full disk: the write that does not fit fails."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    first, again, json_line = done.stdout.splitlines()
    num, efbig, filename = first.split()
    path = tmp_path / "metrics.jsonl"
    assert efbig == "True" and filename == str(path) and again == "again True"
    assert path.read_bytes().endswith(b"\n")  # the record that did not fit was cut back
    kept = list(read_jsonl(path, Sample, skip_partial_tail=False))
    assert [s.value for s in kept] == [float(i) for i in range(int(num))] and kept
    assert json_line == f"json True {tmp_path / 'run.json'}"
    assert (tmp_path / "run.json").read_text() == '{"status":"running"}\n'  # the old one, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "run.json"]


def test_a_fifo_or_device_where_a_run_file_should_be_is_refused_unopened(tmp_path: Path) -> None:
    fifo, zero = tmp_path / "requests.jsonl", tmp_path / "run.json"
    os.mkfifo(fifo)  # before: open() waited for a writer forever
    zero.symlink_to("/dev/zero")  # before: read until the memory ran out
    with pytest.raises(UserError, match=r"requests\.jsonl: it is not a regular file"):
        list(read_jsonl(fifo, RequestRecord))
    with pytest.raises(UserError, match=r"run\.json: it is not a regular file"):
        read_json(zero)
    with pytest.raises(UserError, match="No such file"):
        read_json(tmp_path / "missing.json")
