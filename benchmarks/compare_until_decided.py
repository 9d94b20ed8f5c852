"""`compare --until-decided` against fixed-size comparisons, on the same synthetic runs.

The runs are `compare_false_alarms.py`'s (TTFT log-normal around 200 ms with a
3× tail in one request of ten, 15–25 tokens at log-normal 20 ms gaps, one
request in a hundred failing). Each trial draws a base and a run long enough
for the bound, plans the sample from a pilot of the first `--pilot` requests
per arm as `compare --url A --url B` does (`power.plan_sample` at the alpha
its look can count on, `sequential.planning_alpha`), then looks on
`sequential.schedule` with alpha spent over the looks (`until_decided`), bounded
by `--length` as `--max-requests` bounds it:

- null (the same distribution): the share of comparisons with any regression
  (goal ≤ 5 %), the share still undecided at the bound, the median requests
  per arm used;
- TTFT ×1.2 in the run: the share where `ttft` is a regression.

Beside it, the fixed-size comparison at 1,000 requests a run (the issue's
figure: INCONCLUSIVE on about half of same-distribution comparisons).

    .venv/bin/python benchmarks/compare_until_decided.py [--trials 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from compare_false_alarms import _run  # the same synthetic runs

from infertriage.analyze.compare.comparison import compare_records
from infertriage.analyze.compare.power import plan_sample
from infertriage.analyze.compare.sequential import (
    planning_alpha,
    schedule,
    until_decided,
)
from infertriage.analyze.compare.verdict import MetricComparison
from infertriage.schemas import RequestRecord

_ALPHA = 0.05
_BOUND_FACTOR = 4


def _plan(pilot: list[list[RequestRecord]], most: int) -> tuple[int, int]:
    """(the planned requests per arm, the bound), as `compare --until-decided
    --max-requests MOST` plans them."""
    planned, alpha = 1, _ALPHA
    for _ in range(4):  # plan → the look's share → plan, as api.compare does
        alpha = planning_alpha(planned, min(most, _BOUND_FACTOR * planned), _ALPHA)
        planned = plan_sample(pilot, alpha=alpha).requests_per_arm
    return planned, min(most, _BOUND_FACTOR * planned)


def _sequential(
    base: list[RequestRecord], run: list[RequestRecord], pilot: int, seed: int
) -> tuple[str, int, set[str], int]:
    """(regression | decided | undecided, requests per arm at the last look, regressed,
    planned)."""
    planned, bound = _plan([base[:pilot], run[:pilot]], len(base))
    looked: list[int] = []

    def sizes() -> Iterator[tuple[int, int]]:
        for block, n in enumerate(schedule(planned, bound), 1):
            looked.append(n)
            yield block, n

    def judge(alpha: float) -> Sequence[MetricComparison]:
        n = looked[-1]
        return compare_records(base[:n], run[:n], alpha=alpha, seed=seed).metrics

    result = until_decided(sizes(), judge, bound=bound, alpha=_ALPHA)
    regressed = {m.metric for m in result.metrics if m.verdict == "regression"}
    state = "regression" if regressed else ("decided" if result.decided else "undecided")
    return state, looked[-1], regressed, planned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--pilot", type=int, default=100)
    parser.add_argument(
        "--length", type=int, default=8000, help="requests drawn per run: the --max-requests"
    )
    args = parser.parse_args()
    alarms = undecided = found = fixed_undecided = fixed_alarms = 0
    used: list[int] = []
    plans: list[int] = []
    used_shift: list[int] = []
    for trial in range(args.trials):
        base = _run(args.length, seed=trial)
        same = _run(args.length, seed=10_000 + trial)
        state, n, _, planned = _sequential(base, same, args.pilot, trial)
        plans.append(planned)
        alarms += state == "regression"
        undecided += state == "undecided"
        used.append(n)
        slower = _run(args.length, seed=20_000 + trial, ttft_scale=1.2)
        _, n_shift, regressed, _ = _sequential(base, slower, args.pilot, trial)
        found += "ttft" in regressed
        used_shift.append(n_shift)
        fixed = compare_records(base[:1000], same[:1000], seed=trial)
        fixed_alarms += bool(fixed.regressions)
        fixed_undecided += not fixed.regressions and bool(fixed.inconclusive)
    t = args.trials
    print(
        f"trials {t}, pilot {args.pilot} requests per arm, planned median "
        f"{statistics.median(plans):.0f}, bound min({_BOUND_FACTOR}x the plan, {args.length})"
    )
    print(
        f"until-decided, same distribution: any regression {alarms / t:.1%}, undecided at the "
        f"bound {undecided / t:.1%}, median {statistics.median(used):.0f} requests per arm "
        f"(max {max(used)})"
    )
    print(
        f"until-decided, TTFT x1.2: found {found / t:.1%}, median "
        f"{statistics.median(used_shift):.0f} requests per arm"
    )
    print(
        f"fixed 1,000 requests, same distribution: any regression {fixed_alarms / t:.1%}, "
        f"inconclusive {fixed_undecided / t:.1%}"
    )


if __name__ == "__main__":
    main()
