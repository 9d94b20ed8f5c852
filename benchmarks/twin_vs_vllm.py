"""benchmark: the twin replays every real vLLM-on-H100 load stage; real vs twin, side by side.

    .venv/bin/python benchmarks/twin_vs_vllm.py               # replay, print, judge
    .venv/bin/python benchmarks/twin_vs_vllm.py --write       # ... and write fidelity.json
    .venv/bin/python benchmarks/twin_vs_vllm.py --fit-handoff # the API-server hand-off constant

Data: `$INFERTRIAGE_FIXTURES/calibration/vllm-h100-inference-perf` (else ../shared/fixtures;
`infertriage_testing.vllm_runs` reads it): 16 inference-perf experiments, 24 stages, of a
real vLLM server on H100s (Llama-2-7B TP 1, Llama-2-70B TP 4, Mixtral-8x7B TP 2, CodeLlama-34B
TP 2; `max_num_seqs` 128, `max_num_batched_tokens` 2,048, `max_model_len` 4,096).

Each experiment runs through `infertriage.twin.simulate` as it ran for real: its stages back
to back at their rates and durations, constant arrivals, its cycled shared-prefix prompt set
(`prefix:groups=G,prompts=P,...`; the prompt length the server saw, inference-perf's count),
`max_tokens` with `ignore_eos`, a 300 s client time-out (aiohttp's, which the real runs hit).
Compared per stage, on the requests that completed: TTFT mean, the per-token interval
(E2E − TTFT)/(output − 1) and E2E mean, and whether the stage overloaded (lost requests to
the time-out, or a mean TTFT of 10 s or more: a queue that grew all stage long).

Regimes: "moderate" (the real stage held with fewer than 60 % of the seats busy, by Little's
law), "near saturation" (held with more), "overloaded" (the real server did not hold).
Judged (exit 1 otherwise) on the stages that held: median |error| ≤ 10 % on each figure, none
over 25 %; every real overload overloads in the twin and no held stage does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

from infertriage.twin.results import SimulationResult
from infertriage.twin.scenario import scenario_from_mapping
from infertriage.twin.simulate import Stage, simulate
from infertriage_testing.vllm_runs import OVERLOAD_TTFT_S, RealStage, load_stages

_ROOT = Path(__file__).resolve().parents[1]
_TABLE = _ROOT / "src/infertriage/plan/data/fidelity.json"
CLIENT_TIMEOUT_S = 300.0
NEAR_SATURATION = 0.6  # of max_num_seqs busy, by Little's law
MEDIAN_BOUND, WORST_BOUND = 0.10, 0.25
FIGURES = ("ttft", "interval", "e2e")


@dataclass(frozen=True, slots=True)
class Row:
    """One stage: the real figures and the twin's."""

    real: RealStage
    ttft_s: float
    interval_s: float
    e2e_s: float
    overloaded: bool
    num_timed_out: int

    @property
    def regime(self) -> str:
        if self.real.overloaded:
            return "overloaded"
        busy = self.real.concurrency / self.real.max_num_seqs
        return "near saturation" if busy >= NEAR_SATURATION else "moderate"

    def errors(self) -> dict[str, float]:
        r = self.real
        return {
            "ttft": self.ttft_s / r.ttft_s - 1,
            "interval": self.interval_s / r.token_interval_s - 1,
            "e2e": self.e2e_s / r.e2e_s - 1,
        }


def replay(experiment: Sequence[RealStage], handoff_ms: float | None = None) -> list[Row]:
    """One experiment's stages, back to back, through the twin."""
    first = experiment[0]
    frontend = {} if handoff_ms is None else {"handoff_ms": handoff_ms}
    result: SimulationResult = simulate(
        scenario_from_mapping(first.scenario(**frontend)),
        stages=[Stage(s.rate, s.duration_s) for s in experiment],
        workload=first.workload,
        arrivals="constant",
        timeout_s=CLIENT_TIMEOUT_S,
    )
    rows = []
    for real, twin in zip(experiment, result.stages, strict=True):
        ttft, e2e = twin.ttft.mean_s, twin.e2e.mean_s
        rows.append(
            Row(
                real=real,
                ttft_s=ttft,
                interval_s=(e2e - ttft) / (real.output_len - 1),
                e2e_s=e2e,
                overloaded=twin.num_timed_out > 0 or ttft >= OVERLOAD_TTFT_S,
                num_timed_out=twin.num_timed_out,
            )
        )
    return rows


def _replay_job(args: tuple[list[RealStage], float | None]) -> list[Row]:
    return replay(*args)


def replay_all(stages: Sequence[RealStage], handoff_ms: float | None = None) -> list[Row]:
    experiments = [list(g) for _, g in groupby(stages, key=lambda s: s.experiment)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = pool.map(_replay_job, [(e, handoff_ms) for e in experiments])
        return [row for rows in done for row in rows]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.1f}" if seconds < 10 else f"{seconds:8.1f}s"


def print_rows(rows: Sequence[Row]) -> None:
    print(
        f"{'stage':<42} {'regime':<15} {'TTFT real':>9} {'twin':>9} {'err':>7}  "
        f"{'ms/token real':>13} {'twin':>6} {'err':>7}  {'E2E real':>8} {'twin':>7} {'err':>7}  "
        "lost real/twin"
    )
    for row in rows:
        r, e = row.real, row.errors()
        print(
            f"{r.label:<42} {row.regime:<15} {_ms(r.ttft_s)} {_ms(row.ttft_s)} {e['ttft']:+7.1%}  "
            f"{r.token_interval_s * 1e3:13.2f} {row.interval_s * 1e3:6.2f} {e['interval']:+7.1%}  "
            f"{r.e2e_s:7.2f}s {row.e2e_s:6.2f}s {e['e2e']:+7.1%}  "
            f"{r.num_failed:>5}/{row.num_timed_out}"
        )


def regime_errors(rows: Sequence[Row]) -> dict[str, dict[str, list[float]]]:
    """Per regime and figure, (median |error|, worst |error|) and the stage count."""
    out: dict[str, dict[str, list[float]]] = {}
    for regime in ("moderate", "near saturation", "overloaded"):
        mine = [r for r in rows if r.regime == regime]
        if not mine:
            continue
        figures: dict[str, list[float]] = {"stages": [float(len(mine))]}
        for name in FIGURES:
            mags = [abs(r.errors()[name]) for r in mine]
            figures[name] = [round(statistics.median(mags), 4), round(max(mags), 4)]
        out[regime] = figures
    return out


def judge(rows: Sequence[Row]) -> list[str]:
    """What misses the bounds; [] when the twin holds them."""
    misses = []
    held = [r for r in rows if not r.real.overloaded]
    for name in FIGURES:
        mags = [abs(r.errors()[name]) for r in held]
        if statistics.median(mags) > MEDIAN_BOUND:
            misses.append(f"{name}: median |error| {statistics.median(mags):.1%} > 10 %")
        misses += [
            f"{name}: {r.real.label} {r.errors()[name]:+.1%}"
            for r in held
            if abs(r.errors()[name]) > WORST_BOUND
        ]
    misses += [f"false overload: {r.real.label}" for r in held if r.overloaded]
    misses += [
        f"missed overload: {r.real.label}" for r in rows if r.real.overloaded and not r.overloaded
    ]
    return misses


def print_summary(rows: Sequence[Row]) -> None:
    print()
    for regime, figures in regime_errors(rows).items():
        parts = [
            f"{name} ±{figures[name][0]:.1%} (worst {figures[name][1]:.1%})" for name in FIGURES
        ]
        print(f"{regime:<16} {int(figures['stages'][0]):2d} stages  " + "  ".join(parts))
    held = [r for r in rows if not r.real.overloaded]
    overloads = sum(r.overloaded for r in rows if r.real.overloaded)
    print(
        f"overload: {overloads} of {sum(r.real.overloaded for r in rows)} real overloads "
        f"reproduced; {sum(r.overloaded for r in held)} false of {len(held)} that held"
    )


def write(rows: Sequence[Row]) -> None:
    table = {
        "_note": (
            "Written by benchmarks/twin_vs_vllm.py --write: the twin (simulate) replaying "
            "every stage of real vLLM on H100 under load (inference-perf, 4 models, TP 1-4, "
            "constant arrivals, cycled shared-prefix prompts). |error| of TTFT mean, the "
            "per-token interval and E2E mean per regime: [median, worst]. Do not edit by hand."
        ),
        "source": "real vLLM on H100 (inference-perf stages, 4 models, TP 1-4)",
        "regimes": regime_errors(rows),
        "overloads": {
            "real": sum(r.real.overloaded for r in rows),
            "reproduced": sum(r.overloaded for r in rows if r.real.overloaded),
            "false": sum(r.overloaded for r in rows if not r.real.overloaded),
        },
    }
    _TABLE.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {_TABLE.relative_to(_ROOT)}")


def fit_handoff(stages: Sequence[RealStage]) -> float:
    """The API server's hand-off: median of real minus twin TTFT (hand-off 0) over the held
    stages, in ms."""
    rows = replay_all(stages, handoff_ms=0.0)
    gaps = [(r.real.ttft_s - r.ttft_s) * 1e3 for r in rows if not r.real.overloaded]
    return statistics.median(gaps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write plan/data/fidelity.json")
    parser.add_argument("--fit-handoff", action="store_true", help="fit the hand-off, print it")
    args = parser.parse_args()
    stages = load_stages()
    if not stages:
        print("real fixtures absent: set INFERTRIAGE_FIXTURES", file=sys.stderr)
        return 2
    if args.fit_handoff:
        print(f"hand-off: {fit_handoff(stages):.1f} ms (median of real − twin TTFT, held stages)")
        return 0
    rows = replay_all(stages)
    print_rows(rows)
    print_summary(rows)
    misses = judge(rows)
    for miss in misses:
        print(f"MISS {miss}")
    if args.write:
        write(rows)
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
