"""Benchmark: how much of each real trace's idle GPU time `infertriage trace` explains.

For every real trace in the fixtures (../shared/fixtures/traces: pytorch/*, serving/*,
nsys/*.sqlite; see SOURCES.md), the idle time of each device's busy union, then:

- *before*: the share left as "other" by the HTA-style split `trace` had before
  (host wait / kernel-to-kernel / other, `timeline.py`);
- *after*: the share of each cause of `analyze/trace/idle.py` (sync, copy, between
  steps, host-starved, launch overhead, held, untraced, other), and the host work named
  behind the host-starved share.

Run from the project root:

    PYTHONPATH=src .venv/bin/python benchmarks/trace_idle.py [--fixtures DIR] [--hta-convention]

It prints one Markdown table (benchmarks/README.md, "Trace idle classification").
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from infertriage.analyze.trace import find_steps, load_traces, trim_to_complete_steps
from infertriage.analyze.trace.idle import IdleCause, get_idle_causes
from infertriage.analyze.trace.timeline import get_timeline

_PATTERNS = ("traces/pytorch/*.json.gz", "traces/serving/**/*.json.gz", "traces/nsys/*.sqlite")
_SHORT = {
    IdleCause.SYNC: "sync",
    IdleCause.COPY: "copy",
    IdleCause.BETWEEN_STEPS: "steps",
    IdleCause.HOST_STARVED: "host",
    IdleCause.LAUNCH_OVERHEAD: "launch",
    IdleCause.HELD: "held",
    IdleCause.UNTRACED: "untraced",
    IdleCause.OTHER: "other",
}


def _default_fixtures() -> Path:
    env = os.environ.get("INFERTRIAGE_FIXTURES")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def _row(path: Path, root: Path, hta: bool) -> list[str]:
    tables = load_traces([path])
    if hta:
        tables = [trim_to_complete_steps(t) for t in tables]
    idle = before = 0
    by_cause = dict.fromkeys(IdleCause, 0)
    host: dict[str, int] = {}
    for table in tables:
        timeline = get_timeline(table)
        causes = get_idle_causes(table, find_steps(table))
        idle += causes.idle_ns
        before += timeline.other_idle_ns
        for cause, ns in causes.ns_by_cause.items():
            by_cause[cause] += ns
        for name, ns in causes.host_ns_by_op.items():
            host[name] = host.get(name, 0) + ns
    top = max(host, key=lambda n: host[n]) if host else "–"
    return [
        str(path.relative_to(root / "traces")),
        f"{idle / 1e6:,.2f}",
        _pct(before, idle),
        *(_pct(by_cause[c], idle) for c in IdleCause),
        top[:40].replace("|", "\\|"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=_default_fixtures())
    parser.add_argument("--hta-convention", action="store_true", help="leave the last step out")
    args = parser.parse_args(argv)
    root: Path = args.fixtures
    paths = sorted(p for pattern in _PATTERNS for p in root.glob(pattern))
    if not paths:
        print(f"no traces under {root}/traces: set --fixtures", file=sys.stderr)
        return 1
    header = ["trace", "idle ms", "other before", *(f"{_SHORT[c]}" for c in IdleCause)]
    header.append("top host work (host-starved)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for path in paths:
        print("| " + " | ".join(_row(path, root, args.hta_convention)) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
