"""Start-up of infertriage's commands against a bare `python -c pass` (issue 35 part 2).

    .venv/bin/python benchmarks/cli_startup.py [--runs 7] [--src DIR] [--before DIR]
        [--metrics-file FILE] [--no-bytecode-cache]

Each command is started as a fresh process (the installed console script's interpreter,
with the same `-c` entry the script uses), all interleaved round by round with the bare
interpreter so a busy machine slows every one alike; the figures are medians over the
rounds of each child's own CPU time (user + system, `os.wait4`) and wall time, and their
ratios to the bare interpreter's. Timed: `--version`, `--help`, `bench --help`, `plan` of a
catalogue model (offline), `metrics FILE` of a real vLLM scrape (the fixtures' when
present, else the tests' dump) and `diagnose --help`. `--src DIR` runs another tree's
`src`; `--before DIR` runs a second tree's `src` (the previous commit's) in the same
rounds, interleaved with this one, and adds its CPU-s and the after / before ratio.

The children read and write compiled bytecode in a cache of their own (a temporary
`PYTHONPYCACHEPREFIX`, filled by one untimed round first), as an installed copy has its
`.pyc` files: an environment with `PYTHONDONTWRITEBYTECODE=1` would otherwise compile
every module of the tree from source at each start (about 50 ms of `plan`'s CPU).
`--no-bytecode-cache` keeps the environment as it is. Exits 1 when `--version` or
`--help` takes more than twice the bare interpreter's CPU, or `plan` or `metrics FILE`
more than 0.3 CPU-s (the issue's targets), in the tree measured (not the before).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_ENTRY = (
    "import sys; from infertriage.cli import main; sys.argv[0] = 'infertriage'; sys.exit(main())"
)
_PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "16"]
_PLAN += ["--input-len", "4000", "--output-len", "500"]
_BARE = "python -c pass"
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
        _BARE: [sys.executable, "-c", "pass"],
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
    parser.add_argument("--before", type=Path, default=None, help="a second src, same rounds")
    parser.add_argument("--metrics-file", type=Path, default=None)
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="keep the environment's bytecode setting"
    )
    args = parser.parse_args()
    trees = {"after": args.src}
    if args.before is not None:
        trees["before"] = args.before
    envs = {tree: dict(os.environ, PYTHONPATH=str(src.resolve())) for tree, src in trees.items()}
    cases = _cases(args.metrics_file or _default_metrics_file())
    if args.no_bytecode_cache:
        return _measure(args, envs, cases, "as the environment has it")
    with tempfile.TemporaryDirectory(prefix="cli_startup_pyc_") as cache:
        for tree, env in envs.items():
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = os.path.join(cache, tree)
            for argv in cases.values():  # the untimed round that fills the cache
                _once(argv, env)
        return _measure(args, envs, cases, "cached (one untimed round first)")


def _measure(
    args: argparse.Namespace,
    envs: dict[str, dict[str, str]],
    cases: dict[str, list[str]],
    bytecode: str,
) -> int:
    cpu: dict[tuple[str, str], list[float]] = {(t, n): [] for t in envs for n in cases}
    wall: dict[tuple[str, str], list[float]] = {(t, n): [] for t in envs for n in cases}
    for _ in range(args.runs):
        for name, argv in cases.items():
            for tree, env in envs.items():
                spent, taken = _once(argv, env)
                cpu[tree, name].append(spent)
                wall[tree, name].append(taken)
    med_cpu = {key: statistics.median(values) for key, values in cpu.items()}
    med_wall = {key: statistics.median(values) for key, values in wall.items()}
    bare_cpu, bare_wall = med_cpu["after", _BARE], med_wall["after", _BARE]
    load = os.getloadavg()[0]
    before = f", before {args.before}" if args.before is not None else ""
    print(f"{args.runs} rounds, src {args.src}{before}, bytecode {bytecode}, load {load:.1f}\n")
    head = "| command | CPU-s (median) | vs bare | wall s (median) | vs bare |"
    rule = "|---|---|---|---|---|"
    if args.before is not None:
        head += " before CPU-s | after / before |"
        rule += "---|---|"
    print(head + "\n" + rule)
    for name in cases:
        c, w = med_cpu["after", name], med_wall["after", name]
        row = f"| `{name}` | {c:.3f} | {c / bare_cpu:.1f}× | {w:.3f} | {w / bare_wall:.1f}× |"
        if args.before is not None:
            b = med_cpu["before", name]
            row += f" {b:.3f} | {c / b:.2f} |"
        print(row)
    front = max(med_cpu["after", n] for n in _FRONT_DOOR) / bare_cpu
    offline = max(med_cpu["after", n] for n in _OFFLINE)
    met = front <= _MAX_FRONT_DOOR and offline <= _MAX_OFFLINE_CPU_S
    print(
        f"\nfront door {front:.2f}× bare (≤ {_MAX_FRONT_DOOR:g}×), plan / metrics FILE "
        f"{offline:.3f} CPU-s at most (≤ {_MAX_OFFLINE_CPU_S:g}): {'met' if met else 'not met'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
