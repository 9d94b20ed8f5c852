"""analyze, level 1: what a server's own log says about the run (`diagnose --log F`).

Takes the text of an engine's log and, when known, the run's window in Unix
time; gives a `ServerLog` and its signals. Read from the log:

- the periodic stats lines — vLLM V1 (`Engine 000: Avg prompt throughput: …,
  Running: N reqs, Waiting: M reqs, GPU KV cache usage: X%, …`), vLLM V0
  (`… Running: N reqs, Swapped: S reqs, Pending: M reqs, GPU KV cache usage:
  X%, …`) and SGLang (`Decode batch. #running-req: N, #token: T, token usage:
  0.12, … #queue-req: M`, and its `Prefill batch.` line) — as the peak KV
  use, running and waiting requests;
- vLLM V0's preemption warnings (`… is preempted by PreemptionMode.RECOMPUTE
  …`, with its cumulative count);
- CUDA out-of-memory errors;
- torch.compile recompilations (`TORCH_LOGS=recompiles` lines).

A line whose timestamp lies outside the window is left out (the log covers
the server's whole life, the run only part of it): vLLM stamps
`MM-DD HH:MM:SS` in local time without a year, SGLang `[YYYY-MM-DD
HH:MM:SS]`. Lines without a timestamp are kept. The figures fill in what
the metrics lack; they never replace a scraped figure.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from infertriage.analyze.trace.compiled import RecompileLog, parse_recompile_log
from infertriage.schemas import Signal

__all__ = ["ServerLog", "log_signals", "merge_log_signals", "parse_server_log"]

_VLLM_STATS = re.compile(
    r"Running: (?P<running>\d+) reqs, (?:Swapped: \d+ reqs, )?"
    r"(?P<queue>Waiting|Pending): (?P<waiting>\d+) reqs, GPU KV cache usage: (?P<kv>[\d.]+)%"
)
_SGLANG_STATS = re.compile(r"(?:Decode|Prefill) batch[.,] (?P<body>.*)")
_SGLANG_FIELD = re.compile(r"(#running-req|#queue-req|token usage): (?P<value>[\d.]+)")
_PREEMPTED = re.compile(r"is preempted by PreemptionMode\.\w+")
_CUMULATIVE = re.compile(r"total_num_cumulative_preemption=(\d+)")
_OOM = re.compile(r"(CUDA out of memory|OutOfMemoryError|out of memory on device)", re.IGNORECASE)
# vLLM: "(APIServer pid=7) INFO 12-02 16:31:45 [loggers.py:123] …", the process prefix optional
_VLLM_TIME = re.compile(
    r"^(?:\([^)]*\)\s*)?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+(\d\d)-(\d\d) (\d\d:\d\d:\d\d)"
)
_ISO_TIME = re.compile(r"^\[?(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")
_SLACK_S = 5.0  # log stamps are whole seconds, and a stats line sums the seconds before it


@dataclass(frozen=True, slots=True)
class ServerLog:
    engine: str | None  # "vllm", "vllm-v0", "sglang" or None when no stats line was found
    num_lines: int  # lines inside the window (or undated)
    num_stats_lines: int
    kv_usage_max: float | None  # fraction
    running_max: float | None
    waiting_max: float | None
    preemptions: int
    oom_errors: int
    recompiles: RecompileLog


def _stamp(line: str, year: int) -> float | None:
    """The line's local time as Unix seconds, or None when it has no stamp we know."""
    iso = _ISO_TIME.match(line)
    if iso:
        text = f"{iso.group(1)} {iso.group(2)}"
    else:
        vllm = _VLLM_TIME.match(line)
        if not vllm:
            return None
        text = f"{year}-{vllm.group(1)}-{vllm.group(2)} {vllm.group(3)}"
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def _in_window(lines: Sequence[str], window: tuple[float, float] | None) -> list[str]:
    if window is None:
        return list(lines)
    year = time.localtime(window[0]).tm_year
    start, end = window[0] - _SLACK_S, window[1] + _SLACK_S
    kept = []
    for line in lines:
        at = _stamp(line, year)
        if at is None or start <= at <= end:
            kept.append(line)
    return kept


def _stats(line: str) -> tuple[str, float | None, float | None, float | None] | None:
    """(engine, KV use, running, waiting) of one stats line."""
    vllm = _VLLM_STATS.search(line)
    if vllm:
        kv = float(vllm.group("kv")) / 100.0
        engine = "vllm-v0" if vllm.group("queue") == "Pending" else "vllm"
        return engine, kv, float(vllm.group("running")), float(vllm.group("waiting"))
    sglang = _SGLANG_STATS.search(line)
    if sglang:
        fields = {m.group(1): float(m.group("value")) for m in _SGLANG_FIELD.finditer(line)}
        if not fields:
            return None
        return (
            "sglang",
            fields.get("token usage"),
            fields.get("#running-req"),
            fields.get("#queue-req"),
        )
    return None


def _peak(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def parse_server_log(text: str, window_unix: tuple[float, float] | None = None) -> ServerLog:
    """Read one log; `window_unix` keeps only the lines stamped within it (see the docstring)."""
    lines = _in_window(text.splitlines(), window_unix)
    stats = [s for s in map(_stats, lines) if s is not None]
    warned = sum(1 for line in lines if _PREEMPTED.search(line))
    cumulative = [int(m.group(1)) for line in lines if (m := _CUMULATIVE.search(line))]
    preemptions = max(warned, max(cumulative) - min(cumulative) + 1) if cumulative else warned
    return ServerLog(
        engine=stats[0][0] if stats else None,
        num_lines=len(lines),
        num_stats_lines=len(stats),
        kv_usage_max=_peak([s[1] for s in stats]),
        running_max=_peak([s[2] for s in stats]),
        waiting_max=_peak([s[3] for s in stats]),
        preemptions=preemptions,
        oom_errors=sum(1 for line in lines if _OOM.search(line)),
        recompiles=parse_recompile_log("\n".join(lines)),
    )


def log_signals(log: ServerLog, window_ts: tuple[float, float] | None = None) -> list[Signal]:
    """The log's figures under the names the rules read; `source` is "log"."""

    def signal(name: str, value: float | None, unit: str) -> list[Signal]:
        return [] if value is None else [Signal(name, float(value), unit, "log", window_ts)]

    out = [
        *signal("log.oom_errors", log.oom_errors, "1"),
        *signal("trace.recompilations", log.recompiles.recompilations, "1"),
    ]
    if log.num_stats_lines:
        out += [
            *signal("kv.usage_max", log.kv_usage_max, "fraction"),
            *signal("queue.running_max", log.running_max, "requests"),
            *signal("queue.waiting_max", log.waiting_max, "requests"),
        ]
    # vLLM V0 warns at every preemption; V1 and SGLang do not, so their silence is no zero.
    if log.engine == "vllm-v0" or log.preemptions:
        out += signal("preemptions.total", log.preemptions, "1")
    return out


def merge_log_signals(measured: Sequence[Signal], from_log: Sequence[Signal]) -> list[Signal]:
    """The log fills in what the metrics and traces lack; for counts, the larger figure wins."""
    names = {s.name for s in measured}
    counts = {"trace.recompilations", "preemptions.total"}
    out = list(measured)
    for signal in from_log:
        if signal.name not in names:
            out.append(signal)
        elif signal.name in counts:
            current = next(s for s in out if s.name == signal.name)
            if signal.value > current.value:
                out = [signal if s is current else s for s in out]
    return out
