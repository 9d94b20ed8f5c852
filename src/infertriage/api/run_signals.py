"""The signals of a finished diagnose run: its requests, metrics, config, fleet, traces,
server logs, plan and the other run it is compared with, read from the run directory,
and the `--trace` and `--log` files given with it (`Given`), kept once they have been read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from infertriage.analyze.logs.join import join_slowest
from infertriage.analyze.logs.records import read_records
from infertriage.analyze.server_log import log_signals, merge_log_signals, parse_server_log
from infertriage.analyze.signals.client import client_signals
from infertriage.analyze.signals.deployment import config_signals, fleet_signals
from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.analyze.signals.scaling import scaling_signals
from infertriage.api.capture import keep_files, read_log, unkept
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

__all__ = ["COMPARE_FILE", "Given", "kept_logs", "signals_of_run", "slowest_in_logs"]

COMPARE_FILE = "compare-run.json"  # under raw/: the other run's signals, for scaling


def _trace_files(run: RunDir, given: Sequence[Path]) -> list[Path]:
    """Profiles captured during the run, the `--trace` files copied into raw/traces/, and
    the `given` ones not yet copied."""
    folder = run.raw / "traces"
    kept = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    return [*sorted(run.raw.glob("*.pt.trace.json*")), *kept, *given]


def _fleet_signals(run: RunDir) -> list[Signal]:
    path = run.raw / FLEET_FILE
    return fleet_signals(read_json(path)) if path.is_file() else []


@dataclass(frozen=True, slots=True)
class Given:
    """The `--trace` and `--log` files a diagnosis reads where the user keeps them, less the
    ones the run holds already; `keep` copies them into the run once they have been read,
    so a file that does not read leaves the run as it was."""

    traces: tuple[Path, ...] = ()
    logs: tuple[Path, ...] = ()

    @classmethod
    def of(cls, run: RunDir, traces: Sequence[Path], logs: Sequence[Path]) -> Given:
        return cls(tuple(unkept(run.raw / "traces", traces)), tuple(unkept(run.raw / "logs", logs)))

    def keep(self, run: RunDir) -> None:
        keep_files(run.raw / "traces", self.traces)
        keep_files(run.raw / "logs", self.logs)


def kept_logs(run: RunDir, given: Sequence[Path] = ()) -> list[str]:
    """The text of each server log copied into the run (raw/logs/), then of each `given`."""
    folder = run.raw / "logs"
    kept = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    return [read_log(path) for path in (*kept, *given)]


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


def signals_of_run(
    run: RunDir, view: RunView, logs: Sequence[str], traces: Sequence[Path] = ()
) -> list[Signal]:
    """Every signal of the run, its kept traces and `traces` (given, not yet kept) among them."""
    info, phases = view.info, view.phases
    samples = list(run.iter_records(run.metrics, Sample))
    deployment = info.config.deployment if isinstance(info, DiagnoseRunInfo) else Deployment()
    signals = [
        *client_signals(view.records, client_bound=view.client_bound, run=view.run_records),
        *metric_signals(samples, phases),
        *config_signals(info.server_config, deployment),
        *_fleet_signals(run),
        *trace_signals(_trace_files(run, traces)),
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
