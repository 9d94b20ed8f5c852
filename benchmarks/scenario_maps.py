"""Run `diagnose` on every packaged twin scenario and print the maps as a Markdown table.

    .venv/bin/python benchmarks/scenario_maps.py [--duration 12] [--scenarios a,b,…]

Each row is one real run of the whole pipeline against the twin (load, scraping,
profiling, rules); the scenario table of docs/commands/diagnose.md is this script's output.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from infertriage.api.diagnose import DiagnoseSpec, diagnose
from infertriage.twin.scenario import list_scenarios


def _slo(result_slo: tuple[object, ...]) -> str:
    parts = []
    for r in result_slo:
        measured = getattr(r, "measured", None)
        if measured is None:
            continue
        unit = getattr(r, "unit", "")
        value = f"{measured * 1e3:.0f} ms" if unit == "s" else f"{measured:.1%}"
        parts.append(
            f"{getattr(r, 'name', '')} {value}{'' if getattr(r, 'passed', True) else ' ✗'}"
        )
    return ", ".join(parts)


def _num_4xx(run: Path) -> int:
    """Requests the server answered with a 4xx: the workload's fault, none expected."""
    lines = (run / "requests.jsonl").read_text().splitlines()
    return sum(1 for line in lines if 400 <= (json.loads(line).get("http_status") or 0) < 500)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=12.0)
    parser.add_argument("--scenarios", default="", help="comma-separated names (default: all)")
    args = parser.parse_args()
    names = [n for n in args.scenarios.split(",") if n] or list_scenarios()
    print("| scenario | primary | chain | other findings | SLOs (client) | 4xx | wall s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            started = time.monotonic()
            result = diagnose(
                DiagnoseSpec(scenario=name, duration_s=args.duration, out=Path(tmp) / name)
            )
            d = result.diagnosis
            primary = f"{d.primary.layer.value}: `{d.primary.finding}`" if d.primary else "none"
            chain = " → ".join(link.finding for link in d.chain) if len(d.chain) > 1 else ""
            chained = {link.finding for link in d.chain}
            others = ", ".join(
                f"{f.id} ({f.status.value})"
                for layer in d.layers
                for f in layer.findings
                if f.id not in chained
            )
            wall = time.monotonic() - started
            rejected = _num_4xx(Path(tmp) / name)
            print(
                f"| {name} | {primary} | {chain} | {others} | {_slo(d.slo)} | {rejected} "
                f"| {wall:.0f} |"
            )


if __name__ == "__main__":
    main()
