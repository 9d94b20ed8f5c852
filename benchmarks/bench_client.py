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

`--ttft` measures the first-token stamp instead. The same server in per-stream mode
writes the first token 40 ms after each request reaches its handler and logs both
moments; once with keep-alive and once closing every connection after its stream (as
llama-server does), at each of `--ttft-streams`, three clients each in a child process
of its own run `--repeat` blocks of `--ttft-requests` requests in turn: infertriage
(`run_bench`), and the floor (`infertriage_testing.floor.raw_ttft`: stamp, post, first
content read, nothing parsed) on asyncio's loop and on uvloop. Per client: TTFT p50,
mean and p90; the server's own TTFT (handler start → first token write); what the
client added to it per request (its TTFT less the server's), split into the send (the
stamp → the handler's start: connection set-up, the write) and the read (the write → the
stamp); and ours − the floor's TTFT (p50, mean, and the median of the per-block p50
differences, which a drifting host moves least) and added time.

    .venv/bin/python benchmarks/bench_client.py --ttft [--repeat 10]
        [--ttft-servers keepalive,close] [--ttft-streams 1,8] [--ttft-requests 40]
        [--ttft-tokens 8] [--client-nice 0] [--json]
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
import uvloop

from infertriage.analyze.stats.latency import itl_samples, tpot_s
from infertriage.api.bench import BenchSpec, run_bench
from infertriage.schemas import RequestRecord, RunDir, parse_duration
from infertriage_testing.floor import TtftRow, raw_ttft
from infertriage_testing.testserver import (
    Behavior,
    fetch_arrivals,
    fetch_log,
    fetch_writes,
    serve_in_process,
)

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
        BenchSpec(
            url=load.url,
            concurrencies=[load.streams],
            num_requests=load.requests,
            workers=load.workers,
            workload=f"synthetic:input=16,output={load.tokens}",
            out=out / "run",
        )
    )
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


def _base_ns(run: RunDir) -> int:
    """The run's clock origin on the system's perf_counter_ns (stamps compare with the server's)."""
    base_ns = run.read_info().environment.perf_counter_start_ns
    assert base_ns is not None, "the run recorded no perf_counter origin"
    return base_ns


def _accuracy(run_dir: Path, writes: dict[str, list[int]]) -> dict[str, float]:
    run = RunDir.open(run_dir)
    base_ns = _base_ns(run)
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


# --- `--ttft`: the first-token stamp against a raw reader and the server's truth ----------

TTFT_S = 0.040  # the server writes the first token this long after the request arrives
# infertriage's client (run_bench), and the raw floor on asyncio's loop and on uvloop's
TTFT_CLIENTS = ("ours", "raw", "raw_uvloop")


def _ours_ttft(load: Load) -> list[TtftRow]:
    """`run_bench` itself; its records' sent and first-token stamps on the system's clock."""
    out = Path(tempfile.mkdtemp(prefix="bench-ttft-"))
    run_bench(
        BenchSpec(
            url=load.url,
            concurrencies=[load.streams],
            num_requests=load.requests,
            workers=load.workers,
            workload=f"synthetic:input=16,output={load.tokens}",
            out=out / "run",
        )
    )
    run = RunDir.open(out / "run")
    base_ns = _base_ns(run)
    return [
        (r.id, base_ns + round(r.sent_ts * 1e9), base_ns + round(r.first_token_ts * 1e9))
        for r in run.iter_records(run.requests, RequestRecord)
        if r.first_token_ts is not None
    ]


def _ttft_child(conn: Any, client: str, load: Load, keepalive: bool) -> None:
    """One client's process: a block of requests each time the parent sends a tag."""
    os.nice(load.nice)
    while (tag := conn.recv()) is not None:
        if client == "ours":
            conn.send(_ours_ttft(load))
        else:
            factory = uvloop.new_event_loop if client == "raw_uvloop" else None
            reader = raw_ttft(load.url, streams=load.streams, requests=load.requests,
                              tokens=load.tokens, tag=tag, keepalive=keepalive)  # fmt: skip
            with asyncio.Runner(loop_factory=factory) as runner:
                conn.send(runner.run(reader))
    conn.close()


class _Client:
    """A client in a child process of its own, started once and driven block by block."""

    def __init__(self, client: str, load: Load, keepalive: bool) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_ttft_child, args=(child, client, load, keepalive))
        self.proc.start()

    def block(self, tag: str) -> list[TtftRow]:
        self.conn.send(tag)
        return [tuple(r) for r in self.conn.recv()]

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join()


def _p50(values: Any) -> float:
    return float(np.median(values))


def _wave_sends(
    blocks: list[list[TtftRow]], arrivals: dict[str, int], streams: int
) -> tuple[float, float]:
    """The send's p50 (stamp → the handler's start) of each block's first wave (its first
    `streams` requests by send: connections opened together) and of the rest."""
    first: list[float] = []
    rest: list[float] = []
    for block in blocks:
        for k, (rid, sent, _) in enumerate(sorted(block, key=lambda r: r[1])):
            if rid in arrivals:
                (first if k < streams else rest).append((arrivals[rid] - sent) * 1e-9)
    return _p50(first) if first else float("nan"), _p50(rest) if rest else float("nan")


def _ttft_figures(
    blocks: list[list[TtftRow]], log: dict[str, Any], arrivals: dict[str, int], streams: int
) -> dict[str, Any]:
    """TTFT against the server's truth, per request, split into the send's part and the read's.

    The truth is the server's own TTFT, from its handler's start to its first token write
    (40 ms plus its timer's lateness); what a client adds is the send (stamp → the handler's
    start: connection set-up, the write, the server's parse) and the read (the write → the
    stamp). One system-wide monotonic clock.
    """
    rows = [r for block in blocks for r in block if r[2] and r[0] in log]
    sent, first = (np.array([r[i] for r in rows], dtype=np.int64) for i in (1, 2))
    write = np.array([log[r[0]][0] for r in rows], dtype=np.int64)
    arrival = np.array([arrivals[r[0]] for r in rows], dtype=np.int64)
    ttft, truth = (first - sent) * 1e-9, (write - arrival) * 1e-9
    block_p50 = [float(np.median([(r[2] - r[1]) * 1e-9 for r in b if r[2]])) for b in blocks]
    p50 = _p50
    return {"n": len(rows), "ttft_p50_s": p50(ttft), "ttft_mean_s": float(np.mean(ttft)),
            "ttft_p90_s": float(np.percentile(ttft, 90)), "truth_p50_s": p50(truth),
            "added_p50_s": p50(ttft - truth), "added_mean_s": float(np.mean(ttft - truth)),
            "send_p50_s": p50((arrival - sent) * 1e-9), "read_p50_s": p50((first - write) * 1e-9),
            "read_p99_s": float(np.percentile((first - write) * 1e-9, 99)),
            "send_wave_p50_s": _wave_sends(blocks, arrivals, streams),
            "block_p50_s": block_p50}  # fmt: skip


def _one_ttft(mode: str, streams: int, args: argparse.Namespace) -> dict[str, Any]:
    """One server (keep-alive, or closing every connection), the clients' blocks alternating."""
    keepalive = mode == "keepalive"
    behavior = Behavior(ttft_s=TTFT_S, itl_s=0.005, num_tokens=args.ttft_tokens,
                        close_after=not keepalive)  # fmt: skip
    blocks: dict[str, list[list[TtftRow]]] = {name: [] for name in TTFT_CLIENTS}
    with serve_in_process(behavior) as url:
        load = Load(url, streams, args.ttft_requests, args.ttft_tokens, args.workers,
                    args.client_nice)  # fmt: skip
        clients = {name: _Client(name, load, keepalive) for name in TTFT_CLIENTS}
        try:
            for rep in range(args.repeat):  # interleaved, so drift in the host hits all alike
                for name, client in clients.items():
                    blocks[name].append(client.block(f"{name}{rep}"))
        finally:
            for client in clients.values():
                client.close()
        log, arrivals = fetch_log(url), fetch_arrivals(url)
    row: dict[str, Any] = {"mode": mode, "streams": streams}
    for name in TTFT_CLIENTS:
        row[name] = _ttft_figures(blocks[name], log, arrivals, streams)
    for floor in TTFT_CLIENTS[1:]:
        ours, raw = row["ours"], row[floor]
        pairs = zip(ours["block_p50_s"], raw["block_p50_s"], strict=True)
        raw["ours_minus_this"] = {
            "p50_s": ours["ttft_p50_s"] - raw["ttft_p50_s"],
            "mean_s": ours["ttft_mean_s"] - raw["ttft_mean_s"],
            "paired_s": float(np.median([a - b for a, b in pairs])),
            "added_p50_s": ours["added_p50_s"] - raw["added_p50_s"],
        }
    return row


def _print_ttft(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"TTFT: the server's first token {TTFT_S * 1e3:g} ms after a request arrives, "
          f"{args.ttft_tokens} tokens, {args.ttft_requests} requests a block, {args.repeat} "
          f"blocks a client, alternating, clients at nice {args.client_nice}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")  # fmt: skip
    print(
        "server | streams | client | n | TTFT p50 | mean | p90 | truth p50 | added p50 "
        "(send + read) | send p50: 1st wave / rest | read p99 | ours − this: TTFT p50 / mean "
        "/ paired, added p50"
    )
    ms = 1e3
    for r in rows:
        for name in TTFT_CLIENTS:
            f, d = r[name], r[name].get("ours_minus_this")
            vs = (f"{d['p50_s'] * ms:+.2f} / {d['mean_s'] * ms:+.2f} / {d['paired_s'] * ms:+.2f}"
                  f", {d['added_p50_s'] * ms:+.2f} ms" if d else "")  # fmt: skip
            print(" | ".join([
                r["mode"], str(r["streams"]), name, str(f["n"]),
                f"{f['ttft_p50_s'] * ms:.2f} ms", f"{f['ttft_mean_s'] * ms:.2f} ms",
                f"{f['ttft_p90_s'] * ms:.2f} ms", f"{f['truth_p50_s'] * ms:.2f} ms",
                f"{f['added_p50_s'] * ms:.2f} ({f['send_p50_s'] * ms:.2f} + "
                f"{f['read_p50_s'] * ms:.2f}) ms",
                f"{f['send_wave_p50_s'][0] * ms:.2f} / {f['send_wave_p50_s'][1] * ms:.2f} ms",
                f"{f['read_p99_s'] * ms:.2f} ms", vs,
            ]))  # fmt: skip


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
    parser.add_argument(
        "--ttft",
        action="store_true",
        help="Instead: the TTFT bias against a raw reader and the truth.",
    )
    parser.add_argument("--ttft-servers", default="keepalive,close", help="Comma list (--ttft).")
    parser.add_argument("--ttft-streams", default="1,8", help="Comma list (--ttft).")
    parser.add_argument("--ttft-requests", type=int, default=40, help="Per client run (--ttft).")
    parser.add_argument("--ttft-tokens", type=int, default=8)
    args = parser.parse_args()
    if args.ttft:
        rows = [_one_ttft(mode, int(n), args) for mode in args.ttft_servers.split(",")
                for n in args.ttft_streams.split(",")]  # fmt: skip
        if args.json:
            sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            _print_ttft(rows, args)
        return
    rows = [_one_itl(parse_duration(text, "ms"), args) for text in args.itl.split(",")]
    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print(rows, args)


if __name__ == "__main__":
    main()
