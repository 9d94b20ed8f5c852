"""Benchmark: how fast the trace reader reads Kineto JSON, per core, against orjson and HTA.

Issue 35, part 4 ("traces at native speed"). On one large trace (a generated
marker-less decode trace, `trace_vs_hta.make_trace`, written once into
`--workdir` and reused), each reader runs in a fresh child process, the
runs interleaved `--repeat` times:

- **typed**: `load_chrome` as shipped (msgspec, columns without per-event Python);
- **generic**: `load_chrome(typed=False)`, the orjson reader it replaced, the reference;
- **orjson.loads**: the whole file parsed into Python objects, nothing kept;
- **HTA** (with `--hta-python`): `TraceAnalysis(trace_dir=...)`, its load only.

Each child reports the CPU seconds of its load (`time.process_time`) and its
parent reaps it with `os.wait4`, whose rusage is that child's own: CPU
seconds of the whole process (start-up and imports included) and peak RSS.
MB/s is the file's size over the load's CPU seconds (one core: the readers
are single-threaded). Run from the project root:

    PYTHONPATH=src:testing .venv/bin/python benchmarks/trace_speed.py \\
        --workdir /tmp/trace_bench --size-gb 0.3 --hta-python /tmp/hta-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from trace_vs_hta import make_trace

TYPED = r"""
import json, sys, time
from pathlib import Path
from infertriage.analyze.trace.chrome import load_chrome
t0 = time.process_time()
table = load_chrome(Path(sys.argv[1]), typed=TYPED)
t1 = time.process_time()
print(json.dumps({"load_cpu_s": t1 - t0, "gpu_ops": len(table.gpu)}))
"""

ORJSON = r"""
import json, sys, time
import orjson
t0 = time.process_time()
with open(sys.argv[1], "rb") as f:
    events = orjson.loads(f.read())["traceEvents"]
t1 = time.process_time()
print(json.dumps({"load_cpu_s": t1 - t0, "events": len(events)}))
"""

HTA = r"""
import json, logging, sys, time, warnings
warnings.simplefilter("ignore")
from hta.configs.config import logger
logger.setLevel(logging.ERROR)
from hta.trace_analysis import TraceAnalysis
t0 = time.process_time()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.process_time()
print(json.dumps({"load_cpu_s": t1 - t0, "rows": len(analysis.t.get_trace(0))}))
"""


def run(python: str, code: str, target: Path, env: dict[str, str]) -> dict[str, float]:
    """One child: its JSON line, plus its own CPU seconds and peak RSS from `os.wait4`."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [python, "-c", code, str(target)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{python} exited {child.returncode} on {target}")
    row: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    row["process_cpu_s"] = usage.ru_utime + usage.ru_stime
    row["peak_rss_mib"] = usage.ru_maxrss / 1024
    row["wall_s"] = time.perf_counter() - start
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/trace_bench"))
    parser.add_argument("--size-gb", type=float, default=0.3)
    parser.add_argument("--trace", type=Path, help="read this trace instead of generating one")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    parser.add_argument("--out", type=Path, help="write every run as JSON here")
    args = parser.parse_args()
    trace = args.trace or args.workdir / f"synthetic_{args.size_gb:g}gb.json"
    if not trace.exists():
        args.workdir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        trace = make_trace(args.workdir, args.size_gb)
        print(f"generated {trace} in {time.perf_counter() - start:.0f} s", flush=True)
    size = trace.stat().st_size
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    readers = {
        "typed": (sys.executable, TYPED.replace("TYPED", "True")),
        "generic": (sys.executable, TYPED.replace("TYPED", "False")),
        "orjson.loads": (sys.executable, ORJSON),
    }
    hta_dir = args.workdir / "hta_input"
    if Path(args.hta_python).exists():
        hta_dir.mkdir(parents=True, exist_ok=True)
        link = hta_dir / trace.name
        if not link.exists():
            link.symlink_to(trace.resolve())
        readers["HTA"] = (args.hta_python, HTA)
    else:
        print(f"HTA not found at {args.hta_python}: left out", file=sys.stderr)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in readers}
    for _ in range(args.repeat):
        for name, (python, code) in readers.items():
            target = hta_dir if name == "HTA" else trace
            runs[name].append(run(python, code, target, env))
    load1 = os.getloadavg()[0]
    print(f"{trace.name}: {size / 1e6:,.0f} MB, median of {args.repeat}, load average {load1:.1f}")
    print("| reader | load CPU-s | MB/s per core | process CPU-s | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    medians: dict[str, dict[str, float]] = {}
    for name, rows in runs.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        medians[name] = med
        print(
            f"| {name} | {med['load_cpu_s']:.2f} | {size / 1e6 / med['load_cpu_s']:,.0f} | "
            f"{med['process_cpu_s']:.2f} | {med['peak_rss_mib']:,.0f} |"
        )
    typed = medians["typed"]
    for name, med in medians.items():
        if name != "typed":
            print(
                f"typed vs {name}: load {med['load_cpu_s'] / typed['load_cpu_s']:.2f}x less CPU, "
                f"process {med['process_cpu_s'] / typed['process_cpu_s']:.2f}x, "
                f"memory {typed['peak_rss_mib'] / med['peak_rss_mib']:.1%} of its peak"
            )
    if args.out:
        payload = {"trace": str(trace), "bytes": size, "load_average": load1, "runs": runs}
        args.out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
