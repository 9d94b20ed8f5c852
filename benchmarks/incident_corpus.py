"""Accuracy on the corpus of real incidents (tests/data/incidents): per label, engine and case.

    .venv/bin/python benchmarks/incident_corpus.py [--json OUT] [--misses]

Each case is an excerpt pasted in a public issue thread, labelled with the cause the
thread established (see testing/infertriage_testing/incidents.py). Its verdict comes from
the command an operator would run on it (`infertriage logs FILE`, or `infertriage
diagnose --metrics-file FILE`). Prints the accuracy overall, per label and per engine,
and each miss with what the tool said instead. Deterministic: no clock, no draw.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from infertriage_testing.incidents import Outcome, load_cases, run_case, score

ROOT = Path(__file__).resolve().parents[1] / "tests" / "data" / "incidents"


def run_all(root: Path = ROOT) -> list[Outcome]:
    with tempfile.TemporaryDirectory() as tmp:
        return [run_case(case, Path(tmp)) for case in load_cases(root)]


def _table(outcomes: list[Outcome], key: str) -> list[tuple[str, int, int]]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        groups[o.case.expect if key == "label" else o.case.engine].append(score(o))
    return [(name, sum(hits), len(hits)) for name, hits in sorted(groups.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    parser.add_argument("--misses", action="store_true", help="list each miss")
    args = parser.parse_args(argv)
    outcomes = run_all()
    right = sum(score(o) for o in outcomes)
    print(f"incident corpus: {right}/{len(outcomes)} right ({right / max(1, len(outcomes)):.0%})")
    for key in ("label", "engine"):
        print(f"\nby {key}:")
        for name, hits, total in _table(outcomes, key):
            print(f"  {name:<12} {hits:>3}/{total:<3} ({hits / total:.0%})")
    refused = [o for o in outcomes if o.exit_code != 0]
    print(f"\nrefused: {len(refused)}")
    if args.misses:
        print("\nmisses (case: thread's label → infertriage's verdict [finding]):")
        for o in outcomes:
            if not score(o):
                extra = o.finding or o.error[:90]
                print(f"  {o.case.name}: {o.case.expect} → {o.verdict} [{extra}]")
    if args.json is not None:
        rows = [
            {"case": o.case.name, "engine": o.case.engine, "expect": o.case.expect,
             "verdict": o.verdict, "finding": o.finding, "right": score(o),
             "source": o.case.header["source"]}
            for o in outcomes
        ]  # fmt: skip
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
