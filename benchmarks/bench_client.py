"""Benchmark: the bench client's CPU per streamed chunk and its accuracy, beside a raw client.

One run, one fast streaming server on 127.0.0.1 (the loopback test server in
engine mode on uvloop: every ITL one decode step writes the next token of every
running stream, and logs each write's perf_counter_ns), N streams × T tokens at
each ITL. Clients run one after the other in child processes niced by +5, so the
server keeps the upper hand on a small machine:

- `infertriage`: `run_bench` itself (closed loop at N streams; `--workers`), its
  CPU taken over the load window by the runner;
- `raw aiohttp`: the minimal client — N concurrent POSTs reading raw chunks with
  `iter_any()` and stamping each, no parsing — on asyncio's default loop.

Reported per ITL and client: CPU-seconds per 10,000 streamed chunks (server-side
token writes); for infertriage also the error of its TPOT per request against the
server's logged writes (true TPOT), of its per-token ITL samples against the true
per-token gaps, and the delay of its arrival stamps after the server's writes
(one system-wide monotonic clock). Speed is compared as a ratio in one run because
these machines are noisy; the host's load average is printed beside the figures.

    .venv/bin/python benchmarks/bench_client.py [--streams 32] [--tokens 200]
        [--itl 5ms,1ms] [--requests 160] [--workers 1] [--repeat 2] [--client-nice 5]
        [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson

from infertriage.analyze.latency import itl_samples, tpot_s
from infertriage.api.bench import run_bench
from infertriage.loadgen.testserver import Behavior, fetch_writes, serve_in_process
from infertriage.schemas import RequestRecord, RunDir, parse_duration

CLIENT_NICE = 5  # the default of --client-nice


@dataclass(frozen=True)
class Load:
    url: str
    streams: int
    requests: int
    tokens: int
    workers: int
    nice: int


def _infertriage(load: Load) -> dict[str, Any]:
    os.nice(load.nice)
    out = Path(tempfile.mkdtemp(prefix="bench-client-"))
    result = run_bench(
        url=load.url, concurrencies=[load.streams], num_requests=load.requests,
        workers=load.workers, workload=f"synthetic:input=16,output={load.tokens}",
        out=out / "run",
    )  # fmt: skip
    client = result.levels[0].client
    return {"cpu_s": client.cpu_s, "wall_s": client.wall_s, "run": str(out / "run"),
            "client_bound": client.client_bound, "host_busy": client.host_busy,
            "reasons": list(client.reasons)}  # fmt: skip


async def _raw_load(url: str, streams: int, requests: int, tokens: int) -> tuple[float, float]:
    body = orjson.dumps({
        "model": "test-model", "max_tokens": tokens, "stream": True,
        "messages": [{"role": "user", "content": "hello " * 16}],
        "stream_options": {"include_usage": True},
    })  # fmt: skip
    todo = iter(range(requests))
    stamps: list[int] = []

    async def user(session: aiohttp.ClientSession) -> None:
        for i in todo:
            headers = {"Content-Type": "application/json", "X-Request-Id": f"raw-{i}"}
            async with session.post(url + "/v1/chat/completions", data=body,
                                    headers=headers) as resp:  # fmt: skip
                async for _ in resp.content.iter_any():
                    stamps.append(time.perf_counter_ns())

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(user(session) for _ in range(streams)))
        return time.process_time() - cpu0, time.perf_counter() - wall0


def _raw(load: Load) -> dict[str, Any]:
    os.nice(load.nice)
    cpu_s, wall_s = asyncio.run(_raw_load(load.url, load.streams, load.requests, load.tokens))
    return {"cpu_s": cpu_s, "wall_s": wall_s}


def _child_main(conn: Any, target: Any, args: tuple[Any, ...]) -> None:
    conn.send(target(*args))
    conn.close()


def _in_child(target: Any, *args: Any) -> dict[str, Any]:
    """Run one client in a fresh, non-daemon process (so it may start --workers of its own)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(child, target, args))
    proc.start()
    result: dict[str, Any] = parent.recv()
    proc.join()
    return result


def _accuracy(run_dir: Path, writes: dict[str, list[int]]) -> dict[str, float]:
    run = RunDir.open(run_dir)
    base_ns = run.read_info().environment["perf_counter_start_ns"]
    tpot_err, itl_err, delays, true_tpots = [], [], [], []
    for record in run.iter_records(run.requests, RequestRecord):
        truth = np.asarray(writes[record.id], dtype=np.int64)
        true_tpot = (truth[-1] - truth[0]) * 1e-9 / (len(truth) - 1)
        true_tpots.append(true_tpot)
        tpot_err.append(((tpot_s(record) or 0.0) - true_tpot) / true_tpot)
        itl_err.append(itl_samples(record) - np.diff(truth) * 1e-9)
        arrivals = np.repeat([base_ns + c.ts * 1e9 for c in record.chunks],
                             [c.num_tokens for c in record.chunks])  # fmt: skip
        delays.append((arrivals - truth) * 1e-9)
    itl_abs = np.abs(np.concatenate(itl_err))
    delay = np.concatenate(delays)
    return {
        "true_tpot_s": float(np.mean(true_tpots)),
        "tpot_error_mean": float(np.mean(tpot_err)),
        "tpot_error_max_abs": float(np.max(np.abs(tpot_err))),
        "itl_abs_error_p50_s": float(np.percentile(itl_abs, 50)),
        "itl_abs_error_p99_s": float(np.percentile(itl_abs, 99)),
        "stamp_delay_p50_s": float(np.percentile(delay, 50)),
        "stamp_delay_p99_s": float(np.percentile(delay, 99)),
    }


def _one_itl(itl_s: float, args: argparse.Namespace) -> dict[str, Any]:
    behavior = Behavior(ttft_s=0.01, itl_s=itl_s, num_tokens=args.tokens)
    ours: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    with serve_in_process(behavior, uvloop=True, engine=True, log_writes=True) as url:
        for _ in range(args.repeat):  # interleaved, so drift in the host hits both alike
            load = Load(url, args.streams, args.requests, args.tokens, args.workers,
                        args.client_nice)  # fmt: skip
            ours.append(_in_child(_infertriage, load))
            raw.append(_in_child(_raw, load))
        writes = fetch_writes(url)
    ours_ids = [w for key, w in writes.items() if not key.startswith("raw-")]
    chunks_per_run = sum(len(w) for w in ours_ids) / args.repeat
    ours_cpu = statistics.median(r["cpu_s"] for r in ours) / chunks_per_run * 1e4
    raw_cpu = statistics.median(r["cpu_s"] for r in raw) / chunks_per_run * 1e4
    return {
        "itl_s": itl_s,
        "chunks_per_run": chunks_per_run,
        "chunks_per_s": chunks_per_run / statistics.median(r["wall_s"] for r in ours),
        "infertriage_cpu_s_per_10k": ours_cpu,
        "raw_aiohttp_cpu_s_per_10k": raw_cpu,
        "ratio": ours_cpu / raw_cpu,
        "client_bound": [r["client_bound"] for r in ours],
        "host_busy": [r["host_busy"] for r in ours],
        **_accuracy(Path(ours[-1]["run"]), writes),
    }


def _print(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"{args.streams} streams × {args.tokens} tokens, {args.requests} requests per run, "
          f"--workers {args.workers}, clients at nice {args.client_nice}, median of "
          f"{args.repeat}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")  # fmt: skip
    head = ("ITL", "true ITL", "chunks/s", "ours CPU-s/10k", "raw CPU-s/10k", "ratio",
            "TPOT err", "|ITL err| p99", "stamp p99", "client_bound", "host_busy")  # fmt: skip
    print(" | ".join(head))
    for r in rows:
        print(" | ".join([
            f"{r['itl_s'] * 1e3:g} ms", f"{r['true_tpot_s'] * 1e3:.3f} ms",
            f"{r['chunks_per_s']:,.0f}", f"{r['infertriage_cpu_s_per_10k']:.3f}",
            f"{r['raw_aiohttp_cpu_s_per_10k']:.3f}", f"{r['ratio']:.2f}",
            f"{r['tpot_error_mean']:+.2%} (max {r['tpot_error_max_abs']:.2%})",
            f"{r['itl_abs_error_p99_s'] * 1e3:.3f} ms", f"{r['stamp_delay_p99_s'] * 1e3:.2f} ms",
            str(r["client_bound"]), str(r["host_busy"]),
        ]))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--itl", default="5ms,1ms", help="Comma list of inter-token latencies.")
    parser.add_argument("--requests", type=int, default=160, help="Requests per client run.")
    parser.add_argument("--workers", type=int, default=1, help="infertriage --workers.")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--client-nice", type=int, default=CLIENT_NICE,
                        help="Niceness of the clients (the server keeps 0).")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [_one_itl(parse_duration(text, "ms"), args) for text in args.itl.split(",")]
    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print(rows, args)


if __name__ == "__main__":
    main()
