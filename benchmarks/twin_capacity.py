"""benchmark: how many concurrent streams, and chunks/s, one core of the real-time twin serves
with its engine step slip p99 under 1 ms (goal: >= 256 streams and >= 5,000 chunks/s).

Run `python benchmarks/twin_capacity.py` (on a machine with at least two cores). The twin
(`healthy` scenario) runs in a child process pinned to one core (`--server-core`, default 0);
this process, pinned to another (`--client-core`, default 1), keeps N streams open (closed
loop: each stream that ends is replaced at once; 64-token prompts, `--output-len` tokens with
`ignore_eos`) with a raw aiohttp client on uvloop that only counts the SSE events it reads.
For each level it waits `--warmup` seconds, then reads over `--window` seconds the chunks
received per second, the client's inter-chunk gap p50, the twin's step slip (how late each
engine step's outputs were handed over after the step's modelled end, from the driver's
`step_slip_s`) and the twin process's CPU use (and so its CPU per chunk). Prints one row
per level and the largest level whose slip p99 is under 1 ms; exits 1 when that level is
under the goal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np
import uvloop
from aiohttp import web

from infertriage.twin.scenario import load_scenario
from infertriage.twin.server import make_app

GOAL_STREAMS = 256
GOAL_CHUNKS_S = 5000.0
SLIP_LIMIT_S = 1e-3
READY = "twin-capacity listening on "
PROMPT = " ".join(["hello"] * 64)


# ---------------------------------------------------------------- the twin (child process)
def serve(core: int, scenario_name: str) -> None:
    """The twin as `infertriage twin` serves it, plus `/bench/stats`, pinned to `core`."""
    os.sched_setaffinity(0, {core})
    sys.setswitchinterval(0.0005)  # as `twin.server.serve` sets it
    scenario = load_scenario(scenario_name)
    scenario = scenario.model_copy(
        update={"engine": scenario.engine.model_copy(update={"load_time_s": 0.0})}
    )
    app = make_app(scenario)
    marks = {"wall": time.monotonic(), "cpu": time.process_time()}

    async def stats(_request: web.Request) -> web.Response:
        driver = app["twin"].driver
        slips, driver.step_slip_s = driver.step_slip_s, []
        now, cpu = time.monotonic(), time.process_time()
        cpu_share = (cpu - marks["cpu"]) / max(now - marks["wall"], 1e-9)
        marks.update(wall=now, cpu=cpu)
        body = {"slip_s": slips, "cpu_share": cpu_share, "busy_s": app["twin"].frontend.busy_s}
        return web.json_response(body)

    app.router.add_get("/bench/stats", stats)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        print(f"{READY}http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


# ---------------------------------------------------------------- the client (this process)
class Streams:
    """N streams kept open; counts SSE events and stamps their arrival."""

    def __init__(self, url: str, output_len: int) -> None:
        self.url = url
        self.body = {
            "prompt": PROMPT,
            "max_tokens": output_len,
            "ignore_eos": True,
            "stream": True,
        }
        self.num_events = 0
        self.gaps: list[float] = []
        self.recording = False
        self.errors = 0

    async def one(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        while not stop.is_set():
            last = 0.0
            try:
                async with session.post(f"{self.url}/v1/completions", json=self.body) as resp:
                    async for data in resp.content.iter_any():
                        now = time.perf_counter()
                        self.num_events += data.count(b"\n\n")
                        if self.recording and last:
                            self.gaps.append(now - last)
                        last = now
            except aiohttp.ClientError:
                self.errors += 1


@dataclass(frozen=True)
class Level:
    streams: int
    chunks_s: float
    gap_p50_s: float
    slip_p50_s: float
    slip_p99_s: float
    slip_max_s: float
    num_steps: int
    twin_cpu: float
    errors: int

    @property
    def cpu_us_per_chunk(self) -> float:
        """The twin's CPU per streamed chunk: a figure other load on the host barely moves."""
        return self.twin_cpu / self.chunks_s * 1e6 if self.chunks_s else 0.0

    @property
    def ok(self) -> bool:
        return self.slip_p99_s < SLIP_LIMIT_S and self.errors == 0


async def _stats(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(f"{url}/bench/stats") as resp:
        document: dict[str, Any] = await resp.json()
        return document


async def measure(url: str, streams: int, output_len: int, warmup: float, window: float) -> Level:
    client = Streams(url, output_len)
    stop = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = [asyncio.create_task(client.one(session, stop)) for _ in range(streams)]
        await asyncio.sleep(warmup)
        await _stats(session, url)
        client.recording, start_events, start = True, client.num_events, time.perf_counter()
        await asyncio.sleep(window)
        elapsed = time.perf_counter() - start
        events = client.num_events - start_events
        client.recording = False
        stats = await _stats(session, url)
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    slips = np.asarray(stats["slip_s"] or [0.0])
    return Level(
        streams=streams,
        chunks_s=events / elapsed,
        gap_p50_s=float(np.median(client.gaps)) if client.gaps else 0.0,
        slip_p50_s=float(np.percentile(slips, 50)),
        slip_p99_s=float(np.percentile(slips, 99)),
        slip_max_s=float(slips.max()),
        num_steps=len(stats["slip_s"]),
        twin_cpu=float(stats["cpu_share"]),
        errors=client.errors,
    )


def start_twin(core: int, scenario: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, __file__, "--serve", "--server-core", str(core)]
    command += ["--scenario", scenario]
    # stderr: aiohttp logs every stream the client drops at a level's end
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(READY):
        proc.kill()
        raise SystemExit(f"the twin did not start: {line!r}")
    return proc, line[len(READY) :].strip()


def run_levels(args: argparse.Namespace, levels: Sequence[int]) -> list[Level]:
    proc, url = start_twin(args.server_core, args.scenario)
    results = []
    try:
        for streams in levels:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                level = runner.run(measure(url, streams, args.output_len, args.warmup, args.window))
            results.append(level)
            print(
                f"{level.streams:6d} {level.chunks_s:10,.0f} {level.gap_p50_s * 1e3:9.2f} "
                f"{level.slip_p50_s * 1e3:9.3f} {level.slip_p99_s * 1e3:9.3f} "
                f"{level.slip_max_s * 1e3:9.2f} {level.num_steps:6d} {level.twin_cpu:6.2f} "
                f"{level.cpu_us_per_chunk:7.1f} "
                f"{level.errors:4d}  {'ok' if level.ok else 'over'}",
                flush=True,
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scenario", default="healthy")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--levels", default="16,64,128,256,384,512")
    parser.add_argument("--output-len", type=int, default=512)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--window", type=float, default=5.0)
    args = parser.parse_args()
    if args.serve:
        serve(args.server_core, args.scenario)
        return 0
    os.sched_setaffinity(0, {args.client_core})
    print(
        f"load average before: {os.getloadavg()}; twin on core {args.server_core}, client on "
        f"core {args.client_core}"
    )
    print(
        " streams   chunks/s  gap p50ms slip p50ms slip p99ms slip maxms  steps twncpu us/chnk errs"
    )
    levels = run_levels(args, [int(x) for x in args.levels.split(",")])
    print(f"load average after: {os.getloadavg()}")
    passing = [lv for lv in levels if lv.ok]
    best = max(passing, key=lambda lv: lv.streams, default=None)
    summary = {
        "largest_streams_slip_p99_under_1ms": best.streams if best else 0,
        "chunks_s_there": round(best.chunks_s) if best else 0,
        "goal": {"streams": GOAL_STREAMS, "chunks_s": GOAL_CHUNKS_S},
    }
    print(json.dumps(summary))
    met = best is not None and best.streams >= GOAL_STREAMS and best.chunks_s >= GOAL_CHUNKS_S
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
