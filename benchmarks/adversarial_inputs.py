"""What a hostile or pathological input file costs: wall time and peak memory of each command.

    .venv/bin/python benchmarks/adversarial_inputs.py [--src DIR] [--timeout 120] [--only NAME]

Issue 30, part 4 (bounded cost on any input). Writes each input into a temporary folder,
then runs the command on it as a fresh process (the installed console script's
interpreter; with `--src DIR` the infertriage package is imported from DIR/infertriage
instead: an older commit's tree, `git archive HEAD src | tar -x -C /tmp/old` then `--src
/tmp/old/src`, for the figures before a change). Each run's address space is capped
(`--max-memory-gib`, default 4): a reader that holds a bomb whole dies of MemoryError
there, not the machine. Each process is reaped with `os.wait4`, whose rusage is that
child's own: the peak RSS (`ru_maxrss`) of that run alone, where `RUSAGE_CHILDREN` would
keep the largest so far. Prints one Markdown table: input, command, exit code, wall
seconds, peak MiB and the first words of what it said on stderr. A run past `--timeout` is
killed and shown as such.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from infertriage_testing.bigfiles import write_gzip

MIB = 1024 * 1024
_ENTRY = (
    "import sys; from infertriage.cli import main; sys.argv[0] = 'infertriage'; sys.exit(main())"
)
_KERNEL = (
    b'{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 5, '
    b'"args": {"device": 0, "stream": 7, "correlation": 1}}'
)
_STATS = (
    "(APIServer pid=2917) INFO 12-02 {h:02d}:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg "
    "prompt throughput: {p}.0 tokens/s, Avg generation throughput: {g}.0 tokens/s, Running: "
    "{r} reqs, Waiting: {w} reqs, GPU KV cache usage: {kv}.0%, Prefix cache hit rate: 40.0%\n"
)


def _padded_trace(folder: Path) -> Path:
    """The issue's shape: a small trace, its one event padded with 200 MiB of blanks."""
    head = b'{"traceEvents": [' + _KERNEL[:-1] + b","
    return write_gzip(folder / "padded.json.gz", head, b" " * MIB, 200, b'"x": 1}]}', level=9)


def _padded_plain(folder: Path) -> Path:
    """The same, uncompressed: 300 MiB of blanks in one event (no gzip guard applies)."""
    path = folder / "padded_plain.json"
    with path.open("wb") as out:
        out.write(b'{"traceEvents": [' + _KERNEL[:-1] + b",")
        for _ in range(300):
            out.write(b" \n" * (MIB // 2))
        out.write(b'"x": 1}]}')
    return path


def _trace_bomb(folder: Path) -> Path:
    """2 GiB of blanks in 2 MB of gzip."""
    return write_gzip(
        folder / "bomb.json.gz", b'{"traceEvents": [', b" " * MIB, 2048, b"]}", level=9
    )


def _log_bomb(folder: Path) -> Path:
    """2 GiB of one stats line, repeated, in a few MB of gzip."""
    line = _STATS.format(h=14, m=0, s=1, p=120, g=300, r=3, w=0, kv=50).encode()
    return write_gzip(folder / "bomb.log.gz", b"", line * (MIB // len(line)), 2048, level=9)


def _log_2mb(folder: Path) -> Path:
    """A 2 MB .gz of a vLLM log with a stats line a second (~116 MB of text, 480,000 lines)."""
    rnd = random.Random(1)
    path = folder / "vllm.log.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        for start in range(0, 480_000, 20_000):
            lines = (
                _STATS.format(
                    h=(t // 3600) % 24, m=(t // 60) % 60, s=t % 60,
                    p=rnd.choice((0, 120)), g=rnd.choice((300, 310)), r=rnd.choice((16, 17)),
                    w=rnd.choice((0, 1)), kv=rnd.choice((50, 60)),
                )
                for t in range(start, start + 20_000)
            )  # fmt: skip
            out.write("".join(lines).encode())
    return path


def _alias_bomb(key: str) -> Callable[[Path], Path]:
    """A 'billion laughs' YAML under a key the reader knows: nine levels of nine aliases,
    9⁹ strings from ~0.5 kB (the issue's SLO file gave a 312 MB error sentence)."""

    def make(folder: Path) -> Path:
        levels = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        for name, previous in zip("bcdefghi", "abcdefgh", strict=True):
            levels.append(f"&{name} [{', '.join(['*' + previous] * 9)}]")
        path = folder / f"bomb_{key}.yaml"
        path.write_text(f"{key}: [{', '.join(levels)}]\n", encoding="utf-8")
        return path

    return make


_SLO_BOMB, _SCENARIO_BOMB = _alias_bomb("ttft_p95"), _alias_bomb("description")


def _one_line(folder: Path) -> Path:
    """100 MiB without a newline."""
    path = folder / "one_line.log"
    with path.open("wb") as out:
        for _ in range(100):
            out.write(b"x" * MIB)
    return path


def _one_line_trace(folder: Path) -> Path:
    """A trace of 100 MiB on one line (as orjson writes one): ~700,000 kernels."""
    path = folder / "one_line.json"
    event = _KERNEL + b","
    with path.open("wb") as out:
        out.write(b'{"traceEvents": [')
        for _ in range(100):
            out.write(event * (MIB // len(event)))
        out.write(_KERNEL + b"]}")
    return path


def _deep_json(folder: Path) -> Path:
    path = folder / "deep.json"
    path.write_bytes(b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    return path


def _deep_yaml(folder: Path) -> Path:
    path = folder / "deep.yaml"
    path.write_bytes(b"engine: " + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    return path


_SLO = ["diagnose", "--url", "http://127.0.0.1:9", "--duration", "2", "--slo"]
# name → (what it is, how to make it, the command's words with the file last)
_CASES: dict[str, tuple[str, Callable[[Path], Path], list[str]]] = {
    "padded trace (gz)": ("200 MiB of blanks in one event, 0.2 MB .gz", _padded_trace, ["trace"]),
    "padded trace (plain)": ("300 MiB of blanks in one event", _padded_plain, ["trace"]),
    "gzip bomb trace": ("2 GiB of blanks, 2 MB .gz", _trace_bomb, ["trace"]),
    "gzip bomb log": ("2 GiB of stats lines, 8 MB .gz", _log_bomb, ["logs"]),
    "2 MB .gz log": ("116 MB of vLLM stats lines, 2.1 MB .gz", _log_2mb, ["logs"]),
    "YAML alias bomb (scenario)": (
        "9⁹ strings, 0.5 kB",
        _SCENARIO_BOMB,
        ["simulate", "--scenario"],
    ),
    "YAML alias bomb (SLO)": ("9⁹ strings, 0.5 kB", _SLO_BOMB, _SLO),
    "100 MiB line (logs)": ("no newline", _one_line, ["logs"]),
    "100 MiB line (metrics)": ("no newline", _one_line, ["metrics"]),
    "100 MiB line (trace)": ("a trace on one line", _one_line_trace, ["trace"]),
    "deep nesting (trace)": ("100,000 levels of [ ]", _deep_json, ["trace"]),
    "deep nesting (scenario)": ("100,000 levels of [ ]", _deep_yaml, ["simulate", "--scenario"]),
}


def _run(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[str, float, float, str]:
    """(exit, wall s, peak MiB, stderr's first line) of one fresh process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = started + timeout_s
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                child.send_signal(signal.SIGKILL)
                pid, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.05)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped: keep Popen quiet
        wall = time.perf_counter() - started
        err.seek(0)
        said = err.read().decode("utf-8", "replace").strip().splitlines()
    code = "killed (timeout)" if wall > timeout_s else str(child.returncode)
    first = said[0] if said else ""
    if any("Traceback" in line for line in said):
        first = "TRACEBACK: " + said[-1]
    return code, wall, usage.ru_maxrss / 1024, first.removeprefix("infertriage: error: ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, help="import infertriage from DIR (a source tree)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a run may take")
    parser.add_argument("--only", action="append", help="run only cases whose name has this")
    parser.add_argument(
        "--max-memory-gib", type=float, default=4.0, help="address-space cap of each run"
    )
    args = parser.parse_args()
    env = dict(os.environ, COLUMNS="100")
    cap = int(args.max_memory_gib * 1024 * MIB)  # a reader that holds a bomb whole must not
    entry = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap})); {_ENTRY}"
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    cases = {
        name: case
        for name, case in _CASES.items()
        if not args.only or any(part in name for part in args.only)
    }
    print("| input | what | command | exit | wall (s) | peak (MiB) | said |")
    print("|---|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory(prefix="adversarial-") as tmp:
        made: dict[Callable[[Path], Path], Path] = {}
        for name, (what, make, words) in cases.items():
            path = made.get(make) or make(Path(tmp))
            made[make] = path
            argv = [sys.executable, "-c", entry, *words, str(path)]
            code, wall, peak, said = _run(argv, env, args.timeout)
            command = " ".join(["infertriage", *words, path.name])
            short = said if len(said) <= 90 else said[:89] + "…"
            print(f"| {name} | {what} | `{command}` | {code} | {wall:.1f} | {peak:,.0f} | "
                  f"{short.replace('|', '/')} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
