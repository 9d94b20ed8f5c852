"""report, level 4: `infertriage logs` on screen (rich) and as JSON.

Takes a `LogTriage` (the timeline read from a server's logs and the
diagnosis the rules made of it); gives the timeline table — per interval the
requests running and waiting, the KV cache in use, the prompt and generation
throughput, the draft acceptance, and events (preemptions, out-of-memory
errors, a stalled engine) — the stalls, and the seven-layer map drawn by the
same renderer as `diagnose`. Times are the log's own clock (its stamps are
local time). File names are the user's text: they reach rich as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.analyze.logs import Interval, LogTimeline
from infertriage.engines import log_title
from infertriage.report.diagnosis import diagnosis_to_json, render_diagnosis
from infertriage.schemas import Diagnosis, Thresholds
from infertriage.schemas.text import show_controls

__all__ = ["LOGS_SCHEMA", "LogTriage", "logs_to_json", "render_logs"]

LOGS_SCHEMA = "infertriage.logs/v1"
_FULL = Thresholds().kv_full  # a KV cell in red: as full as the memory rule calls full


def _engine_title(timeline_engine: str | None, engine: str | None) -> str:
    """The engine as its adapter titles it (vLLM with its stats lines' version)."""
    return log_title(timeline_engine, engine) or "engine not recognised"


@dataclass(frozen=True, slots=True)
class LogTriage:
    files: tuple[str, ...]
    timeline: LogTimeline
    diagnosis: Diagnosis
    notes: tuple[str, ...] = ()
    engine: str | None = None  # the adapter its lines are read by (`engines.ENGINES`)


def _clock(unix: float) -> str:
    return datetime.fromtimestamp(unix).isoformat(timespec="seconds")


def _interval_json(row: Interval) -> dict[str, object]:
    return {
        "start": _clock(row.start),
        "start_unix": row.start,
        "num_stats_lines": row.num_stats_lines,
        "running": row.running,
        "waiting": row.waiting,
        "kv_usage": row.kv_usage,
        "prompt_tok_s": row.prompt_tok_s,
        "gen_tok_s": row.gen_tok_s,
        "spec_acceptance": row.spec_acceptance,
        "preemptions": row.preemptions,
        "oom_errors": row.oom_errors,
        "stalled": row.stalled,
    }


def logs_to_json(triage: LogTriage) -> dict[str, object]:
    tl = triage.timeline
    spec = tl.spec
    return {
        "schema": LOGS_SCHEMA,
        "files": list(triage.files),
        "engine": tl.engine or triage.engine,
        "window": {
            "start": _clock(tl.start),
            "end": _clock(tl.end),
            "start_unix": tl.start,
            "end_unix": tl.end,
        },
        "interval_s": tl.interval_s,
        "num_records": tl.num_records,
        "timeline": [_interval_json(row) for row in tl.intervals],
        "stalls": [
            {
                "start": _clock(s.start),
                "end": _clock(s.end),
                "duration_s": s.duration_s,
                "running": s.running,
            }
            for s in tl.stalls
        ],
        "preemptions": tl.preemptions,
        "oom_errors": tl.oom_errors,
        "recompilations": tl.recompilations,
        "spec": None
        if spec is None
        else {
            "num_lines": spec.num_lines,
            "acceptance_rate": spec.acceptance_rate,
            "mean_accepted_tokens": spec.mean_accepted_tokens,
            "per_position": list(spec.per_position),
        },
        "notes": list(triage.notes),
        "diagnosis": diagnosis_to_json(triage.diagnosis),
    }


def _num(value: float | None, form: str = "{:,.0f}") -> str:
    return "" if value is None else form.format(value)


def _events(row: Interval) -> Text:
    text = Text()
    if row.oom_errors:
        text.append(f"OOM ×{row.oom_errors} " if row.oom_errors > 1 else "OOM ", style="bold red")
    if row.preemptions:
        text.append(f"{row.preemptions} preempted ", style="yellow")
    if row.stalled:
        text.append("stalled", style="bold red")
    return text


def _table(tl: LogTimeline) -> Table:
    spec = any(row.spec_acceptance is not None for row in tl.intervals)
    table = Table(
        title=f"Timeline ({tl.interval_s:g} s per row; tokens/s are the lines' means)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for name in ("time", "running", "waiting", "KV", "prompt/s", "gen/s"):
        table.add_column(name, justify="left" if name == "time" else "right", no_wrap=True)
    if spec:
        table.add_column("accept", justify="right", no_wrap=True)
    table.add_column("events", min_width=7)
    for row in tl.intervals:
        kv = _num(row.kv_usage, "{:.0%}")
        cells = [
            Text(datetime.fromtimestamp(row.start).strftime("%H:%M:%S")),
            Text(_num(row.running)),
            Text(_num(row.waiting), style="yellow" if row.waiting else ""),
            Text(kv, style="red" if (row.kv_usage or 0) >= _FULL else ""),
            Text(_num(row.prompt_tok_s)),
            Text(_num(row.gen_tok_s)),
        ]
        if spec:
            cells.append(Text(_num(row.spec_acceptance, "{:.0%}")))
        table.add_row(*cells, _events(row))
    return table


def _header(triage: LogTriage) -> Text:
    tl = triage.timeline
    names = ", ".join(triage.files)
    engine = _engine_title(tl.engine, triage.engine)
    span = (tl.end - tl.start) / 60
    text = Text()
    text.append(f"Log triage: {show_controls(names)}\n", style="bold")
    text.append(
        f"{engine}, {_clock(tl.start)} → {datetime.fromtimestamp(tl.end):%H:%M:%S} "
        f"({span:.1f} min), {tl.num_records:,} records\n"
    )
    return text


def _footer(triage: LogTriage) -> Text:
    tl = triage.timeline
    text = Text()
    for stall in tl.stalls:
        text.append(
            f"Stalled: {datetime.fromtimestamp(stall.start):%H:%M:%S}–"
            f"{datetime.fromtimestamp(stall.end):%H:%M:%S} ({stall.duration_s:.0f} s) with "
            f"{stall.running:.0f} requests running and no token generated\n",
            style="red",
        )
    if tl.preemptions is not None:
        text.append(f"Preemptions: {tl.preemptions:,}\n")
    if tl.oom_errors:
        text.append(f"CUDA out-of-memory errors: {tl.oom_errors}\n", style="red")
    if tl.spec is not None and tl.spec.acceptance_rate is not None:
        positions = ", ".join(f"{p:.0%}" for p in tl.spec.per_position)
        text.append(
            f"Draft acceptance: {tl.spec.acceptance_rate:.0%}"
            + (f" (by position: {positions})" if positions else "")
            + "\n"
        )
    for note in triage.notes:
        text.append(f"note: {show_controls(note)}\n", style="yellow")
    return text


def render_logs(triage: LogTriage, console: Console) -> None:
    console.print(_header(triage))
    console.print(_table(triage.timeline))
    footer = _footer(triage)
    if footer.plain:
        console.print(footer)
    render_diagnosis(triage.diagnosis, console, title="Bottleneck map (from the log)")
