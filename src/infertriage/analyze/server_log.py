"""analyze, level 1: what a server's own log says about the run (`diagnose --log F`).

Takes the text of an engine's log and, when known, the run's window in Unix
time; gives a `ServerLog` and its signals. Read from the log:

- the periodic stats lines (their formats are each engine's adapter's, in
  `infertriage.engines`) — vLLM V1 (`Engine 000: Avg prompt throughput: …,
  Running: N reqs, Waiting: M reqs, GPU KV cache usage: X%, …`), vLLM V0
  (`… Running: N reqs, Swapped: S reqs, Pending: M reqs, GPU KV cache usage:
  X%, …`) and SGLang (`Decode batch. #running-req: N, #token: T, token usage:
  0.12, … #queue-req: M`, and its `Prefill batch.` line) — as the peak KV
  use, running and waiting requests;
- vLLM V0's preemption warnings (`… is preempted by PreemptionMode.RECOMPUTE
  …`, with its cumulative count);
- CUDA out-of-memory errors;
- torch.compile recompilations (`TORCH_LOGS=recompiles` lines);
- the decode lines that say whether the step ran from CUDA graphs (SGLang's
  `cuda graph: False`), and the flash-attention kernel the engine left at
  start-up (vLLM's selector, TGI's flash import: read from the lines of the
  server's last start at or before the window's end, since the server started
  before the run's window, and a restart leaves what an earlier start said).

A line whose timestamp lies outside the window is left out (the log covers
the server's whole life, the run only part of it): vLLM stamps
`MM-DD HH:MM:SS` in local time without a year, SGLang `[YYYY-MM-DD
HH:MM:SS]`. Lines without a timestamp are kept. The figures fill in what
the metrics lack; they never replace a scraped figure. The records are read
as `infertriage logs` reads them (`analyze.logs.records`: colour dropped,
glued records split).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from infertriage.analyze.logs.events import attention_fallback
from infertriage.analyze.logs.records import (
    FORMATS,
    OOM,
    clean_lines,
    last_start,
    no_line_read,
    reads_a_line,
    stamp_of,
)
from infertriage.analyze.logs.signals import kernel_signals
from infertriage.analyze.logs.source import LogSource
from infertriage.analyze.logs.timeline import GraphUse, graph_use
from infertriage.analyze.trace.compiled import RecompileLog, parse_recompile_log
from infertriage.engines import EventKind, LogEvent, LogFormat, SpecLine, StatsLine
from infertriage.schemas import Signal

__all__ = [
    "ServerLog",
    "log_signals",
    "merge_log_signals",
    "parse_server_log",
    "reads_no_line",
    "unread_log",
]

_FORMATS: tuple[LogFormat, ...] = FORMATS
_PREEMPTED = tuple(f.preempted for f in _FORMATS if f.preempted is not None)
_CUMULATIVE = tuple(
    f.cumulative_preemptions for f in _FORMATS if f.cumulative_preemptions is not None
)
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
    graph_use: GraphUse | None = None  # the window's decode lines that say graphs or not
    # the server's last start's at or before the window's end (start-up precedes the window)
    attention_fallbacks: tuple[LogEvent, ...] = ()
    graph_max_batch: float | None = None  # the largest batch captured in a graph, as said then


def _in_window(lines: Sequence[str], window: tuple[float, float] | None) -> list[str]:
    if window is None:
        return list(lines)
    start, end = window[0] - _SLACK_S, window[1] + _SLACK_S
    kept = []
    for line in lines:
        at = stamp_of(line, window[0])
        if at is None or start <= at <= end:
            kept.append(line)
    return kept


def _stats(line: str) -> StatsLine | None:
    """The first engine's reading of one stats line."""
    return next((found for f in _FORMATS if (found := f.read_stats(line)) is not None), None)


def _spec(line: str) -> SpecLine | None:
    """The first engine's reading of the speculative-decoding figures one line states."""
    return next(
        (d for f in _FORMATS if f.read_spec is not None and (d := f.read_spec(line)) is not None),
        None,
    )


def _graph_lines(
    read: Sequence[tuple[str, StatsLine]],
) -> Iterator[tuple[StatsLine, SpecLine | None]]:
    """The stats lines that say whether their step ran in CUDA graphs, with their spec
    figures (a step's accepted tokens: SGLang prints them on its decode line)."""
    for line, found in read:
        if found.cuda_graph is not None:  # only an eager step's time is read
            yield found, None if found.cuda_graph else _spec(line)


def _fallbacks(lines: Sequence[str]) -> tuple[LogEvent, ...]:
    """The attention fallbacks the lines say; only the lines that hold an engine's words
    (`LogFormat.fallback_words`) are read."""
    return tuple(
        event
        for form in _FORMATS
        if form.read_events is not None and form.fallback_words
        for line in lines
        if any(words in line for words in form.fallback_words)
        for event in form.read_events(line)
        if event.kind is EventKind.ATTENTION_FALLBACK
    )


def _captured_batch(lines: Sequence[str]) -> float | None:
    """The largest decode batch the start-up says it captured in a CUDA graph (SGLang's
    `cuda_graph_max_bs=` in its `server_args=` line); None when no line says it."""
    found = None
    for line in lines:
        if "cuda_graph_max_bs" not in line:
            continue
        for form in _FORMATS:
            for event in form.read_events(line) if form.read_events is not None else ():
                if event.kind is EventKind.CONFIG and event.get("cuda_graph_max_batch"):
                    found = event.get("cuda_graph_max_batch")
    return found


def _peak(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def reads_no_line(path: Path) -> bool:
    """Whether a log gives no evidence: no line an engine's format or torch's words know
    (`LogRecord.recognised`, as `infertriage logs` reads them) and no recompilation. The
    engines' check stops at the first line it reads; a NUL-filled hole (a file truncated
    under a writer that goes on at its offset: logrotate's copytruncate) before lines it
    reads is no matter."""
    if reads_a_line(LogSource(path).lines()):
        return False
    recompiles = parse_recompile_log(LogSource(path).lines())
    return not (recompiles.recompilations or recompiles.limit_hits)


def unread_log(path: Path, flag: str = "--log") -> str | None:
    """What a command says of a log given to `flag` that gives no evidence (`reads_no_line`),
    as a clause without its stop; None when infertriage reads a line of it."""
    return f"{flag} {no_line_read(str(path))}" if reads_no_line(path) else None


def parse_server_log(text: str, window_unix: tuple[float, float] | None = None) -> ServerLog:
    """Read one log; `window_unix` keeps only the lines stamped within it (see the docstring)."""
    every = clean_lines(text)
    lines = _in_window(every, window_unix)
    # the server's last start at or before the window's end: start-up precedes the window
    until = None if window_unix is None else (window_unix[0], window_unix[1] + _SLACK_S)
    started = every[last_start(every, until)]
    read = [(line, found) for line in lines if (found := _stats(line)) is not None]
    stats = [found for _, found in read]
    warned = sum(1 for line in lines if any(p.search(line) for p in _PREEMPTED))
    cumulative = [int(m.group(1)) for line in lines for p in _CUMULATIVE if (m := p.search(line))]
    preemptions = max(warned, max(cumulative) - min(cumulative) + 1) if cumulative else warned
    return ServerLog(
        engine=stats[0].engine if stats else None,
        num_lines=len(lines),
        num_stats_lines=len(stats),
        kv_usage_max=_peak([s.kv_usage for s in stats]),
        running_max=_peak([s.running for s in stats]),
        waiting_max=_peak([s.waiting for s in stats]),
        preemptions=preemptions,
        oom_errors=sum(1 for line in lines if OOM.search(line)),
        recompiles=parse_recompile_log(lines),
        graph_use=graph_use(_graph_lines(read)),
        attention_fallbacks=_fallbacks(started),
        graph_max_batch=_captured_batch(started),
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
    out += signal("config.cuda_graph_max_batch", log.graph_max_batch, "requests")
    said = log.attention_fallbacks
    return out + kernel_signals(log.graph_use, len(said), attention_fallback(said), signal)


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
