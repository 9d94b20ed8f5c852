"""`infertriage trace`: the summary on screen, --json as one document, bad input as exit 2."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infertriage.cli import main
from infertriage_testing.tracesynth import SynthSpec, synth_truth, trace_chunks

SPEC = SynthSpec(num_steps=6, num_layers=4)


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "decode.pt.trace.json.gz"
    with gzip.open(path, "wb") as out:
        for chunk in trace_chunks(SPEC):
            out.write(chunk)
    return path


def test_summary_names_the_layers(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(trace_file)]) == 0
    out = capsys.readouterr().out
    for needle in ("GPU time", "idle: host wait", "Heaviest kernels", "kernel:", "scheduling:",
                   "parallelism:", "hardware:", "flash_attn_2", "6 / 40.0 (pattern)",
                   "CUDA graphs off", "trace.launch_gap_fraction", "(limit 15%)"):  # fmt: skip
        assert needle in out, needle


def test_json_is_one_document_with_every_signal(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", str(trace_file), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["schema"] == "infertriage.trace/v1"
    signals = {s["name"]: s for s in document["signals"]}
    assert set(signals[next(iter(signals))]) == {"name", "value", "unit", "source", "window"}
    assert signals["trace.steps"]["value"] == SPEC.num_steps
    assert signals["trace.kernels_per_step"]["value"] == synth_truth(SPEC).kernels_per_step
    assert signals["trace.gpu_busy_fraction"]["unit"] == "fraction"
    assert document["ranks"][0]["step_source"] == "pattern"
    assert document["findings"] and document["findings"][0]["layer"] in {"kernel", "hardware"}
    # the diagnose rules' verdict, with the threshold it applied (Thresholds.launch_gap_fraction)
    top = document["findings"][0]
    assert top["id"] == "kernel.launch_bound"
    assert top["evidence"][0] == {**top["evidence"][0], "signal": "trace.launch_gap_fraction",
                                  "threshold": 0.15}  # fmt: skip
    assert document["top_kernels"][0]["total_s"] > 0


def test_log_option(trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "recompiles.log"
    log.write_text("V0612 x.py:1] [0/1] [__recompiles] Recompiling function forward in m.py:3\n")
    assert main(["trace", str(trace_file), "--log", str(log), "--json"]) == 0
    signals = {s["name"]: s for s in json.loads(capsys.readouterr().out)["signals"]}
    assert signals["trace.recompilations"]["value"] == 1
    assert signals["trace.recompilations"]["source"] == "log"


@pytest.mark.parametrize(
    "text", [b"\x00" * 65536, b"ls -l\ncd /tmp\n"], ids=["NUL-filled", "no line read"]
)
def test_a_log_that_gives_no_evidence_counts_no_recompilation_and_says_so(
    trace_file: Path, tmp_path: Path, text: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """The traces are read whatever the log: a note on stderr, and the recompilations the
    trace shows, where "0 recompilations" was read from a log with no recompilation line."""
    log = tmp_path / "recompiles.log"
    log.write_bytes(text)
    assert main(["trace", str(trace_file), "--log", str(log), "--json"]) == 0
    captured = capsys.readouterr()
    note = (
        f"--log {log} has no recompilation line (TORCH_LOGS=recompiles): "
        "no recompilation was counted from it"
    )
    assert captured.err.strip() == f"note: {note}"
    document = json.loads(captured.out)
    assert document["notes"] == [note]
    signals = {s["name"]: s for s in document["signals"]}
    assert signals["trace.recompilations"]["source"] != "log"
    assert "trace.recompile_limit_hits" not in signals


def _bad_inputs(tmp_path: Path, trace_file: Path) -> list[tuple[Path, str]]:
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(trace_file.read_bytes()[:2000])
    not_trace = tmp_path / "config.json"
    not_trace.write_text('{"architectures": ["LlamaForCausalLM"]}')
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    report = tmp_path / "profile.nsys-rep"
    report.write_bytes(b"\x00\x01")
    sqlite = tmp_path / "other.sqlite"
    db = sqlite3.connect(sqlite)
    db.execute("CREATE TABLE requests (id INTEGER)")
    db.commit()
    db.close()
    return [
        (truncated, "truncated or corrupt gzip"),
        (not_trace, "not a PyTorch-profiler trace"),
        (empty, "is empty"),
        (report, "nsys export --type sqlite"),
        (sqlite, "not an Nsight Systems export"),
    ]


def test_bad_inputs_exit_2_with_one_sentence(
    tmp_path: Path, trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, needle in _bad_inputs(tmp_path, trace_file):
        assert main(["trace", str(path)]) == 2, path
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("infertriage: error: "), captured.err
        assert needle in lines[0], (needle, lines[0])
        assert captured.out == ""


def test_the_console_script_exits_2_without_a_traceback(tmp_path: Path, trace_file: Path) -> None:
    truncated, needle = _bad_inputs(tmp_path, trace_file)[0]
    command = [sys.executable, "-m", "infertriage", "trace", str(truncated)]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and needle in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_missing_log_is_exit_2(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", str(trace_file), "--log", "/nonexistent/recompiles.log"]) == 2
    assert "--log" in capsys.readouterr().err


def test_hta_convention_leaves_the_last_profiler_step_out(
    shared_fixture: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--hta-convention`: HTA's window (a real DDP trace of three ProfilerSteps), said so on
    screen and in the JSON; the whole capture without it."""
    path = str(shared_fixture("traces/pytorch/ddp_2rank_nccl_rank0_a100.json.gz"))

    def kernels(document: dict[str, Any]) -> float:
        return next(s["value"] for s in document["signals"] if s["name"] == "trace.kernels")

    assert main(["trace", "--json", path]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert main(["trace", "--json", "--hta-convention", path]) == 0
    hta = json.loads(capsys.readouterr().out)
    assert (ours["hta_convention"], hta["hta_convention"]) == (False, True)
    assert 0 < kernels(hta) < kernels(ours)
    assert main(["trace", "--hta-convention", path]) == 0
    assert "HTA's convention" in capsys.readouterr().out


_BLAS_PROBE = """
import os, sys
from infertriage.cli import main
sys.argv = ["infertriage", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    code = done.code
print(code, os.environ.get("OPENBLAS_NUM_THREADS"), file=sys.stderr)
"""


def test_the_console_script_starts_no_blas_threads_for_a_trace(trace_file: Path) -> None:
    """The trace analyses never reach BLAS: the console script's process keeps OpenBLAS from
    starting its thread pool, unless the user set OPENBLAS_NUM_THREADS."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for extra, expected in (({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")):
        command = [sys.executable, "-c", _BLAS_PROBE, "trace", "--json", str(trace_file)]
        result = subprocess.run(
            command, env={**env, **extra}, check=False, capture_output=True, text=True, timeout=60
        )
        assert result.stderr.split() == ["0", expected], result.stderr
        assert json.loads(result.stdout)["schema"] == "infertriage.trace/v1"
