"""benchmark: `simulate` on a healthy 8B deployment (the `healthy` scenario, Llama-3.1-8B on
one H100) at 10 req/s of the chat mix (issue 35): how many times faster than real time it
runs, and its peak memory, at 1,000, 10,000 and 100,000 requests (goals: >= 1,000x real
time by CPU time, and memory constant in the number of requests: the largest run's peak
within 1.3x of the smallest's).

Run `python benchmarks/simulate_speed.py` (`--sizes 1000,10000` for fewer sizes,
`--signatures` to print every packaged scenario's signature figures at the loads
tests/twin/test_twin_signatures.py pins). Each size runs in a fresh process and prints the
simulated time, the wall and CPU seconds the simulation took (CPU time, which other work
on a busy machine barely moves, is what the exit code judges), the real-time multiples
and the process's peak resident memory (`ru_maxrss`, the interpreter and imports
included). Exits 1 when a size's CPU-time multiple is under 1,000x or the largest size's
peak is over 1.3x the smallest's. `--before-src DIR` also runs each size with another
checkout's `src` (main's, say) first, in the same invocation, and prints the CPU-time ratio.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time

from infertriage.twin.scenario import load_scenario
from infertriage.twin.simulate import simulate

GOAL = 1000.0  # times real time, by CPU time
MEMORY_GOAL = 1.3  # the largest size's peak over the smallest's
SIZES = (1_000, 10_000, 100_000)
RATE = 10.0

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


def one_run(num_requests: int) -> str:
    """Simulate `num_requests` (run it in a fresh process); its figures as one JSON line."""
    cpu_start = time.process_time()
    r = simulate(load_scenario("healthy"), rate=RATE, num_requests=num_requests)
    cpu_s = time.process_time() - cpu_start
    return json.dumps(
        {
            "num_requests": num_requests,
            "simulated_s": r.duration_s,
            "wall_s": r.wall_s,
            "cpu_s": cpu_s,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "ttft_p50_ms": r.ttft.p50_s * 1e3,
            "itl_p95_ms": r.itl.p95_s * 1e3,
            "num_completed": r.num_completed,
        }
    )


def _child(num_requests: int, src: str | None) -> dict[str, float]:
    """One size in a fresh process (with `src` first on its path when given)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(num_requests)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def sizes_run(sizes: tuple[int, ...], before_src: str | None = None) -> tuple[float, float]:
    """Each size in a fresh process; gives the slowest CPU-time multiple and the memory ratio."""
    rows = []
    for num_requests in sizes:
        if before_src is not None:
            before = _child(num_requests, before_src)
        row = _child(num_requests, None)
        rows.append(row)
        sim, wall, cpu = row["simulated_s"], row["wall_s"], row["cpu_s"]
        if before_src is not None:
            print(
                f"  before ({before_src}): {before['cpu_s']:.2f} CPU-s "
                f"({before['simulated_s'] / before['cpu_s']:,.0f}x), peak RSS "
                f"{before['peak_rss_mib']:,.0f} MiB; CPU before / after "
                f"{before['cpu_s'] / cpu:.2f}; load average {os.getloadavg()[0]:.1f}"
            )
        print(
            f"healthy, {num_requests:,} requests at {RATE:g} req/s (chat mix): {sim:,.0f} s "
            f"simulated in {wall:.2f} s wall ({sim / wall:,.0f}x real time), {cpu:.2f} CPU-s "
            f"({sim / cpu:,.0f}x); peak RSS {row['peak_rss_mib']:,.0f} MiB; TTFT p50 "
            f"{row['ttft_p50_ms']:.1f} ms, ITL p95 {row['itl_p95_ms']:.1f} ms",
            flush=True,
        )
    slowest = min(r["simulated_s"] / r["cpu_s"] for r in rows)
    ratio = rows[-1]["peak_rss_mib"] / rows[0]["peak_rss_mib"]
    print(
        f"slowest {slowest:,.0f}x real time by CPU (goal {GOAL:,.0f}x); peak RSS "
        f"{rows[-1]['num_requests']:,} over {rows[0]['num_requests']:,} requests: {ratio:.2f}x "
        f"(goal <= {MEMORY_GOAL}x)"
    )
    return slowest, ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--signatures", action="store_true", help="also print the signatures")
    parser.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="request counts, comma-separated"
    )
    parser.add_argument(
        "--before-src", help="another checkout's src directory to run first, for a ratio"
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one run, in a child
    args = parser.parse_args()
    if args.one:
        print(one_run(args.one))
        return 0
    if args.signatures:
        signatures()
    sizes = tuple(int(n) for n in args.sizes.split(","))
    slowest, ratio = sizes_run(sizes, args.before_src)
    return 0 if slowest >= GOAL and ratio <= MEMORY_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
