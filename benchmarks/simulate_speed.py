"""benchmark: how much faster than real time `simulate` runs 1,000 requests (goal: >= 100x),
and its peak memory at 1,000 and 10,000 requests (goal: 10,000 within 1.3x of 1,000).

Run `python benchmarks/simulate_speed.py` (add `--signatures` to print every packaged
scenario's signature figures at the loads tests/twin/test_twin_signatures.py pins,
`--no-memory` to skip the memory runs). Prints one line per run, then the best of three
by wall clock and by CPU time (the simulation's own CPU-seconds, which other work on a
busy machine barely moves); then the peak resident memory (`ru_maxrss`) of the healthy
scenario's chat mix at 4 req/s, 1,000 and 10,000 requests side by side, each in a fresh
process. Exits 1 when the CPU-time speed-up is under 100x or the 10,000-request peak is
over 1.3x the 1,000-request one.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import subprocess
import sys
import time

from infertriage.twin.scenario import load_scenario
from infertriage.twin.simulate import simulate

GOAL = 100.0
MEMORY_GOAL = 1.3  # the 10,000-request peak over the 1,000-request one
MEMORY_SIZES = (1_000, 10_000)

# issue 33: 96 system prompts of 1,024 tokens, twice the offload scenarios' GPU KV cache
_OFFLOAD_WORKLOAD = "prefix:groups=96,prefix=1024,input=64,output=64"

SIGNATURE_LOADS: dict[str, dict[str, object]] = {
    "healthy": {"rate": 4, "num_requests": 300},
    "kv-pressure": {"rate": 6, "num_requests": 200},
    "kv-leak": {
        "rate": 1,
        "num_requests": 40,
        "input_len": 512,
        "output_len": 64,
        "arrivals": "constant",
    },
    "queue-bound": {"rate": 4, "num_requests": 150},
    "launch-bound": {"rate": 4, "num_requests": 120},
    "bandwidth-bound": {"rate": 0.5, "num_requests": 40, "input_len": 512, "output_len": 128},
    "tp-over-pcie": {"rate": 4, "num_requests": 150},
    "spec-low-acceptance": {"rate": 4, "num_requests": 100},
    "frontend-bound": {"rate": 16, "num_requests": 200, "input_len": 1024, "output_len": 16},
    "offload-thrash": {"rate": 8, "num_requests": 400, "workload": _OFFLOAD_WORKLOAD},
    "offload-helps": {"rate": 8, "num_requests": 400, "workload": _OFFLOAD_WORKLOAD},
    "ep-hot-experts": {"rate": 8, "num_requests": 150},
    "healthy-ep": {"rate": 8, "num_requests": 150},
    "pp-bubbles": {"rate": 2, "num_requests": 150},
    "healthy-pp": {"rate": 2, "num_requests": 150},
}


def speed(repeats: int = 3) -> float:
    """The CPU-time speed-up of the best of `repeats` runs (wall-clock too, for reference)."""
    best_wall = best_cpu = 0.0
    for _ in range(repeats):
        cpu_start = time.process_time()
        run = simulate(load_scenario("healthy"), rate=4, num_requests=1000)
        cpu_s = time.process_time() - cpu_start
        best_wall = max(best_wall, run.speedup)
        best_cpu = max(best_cpu, run.duration_s / cpu_s)
        print(
            f"healthy, 1000 requests at 4 req/s (chat mix): {run.duration_s:.1f} s simulated "
            f"in {run.wall_s:.2f} s wall ({run.speedup:.0f}x real time), {cpu_s:.2f} CPU-s "
            f"({run.duration_s / cpu_s:.0f}x)"
        )
    print(f"best of {repeats}: {best_wall:.0f}x by wall clock, {best_cpu:.0f}x by CPU time")
    return best_cpu


def signatures() -> None:
    for name, load in SIGNATURE_LOADS.items():
        r = simulate(load_scenario(name), **load)  # type: ignore[arg-type]
        free = [blocks for _, blocks in r.free_blocks_trajectory]
        falling = len(free) > 1 and all(b < a for a, b in itertools.pairwise(free))
        acceptance = "-" if r.spec_acceptance_rate is None else f"{r.spec_acceptance_rate:.3f}"
        print(
            f"{name:20s} {load}\n    ttft_p95={r.ttft.p95_s * 1e3:.1f}ms itl_p50="
            f"{r.itl.p50_s * 1e3:.1f}ms itl_p95={r.itl.p95_s * 1e3:.1f}ms "
            f"queue_share={r.queue_share_of_ttft:.2f} preemptions={r.num_preemptions} "
            f"kv_max={r.kv_usage_max:.3f} gpu_util={r.gpu_util:.2f} sm_active={r.sm_active:.2f} "
            f"dram_active={r.dram_active:.2f} decode_mem_bound={r.decode_memory_bound_share:.2f} "
            f"comm_share={r.comm_share:.2f} spec_acceptance={acceptance} "
            f"frontend_busy={r.frontend_busy:.2f} leaked={r.num_leaked_blocks} "
            f"free_blocks_falling={falling} offload_hit_rate={r.offload_hit_rate} "
            f"offload_stored={r.offload_stored_blocks} offload_loaded={r.offload_loaded_blocks} "
            f"speedup={r.speedup:.0f}x"
        )


def peak_rss_mib(num_requests: int) -> float:
    """This process's peak resident memory after simulating `num_requests` (run it fresh)."""
    simulate(load_scenario("healthy"), rate=4, num_requests=num_requests)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def memory() -> float:
    """Peak RSS at each of MEMORY_SIZES, each in a fresh process; gives the largest's ratio."""
    peaks = []
    for num_requests in MEMORY_SIZES:
        out = subprocess.run(
            [sys.executable, __file__, "--rss", str(num_requests)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        peaks.append(float(out.strip()))
    pairs = zip(MEMORY_SIZES, peaks, strict=True)
    sizes = "  ".join(f"{n:,} requests {mib:,.0f} MiB" for n, mib in pairs)
    ratio = peaks[-1] / peaks[0]
    print(f"peak RSS (healthy, chat mix, 4 req/s): {sizes}  ({ratio:.2f}x)")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--signatures", action="store_true", help="also print the signatures")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory runs")
    parser.add_argument("--rss", type=int, help=argparse.SUPPRESS)  # one memory run
    args = parser.parse_args()
    if args.rss:
        print(f"{peak_rss_mib(args.rss):.1f}")
        return 0
    if args.signatures:
        signatures()
    ratio = speed()
    grown = 1.0 if args.no_memory else memory()
    return 0 if ratio >= GOAL and grown <= MEMORY_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
