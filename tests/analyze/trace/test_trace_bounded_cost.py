"""Reading a trace costs time linear in its size and bounded memory, whatever its shape; a
trace the tool cannot read is one sentence.

The shapes: hundreds of megabytes of blanks between or inside events (the splitter once
rescanned the whole backlog at every chunk: minutes), a gzip bomb, a 200 MB event, leading
blanks, a FIFO; and GPU kernels with no runtime call (PyTorch JSON and nsys SQLite), which
once raised an IndexError in the idle split.
"""

from __future__ import annotations

import io
import os
import sqlite3
from pathlib import Path

import orjson
import pytest
from tests.bounded import MIB, run_capped, write_gzip

from infertriage.analyze.trace import analyze_tables, jsonsplit, load_traces
from infertriage.analyze.trace.jsonsplit import NotATrace, iter_event_batches
from infertriage.api.trace import analyze_trace
from infertriage.schemas import UserError
from infertriage.schemas.inputs import GZIP_RATIO_FROM_BYTES

KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 5,
          "args": {"device": 0, "stream": 7, "correlation": 1}}  # fmt: skip
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 3,
          "args": {"correlation": 1}}  # fmt: skip


def _events(data: bytes, chunk: int) -> list[object]:
    old = jsonsplit.CHUNK_BYTES
    jsonsplit.CHUNK_BYTES = chunk
    try:
        return [e for batch in iter_event_batches(io.BytesIO(data), {}) for e in batch]
    finally:
        jsonsplit.CHUNK_BYTES = old


def _one_sentence(err: pytest.ExceptionInfo[UserError], *needles: str) -> None:
    message = str(err.value)
    assert message.endswith(".") and "\n" not in message and len(message) < 400, message
    for needle in needles:
        assert needle in message, message


@pytest.mark.parametrize("where", ["inside an event", "between events"])
def test_twenty_megabytes_of_blanks_read_in_one_pass(where: str) -> None:
    # 4 KiB chunks: 5,000 of them. Rescanning the backlog at each (the old splitter) reads
    # 50 GB here, minutes; one pass reads 20 MB.
    blanks = b" \n\t" * (7 * MIB)
    if where == "inside an event":
        doc = b'{"traceEvents": [{"ph": "X",' + blanks + b'"ts": 1}, {"ts": 2}]}'
    else:
        doc = b'{"traceEvents": [{"ph": "X", "ts": 1}' + blanks + b', {"ts": 2}]}'
    assert _events(doc, 4096) == [{"ph": "X", "ts": 1}, {"ts": 2}]


def test_blanks_inside_strings_are_kept_and_escapes_cross_chunks() -> None:
    name = 'a "quoted" \\ name  with  blanks, and }, { and ] ' + "\\" * 3
    events = [{"name": name, "args": {"s": " " * 5000}}, {"name": "x"}] * 3
    blanks = b" \n" * 3000  # outside strings only: orjson writes `},{` and `":` nowhere else
    compact = orjson.dumps({"traceEvents": events})
    padded = compact.replace(b"},{", b"}," + blanks + b"{").replace(b'"args":', b'"args":' + blanks)
    for chunk in (3, 7, 64, 4096):
        assert _events(padded, chunk) == events


def test_an_event_longer_than_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonsplit, "MAX_EVENT_BYTES", 64 * 1024)
    doc = b'{"traceEvents": [{"name": "' + b"a" * (256 * 1024) + b'"}]}'
    with pytest.raises(NotATrace, match="longer than"):
        _events(doc, 4096)


def test_a_padded_gzip_trace_loads_in_bounded_memory(tmp_path: Path) -> None:
    # 200 MB of blanks inside one event: the old splitter held the whole backlog (and a
    # copy per chunk) and needed minutes; now it is read at a few MB of memory.
    head, tail = orjson.dumps(LAUNCH) + b",", b'"ph": "X"}]}'
    path = write_gzip(
        tmp_path / "padded.json.gz",
        b'{"traceEvents": [' + head + orjson.dumps(KERNEL)[:-1] + b",",
        b" " * MIB,
        200,
        b" " + tail,
    )
    out = run_capped(
        "from pathlib import Path\n"
        "from infertriage.analyze.trace import load_traces\n"
        f"print(len(load_traces([Path({str(path)!r})])[0].gpu))\n"
    )
    assert out.split() == ["1"]


def test_a_gzip_bomb_is_refused_in_one_sentence(tmp_path: Path) -> None:
    count = GZIP_RATIO_FROM_BYTES // MIB + 64
    path = write_gzip(tmp_path / "bomb.json.gz", b'{"traceEvents": [', b" " * MIB, count)
    assert os.path.getsize(path) * 100 < GZIP_RATIO_FROM_BYTES  # a bomb by the ratio
    with pytest.raises(UserError) as err:
        load_traces([path])
    _one_sentence(err, str(path), "gzip bomb")


def test_a_truncated_gzip_trace_is_one_sentence(tmp_path: Path) -> None:
    path = write_gzip(tmp_path / "t.json.gz", b'{"traceEvents": [', orjson.dumps(KERNEL), 1)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(UserError) as err:
        load_traces([path])
    _one_sentence(err, str(path), "truncated or corrupt gzip")


def test_leading_blanks_and_a_fifo(tmp_path: Path) -> None:
    padded = tmp_path / "padded.json"
    padded.write_bytes(b" \n" * 100_000 + orjson.dumps({"traceEvents": [KERNEL]}))
    assert len(load_traces([padded])[0].gpu) == 1
    blank = tmp_path / "blank.json"
    blank.write_bytes(b" " * 100_000)
    with pytest.raises(UserError) as err:
        load_traces([blank])
    _one_sentence(err, "nothing but blanks")
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError) as err:  # opening it would wait for a writer forever
        load_traces([fifo])
    _one_sentence(err, "not a regular file")


@pytest.mark.parametrize("ts", [b"1e300", b"-1e300", b"9223372036854775807"])
def test_timestamps_out_of_range_are_one_sentence(tmp_path: Path, ts: bytes) -> None:
    path = tmp_path / "far.json"
    path.write_bytes(orjson.dumps({"traceEvents": [KERNEL]}).replace(b'"ts":10', b'"ts":' + ts))
    with pytest.raises(UserError) as err:
        load_traces([path])
    _one_sentence(err, "out of range")


def test_gpu_kernels_without_runtime_calls_pytorch(tmp_path: Path) -> None:
    kernels = [dict(KERNEL, ts=10 * i, args={"device": 0, "stream": 7, "correlation": i})
               for i in range(20)]  # fmt: skip
    path = tmp_path / "gpu_only.json"
    path.write_bytes(orjson.dumps({"traceEvents": kernels}))
    report = analyze_trace([path])
    assert report.value("trace.kernels") == 20
    assert report.value("trace.gpu_busy_fraction") == pytest.approx(100 / 195)
    # no runtime call: whether the GPU waited on the host is unknown, not zero
    assert report.signal("trace.idle.host_wait_s") is None
    assert report.signal("trace.host_wait_fraction") is None


def _nsys_kernels_only(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
                streamId INT, correlationId INT, globalPid INT, demangledName INT);
            INSERT INTO StringIds VALUES (1, 'sm90_xmma_gemm');
            """
        )
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, ?, 1)",
            [(1000 * i, 1000 * i + 400, i, 77 << 24) for i in range(1, 9)],
        )
    db.close()
    return path


def test_gpu_kernels_without_runtime_calls_nsys(tmp_path: Path) -> None:
    tables = load_traces([_nsys_kernels_only(tmp_path / "k.sqlite")])
    report = analyze_tables(tables)
    assert report.value("trace.kernels") == 8
    assert report.signal("trace.idle.host_wait_s") is None


def test_nsys_values_that_are_not_integers_are_one_sentence(tmp_path: Path) -> None:
    path = _nsys_kernels_only(tmp_path / "bad.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1e300, 'x', 0, 7, 1, 1, 1)")
    db.close()
    with pytest.raises(UserError) as err:
        load_traces([path])
    _one_sentence(err, str(path), "not a 64-bit integer")
    broken = tmp_path / "broken.sqlite"
    with sqlite3.connect(broken) as db:
        db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (foo INT)")
    db.close()
    with pytest.raises(UserError) as err:
        load_traces([broken])
    _one_sentence(err, "not a whole Nsight Systems export")
