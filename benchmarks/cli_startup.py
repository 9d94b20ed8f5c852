"""How long `infertriage --version` and `--help` take, against a bare `python -c pass`.

    .venv/bin/python benchmarks/cli_startup.py [--runs 15]

Each command is started as a fresh process (`python -m`-free: the installed console script's
interpreter, with the same `-c` entry the script uses), interleaved with the bare interpreter
so a busy machine slows both alike; the figure is the ratio of medians. Also timed: `diagnose
--help`, which loads the whole application (the front door's answers must not). Exits 1 when
--version or --help takes more than twice the bare interpreter (the issue's target).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

_ENTRY = (
    "import sys; from infertriage.cli import main; sys.argv[0] = 'infertriage'; sys.exit(main())"
)
_CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "infertriage --version": [sys.executable, "-c", _ENTRY, "--version"],
    "infertriage --help": [sys.executable, "-c", _ENTRY, "--help"],
    "infertriage diagnose --help": [sys.executable, "-c", _ENTRY, "diagnose", "--help"],
}


def _once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    times: dict[str, list[float]] = {name: [] for name in _CASES}
    for _ in range(runs):
        for name, argv in _CASES.items():
            times[name].append(_once(argv))
    bare = statistics.median(times["python -c pass"])
    print("| command | median (s) | min (s) | vs bare python |\n|---|---|---|---|")
    for name, taken in times.items():
        median = statistics.median(taken)
        print(f"| `{name}` | {median:.3f} | {min(taken):.3f} | {median / bare:.2f}× |")
    worst = max(
        statistics.median(times[n]) for n in ("infertriage --version", "infertriage --help")
    )
    return 0 if worst <= 2 * bare else 1


if __name__ == "__main__":
    sys.exit(main())
