"""The typed Kineto reader (msgspec, columns without per-event Python) gives the generic one's
table: on every real fixture trace, column for column, and on the shapes where the typed
reader hands a batch over (string thread ids and args, absent names and devices, other
phases, values out of range), the same table or the same one-sentence error.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from infertriage.analyze.trace.chrome import load_chrome
from infertriage.analyze.trace.table import TraceTable
from infertriage.schemas import UserError
from infertriage_testing.tracesynth import SynthSpec, trace_chunks

Fixture = Callable[[str], Path]
FIXTURES = [
    "traces/pytorch/alexnet_single_gpu_a100_inference.json.gz",
    "traces/pytorch/amd_mi250_rocm62_train.json.gz",
    "traces/pytorch/cuda_event_sync_a100.json.gz",
    "traces/pytorch/ddp_2rank_nccl_rank0_a100.json.gz",
    "traces/pytorch/sampled_128rank_job_rank-0.json.gz",
    "traces/pytorch/sampled_128rank_job_rank-1.json.gz",
    "traces/pytorch/simple_add_overlaid_critical_path_output.json.gz",
    "traces/pytorch/trace_diff_test_2rank_rank1_v100_cudagraph.json.gz",
    "traces/pytorch/triton_kernel_a100.json.gz",
    "traces/serving/h100_qwen1.5-0.5b_eager.json.gz",
    "traces/serving/mi300x_qwen1.5-0.5b_eager.json.gz",
    "traces/serving/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "traces/serving/vllm_prefilldecode_piecewise/graph_execution.json.gz",
]


def _columns(table: TraceTable) -> dict[str, object]:
    out: dict[str, object] = {
        "strings": table.strings,
        "rank": table.rank,
        "device_names": table.device_names,
        "launcher": table.launcher,
    }
    for part in ("gpu", "runtime", "ranges", "cpu"):
        group = getattr(table, part)
        out |= {f"{part}.{f.name}": getattr(group, f.name) for f in fields(group)}
    return out


def assert_same_table(a: TraceTable, b: TraceTable) -> None:
    left, right = _columns(a), _columns(b)
    assert left.keys() == right.keys()
    for key, value in left.items():
        other = right[key]
        if isinstance(value, np.ndarray):
            assert isinstance(other, np.ndarray)
            assert value.dtype == other.dtype, key
            assert np.array_equal(value, other, equal_nan=value.dtype.kind == "f"), key
        else:
            assert value == other, key


def _both(path: Path) -> tuple[TraceTable | str, TraceTable | str]:
    """Each reader's table, or the sentence of its UserError."""
    out: list[TraceTable | str] = []
    for typed in (True, False):
        try:
            out.append(load_chrome(path, typed=typed))
        except UserError as err:
            out.append(str(err))
    return out[0], out[1]


def _same(path: Path) -> TraceTable:
    typed, generic = _both(path)
    assert isinstance(typed, TraceTable), typed
    assert isinstance(generic, TraceTable), generic
    assert_same_table(typed, generic)
    return typed


@pytest.mark.parametrize("relative", FIXTURES)
def test_typed_reader_gives_the_generic_table_on_real_traces(
    shared_fixture: Fixture, relative: str
) -> None:
    table = _same(shared_fixture(relative))
    assert len(table.gpu) > 0


def test_typed_reader_gives_the_generic_table_on_a_synthetic_trace(tmp_path: Path) -> None:
    spec = SynthSpec(num_steps=6, num_layers=4, tp=2, pad_cpu_ops=1, markers=True)
    path = tmp_path / "synthetic.json"
    path.write_bytes(b"".join(trace_chunks(spec)))
    table = _same(path)
    assert len(table.gpu) > 0 and len(table.runtime) > 0 and len(table.cpu) > 0


def _trace(tmp_path: Path, events: list[dict[str, object]], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    return path


KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10.25,
          "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 1,
                             "est. achieved occupancy %": 50}}  # fmt: skip
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
          "ts": 2, "dur": 3, "args": {"correlation": 1}}  # fmt: skip
COPY = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
        "tid": 7, "ts": 20, "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 2,
                                                "bytes": 4096}}  # fmt: skip
OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 9}
STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
        "ts": 0, "dur": 40}  # fmt: skip


def _with(base: dict[str, object], **changes: object) -> dict[str, object]:
    out = {**base, **changes}
    return {k: v for k, v in out.items() if v is not _DROP}


_DROP = object()
SHAPES: dict[str, list[dict[str, object]]] = {
    "regular": [STEP, OP, LAUNCH, KERNEL, COPY],
    "string thread ids": [_with(OP, tid="main"), _with(LAUNCH, tid="7"), KERNEL],
    "ROCm string args": [
        _with(LAUNCH, args={"correlation": 1, "bytes": "1", "stream": "0x0"}),
        _with(KERNEL, args={"device": 0, "stream": "0x0", "correlation": "1", "bytes": "8"}),
    ],
    "no device: the pid": [_with(KERNEL, args={"stream": 7, "correlation": 1}, pid=3)],
    "no device, a named pid": [_with(KERNEL, args={"correlation": 1}, pid="GPU 0")],
    "args null or a list": [_with(KERNEL, args=None), _with(COPY, args=[1, 2])],
    "annotation without a name": [_with(STEP, name=_DROP), KERNEL],
    "ranges by name": [
        _with(OP, name="Torch-Compiled Region: 0/1"),
        _with(OP, name="CompiledFunction"),
        _with(OP, name="ProfilerStep#9"),
        _with(OP, name="Tensor stuff"),
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "ts": 5, "dur": 1},
        KERNEL,
    ],
    "other phases and categories": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 3},
        {"ph": "Z", "cat": "kernel", "name": "unknown phase", "ts": 3},
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 0,
            "dur": 100,
        },
        _with(KERNEL, ph=_DROP),
        _with(KERNEL, cat=None),
        KERNEL,
    ],
    "integer and fractional times": [
        _with(KERNEL, ts=1_700_000_000_000_000, dur=3),
        _with(KERNEL, ts=1_700_000_000_000_001.125, dur=0.5),
        _with(LAUNCH, ts=4_000_000_000_000_000),
    ],
    "a name that is a number": [_with(KERNEL, name=42), OP],
    "booleans for numbers": [_with(KERNEL, args={"device": True, "stream": False})],
    "big integers": [_with(KERNEL, args={"device": 0, "correlation": 2**70})],
    "a stream beyond int32": [_with(KERNEL, args={"device": 0, "stream": 2**40})],
    "a time out of range": [_with(KERNEL, ts=2**62)],
    "a time that is a string": [_with(KERNEL, ts="10")],
    "a kernel without a start": [_with(KERNEL, ts=_DROP)],
    "a metadata event without a start, then kernels": [
        {"ph": "M", "name": "thread_name", "tid": "x", "ts": "never", "args": {"name": 1}},
        KERNEL,
    ],
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_typed_reader_agrees_where_it_hands_over(tmp_path: Path, shape: str) -> None:
    typed, generic = _both(_trace(tmp_path, SHAPES[shape]))
    if isinstance(generic, str):
        assert typed == generic
    else:
        assert isinstance(typed, TraceTable), typed
        assert_same_table(typed, generic)


def test_fields_are_read_as_the_profiler_wrote_them(tmp_path: Path) -> None:
    table = _same(_trace(tmp_path, SHAPES["regular"]))
    names = table.names_of(table.gpu.name)
    assert names == ["gemm", "Memcpy HtoD (Pageable -> Device)"]
    assert table.gpu.start_ns.tolist() == [10_250, 20_000]
    assert table.gpu.end_ns.tolist() == [15_250, 22_000]
    assert table.gpu.num_bytes.tolist() == [0, 4096]
    assert table.gpu.pageable.tolist() == [False, True]
    assert table.gpu.occupancy[0] == pytest.approx(0.5)
    assert table.launcher.tolist() == [0, -1]
    assert table.names_of(table.ranges.name) == ["ProfilerStep#3"]


def test_garbage_collection_is_restored_after_a_load(tmp_path: Path) -> None:
    good = _trace(tmp_path, SHAPES["regular"])
    bad = _trace(tmp_path, SHAPES["a time out of range"], "bad.json")
    assert gc.isenabled()
    load_chrome(good)
    assert gc.isenabled()
    with pytest.raises(UserError):
        load_chrome(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        load_chrome(good)
        assert not gc.isenabled()
    finally:
        gc.enable()
