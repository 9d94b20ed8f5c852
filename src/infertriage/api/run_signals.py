"""The signals of a finished diagnose run: its requests, metrics, config, fleet, traces,
server logs, plan and the other run it is compared with, read from the run directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infertriage.analyze.logs.join import join_slowest
from infertriage.analyze.logs.records import read_records
from infertriage.analyze.server_log import log_signals, merge_log_signals, parse_server_log
from infertriage.analyze.signals.client import client_signals
from infertriage.analyze.signals.deployment import config_signals, fleet_signals
from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.analyze.signals.scaling import scaling_signals
from infertriage.api.capture import read_log
from infertriage.api.evidence import plan_signals, trace_signals
from infertriage.api.fleet import FLEET_FILE
from infertriage.api.runspans import run_span_signals
from infertriage.api.runview import RunView
from infertriage.api.topology import kept_interconnect
from infertriage.schemas import (
    Deployment,
    DiagnoseRunInfo,
    LoggedRequest,
    RunDir,
    RunInfo,
    Sample,
    Signal,
    read_json,
)

__all__ = ["COMPARE_FILE", "kept_logs", "signals_of_run", "slowest_in_logs"]

COMPARE_FILE = "compare-run.json"  # under raw/: the other run's signals, for scaling


def _trace_files(run: RunDir) -> list[Path]:
    """Profiles captured during the run, and the `--trace` files copied into raw/traces/."""
    given = run.raw / "traces"
    extra = sorted(p for p in given.iterdir() if p.is_file()) if given.is_dir() else []
    return sorted(run.raw.glob("*.pt.trace.json*")) + extra


def _fleet_signals(run: RunDir) -> list[Signal]:
    path = run.raw / FLEET_FILE
    return fleet_signals(read_json(path)) if path.is_file() else []


def kept_logs(run: RunDir) -> list[str]:
    """The text of each server log `--log` copied into the run (raw/logs/), read once."""
    folder = run.raw / "logs"
    if not folder.is_dir():
        return []
    return [read_log(path) for path in sorted(p for p in folder.iterdir() if p.is_file())]


def _log_signals(logs: Sequence[str], info: RunInfo, phases: Phases) -> list[Signal]:
    end_ts = phases.drain_end_ts or phases.load_end_ts
    window_unix = (info.wall_anchor_s, info.wall_anchor_s + end_ts)
    out: list[Signal] = []
    for text in logs:
        out += log_signals(parse_server_log(text, window_unix), (0.0, end_ts))
    return out


def slowest_in_logs(logs: Sequence[str], view: RunView) -> tuple[LoggedRequest, ...]:
    """The measured level's slowest requests with the lines of the server's log about them."""
    if not view.records:
        return ()
    anchor = view.info.wall_anchor_s
    records = [record for text in logs for record in read_records(text, anchor)]
    if not records:  # no --log given (its folder is made either way), or nothing read in it
        return ()
    return tuple(join_slowest(view.records, records, anchor))


def signals_of_run(run: RunDir, view: RunView, logs: Sequence[str]) -> list[Signal]:
    info, phases = view.info, view.phases
    samples = list(run.iter_records(run.metrics, Sample))
    deployment = info.config.deployment if isinstance(info, DiagnoseRunInfo) else Deployment()
    signals = [
        *client_signals(view.records, client_bound=view.client_bound, run=view.run_records),
        *metric_signals(samples, phases),
        *config_signals(info.server_config, deployment),
        *_fleet_signals(run),
        *trace_signals(_trace_files(run)),
    ]
    signals = merge_log_signals(signals, _log_signals(logs, info, phases))
    signals = run_span_signals(run, view.records, signals)  # the server's spans, if kept
    signals += plan_signals(deployment, info.server_config, signals, kept_interconnect(run.raw))
    return signals + _scaling_signals(run, signals)


def _scaling_signals(run: RunDir, signals: Sequence[Signal]) -> list[Signal]:
    path = run.raw / COMPARE_FILE
    if not path.is_file():
        return []
    other = read_json(path)["signals"]
    return scaling_signals({s.name: s.value for s in signals}, other)
