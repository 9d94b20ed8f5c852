"""Start-up of two source trees side by side, one run (issue 36 part 4: no regression).

    .venv/bin/python benchmarks/cli_startup_ab.py --before /work/main/src --after src [--runs 11]

Each command is started as a fresh process (the console script's `-c` entry) from each
tree, the two alternating within every round (the order flipped each round) so a busy
host slows both alike; the figures are medians of each child's own CPU-s (user + system,
`os.wait4`) and after/before ratios. Exits 1 when a command's after/before CPU ratio is
above `--max-ratio` (default 1.10: the start-up must not regress).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_ENTRY = (
    "import sys; from infertriage.cli import main; sys.argv[0] = 'infertriage'; sys.exit(main())"
)
_METRICS = Path(os.environ.get("INFERTRIAGE_FIXTURES", _ROOT.parent / "shared" / "fixtures"))
_PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "16"]


def _cases() -> dict[str, list[str]]:
    metrics = _METRICS / "metrics" / "vllm.txt"
    if not metrics.is_file():
        metrics = _ROOT / "tests" / "data" / "metrics_dumps" / "vllm_dp2_balanced.txt"
    return {
        "--help": ["--help"],
        "plan": [*_PLAN, "--input-len", "4000", "--output-len", "500"],
        "metrics FILE": ["metrics", str(metrics)],
        "bench --help": ["bench", "--help"],
    }


def _cpu_s(argv: list[str], src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    child = subprocess.Popen(  # our own interpreter and arguments
        [sys.executable, "-c", _ENTRY, *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, _, usage = os.wait4(child.pid, 0)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the earlier tree's src")
    parser.add_argument("--after", type=Path, default=_ROOT / "src", help="this tree's src")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--max-ratio", type=float, default=1.10)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    cases = _cases()
    found: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in cases}
    for round_ in range(args.runs):
        order = list(trees.items()) if round_ % 2 else list(trees.items())[::-1]
        for case, argv in cases.items():
            for tree, src in order:
                found[tree, case].append(_cpu_s(argv, src))
    print(f"{args.runs} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"before {trees['before']}, after {trees['after']}\n")
    print("| command | before CPU-s | after CPU-s | after / before |")
    print("|---|---|---|---|")
    worst = 0.0
    for case in cases:
        before = statistics.median(found["before", case])
        after = statistics.median(found["after", case])
        worst = max(worst, after / before)
        print(f"| `infertriage {case}` | {before:.3f} | {after:.3f} | {after / before:.2f}× |")
    met = worst <= args.max_ratio
    print(f"\nworst after/before {worst:.2f}× (≤ {args.max_ratio}×): {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
