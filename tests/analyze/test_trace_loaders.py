"""Loading traces: the streaming splitter, the nsys schema probe, and bad input as one sentence."""

from __future__ import annotations

import gzip
import io
import sqlite3
from pathlib import Path

import orjson
import pytest

from infertriage.analyze.trace import jsonsplit, load_traces
from infertriage.analyze.trace.jsonsplit import NotATrace, TruncatedTrace, iter_event_batches
from infertriage.analyze.trace.table import CopyKind, GpuOpKind
from infertriage.schemas import UserError
from infertriage_testing.tracesynth import SynthSpec, trace_chunks


def _events(data: bytes, chunk: int | None = None) -> tuple[list[object], dict[str, object]]:
    header: dict[str, object] = {}
    old = jsonsplit.CHUNK_BYTES
    if chunk is not None:
        jsonsplit.CHUNK_BYTES = chunk
    try:
        events = [e for batch in iter_event_batches(io.BytesIO(data), header) for e in batch]
    finally:
        jsonsplit.CHUNK_BYTES = old
    return events, header


TRICKY = [
    {"ph": "X", "name": 'quote " and }, { inside', "ts": 1, "args": {"a": [1, {"b": "]"}]}},
    {"ph": "X", "name": 'backslash \\ then quote \\" end', "ts": 2},
    {"ph": "X", "name": "escaped \\\\", "ts": 3, "args": {}},
    {"ph": "i", "name": "x" * 300, "ts": 4},
]


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_splitter_keeps_every_event_whatever_the_chunk(chunk: int) -> None:
    doc = {"schemaVersion": 1, "traceEvents": TRICKY * 20, "distributedInfo": {"rank": 3}}
    events, header = _events(orjson.dumps(doc, option=orjson.OPT_INDENT_2), chunk)
    assert events == TRICKY * 20
    assert header["schemaVersion"] == 1
    assert header["distributedInfo"] == {"rank": 3}  # a key after the array is read too


def test_splitter_reads_a_bare_array_and_an_empty_one() -> None:
    assert _events(orjson.dumps(TRICKY), 16)[0] == TRICKY
    assert _events(b'{"traceEvents": []}')[0] == []


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", NotATrace),
        (b"   \n", NotATrace),
        (b'{"foo": 1}', NotATrace),
        (b"hello", NotATrace),
        (b'{"traceEvents": [{"ph": "X"}, {"ph": ', TruncatedTrace),
        (b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', NotATrace),
    ],
)
def test_splitter_rejects(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        _events(data, 8)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _synth(tmp_path: Path, spec: SynthSpec, name: str = "trace.json.gz") -> Path:
    path = tmp_path / name
    with gzip.open(path, "wb") if name.endswith(".gz") else path.open("wb") as out:
        for chunk in trace_chunks(spec):
            out.write(chunk)
    return path


def _one_sentence(message: str) -> None:
    assert message.endswith(".")
    assert "\n" not in message and "Traceback" not in message


def test_bad_inputs_are_one_sentence(tmp_path: Path) -> None:
    good = _synth(tmp_path, SynthSpec(num_steps=2)).read_bytes()
    cases = {
        "truncated gzip": (_write(tmp_path / "cut.json.gz", good[: len(good) // 2]), "gzip"),
        "not a trace": (_write(tmp_path / "config.json", b'{"model": "llama"}'), "traceEvents"),
        "empty file": (_write(tmp_path / "empty.json", b""), "is empty"),
        "garbage": (_write(tmp_path / "x.bin", b"\x00\x01binary"), "neither"),
        "events not objects": (_write(tmp_path / "ints.json", b"[1, 2, 3]"), "not JSON objects"),
        "report": (_write(tmp_path / "run.nsys-rep", b"\x00" * 10), "nsys export --type sqlite"),
        "missing": (tmp_path / "absent.json", "does not exist"),
    }
    for case, (path, needle) in cases.items():
        with pytest.raises(UserError) as err:
            load_traces([path])
        assert needle in str(err.value), case
        assert str(path) in str(err.value), case
        _one_sentence(str(err.value))


def test_sqlite_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    db.close()
    with pytest.raises(UserError, match="not an Nsight Systems export"):
        load_traces([path])


def test_a_trace_without_gpu_work_says_how_to_profile(tmp_path: Path) -> None:
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}
    with pytest.raises(UserError, match=r"ProfilerActivity\.CUDA"):
        load_traces([_write(tmp_path / "cpu.json", orjson.dumps(doc))])


def test_plain_and_gzip_load_the_same(tmp_path: Path) -> None:
    spec = SynthSpec(num_steps=3)
    plain = load_traces([_synth(tmp_path, spec, "t.json")])[0]
    zipped = load_traces([_synth(tmp_path, spec, "t.json.gz")])[0]
    assert len(plain.gpu) == len(zipped.gpu) == 3 * (40 + 2)
    assert (plain.gpu.start_ns == zipped.gpu.start_ns).all()
    assert plain.strings == zipped.strings
    assert (plain.launcher >= 0).all()


def test_fractional_microseconds_become_exact_nanoseconds(tmp_path: Path) -> None:
    doc = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 4458676416788.066, "dur": 1.5,
             "args": {"device": 0, "stream": 7, "correlation": 5}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
             "ts": 4458676416780.001, "dur": 2, "args": {"correlation": 5}},
        ]
    }  # fmt: skip
    table = load_traces([_write(tmp_path / "ns.json", orjson.dumps(doc))])[0]
    assert table.gpu.start_ns.tolist() == [4_458_676_416_788_066]
    assert table.gpu.end_ns.tolist() == [4_458_676_416_789_566]
    assert table.launcher.tolist() == [0]


def _nsys_29(path: Path) -> Path:
    """A tiny export in the 2.9 schema: runtime names as text, no MEMSET, NVTX with text."""
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
                contextId INT, streamId INT, correlationId INT, globalPid INT,
                demangledName INT, shortName INT);
            CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, eventClass INT,
                globalTid INT, correlationId INT, nameId INT, returnValue INT, name TEXT);
            CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, deviceId INT,
                contextId INT, streamId INT, correlationId INT, globalPid INT, bytes INT,
                copyKind INT, srcKind INT, dstKind INT);
            CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT,
                globalTid INT, textId INT);
            INSERT INTO StringIds VALUES (1, 'ncclDevKernel_AllReduce_Sum_f16_RING_LL(x)'),
                (2, 'cudaLaunchKernel_v7000'), (3, 'cudaMemcpyAsync_v3020');
            """
        )
        pid = 77 << 24
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,7,?,?,1,1)",
            [(1000 * i + 100, 1000 * i + 600, i, pid) for i in range(1, 5)],
        )
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,2,0,NULL)",
            [(1000 * i, 1000 * i + 50, pid + 5, i) for i in range(1, 5)],
        )
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10,20,0,?,9,3,0,NULL)", (pid,))
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (30,90,0,1,7,9,?,4096,1,0,2)", (pid,)
        )
        db.executemany(
            "INSERT INTO NVTX_EVENTS VALUES (?,?,59,'step',?,NULL)",
            [(1000 * i - 10, 1000 * i + 900, pid + 5) for i in range(1, 5)],
        )
    db.close()
    return path


def test_nsys_old_schema_is_probed(tmp_path: Path) -> None:
    tables = load_traces([_nsys_29(tmp_path / "old.sqlite")])
    assert len(tables) == 1
    table = tables[0]
    assert table.fmt == "nsys"
    kernels = table.gpu.kind == GpuOpKind.KERNEL
    assert int(kernels.sum()) == 4
    assert (table.launcher >= 0).all()  # kernels and the memcpy joined on correlationId
    copy = table.gpu.kind == GpuOpKind.MEMCPY
    assert table.gpu.copy_kind[copy].tolist() == [CopyKind.HTOD]
    assert table.gpu.pageable[copy].tolist() == [True]
    assert len(table.ranges) == 4
