"""Benchmark: `--locust-workers` against the native client — chunks/s, CPU per chunk, accuracy.

One fast streaming server on 127.0.0.1 (the loopback test server in engine mode on
uvloop, logging every token write's perf_counter_ns), N streams × T tokens at each
ITL. Clients run one after the other, interleaved `--repeat` times, each in a child
process of its own: `run_bench` on one event loop, with `--workers 2`, and with a
Locust master and 1 and 2 workers (`--locust-workers`).

Reported per client: streamed chunks/s over the load (server-side token writes ÷
the workers' wall time) and per worker process; CPU-seconds per 10,000 chunks of
the load processes alone (the event loops, or the Locust workers: `ClientDiagnostics`)
and of every process the client ran (bench's own, the master, the workers:
`getrusage` of the child and its reaped children, start-up included); the TPOT error
against the server's logged writes and the delay of the arrival stamps after them
(`bench_client._accuracy`, one system-wide monotonic clock).

    .venv/bin/python benchmarks/bench_locust.py [--streams 32] [--tokens 200]
        [--itl 5ms] [--requests 320] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
from bench_client import _accuracy, _in_child

from infertriage.api.bench import BenchSpec, run_bench
from infertriage.schemas import parse_duration
from infertriage_testing.testserver import Behavior, fetch_writes, serve_in_process

CLIENTS = {
    "native": {},
    "native --workers 2": {"workers": 2},
    "locust 1 worker": {"locust_workers": 1},
    "locust 2 workers": {"locust_workers": 2},
}


def _cpu_all() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _client(url: str, name: str, args: argparse.Namespace, tag: int) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="bench-locust-")) / "run"
    cpu0 = _cpu_all()
    result = run_bench(
        BenchSpec(
            url=url,
            concurrencies=[args.streams],
            num_requests=args.requests,
            workload=f"synthetic:input=16,output={args.tokens}",
            out=out,
            check_tokens=False,
            seed=tag,
            **CLIENTS[name],  # type: ignore[arg-type]
        )
    )
    level = result.levels[0]
    return {
        "run": str(out),
        "cpu_all_s": _cpu_all() - cpu0,
        "cpu_load_s": level.client.cpu_s,
        "wall_s": level.client.wall_s,
        "processes": level.client.num_workers,
        "ok": level.summary.num_ok,
        "host_busy": level.client.host_busy,
    }


def _median(results: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in results))


def _one_itl(itl_s: float, args: argparse.Namespace) -> list[dict[str, Any]]:
    behavior = Behavior(ttft_s=0.01, itl_s=itl_s, num_tokens=args.tokens)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CLIENTS}
    with serve_in_process(behavior, uvloop=True, engine=True, log_writes=True) as url:
        for tag in range(args.repeat):  # interleaved: drift in the host hits all alike
            for name in CLIENTS:
                runs[name].append(_in_child(_client, url, name, args, tag))
        writes = fetch_writes(url)
    rows = []
    for name, results in runs.items():
        chunks = args.requests * args.tokens
        wall = statistics.median(r["wall_s"] for r in results)
        processes = results[0]["processes"]
        rows.append({
            "itl_s": itl_s, "client": name, "processes": processes,
            "ok": min(r["ok"] for r in results),
            "chunks_per_s": chunks / wall,
            "chunks_per_s_per_process": chunks / wall / processes,
            "cpu_load_s_per_10k": _median(results, "cpu_load_s") / chunks * 1e4,
            "cpu_all_s_per_10k": _median(results, "cpu_all_s") / chunks * 1e4,
            "host_busy": [r["host_busy"] for r in results],
            **_accuracy(Path(results[-1]["run"]), writes),
        })  # fmt: skip
    return rows


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| ITL | client | procs | chunks/s | chunks/s/proc | load CPU-s/10k | all CPU-s/10k "
          "| TPOT err | stamp delay p99 |")  # fmt: skip
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['itl_s'] * 1e3:g} ms | {r['client']} | {r['processes']} "
              f"| {r['chunks_per_s']:,.0f} | {r['chunks_per_s_per_process']:,.0f} "
              f"| {r['cpu_load_s_per_10k']:.3f} | {r['cpu_all_s_per_10k']:.3f} "
              f"| {r['tpot_error_mean'] * 100:+.2f} % "
              f"| {r['stamp_delay_p99_s'] * 1e3:.2f} ms |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--itl", default="5ms")
    parser.add_argument("--requests", type=int, default=320)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [row for itl in args.itl.split(",") for row in _one_itl(parse_duration(itl), args)]
    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print(rows)


if __name__ == "__main__":
    main()
