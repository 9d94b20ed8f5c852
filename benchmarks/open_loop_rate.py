"""Benchmark: how fast one `bench` process keeps an open-loop schedule, and `--workers N`.

One cheap loopback server (a raw asyncio protocol on uvloop, in a process of its own)
answers every POST at once with a short stream (4 content events, a usage event,
`[DONE]`) on a kept-alive connection, so the server costs next to nothing and what
falls behind is the client. For each rate (Poisson arrivals by default) and each
worker count, `run_bench` itself runs one level in a fresh child process, and the
benchmark reads back from its records and its level result:

- schedule lag = sent − scheduled (the dispatch lag, every request, as recorded):
  p50, p99 and max;
- the achieved send rate (requests sent / the schedule's span) against the target;
- the share of requests sent more than 5 ms late (a stall's mark: the p99 is one stall),
  and the longest pass of the cyclic collector in the level's process while its event
  loop ran (one worker: during the load; more: none, the workers are not watched);
- the client's CPU (the busiest worker's share of a core, as `bench` measures it), the
  CPU-s per request, and the ceiling it implies: the rate sent over the busiest worker's
  share of a core, the rate the client would reach with a core per worker (its cost per
  request unchanged); with `--workers N` it should grow about N-fold (the scaling a
  2-core host shared with the server cannot show in the rate itself);
- `client_bound` and `host_busy` as `bench` judged them, and their reasons.

The goal (issue 35, part 3): lag p99 ≤ 5 ms at 1,000 req/s from one process, more
with `--workers 2`, and `client_bound` true exactly where the schedule is not kept.
The host's load average is printed beside the figures: other work moves them.

    PYTHONPATH=src .venv/bin/python benchmarks/open_loop_rate.py
        [--rates 200,400,800,1000,1500] [--workers 1,2] [--duration 10]
        [--arrival poisson] [--repeat 1] [--src OLD/src] [--pin] [--nice 0] [--json]

`--src` runs a previous tree's `src/` beside this one, level by level (before, after).
`--pin` keeps the server on the last CPU and the clients on the others, as a remote
server would (on the same cores, each send wakes the server, which takes the client's
core). `--nice -10` (root) runs the server and the clients ahead of other work on a shared host,
standing in for a machine of this class that runs nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import uvloop

from infertriage.api.bench import BenchSpec, run_bench
from infertriage.schemas import RequestRecord, RunDir

GOAL_RATE, GOAL_LAG_P99_S = 1000.0, 0.005
_ROOT = Path(__file__).resolve().parent.parent


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunk(content: str | None, finish: str | None, usage: dict[str, int] | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 0,
                            "model": "loopback", "choices": choices}  # fmt: skip
    if usage:
        body["usage"] = usage
    return _sse(body)


def _response(status: str, ctype: str, body: bytes) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: keep-alive\r\n\r\n")  # fmt: skip
    return head.encode() + body


_STREAM = _response(
    "200 OK",
    "text/event-stream",
    b"".join(_chunk(t, None) for t in ("a", "b", "c"))
    + _chunk("d", "length")
    + _chunk(None, None, {"prompt_tokens": 16, "completion_tokens": 4, "total_tokens": 20})
    + b"data: [DONE]\n\n",
)
_MODELS = _response("200 OK", "application/json", json.dumps({
    "object": "list", "data": [{"id": "loopback", "object": "model", "max_model_len": 4096}],
}).encode())  # fmt: skip
_NOT_FOUND = _response("404 Not Found", "application/json", b'{"error":"not found"}')


class _Http(asyncio.Protocol):
    """HTTP/1.1 with kept-alive connections, just enough for `bench`: every POST streams."""

    def __init__(self) -> None:
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            if head.startswith(b"post"):
                self.transport.write(_STREAM)
            elif head.startswith(b"get /v1/models"):
                self.transport.write(_MODELS)
            else:
                self.transport.write(_NOT_FOUND)


def _serve(sock: socket.socket, nice: int, cpus: set[int] | None) -> None:
    os.nice(nice)
    if cpus:
        os.sched_setaffinity(0, cpus)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Http, sock=sock)
        await server.serve_forever()

    uvloop.run(main())


def _gc_pauses() -> list[tuple[float, int]]:
    """The cyclic collector's passes in this process from now on while an event loop runs
    (with one worker: the load), each its duration (s) and generation."""
    pauses: list[tuple[float, int]] = []
    began = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if asyncio._get_running_loop() is None:  # not during the load
            return
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses.append((time.perf_counter() - began[0], info["generation"]))

    gc.callbacks.append(on_gc)
    return pauses


def _bench(url: str, rate: float, workers: int, duration: float, arrival: str) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="open-loop-")) / "run"
    pauses = _gc_pauses()  # with one worker, the load's own process
    result = run_bench(
        BenchSpec(
            url=url,
            client={"model": "loopback"},
            rates=(rate,),
            duration_s=duration,
            arrival=arrival,
            workers=workers,
            workload="synthetic:input=16,output=4",
            check_tokens=False,
            out=out,
        )
    )
    level = result.levels[0]
    client = level.client
    run = RunDir.open(out)
    records = list(run.iter_records(run.requests, RequestRecord))
    lag = np.asarray([r.dispatch_lag_s - r.client_queue_s for r in records])
    scheduled = np.asarray([r.scheduled_ts for r in records])
    sent = np.asarray([r.sent_ts for r in records])
    span = float(sent.max() - scheduled.min()) if len(records) > 1 else 0.0
    return {
        "rate": rate, "workers": workers, "requests": len(records),
        "ok": sum(1 for r in records if r.ok),
        "achieved_rate": (len(records) - 1) / span if span else 0.0,
        "lag_p50_ms": float(np.percentile(lag, 50)) * 1e3,
        "lag_p99_ms": float(np.percentile(lag, 99)) * 1e3,
        "lag_max_ms": float(lag.max()) * 1e3,
        "late_5ms": float(np.mean(lag > GOAL_LAG_P99_S)),
        "gc_max_ms": max(pauses, default=(0.0, 0))[0] * 1e3, "gc_passes": len(pauses),
        "gc_gen": max(pauses, default=(0.0, 0))[1],
        "gc_over_1ms": [(round(d * 1e3, 1), g) for d, g in pauses if d > 1e-3],
        "cpu_busiest": client.cpu_busiest, "cpu_s": client.cpu_s,
        "cpu_ms_per_request": client.cpu_s / len(records) * 1e3 if records else None,
        # the send rate the client would reach with a core per worker, its CPU per
        # request unchanged: the rate sent over the busiest worker's share of a core
        "ceiling": (len(records) - 1) / span / client.cpu_busiest
        if span and client.cpu_busiest else 0.0,
        "loop_lag_p99_ms": client.loop_lag.p99 * 1e3 if client.loop_lag else None,
        "client_bound": client.client_bound, "host_busy": client.host_busy,
        "reasons": list(client.reasons), "uvloop": client.uvloop,
    }  # fmt: skip


def _in_child(src: str, nice: int, cpus: set[int] | None, *args: Any) -> dict[str, Any]:
    """One level in a fresh process importing infertriage from `src` (before/after), at
    `nice`, on `cpus` (its `--workers` inherit both)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(_ROOT / "testing")])}
    pin = ["taskset", "-c", ",".join(map(str, sorted(cpus)))] if cpus else []
    cmd = [*pin, "nice", "-n", str(nice), sys.executable, __file__, "--child", json.dumps(args)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the child failed:\n{done.stderr[-3000:]}")
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'tree':>6} {'rate':>6} {'wk':>2} {'sent/s':>8} {'lag p50':>8} {'p99':>8} "
          f"{'max':>8} {'>5ms':>6} {'cpu':>5} {'ms/req':>6} {'ceil/s':>7} {'loop p99':>8} "
          f"{'gc max':>6} {'load':>4}  verdict")  # fmt: skip
    for r in rows:
        verdict = "client_bound" if r["client_bound"] else "host_busy" if r["host_busy"] else "ok"
        print(f"{r['tree']:>6} {r['rate']:>6g} {r['workers']:>2} {r['achieved_rate']:>8.1f} "
              f"{r['lag_p50_ms']:>7.2f}m {r['lag_p99_ms']:>7.2f}m {r['lag_max_ms']:>7.1f}m "
              f"{r.get('late_5ms', 0):>6.2%} {r['cpu_busiest']:>5.0%} "
              f"{r['cpu_ms_per_request'] or 0:>6.3f} {r.get('ceiling', 0):>7.0f} "
              f"{r['loop_lag_p99_ms'] or 0:>7.2f}m {r.get('gc_max_ms', 0):>5.1f}m "
              f"{r['load_before']:>4.1f}"
              f"  {verdict}")  # fmt: skip
        if r["reasons"]:
            print(f"{'':>24}{'; '.join(r['reasons'])}")


def _medians(rows: list[dict[str, Any]], trees: list[str]) -> None:
    """Per (rate, workers): each tree's median lag p99 over the repeats, and after/before."""
    print("\nmedian lag p99 over the repeats (ms)" + (", after / before" if len(trees) > 1 else ""))
    keys = sorted({(r["workers"], r["rate"]) for r in rows})
    for workers, rate in keys:
        cells = []
        for tree in trees:
            mine = [
                r for r in rows if (r["workers"], r["rate"], r["tree"]) == (workers, rate, tree)
            ]
            p99 = float(np.median([r["lag_p99_ms"] for r in mine]))
            bound = sum(r["client_bound"] for r in mine)
            ceiling = float(np.median([r.get("ceiling", 0.0) for r in mine]))
            cells.append((tree, p99, bound, len(mine), ceiling))
        text = "  ".join(
            f"{t} {p:8.2f} (client_bound {b}/{n}, ceiling {c:6.0f}/s)" for t, p, b, n, c in cells
        )
        ratio = f"  ×{cells[1][1] / cells[0][1]:.2f}" if len(cells) > 1 and cells[0][1] else ""
        if len(cells) > 1 and cells[1][4]:
            ratio += f", ceiling after / before ×{cells[0][4] / cells[1][4]:.2f}"
        print(f"rate {rate:>6g} workers {workers}: {text}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="200,400,800,1000,1500")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--arrival", default="poisson")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--src", help="a previous tree's src/, run beside this one (before)")
    parser.add_argument("--pin", action="store_true", help="the server on the last CPU, "
                        "the clients on the others")  # fmt: skip
    parser.add_argument("--nice", type=int, default=0, help="the server's and clients' niceness")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_bench(*json.loads(args.child))))
        return
    every = sorted(os.sched_getaffinity(0))
    server_cpus, client_cpus = ({every[-1]}, set(every[:-1])) if args.pin else (None, None)
    trees = {"after": str(_ROOT / "src")} | ({"before": args.src} if args.src else {})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = mp.get_context("fork").Process(
        target=_serve, args=(sock, args.nice, server_cpus), daemon=True
    )
    server.start()
    rows = []
    try:
        for _ in range(args.repeat):
            for workers in (int(w) for w in args.workers.split(",")):
                for rate in (float(r) for r in args.rates.split(",")):
                    for tree, src in trees.items():  # side by side, one after the other
                        load = os.getloadavg()[0]
                        row = _in_child(
                            src,
                            args.nice,
                            client_cpus,
                            url,
                            rate,
                            workers,
                            args.duration,
                            args.arrival,
                        )
                        row |= {"tree": tree, "load_before": load, "load_after": os.getloadavg()[0]}
                        rows.append(row)
                        print(f"# {tree} rate {rate:g} workers {workers}: load {load:.2f} → "
                              f"{row['load_after']:.2f}, lag p99 {row['lag_p99_ms']:.2f} ms",
                              flush=True)  # fmt: skip
    finally:
        server.terminate()
        server.join()
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), f"cpus {os.cpu_count()}",
          f"nice {args.nice}", f"server on {server_cpus}, clients on {client_cpus}")  # fmt: skip
    _print(rows)
    _medians(rows, list(trees))
    goal = [
        r["lag_p99_ms"]
        for r in rows
        if (r["tree"], r["workers"], r["rate"]) == ("after", 1, GOAL_RATE)
    ]
    if goal:
        met = float(np.median(goal)) <= GOAL_LAG_P99_S * 1e3
        print(f"goal (1 process, {GOAL_RATE:g} req/s, lag p99 ≤ {GOAL_LAG_P99_S * 1e3:g} ms, "
              f"median of {len(goal)}): {'met' if met else 'NOT met'}")  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
