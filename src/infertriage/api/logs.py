"""api, level 5: `infertriage logs` — offline incident triage from a server's logs.

Takes a `LogsSpec` (the files, the engine if known, the window and the
interval); gives a `LogTriage`: the timeline read from the logs and the
seven-layer map the diagnose rules make of its signals. The files are one
server's (rotated parts in any order: their records are merged by time);
`.gz` is read, and a gzip cut short keeps what came before the cut, with a
note. Files are streamed line by line (`analyze.logs.source`): a file of more
than `MAX_LOG_BYTES` of text is refused, a line longer than `MAX_LINE_BYTES`
is read up to there, with a note. A missing, empty or unreadable file, or one
without a line of a known format, is one clear sentence (exit 2).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from infertriage.analyze.logs import (
    FORMATS,
    LogRecord,
    formats_of,
    make_timeline,
    no_line_read,
    pick_interval,
    read_records,
    seat_stats,
    timeline_signals,
    with_times,
)
from infertriage.analyze.logs.source import MAX_LINE_BYTES, MAX_LOG_BYTES, LogSource, too_long
from infertriage.api.specs import LogsSpec
from infertriage.diagnose import Evidence, diagnose_evidence
from infertriage.engines import LogFormat, engine_of, registered
from infertriage.report.logs import LogTriage
from infertriage.schemas import UserError, load_thresholds

__all__ = ["log_engines", "triage_logs"]

_DEFAULT_INTERVAL_S = 10.0  # an engine that does not log on a clock (SGLang): rows of 10 s
_MAX_ROWS = 60
_CLOCK = re.compile(r"(\d{1,2}):(\d\d)(?::(\d\d))?")


def log_engines() -> tuple[str, ...]:
    """What `logs --engine` takes: each engine whose adapter reads its log."""
    return tuple(e.name for e in registered() if e.log is not None)


def _formats(engine: str | None) -> tuple[LogFormat, ...]:
    engines = log_engines()
    if engine is not None and engine not in engines:
        raise UserError(f"--engine must be one of {', '.join(engines)}, not {engine!r}.")
    return formats_of(engine)


def _expected(formats: Sequence[LogFormat]) -> str:
    return " or ".join(f.expected for f in formats if f.expected)


def _sources(files: Sequence[Path]) -> list[LogSource]:
    """Each file checked and measured, before a line is read; together within the bound."""
    sources = [LogSource(path) for path in files]
    if len(sources) > 1 and sum(s.size for s in sources) > MAX_LOG_BYTES:
        raise UserError(f"the {len(sources)} files hold more than {too_long()}.")
    return sources


def _read_file(
    source: LogSource, formats: Sequence[LogFormat], engine: str | None
) -> tuple[list[LogRecord], list[str]]:
    """The file's records and what to say of them: a cut, lines not recognised.

    One recognised line is enough; a last line without its newline (a copy taken
    mid-write) is left out when other lines are there, since its figures may be cut."""
    path = source.path
    # vLLM's stamps carry no year: the file was last written near its last line
    records = read_records(source.lines(), path.stat().st_mtime, formats)
    cut = source.cut
    notes = [] if cut is None else [f"{path} is a gzip cut short ({cut}): read up to the cut"]
    if not source.num_lines and not source.hole_bytes:  # NULs alone are text read as none
        raise UserError(f"{path} is empty" + (" before its gzip is cut." if cut else "."))
    if source.num_long_lines:
        notes.append(
            f"{path}: {source.num_long_lines} lines longer than {MAX_LINE_BYTES // 1024} KiB "
            "were read up to that length"
        )
    cut_last = source.last_line_open and source.num_lines > 1
    if cut_last and records and (records[-1].stats or records[-1].spec):
        # a copy taken mid-write: its figures may be cut ("Waiting: 1" of "Waiting: 12"); what
        # it says happened (an OOM, an abort) stands
        records[-1] = dataclasses.replace(records[-1], stats=None, spec=None)
        notes.append(
            f"{path}: its last line has no newline and may be cut: its figures were left out"
        )
    known = sum(1 for r in records if r.recognised)
    # an engine named: some line must be its own (torch's OOM words are every engine's)
    if not known or (engine is not None and not any(r.engine == engine for r in records)):
        raise UserError(f"{no_line_read(str(path))}: it expects {_expected(formats)}.")
    if known < len(records):
        notes.append(f"{path}: {len(records) - known} of {len(records)} lines not recognised")
    return records, notes


def _engine_read(records: Sequence[LogRecord]) -> tuple[str | None, str | None]:
    """The engine the lines are from, and a note saying so when no stats line named it."""
    stats = next((r.stats.engine for r in records if r.stats is not None), None)
    if stats is not None:
        return _adapter_name(stats), None
    named = Counter(r.engine for r in records if r.engine is not None)
    if not named:
        return None, None
    engine, lines = named.most_common(1)[0]
    adapter = engine_of(engine)
    title = adapter.title if adapter is not None else engine
    return engine, f"engine read as {title} from {lines} of its lines"


def _moment(text: str, flag: str, day: time.struct_time) -> float:
    """`HH:MM[:SS]` on `day`, or an ISO date and time (local unless it names its zone)."""
    clock = _CLOCK.fullmatch(text.strip())
    try:
        if clock:
            hour, minute, second = (int(g or 0) for g in clock.groups())
            moment = datetime(day.tm_year, day.tm_mon, day.tm_mday, hour, minute, second)
        else:
            moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserError(
            f"{flag} {text!r} is not a time: give HH:MM, HH:MM:SS or an ISO date and time "
            "such as 2026-12-02T16:31."
        ) from None
    return moment.timestamp()  # naive: local time, as the log's stamps


def _window(spec: LogsSpec, first: float, last: float) -> tuple[float | None, float | None]:
    day = time.localtime(first)
    since = None if spec.since is None else _moment(spec.since, "--since", day)
    until = None if spec.until is None else _moment(spec.until, "--until", day)
    if since is not None and until is not None and until < since:
        clock = spec.until is not None and _CLOCK.fullmatch(spec.until.strip())
        past_midnight = time.localtime(last)[:3] != day[:3]
        if not (clock and past_midnight):
            raise UserError(f"--until {spec.until} is before --since {spec.since}.")
        until += 86400.0  # 23:50 to 00:10 in a log that runs past midnight
    return since, until


def triage_logs(spec: LogsSpec) -> LogTriage:
    """Read the logs, build the timeline in the window, and judge it by the diagnose rules."""
    if not spec.files:
        raise UserError("give at least one log file.")
    if spec.interval_s is not None and not spec.interval_s > 0:
        raise UserError(f"--interval must be above 0 seconds, not {spec.interval_s:g}.")
    thresholds = load_thresholds(spec.slo)
    formats = _formats(spec.engine)
    records: list[LogRecord] = []
    notes: list[str] = []
    undated: list[LogRecord] = []
    for source in _sources(spec.files):
        found, said = _read_file(source, formats, spec.engine)
        dated_part = with_times(found)  # a traceback's lines take their own file's time
        records += dated_part
        undated += [] if dated_part else [dataclasses.replace(r, at=0.0) for r in found]
        notes += said
    if records and undated:  # a file without stamps has no place on the others' timeline
        notes.append(f"{len(undated)} lines of files without a timestamp were left out")
    records = records or undated
    dated = any(r.at for r in records)
    if not dated:
        if spec.since is not None or spec.until is not None:
            raise UserError("--since and --until need timestamps, and no line of the logs has one.")
        notes.append(
            "no line has a timestamp: read as a snapshot (state and events), not a timeline"
        )
    engine, said_engine = _engine_read(records)
    notes += [said_engine] if said_engine else []
    if engine is not None:
        records = seat_stats(records, engine)
    stamps = [r.at for r in records if r.at is not None]
    window = _window(spec, min(stamps), max(stamps)) if dated else (None, None)
    base = spec.interval_s or _engine_interval(engine)
    timeline = make_timeline(records, window, base, dated=dated)
    if timeline is None:
        raise UserError("no line of the logs lies between --since and --until.")
    if spec.interval_s is None:  # a long log: rows widened so that it fits one screen
        wider = pick_interval(timeline.end - timeline.start, base, _MAX_ROWS)
        if wider != base:
            timeline = make_timeline(records, window, wider, dated=dated) or timeline
    evidence = Evidence.of(timeline_signals(timeline), engine=engine)
    return LogTriage(
        files=tuple(str(p) for p in spec.files),
        timeline=timeline,
        diagnosis=diagnose_evidence(evidence, thresholds),
        notes=tuple(notes),
        engine=engine,
    )


def _engine_interval(engine: str | None) -> float:
    name = _adapter_name(engine)
    found = formats_of(name) if name is not None else FORMATS
    interval = found[0].interval_s if len(found) == 1 else None
    return interval or _DEFAULT_INTERVAL_S


def _adapter_name(engine: str | None) -> str | None:
    """The adapter's name of an engine as a stats line names it (`vllm-v0` is vLLM's)."""
    return "vllm" if engine == "vllm-v0" else engine
