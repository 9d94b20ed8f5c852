"""Start-up of infertriage's commands against a bare `python -c pass` (issue 35 part 2).

    .venv/bin/python benchmarks/cli_startup.py [--runs 7] [--src DIR] [--metrics-file FILE]

Each command is started as a fresh process (the installed console script's interpreter,
with the same `-c` entry the script uses), all interleaved round by round with the bare
interpreter so a busy machine slows every one alike; the figures are medians over the
rounds of each child's own CPU time (user + system, `os.wait4`) and wall time, and their
ratios to the bare interpreter's. Timed: `--version`, `--help`, `bench --help`, `plan` of a
catalogue model (offline), `metrics FILE` of a real vLLM scrape (the fixtures' when
present, else the tests' dump) and `diagnose --help`. `--src DIR` runs another tree's
`src` (the previous commit's, for a before). Exits 1 when `--version` or `--help` takes
more than twice the bare interpreter's CPU, or `plan` or `metrics FILE` more than 0.3
CPU-s (the issue's targets).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_ENTRY = (
    "import sys; from infertriage.cli import main; sys.argv[0] = 'infertriage'; sys.exit(main())"
)
_PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "16"]
_PLAN += ["--input-len", "4000", "--output-len", "500"]
_FRONT_DOOR = ("infertriage --version", "infertriage --help")
_OFFLINE = ("infertriage plan", "infertriage metrics FILE")
_MAX_FRONT_DOOR = 2.0  # × the bare interpreter
_MAX_OFFLINE_CPU_S = 0.3


def _default_metrics_file() -> Path:
    shared = Path(os.environ.get("INFERTRIAGE_FIXTURES", _ROOT.parent / "shared" / "fixtures"))
    real = shared / "metrics" / "vllm.txt"
    if real.is_file():
        return real
    return _ROOT / "tests" / "data" / "metrics_dumps" / "vllm_dp2_balanced.txt"


def _cases(metrics_file: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-c", _ENTRY]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "infertriage --version": [*cli, "--version"],
        "infertriage --help": [*cli, "--help"],
        "infertriage bench --help": [*cli, "bench", "--help"],
        "infertriage plan": [*cli, *_PLAN],
        "infertriage metrics FILE": [*cli, "metrics", str(metrics_file)],
        "infertriage diagnose --help": [*cli, "diagnose", "--help"],
    }


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU-s, wall-s) of one child run to completion."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv[3:]) or argv} exited {child.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--src", type=Path, default=_ROOT / "src", help="the tree's src to run")
    parser.add_argument("--metrics-file", type=Path, default=None)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(args.src.resolve()))
    cases = _cases(args.metrics_file or _default_metrics_file())
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    wall: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, argv in cases.items():
            spent, taken = _once(argv, env)
            cpu[name].append(spent)
            wall[name].append(taken)
    bare_cpu = statistics.median(cpu["python -c pass"])
    bare_wall = statistics.median(wall["python -c pass"])
    print(f"{args.runs} rounds, src {args.src}, load average {os.getloadavg()[0]:.1f}\n")
    print("| command | CPU-s (median) | vs bare | wall s (median) | vs bare |")
    print("|---|---|---|---|---|")
    for name in cases:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(f"| `{name}` | {c:.3f} | {c / bare_cpu:.1f}× | {w:.3f} | {w / bare_wall:.1f}× |")
    front = max(statistics.median(cpu[n]) for n in _FRONT_DOOR) / bare_cpu
    offline = max(statistics.median(cpu[n]) for n in _OFFLINE)
    met = front <= _MAX_FRONT_DOOR and offline <= _MAX_OFFLINE_CPU_S
    print(
        f"\nfront door {front:.2f}× bare (≤ {_MAX_FRONT_DOOR:g}×), plan / metrics FILE "
        f"{offline:.3f} CPU-s at most (≤ {_MAX_OFFLINE_CPU_S:g}): {'met' if met else 'not met'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
