"""analyze, level 1: a server's log as records — cleaned, split, stamped and read.

Takes the text of a log (and a moment near it, which dates the stamps that carry no
year); gives `LogRecord`s:
one per record, each with its time (Unix seconds from the line's local-time
stamp, None when it has none) and what the engines' adapters read from it — a
stats line, a speculative-decoding line, a preemption warning — and whether
it reports a CUDA out-of-memory error. Real logs are messy, so first: ANSI
colour codes are dropped and two records glued on one line (a lost newline
between two writers) are split where the second record's stamp begins, as
each engine's adapter says (`LogFormat.record_start`). The formats are the
adapters' (`infertriage.engines`); nothing engine-specific is written here.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from infertriage.engines import (
    ENGINES,
    EventKind,
    LogEvent,
    LogFormat,
    SpecLine,
    StatsLine,
    engine_of,
)

__all__ = [
    "FORMATS",
    "OOM",
    "LogRecord",
    "clean_lines",
    "engine_of_format",
    "formats_of",
    "last_start",
    "no_line_read",
    "read_records",
    "reads_a_line",
    "stamp_of",
    "starts_server",
]

FORMATS: tuple[LogFormat, ...] = tuple(e.log for e in ENGINES if e.log is not None)
# torch's and the CUDA caching allocator's words, whatever the engine (and SGLang's KV pool:
# "RuntimeError: Decode out of memory. Try to lower your batch size."; not its retraction,
# "Decode out of memory happened. #retracted_reqs: 1": an INFO line, requests put back)
# and ggml's (llama.cpp: "cudaMalloc failed: out of memory", Vulkan "ErrorOutOfDeviceMemory",
# "Device memory allocation of size N failed"; ggml-org/llama.cpp#20431, #15256)
OOM = re.compile(
    r"(CUDA out of memory|OutOfMemoryError|out of memory on device|cudaMalloc failed: out of "
    r"memory|CUDA error: out of memory|ErrorOutOfDeviceMemory|Device memory allocation of size "
    r"\d+ failed|(?:Decode|Prefill) out of memory(?! happened))",
    re.IGNORECASE,
)
# torch's distributed watchdog, whatever the engine: "Watchdog caught collective operation
# timeout: WorkNCCL(SeqNum=81, OpType=ALLREDUCE, … Timeout(ms)=600000) ran for 600005 milliseconds
# before timing out" (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), and NCCL's own errors
_COLLECTIVE = re.compile(
    r"Watchdog caught collective operation timeout|NCCL communicator was aborted|"
    r"NCCL error in:|ncclSystemError|ncclInternalError|ncclUnhandledCudaError"
)
_COLLECTIVE_MS = re.compile(r"Timeout\(ms\)=(\d+)")
# an engine process gone: vLLM V1 `EngineDeadError`, "Engine core proc … died unexpectedly",
# SGLang "Scheduler hit an exception" / a child killed, TGI "Shard … failed"
_DEAD = re.compile(
    r"EngineDeadError|EngineCore encountered an issue|died unexpectedly|"
    r"Scheduler hit an exception|Shard \d+ (?:failed|terminated)|Child process .* died"
)
# a KV transfer between prefill and decode instances that failed or timed out, whatever the
# connector (SGLang/Mooncake "Failed to send kv chunk", "Sync batch data transfer timeout";
# NIXL / vLLM's KV connectors "KV transfer failed")
_KV_TRANSFER_FAILED = re.compile(
    r"(?i)(?:kv ?(?:cache )?transfer (?:failed|timed out)|failed to (?:send|get|receive|"
    r"transfer) kv|batch data transfer timeout|(?:prefill|decode) transfer failed|"
    # Mooncake's transfer engine: "Session::writeBody failed", "Failed to complete transfers"
    r"Session::\w+ failed|failed to complete transfers)"
)
# the server's metrics code meeting a value no state can have (prometheus_client's own error;
# Dynamo's TensorRT-LLM worker "Received negative values for kv blocks: kv_active_block: -2")
_NEGATIVE_INC = "Counters can only be incremented by non-negative amounts"
_NEGATIVE_VALUE = re.compile(r"[Nn]egative values? for [\w ]+?: \w+: (-\d+(?:\.\d+)?)")
# a process's own prefix before a record ("(VllmWorker rank=1 pid=3832931) [2025-07-21 …]"):
# part of that record, never a record of its own to split off
_PROCESS_PREFIX = re.compile(r"\s*\([^()]*\)\s*")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_STARTS = tuple(f.record_start for f in FORMATS if f.record_start is not None)
_HALF_YEAR_S = 183 * 86400.0


@dataclass(frozen=True, slots=True)
class LogRecord:
    at: float | None  # Unix seconds; None when the record has no stamp
    text: str
    stats: StatsLine | None = None
    spec: SpecLine | None = None
    preempted: bool = False
    cumulative_preemptions: int | None = None  # the running count a V0 warning carries
    oom: bool = False
    stuck_s: float | None = None  # an engine's watchdog: this long without progress
    events: tuple[LogEvent, ...] = ()  # what else the line says happened (`EventKind`)
    engine: str | None = None  # the adapter whose format recognised the line, if one did

    @property
    def recognised(self) -> bool:
        """Whether any reader knew the line (an engine's format, or torch's words)."""
        return self.engine is not None or bool(
            self.stats or self.spec or self.preempted or self.oom or self.stuck_s or self.events
        )


def engine_of_format(form: LogFormat) -> str:
    """The name of the engine whose adapter holds `form`."""
    return next(e.name for e in ENGINES if e.log is form)


def formats_of(engine: str | None) -> tuple[LogFormat, ...]:
    """The log formats to read: one engine's, or every engine's when None."""
    if engine is None:
        return FORMATS
    adapter = engine_of(engine)
    return () if adapter is None or adapter.log is None else (adapter.log,)


def clean_lines(text: str | Iterable[str]) -> list[str]:
    """The log's records: colour dropped, glued records split, blank lines left out."""
    return list(_records_of(text.splitlines() if isinstance(text, str) else text))


def _records_of(lines: Iterable[str]) -> Iterator[str]:
    """`clean_lines`, a line at a time (a line may hold several: `splitlines` is applied)."""
    for physical in lines:
        for line in _ANSI.sub("", physical).splitlines():
            cuts = sorted(
                {
                    m.start()
                    for p in _STARTS
                    for m in p.finditer(line)
                    if m.start() > 0 and not _PROCESS_PREFIX.fullmatch(line[: m.start()])
                }
            )
            bounds = [0, *cuts, len(line)]
            pieces = (line[a:b].strip() for a, b in itertools.pairwise(bounds))
            yield from (piece for piece in pieces if piece)


_STARTED = re.compile("|".join(re.escape(words) for f in FORMATS for words in f.started))


def starts_server(line: str) -> bool:
    """Whether a line begins a start of the server (an engine's `LogFormat.started`): what
    an earlier start said at start-up (its attention kernel) no longer holds after it."""
    return _STARTED.search(line) is not None


def last_start(lines: Sequence[str], until: tuple[float, float] | None = None) -> slice:
    """Where the server's last start runs in `lines` (`starts_server`), up to the next
    start: what a start-up said holds from it on, not after a restart; all the lines when
    none starts. `until`: a moment near the lines and the latest a start may be stamped — a
    start stamped later is another server's, its lines left out."""
    first, last = 0, len(lines)
    for index, line in enumerate(lines):
        if not starts_server(line):
            continue
        at = None if until is None else stamp_of(line, until[0])
        if until is not None and at is not None and at > until[1]:
            last = index
            break
        first = index
    return slice(first, last)


def stamp_of(line: str, near_unix_s: float, formats: Sequence[LogFormat] = FORMATS) -> float | None:
    """The line's local time as Unix seconds, or None when it has no stamp we know.

    A stamp without a year (vLLM's `MM-DD HH:MM:SS`) takes the year that puts it nearest
    `near_unix_s`: a log of New Year's Eve read just after midnight is last year's, and
    29 February only exists in a leap year."""
    year = time.localtime(near_unix_s).tm_year
    found = next(((f, t) for f in formats if (t := f.read_stamp(line, year)) is not None), None)
    if found is None:
        return None
    form, text = found
    at = _unix(text)
    if at is not None and abs(at - near_unix_s) <= _HALF_YEAR_S:
        return at
    others = (form.read_stamp(line, y) for y in (year - 1, year + 1))
    dated = [a for a in (at, *(_unix(t) for t in others if t is not None)) if a is not None]
    return min(dated, key=lambda a: abs(a - near_unix_s), default=None)


@functools.lru_cache(maxsize=4096)  # a log repeats each second over many lines
def _unix(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def _read(line: str, at: float | None, formats: Sequence[LogFormat]) -> LogRecord:
    stats = next((s for f in formats if (s := f.read_stats(line)) is not None), None)
    spec = next(
        (d for f in formats if f.read_spec is not None and (d := f.read_spec(line)) is not None),
        None,
    )
    preempted = any(f.preempted is not None and f.preempted.search(line) for f in formats)
    cumulative = next(
        (
            int(m.group(1))
            for f in formats
            if f.cumulative_preemptions is not None and (m := f.cumulative_preemptions.search(line))
        ),
        None,
    )
    oom = "emory" in line and bool(OOM.search(line))  # "Memory" or "memory" in each spelling
    stuck = next(
        (float(m.group(1)) for f in formats if f.stuck is not None and (m := f.stuck.search(line))),
        None,
    )
    said = [(f, f.read_events(line)) for f in formats if f.read_events is not None]
    events = tuple(e for _, found in said for e in found) + _generic_events(line)
    engine = _engine_of_line(line, stats, spec, [f for f, found in said if found], formats)
    return LogRecord(at, line, stats, spec, preempted, cumulative, oom, stuck, events, engine)


def _generic_events(line: str) -> tuple[LogEvent, ...]:
    """What torch, the process manager and the KV connectors say in any engine's log:
    collectives, deaths, KV transfers that failed."""
    out: list[LogEvent] = []
    if _NEGATIVE_INC in line:
        out.append(LogEvent(EventKind.METRIC_ARTEFACT, {"negative_counter": 1.0}))
    if "egative value" in line and (negative := _NEGATIVE_VALUE.search(line)):
        out.append(
            LogEvent(EventKind.METRIC_ARTEFACT, {"negative_gauge": float(negative.group(1))})
        )
    if ("ransfer" in line or "kv" in line or "Session::" in line) and _KV_TRANSFER_FAILED.search(
        line
    ):
        out.append(LogEvent(EventKind.KV_TRANSFER, {"failed": 1.0}))
    if ("NCCL" in line or "ollective" in line or "nccl" in line) and _COLLECTIVE.search(line):
        ms = _COLLECTIVE_MS.search(line)
        values = {} if ms is None else {"timeout_s": int(ms.group(1)) / 1000.0}
        out.append(LogEvent(EventKind.COLLECTIVE_TIMEOUT, values))
    if ("ead" in line or "ied" in line or "xception" in line or "hard" in line) and _DEAD.search(
        line
    ):
        out.append(LogEvent(EventKind.ENGINE_DEAD))
    return tuple(out)


def _engine_of_line(
    line: str,
    stats: StatsLine | None,
    spec: SpecLine | None,
    eventful: Sequence[LogFormat],
    formats: Sequence[LogFormat],
) -> str | None:
    """The engine whose format knows the line: its stats line's, else the first that does."""
    if stats is not None:
        return "vllm" if stats.engine == "vllm-v0" else stats.engine
    if eventful:
        return engine_of_format(eventful[0])
    for form in formats:
        known = spec is not None and form.read_spec is not None and form.read_spec(line) is not None
        if known or (form.recognises is not None and form.recognises.search(line)):
            return engine_of_format(form)
    return None


def reads_a_line(lines: Iterable[str], formats: Sequence[LogFormat] = FORMATS) -> bool:
    """Whether a format reads a record of the log (`LogRecord.recognised`); stops at the first."""
    return any(_read(line, None, formats).recognised for line in _records_of(lines))


def no_line_read(name: str) -> str:
    """What is said of a log of which infertriage reads no line (a clause, without its stop):
    `infertriage logs` refuses it, a run notes it and goes on."""
    return f"{name} has no line infertriage reads"


def read_records(
    text: str | Iterable[str], near_unix_s: float, formats: Sequence[LogFormat] = FORMATS
) -> list[LogRecord]:
    """Every record of one log (its text, or its lines as a stream), in the log's order;
    `near_unix_s` (a moment the log is near: its file's modification time, a run's start)
    dates stamps that carry no year."""
    lines = text.splitlines() if isinstance(text, str) else text
    return [
        _read(line, stamp_of(line, near_unix_s, formats), formats) for line in _records_of(lines)
    ]
