"""Benchmark: infertriage's bench client beside vLLM's, GuideLLM's and AIPerf's, in one run.

One fast streaming server on 127.0.0.1 (the loopback test server in engine mode on
uvloop, at nice 0: every ITL one decode step writes the next token of every running
stream and logs each write's perf_counter_ns). For each ITL, each client in turn
drives the same load at it — N streams (closed loop), R requests, T tokens each —
from its own child process tree at `--client-nice`:

- `infertriage`: `run_bench` in a fresh process of the project's venv;
- `raw`: a minimal aiohttp client reading raw chunks, no parsing (the floor);
- `vllm`: the request function of `vllm bench serve`
  (`vllm/benchmarks/lib/endpoint_request_func.py`, pure Python on aiohttp), driven as
  `vllm bench serve --max-concurrency N` drives it, by a runner this script writes
  to a temp dir; the file is taken at run time from vLLM's wheel on PyPI into the
  cache (`pip download vllm==V --no-deps`, one file extracted, the wheel deleted),
  and runs in a venv of its own with aiohttp, regex and tqdm; nothing of vLLM is
  in this repository or the project's venv;
- `guidellm`: `guidellm run` (profile concurrent, max_requests) from its own venv,
  beside the CPU build of torch (`pip install torch==2.13.0` first);
- `aiperf`: `aiperf profile --concurrency N --request-count R` from its own venv;
- `before` (only with `--before-src DIR`): `run_bench` as `infertriage`, imported from
  another tree's src/ (e.g. main's), so a change is judged against its base in one run.

GuideLLM and AIPerf need a tokenizer: the script writes a word-level one (the test
server's words) into the cache and an HF-cache layout for it, used offline.

Figures per client and ITL:
- CPU-seconds per 10,000 streamed chunks in the load window: the window runs from
  the first to the last token write the server logged for that client's requests;
  the client's CPU (its whole process tree, user + system, reaped children
  included) is sampled every `--sample-ms` and interpolated at the window's ends;
- the error of its reported TPOT, (E2E − TTFT)/(N − 1), and of its mean per-token
  ITL against the server's true schedule (the mean over its requests of the logged
  writes), each under the name that client gives it (see the README's table);
- where the client's per-request data can be matched to the server's log by
  request id (infertriage, vLLM): the largest per-request TPOT error and the p99
  of |ITL sample − true gap|.

    .venv/bin/python benchmarks/bench_clients_compare.py [--clients all] [--itl 5ms,1ms]
        [--streams 32] [--tokens 200] [--requests 320] [--client-nice 5]
        [--cache ~/.cache/infertriage/bench-clients] [--before-src DIR] [--setup] [--json]

`--setup` creates what is missing in the cache (venvs, vLLM's file, the tokenizer);
without it a client whose venv is missing is reported as skipped, with the reason.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import psutil

from infertriage.schemas import parse_duration
from infertriage_testing.testserver import Behavior, fetch_writes, serve_in_process

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_clients_tools as tools
from bench_client import Load

CLIENTS = ("infertriage", "raw", "vllm", "guidellm", "aiperf")


@dataclass
class TreeCpu:
    """Samples the CPU time of a process and all its descendants in a thread."""

    pid: int
    interval_s: float
    samples: list[tuple[int, float]] = field(default_factory=list)  # (perf_counter_ns, cpu_s)
    _stop: threading.Event = field(default_factory=threading.Event)
    _seen: dict[int, float] = field(default_factory=dict)

    def _total(self, root: psutil.Process) -> float:
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            try:
                t = proc.cpu_times()
            except psutil.Error:
                total += self._seen.get(proc.pid, 0.0)  # just exited: keep its last figure
                continue
            cpu = t.user + t.system + t.children_user + t.children_system
            self._seen[proc.pid] = cpu
            total += cpu
        return total

    def run(self) -> None:
        root = psutil.Process(self.pid)
        best = 0.0
        while not self._stop.is_set():
            try:
                best = max(best, self._total(root))  # cumulative: never goes back
            except psutil.Error:
                break
            self.samples.append((time.perf_counter_ns(), best))
            self._stop.wait(self.interval_s)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread

    def stop(self, thread: threading.Thread) -> None:
        self._stop.set()
        thread.join()

    def between(self, t0_ns: int, t1_ns: int) -> float:
        ts = np.array([s[0] for s in self.samples], dtype=np.float64)
        cpu = np.array([s[1] for s in self.samples])
        return float(np.interp(t1_ns, ts, cpu) - np.interp(t0_ns, ts, cpu))


def _run_client(client: str, load: Load, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"bench-{client}-"))
    try:
        argv, env = tools.command(client, load, Path(args.cache), work)
    except tools.Unavailable as err:
        return {"client": client, "skipped": str(err)}
    before = set(fetch_writes(load.url))
    log = (work / "client.log").open("wb")
    proc = subprocess.Popen(["nice", "-n", str(load.nice), *argv], env=env, cwd=work,
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    sampler = TreeCpu(proc.pid, args.sample_ms / 1e3)
    thread = sampler.start()
    try:
        rc = proc.wait(timeout=args.timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
        sampler.stop(thread)
        log.close()
    if rc != 0:
        tail = (work / "client.log").read_text(errors="replace")[-2000:]
        return {"client": client, "skipped": f"exit {rc}: {tail}"}
    writes = {k: v for k, v in fetch_writes(load.url).items() if k not in before and v}
    t0 = min(w[0] for w in writes.values())
    t1 = max(w[-1] for w in writes.values())
    chunks = sum(len(w) for w in writes.values())
    cpu_s = sampler.between(t0, t1)
    row: dict[str, Any] = {
        "client": client,
        "requests_seen": len(writes),
        "chunks": chunks,
        "window_s": (t1 - t0) * 1e-9,
        "chunks_per_s": chunks / ((t1 - t0) * 1e-9),
        "cpu_s": cpu_s,
        "cpu_s_per_10k": cpu_s / chunks * 1e4,
        "load_avg": os.getloadavg()[0],
        **_truth(writes),
        **tools.reported(client, work, writes),
    }
    for key, true_key in (("tpot_s", "true_tpot_s"), ("itl_s", "true_itl_s")):
        if row.get(key) is not None:
            row[key.removesuffix("_s") + "_error"] = row[key] / row[true_key] - 1
    return row


def _truth(writes: dict[str, list[int]]) -> dict[str, float]:
    tpots = [(w[-1] - w[0]) * 1e-9 / (len(w) - 1) for w in writes.values() if len(w) > 1]
    gaps = np.concatenate([np.diff(np.asarray(w, dtype=np.int64)) for w in writes.values()])
    return {"true_tpot_s": float(np.mean(tpots)), "true_itl_s": float(np.mean(gaps)) * 1e-9}


def _one_itl(itl_s: float, clients: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    behavior = Behavior(ttft_s=0.01, itl_s=itl_s, num_tokens=args.tokens)
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    with serve_in_process(behavior, uvloop=True, engine=True, log_writes=True) as url:
        load = Load(url, args.streams, args.requests, args.tokens, args.workers,
                    args.client_nice)  # fmt: skip
        for _ in range(args.repeat):  # interleaved, so drift in the host hits all alike
            for client in clients:
                runs[client].append(_run_client(client, load, args))
                print(f"  {itl_s * 1e3:g} ms {client}: "
                      f"{_brief(runs[client][-1])}", file=sys.stderr)  # fmt: skip
    return [_median_row(itl_s, client_runs) for client_runs in runs.values()]


def _brief(row: dict[str, Any]) -> str:
    if "skipped" in row:
        return "skipped: " + row["skipped"].splitlines()[0][:200]
    return f"{row['cpu_s_per_10k']:.3f} CPU-s/10k, {row['chunks_per_s']:,.0f} chunks/s"


def _median_row(itl_s: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure the median of its runs; the per-run values kept beside (`*_runs`)."""
    done = [r for r in runs if "skipped" not in r]
    if not done:
        return {**runs[0], "nominal_itl_s": itl_s}
    row = dict(done[0])
    for key, value in done[0].items():
        values = [r.get(key) for r in done]
        if isinstance(value, float) and all(isinstance(v, float) for v in values):
            row[key] = statistics.median(values)
            row[key + "_runs"] = values
    row["own_runs"] = [r.get("own") for r in done]
    return {**row, "nominal_itl_s": itl_s}


def _paired(ours: dict[str, Any] | None, other: dict[str, Any]) -> str:
    """The median over repeats of ours ÷ this client's CPU per chunk, each pair from one
    repeat (the clients run back to back there, so a drifting host hits both alike)."""
    mine = (ours or {}).get("cpu_s_per_10k_runs")
    theirs = other.get("cpu_s_per_10k_runs")
    if not mine or not theirs or len(mine) != len(theirs):
        return "—"
    return f"{statistics.median(a / b for a, b in zip(mine, theirs, strict=True)):.2f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2%}"


def _print(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    repeat = max((len(r.get("cpu_s_per_10k_runs", [])) for r in rows), default=args.repeat)
    print(f"{args.streams} streams × {args.tokens} tokens, {args.requests} requests per run, "
          f"clients at nice {args.client_nice}, median of {repeat or 1}; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")  # fmt: skip
    print(
        f"versions {tools.VERSIONS}; load average after each client run: "
        + ", ".join(f"{r['load_avg']:.1f}" for r in rows if "load_avg" in r)
    )
    head = ("ITL", "client", "true TPOT", "chunks/s", "CPU-s/10k", "ours ÷ this",
            "paired ÷", "TPOT err", "ITL err", "TPOT err max", "|ITL err| p99")  # fmt: skip
    print(" | ".join(head))
    for itl in sorted({r["nominal_itl_s"] for r in rows}, reverse=True):
        group = [r for r in rows if r["nominal_itl_s"] == itl]
        ours = next((r for r in group if r["client"] == "infertriage" and "cpu_s_per_10k" in r),
                    None)  # fmt: skip
        for r in group:
            if "skipped" in r:
                print(f"{itl * 1e3:g} ms | {r['client']} | skipped: {r['skipped'][:160]}")
                continue
            ratio = ours["cpu_s_per_10k"] / r["cpu_s_per_10k"] if ours else float("nan")
            p99 = r.get("itl_abs_error_p99_s")
            print(" | ".join([
                f"{itl * 1e3:g} ms", r["client"], f"{r['true_tpot_s'] * 1e3:.3f} ms",
                f"{r['chunks_per_s']:,.0f}", f"{r['cpu_s_per_10k']:.3f}", f"{ratio:.2f}",
                _paired(ours, r),
                _pct(r.get("tpot_error")), _pct(r.get("itl_error")),
                "—" if r.get("tpot_error_max_abs") is None
                else f"{r['tpot_error_max_abs']:.2%}",
                "—" if p99 is None else f"{p99 * 1e3:.3f} ms",
            ]))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="all", help=f"Comma list of {', '.join(CLIENTS)}.")
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--itl", default="5ms,1ms", help="Comma list of inter-token latencies.")
    parser.add_argument("--requests", type=int, default=320, help="Requests per client run.")
    parser.add_argument("--workers", type=int, default=1, help="infertriage --workers.")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--client-nice", type=int, default=5,
                        help="Niceness of the clients (the server keeps 0).")  # fmt: skip
    parser.add_argument("--sample-ms", type=float, default=20.0, help="CPU sampling period.")
    parser.add_argument("--timeout", type=float, default=600.0, help="Per client run.")
    parser.add_argument("--before-src", metavar="DIR",
                        help="Another tree's src/ (e.g. main's): adds client `before`, "
                        "infertriage from there, beside this tree's.")  # fmt: skip
    parser.add_argument("--cache", default=str(tools.DEFAULT_CACHE))
    parser.add_argument("--setup", action="store_true", help="Install what is missing first.")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--table", metavar="FILE", help="Print the table of a saved --json run.")
    args = parser.parse_args()
    if args.table:
        _print(orjson.loads(Path(args.table).read_bytes()), args)
        return
    clients = list(CLIENTS) if args.clients == "all" else args.clients.split(",")
    if args.before_src:
        clients.insert(clients.index("infertriage") + 1 if "infertriage" in clients else 0,
                       "before")  # fmt: skip
        os.environ[tools.BEFORE_ENV] = str(Path(args.before_src).resolve())
    if args.setup:
        tools.setup(clients, Path(args.cache))
    rows: list[dict[str, Any]] = []
    for text in args.itl.split(","):
        rows += _one_itl(parse_duration(text, "ms"), clients, args)
        partial = Path(tempfile.gettempdir()) / "bench_clients_compare.partial.json"
        partial.write_bytes(orjson.dumps(rows))  # an interrupted run keeps what it measured
    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print(rows, args)


if __name__ == "__main__":
    main()
