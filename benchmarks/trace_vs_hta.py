"""Benchmark: `infertriage trace` against HTA (HolisticTraceAnalysis) on the same traces.

For each trace (the real PyTorch fixtures, then generated inference traces
of the sizes asked), each tool runs in a fresh child process that loads the
trace and runs the analyses both have: temporal breakdown (busy, idle,
compute), idle-time breakdown, communication/computation overlap, kernel
launch statistics and the kernel-type breakdown. The child reports its
times and its peak RSS (`ru_maxrss`); the parent adds the child's own CPU
seconds, start-up and imports included (`process_cpu_s`). Then the figures both compute are
compared (span, idle, compute, overlap, kernel count), ours on HTA's window
(`trim_to_complete_steps`: HTA drops the last ProfilerStep) and, for traces
with fractional-microsecond timestamps, with HTA's rounding of each op to
whole microseconds (start up, end down); our own signals stay exact.

HTA is never a dependency of the project: install it into its own venv,

    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis

and run, from the project root,

    .venv/bin/python benchmarks/trace_vs_hta.py --hta-python /tmp/hta-venv/bin/python \
        --sizes-gb 0.25,1 --out results.json

Everything happens in one run, so the ratios compare like with like.

Without `--hta-python` (or when it does not exist) only our side runs.

Besides the analyses both tools have, the whole `infertriage trace FILE --json`
command (the CLI, every analysis, the findings and the report) runs as a child of
its own: its CPU seconds and peak RSS come from `os.wait4`. `--before-src DIR`
runs our children a second time with another tree's `src` (say `git archive main src`
unpacked) first on the path, interleaved, for a before/after ratio in the same run.
The floor comes first: the CPU seconds of a child that only starts Python, of one
that imports numpy (with OpenBLAS's threads, and with one, as the `trace` command
runs), and of one that imports the command's third-party stack (numpy, msgspec,
orjson, pydantic with one model built, typer, rich), median of five each;
HTA's CPU over each is the most any tool built on it could save on a trace.
Every source tree is byte-compiled first (`compileall`, its own `__pycache__`), as
an installed package is and as HTA's site-packages are: the children then measure
the imports, not the compiler.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infertriage_testing.tracesynth import SynthSpec, trace_chunks

HERE = Path(__file__).resolve().parent
FIXTURES = Path(os.environ.get("INFERTRIAGE_FIXTURES", HERE.parent.parent / "shared" / "fixtures"))
MEMORY_LIMIT_BYTES = 20 * 1024**3  # a child past this fails instead of taking the machine down

OURS = r"""
import json, resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from infertriage.analyze.trace import analyze_tables, load_traces, trim_to_complete_steps
from infertriage.analyze.trace.timeline import get_timeline
ti = time.perf_counter()
tables = load_traces([Path(sys.argv[1])])
t1 = time.perf_counter()
report = analyze_tables(tables)
t2 = time.perf_counter()
from dataclasses import replace
trimmed = trim_to_complete_steps(tables[0])
exact = get_timeline(trimmed)
gpu = trimmed.gpu
# HTA rounds fractional-microsecond traces: start up, end down, to whole microseconds.
rounded = bool(((gpu.start_ns % 1000) != 0).any())
if rounded:
    gpu = replace(gpu, start_ns=-(-gpu.start_ns // 1000) * 1000, end_ns=gpu.end_ns // 1000 * 1000)
window = get_timeline(replace(trimmed, gpu=gpu))
kernels = int((trimmed.gpu.kind == 0).sum())
print(json.dumps({
    "import_s": ti - t0, "load_s": t1 - ti, "analyze_s": t2 - t1, "total_s": t2 - t0,
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "span_us": window.span_ns / 1e3, "idle_us": window.idle_ns / 1e3,
    "compute_us": window.compute_ns / 1e3,
    "overlap": window.comm_overlap_ns / window.comm_ns if window.comm_ns else None,
    "kernels": kernels, "signals": len(report.signals), "hta_rounding": rounded,
    "exact_idle_us": exact.idle_ns / 1e3, "exact_compute_us": exact.compute_ns / 1e3,
}))
"""

HTA = r"""
import json, logging, os, resource, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
from hta.configs.config import logger
logger.setLevel(logging.ERROR)
from hta.trace_analysis import TraceAnalysis
ti = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
temporal = analysis.get_temporal_breakdown(visualize=False)
overlap = analysis.get_comm_comp_overlap(visualize=False)
rank = analysis.t.get_ranks()[0]
analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)
analysis.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)
analysis.get_gpu_kernel_breakdown(visualize=False)
t2 = time.perf_counter()
row = temporal.iloc[0]
df = analysis.t.get_trace(rank)
kernel_cat = analysis.t.symbol_table.get_sym_id_map().get("kernel")
print(json.dumps({
    "import_s": ti - t0, "load_s": t1 - ti, "analyze_s": t2 - t1, "total_s": t2 - t0,
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "span_us": float(row["kernel_time(us)"]), "idle_us": float(row["idle_time(us)"]),
    "compute_us": float(row["compute_time(us)"]),
    "overlap": float(overlap.iloc[0]["comp_comm_overlap_pctg"]) / 100.0,
    "kernels": int((df["cat"] == kernel_cat).sum()),
}))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(
    python: str, code: str, target: Path, timeout_s: float, src: Path | None = None
) -> dict[str, object]:
    """One tool on one trace in a fresh process; its JSON line, or why it failed.

    `process_cpu_s` is the child's own CPU time, start-up and imports included (the
    children run one at a time, so the growth of RUSAGE_CHILDREN is this child's)."""
    start = time.perf_counter()
    cpu_before = _children_cpu_s()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    try:
        done = subprocess.run(
            [python, "-c", code, str(target)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            preexec_fn=_limit_memory,  # the parent is single-threaded
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    wall = time.perf_counter() - start
    cpu = _children_cpu_s() - cpu_before
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:200]}", "wall_s": wall}
    result: dict[str, object] = json.loads(lines[-1])
    result["wall_s"] = wall
    result["process_cpu_s"] = cpu
    return result


def run_command(target: Path, timeout_s: float, src: Path | None = None) -> dict[str, object]:
    """The whole `infertriage trace TARGET --json` in a fresh process: its own CPU
    seconds and peak RSS (`os.wait4`), start-up, analyses, findings and report included."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "infertriage", "trace", str(target), "--json"]
    start = time.perf_counter()
    child = subprocess.Popen(  # our own interpreter and module
        command,
        stdout=subprocess.DEVNULL,
        preexec_fn=_limit_memory,  # noqa: PLW1509  # the parent is single-threaded
        env=env,
    )
    while True:  # os.wait4 reaps it and gives this child's own rusage
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - start > timeout_s:
            child.kill()
            os.wait4(child.pid, 0)
            return {"error": f"timed out after {timeout_s:.0f} s"}
        time.sleep(0.005)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if child.returncode:
        return {"error": f"exit {child.returncode}"}
    return {
        "wall_s": time.perf_counter() - start,
        "process_cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
    }


_STACK = (
    "import numpy, msgspec, orjson, typer, rich.console, pydantic\n"
    "class M(pydantic.BaseModel):\n    x: int\n"
    "M(x=1)"
)
_ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}  # as the `trace` command's process runs
FLOORS: dict[str, tuple[str, dict[str, str]]] = {
    "python": ("pass", {}),
    "python + numpy": ("import numpy", {}),
    "python + numpy, 1 BLAS thread": ("import numpy", _ONE_BLAS_THREAD),
    "python + the command's stack": (_STACK, _ONE_BLAS_THREAD),
}


def measure_floors(repeat: int = 5) -> dict[str, float]:
    """Median CPU seconds of a fresh child that runs each of `FLOORS`, start-up included."""
    out: dict[str, float] = {}
    for label, (code, extra) in FLOORS.items():
        times = []
        for _ in range(repeat):
            before = _children_cpu_s()
            subprocess.run([sys.executable, "-c", code], env={**os.environ, **extra}, check=True)
            times.append(_children_cpu_s() - before)
        out[label] = sorted(times)[len(times) // 2]
        print(f"floor: {label:30s} {out[label]:.3f} CPU-s", flush=True)
    return out


def make_trace(directory: Path, size_gb: float) -> Path:
    """A marker-less decode trace of about `size_gb` GB (plain JSON, as Kineto writes it)."""
    probe = SynthSpec(num_steps=16, num_layers=32, tp=2, pad_cpu_ops=1)
    per_step = sum(len(c) for c in trace_chunks(probe)) / probe.num_steps
    steps = max(1, round(size_gb * 1e9 / per_step))
    spec = SynthSpec(num_steps=steps, num_layers=32, tp=2, pad_cpu_ops=1)
    path = directory / f"synthetic_{size_gb:g}gb.json"
    with path.open("wb") as out:
        for chunk in trace_chunks(spec, steps_per_chunk=256):
            out.write(chunk)
    return path


def _agreement(ours: dict[str, object], hta: dict[str, object]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key in ("span_us", "idle_us", "compute_us", "overlap", "kernels"):
        a, b = ours.get(key), hta.get(key)
        if isinstance(a, int | float) and isinstance(b, int | float) and b:
            out[key] = abs(a - b) / abs(b)
        else:
            out[key] = None
    return out


def _fmt_mb(value: object) -> str:
    return f"{value / 1e6:,.0f} MB" if isinstance(value, int | float) else "–"


def _fmt_s(value: object) -> str:
    return f"{value:.2f} s" if isinstance(value, int | float) else "–"


def compare(
    trace: Path, hta_python: str | None, timeout_s: float, before: Path | None = None
) -> dict[str, object]:
    ours = run_child(sys.executable, OURS, trace, timeout_s)
    row: dict[str, object] = {"trace": trace.name, "bytes": trace.stat().st_size, "ours": ours}
    row["command"] = run_command(trace, timeout_s)
    if before is not None:
        row["ours_before"] = run_child(sys.executable, OURS, trace, timeout_s, src=before)
        row["command_before"] = run_command(trace, timeout_s, src=before)
    if hta_python:
        with tempfile.TemporaryDirectory() as tmp:
            link = Path(tmp) / trace.name
            link.symlink_to(trace.resolve())
            hta = run_child(hta_python, HTA, Path(tmp), timeout_s)
        row["hta"] = hta
        if "error" not in hta and "error" not in ours:
            row["speedup"] = float(hta["total_s"]) / float(ours["total_s"])  # type: ignore[arg-type]
            row["cpu_ratio"] = float(hta["process_cpu_s"]) / float(ours["process_cpu_s"])  # type: ignore[arg-type]
            row["memory_ratio"] = float(ours["peak_rss_bytes"]) / float(hta["peak_rss_bytes"])  # type: ignore[arg-type]
            row["relative_difference"] = _agreement(ours, hta)
        command = row["command"]
        if "error" not in hta and isinstance(command, dict) and "error" not in command:
            row["command_cpu_ratio"] = float(hta["process_cpu_s"]) / float(  # type: ignore[arg-type]
                command["process_cpu_s"]  # type: ignore[arg-type]
            )
            row["command_memory_ratio"] = float(command["peak_rss_bytes"]) / float(  # type: ignore[arg-type]
                hta["peak_rss_bytes"]  # type: ignore[arg-type]
            )
    return row


def print_row(row: dict[str, object]) -> None:
    ours = row["ours"]
    hta = row.get("hta", {})
    assert isinstance(ours, dict) and isinstance(hta, dict)
    diff = row.get("relative_difference") or {}
    assert isinstance(diff, dict)
    worst = max((v for v in diff.values() if v is not None), default=None)
    hta_time = hta.get("error") or _fmt_s(hta.get("total_s"))
    parts = [
        f"{row['trace'][:44]:44s} {_fmt_mb(row['bytes']):>9s}",
        f"ours {_fmt_s(ours.get('total_s')):>8s} {_fmt_s(ours.get('process_cpu_s')):>8s} CPU "
        f"{_fmt_mb(ours.get('peak_rss_bytes')):>8s}",
        f"HTA {hta_time:>8s} {_fmt_s(hta.get('process_cpu_s')):>8s} CPU "
        f"{_fmt_mb(hta.get('peak_rss_bytes')):>8s}",
    ]
    if "speedup" in row:
        parts.append(
            f"{row['speedup']:5.1f}x faster, {row['cpu_ratio']:5.1f}x less CPU (whole process), "
            f"{row['memory_ratio']:.2f} of HTA's memory"
        )
        parts.append("worst difference " + ("–" if worst is None else f"{worst:.3%}"))
    print(" | ".join(parts), flush=True)
    for key, label in (
        ("command", "trace cmd"),
        ("ours_before", "before"),
        ("command_before", "before cmd"),
    ):
        child = row.get(key)
        if not isinstance(child, dict):
            continue
        line = f"    {label:10s} " + (
            str(child["error"])
            if "error" in child
            else f"{_fmt_s(child.get('process_cpu_s'))} CPU {_fmt_mb(child.get('peak_rss_bytes'))}"
        )
        hta_cpu = hta.get("process_cpu_s")
        if "error" not in child and isinstance(hta_cpu, int | float):
            line += (
                f" | {hta_cpu / float(child['process_cpu_s']):5.1f}x less CPU than HTA, "
                f"{float(child['peak_rss_bytes']) / float(hta['peak_rss_bytes']):.1%} of its memory"
            )
        print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    parser.add_argument(
        "--sizes-gb",
        default=None,
        help="generated trace sizes, e.g. 0.25,1 (default 1, none when --trace is given)",
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--out", type=Path, help="write every figure as JSON here")
    parser.add_argument("--workdir", type=Path, help="where generated traces go (default: tmp)")
    parser.add_argument(
        "--fixtures", type=Path, default=FIXTURES, help="the fixtures folder (its traces/)"
    )
    parser.add_argument(
        "--trace", type=Path, action="append", default=[], help="also this trace (repeatable)"
    )
    parser.add_argument("--no-fixtures", action="store_true", help="leave the real traces out")
    parser.add_argument(
        "--fixtures-only", action="store_true", help="only the real traces, nothing generated"
    )
    parser.add_argument(
        "--before-src",
        type=Path,
        help="also run our side with this tree's src first on the path (before/after)",
    )
    args = parser.parse_args()
    for tree in (HERE.parent / "src", HERE.parent / "testing", args.before_src):
        if tree is not None:  # as installed: bytecode written once, read by every child
            compileall.compile_dir(tree, quiet=1)
    hta_python = args.hta_python if Path(args.hta_python).exists() else None
    if hta_python is None:
        print(f"HTA not found at {args.hta_python}: running our side only", file=sys.stderr)
    real = args.fixtures / "traces"
    traces = sorted(real.glob("**/*.json.gz")) if real.is_dir() and not args.no_fixtures else []
    traces += args.trace
    floors = measure_floors()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        asked = args.sizes_gb if args.sizes_gb is not None else ("" if args.trace else "1")
        sizes = [] if args.fixtures_only else [float(s) for s in asked.split(",") if s]
        for size in sizes:
            start = time.perf_counter()
            traces.append(make_trace(Path(tmp), size))
            print(f"generated {traces[-1].name} in {time.perf_counter() - start:.0f} s", flush=True)
        for trace in traces:
            rows.append(compare(trace, hta_python, args.timeout_s, args.before_src))
            print_row(rows[-1])
            hta = rows[-1].get("hta")
            if isinstance(hta, dict) and "process_cpu_s" in hta:
                best = ", ".join(
                    f"{label} {float(hta['process_cpu_s']) / cpu:.1f}x"  # type: ignore[arg-type]
                    for label, cpu in floors.items()
                )
                print(f"    HTA over the floor: {best}", flush=True)
    rows.append({"floors_cpu_s": floors})
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
