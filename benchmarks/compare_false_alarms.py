"""How often does `compare` cry wolf, and how often does it catch a real regression?

Synthetic open-loop runs (no server): TTFT log-normal around 200 ms (σ 0.3,
one request in ten with a 3× slower tail), 15–25 tokens with log-normal 20 ms
gaps, one request in a hundred failing. For each sample size, `--trials` pairs
of runs with different seeds are compared:

- null: the same distribution → the share of comparisons with *any*
  regression (the family-wise false-alarm rate a CI gate sees; goal ≤ 5 %),
  and the share that is INCONCLUSIVE (some metric undecided: the price of
  never saying "no regression" on data that cannot tell);
- shifted: TTFT ×1.2 and ×1.5 in the run → the share where `ttft` is a
  regression (the power).

    .venv/bin/python benchmarks/compare_false_alarms.py [--trials 200]
"""

from __future__ import annotations

import argparse

import numpy as np

from infertriage.analyze.compare.comparison import compare_records
from infertriage.schemas import Chunk, ErrorKind, RequestRecord


def _run(n: int, seed: int, ttft_scale: float = 1.0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    sends = np.cumsum(rng.exponential(0.1, n))
    records = []
    for i, sent in enumerate(sends):
        if rng.random() < 0.01:
            records.append(
                RequestRecord(
                    id=str(i),
                    scheduled_ts=float(sent),
                    sent_ts=float(sent),
                    end_ts=float(sent) + 0.01,
                    error_kind=ErrorKind.HTTP,
                    http_status=503,
                )
            )
            continue
        tail = 3.0 if rng.random() < 0.1 else 1.0
        first = sent + 0.2 * ttft_scale * tail * rng.lognormal(0.0, 0.3)
        gaps = 0.02 * rng.lognormal(0.0, 0.3, int(rng.integers(15, 26)) - 1)
        times = first + np.concatenate([[0.0], np.cumsum(gaps)])
        chunks = tuple(Chunk(float(t), 1) for t in times)
        records.append(
            RequestRecord(
                id=str(i),
                scheduled_ts=float(sent),
                sent_ts=float(sent),
                first_token_ts=chunks[0].ts,
                last_token_ts=chunks[-1].ts,
                end_ts=chunks[-1].ts,
                chunks=chunks,
                prompt_tokens=int(rng.integers(100, 200)),
                output_tokens=len(chunks),
                chunk_tokens_exact=True,
            )
        )
    return records


def _rates(n: int, trials: int) -> tuple[float, float, float, float]:
    null = undecided = power_20 = power_50 = 0
    for trial in range(trials):
        base = _run(n, seed=trial)
        same = compare_records(base, _run(n, seed=10_000 + trial), seed=trial)
        null += bool(same.regressions)
        undecided += not same.regressions and bool(same.inconclusive)
        for scale in (1.2, 1.5):
            run = _run(n, seed=20_000 + trial, ttft_scale=scale)
            found = {m.metric for m in compare_records(base, run, seed=trial).regressions}
            if "ttft" in found:
                power_20 += scale == 1.2
                power_50 += scale == 1.5
    return null / trials, undecided / trials, power_20 / trials, power_50 / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    header = ("requests", "false alarm", "inconclusive", "TTFT x1.2 found", "TTFT x1.5 found")
    print(f"{header[0]:>9} {header[1]:>12} {header[2]:>13} {header[3]:>16} {header[4]:>16}")
    for n in (15, 30, 100, 300, 1000):
        null, undecided, p20, p50 = _rates(n, args.trials)
        print(f"{n:>9} {null:>12.1%} {undecided:>13.1%} {p20:>16.1%} {p50:>16.1%}")


if __name__ == "__main__":
    main()
