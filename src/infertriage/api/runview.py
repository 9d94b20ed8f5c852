"""api, level 5: the measured load of a run directory, whichever command wrote it.

Takes a run directory — a diagnose run (finished, or interrupted after a
level finished a request), a bench run, a validate run, or a diagnose run
killed mid-load (whose run.json is its last bench call's) — and gives a
`RunView`: the measured level's records, the phases over which the server's
metrics are read, and whether the load client was the bottleneck. A diagnose
run names its measured level and phases in run.json; any other run's
measured level is the one it names (`main_level`: validate's performance
phase) or else its last level that finished a request. A run of two servers
(`compare --url`), or one with no finished request, is a `UserError` that
says so in one sentence. `diagnose --from-run` draws the map from this.
run.json's summary is read through `RunSummary` and its spec (`api.specs`)
through the model of the command that wrote it (`run_spec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from infertriage.analyze.signals.client import judged_window
from infertriage.analyze.stats.outcomes import is_incomplete
from infertriage.api.specs import BenchSpec, DiagnoseSpec, ValidateSpec
from infertriage.schemas import (
    BenchRunInfo,
    BenchSummary,
    DiagnoseRunInfo,
    DiagnoseSummary,
    Phases,
    RequestRecord,
    RunDir,
    RunInfo,
    RunStatus,
    UserError,
    ValidateRunInfo,
    ValidateSummary,
    stored_thresholds,
)

__all__ = [
    "RunSummary",
    "RunView",
    "finished",
    "group_key",
    "load_phases",
    "measured_view",
    "run_spec",
    "run_target",
]

_SPECS: dict[str, type[BenchSpec | DiagnoseSpec | ValidateSpec]] = {
    "bench": BenchSpec,
    "diagnose": DiagnoseSpec,
    "validate": ValidateSpec,
}


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What `--from-run` reads of run.json's summary, whichever command wrote it."""

    status: RunStatus | None = None  # complete, interrupted, or running (killed mid-run)
    main_level: str | None = None  # the measured level (validate: its performance phase)
    client_bound: bool = False
    phases: Phases | None = None  # diagnose: the windows its metrics are read over

    @classmethod
    def of(cls, run: RunDir, info: RunInfo | None = None) -> RunSummary:
        """`run`'s summary (from `info` when read already)."""
        summary = (info or run.read_info()).summary
        if isinstance(summary, DiagnoseSummary):
            return cls(summary.status, summary.main_level, summary.client_bound, summary.phases)
        if isinstance(summary, ValidateSummary):
            return cls(summary.status, summary.main_level)
        if isinstance(summary, BenchSummary):
            return cls(summary.status, client_bound=summary.client_bound)
        return cls(summary.status)


def group_key(record: RequestRecord) -> str:
    """validate labels its records by phase; bench and diagnose by level."""
    return record.labels.get("phase") or record.labels.get("level", "")


def run_spec(info: RunInfo) -> BenchSpec | DiagnoseSpec | ValidateSpec | None:
    """The spec run.json stores, read through its command's model (None: a run of a version
    that stored none, or of a command without one); the key and header values are not in it."""
    model = _SPECS.get(info.command)
    if model is None or not info.spec:
        return None
    spec: dict[str, object] = dict(info.spec)
    stored = spec.get("thresholds")
    if isinstance(stored, dict):  # as an earlier version may have named them
        spec["thresholds"] = stored_thresholds(stored)
    try:
        return model.model_validate(spec)
    except ValidationError as err:
        raise UserError(f"invalid spec in run.json ({err.errors()[0]['msg'].lower()}).") from err


def run_target(info: RunInfo, default: str) -> str:
    """What the run measured: diagnose's target, or the server bench or validate sent to."""
    spec = run_spec(info)
    if isinstance(spec, BenchSpec):
        return spec.url
    if isinstance(info, DiagnoseRunInfo | ValidateRunInfo):
        return info.config.target or default
    url = info.config.get("url") if isinstance(info, BenchRunInfo) else None  # an older bench
    return url if isinstance(url, str) and url else default


@dataclass(frozen=True, slots=True)
class RunView:
    info: RunInfo
    main_level: str
    records: list[RequestRecord]  # the measured level's
    phases: Phases
    client_bound: bool
    notes: tuple[str, ...] = ()
    # every record of the run, other levels' too: what the server saw before the measured
    # level (its prefix cache holds the warm-up's prompts; `analyze.signals.reuse`)
    run_records: tuple[RequestRecord, ...] = ()


def finished(record: RequestRecord) -> bool:
    """Did the request end on its own (a response or the server's error), not cut by the run?"""
    return record.end_ts is not None and not is_incomplete(record)


def load_phases(
    mine: Sequence[RequestRecord],
    over: Sequence[RequestRecord] = (),
    drain_end_ts: float | None = None,
) -> Phases:
    """The measured level's window (without a closed loop's first burst), then overload's."""
    if not mine:
        raise UserError("the measured load level finished no request; is the server serving?")
    ends = [r.end_ts for r in mine if r.end_ts is not None]
    over_ends = [r.end_ts or r.sent_ts for r in over]
    return Phases(
        # the server's figures over the window the client's are judged in: no first burst
        load_start_ts=judged_window(mine).start_ts,
        load_end_ts=max(ends, default=max(r.sent_ts for r in mine)),
        overload_start_ts=min((r.sent_ts for r in over), default=None),
        overload_end_ts=max(over_ends, default=None),
        drain_end_ts=drain_end_ts,
    )


def measured_view(run: RunDir) -> RunView:
    """What `--from-run` diagnoses in `run`; see the module docstring."""
    info = run.read_info()
    records = list(run.iter_records(run.requests, RequestRecord))
    if info.command == "compare" or any("arm" in r.labels for r in records):
        raise UserError(
            f"{run.root} is an A/B run of two servers, which one map cannot describe: "
            "diagnose each server with its own run."
        )
    summary = RunSummary.of(run, info)
    notes = _notes(summary)
    if info.command == "diagnose" and summary.phases is not None and summary.main_level:
        # its phases hold: metrics and traces are read over them, even with no records
        main = summary.main_level
        mine = [r for r in records if r.labels.get("level") == main]
        return RunView(
            info, main, mine, summary.phases, summary.client_bound, notes, tuple(records)
        )
    if not records:
        raise UserError(
            f"{run.root} holds no request records (no requests.jsonl, or an empty one): "
            "nothing to diagnose."
        )
    groups: dict[str, list[RequestRecord]] = {}
    for record in records:
        groups.setdefault(group_key(record), []).append(record)
    measured = _main_group(groups, summary.main_level)
    if measured is None:
        raise UserError(f"no request in {run.root} finished: nothing to diagnose.")
    mine = groups[measured]
    what = f"level {measured}" if measured else "requests"
    notes += (f"the map judges the {info.command} run's {what}.",)
    return RunView(
        info, measured, mine, load_phases(mine), summary.client_bound, notes, tuple(records)
    )


def _main_group(groups: dict[str, list[RequestRecord]], named: str | None) -> str | None:
    """The group the run names as measured, else the last one that finished a request."""
    done = [key for key, group in groups.items() if any(finished(r) for r in group)]
    if named is not None and named in done:
        return named
    return done[-1] if done else None


def _notes(summary: RunSummary) -> tuple[str, ...]:
    if summary.status == "interrupted":
        return ("the run was interrupted (Ctrl-C): the map judges only what it measured.",)
    if summary.status == "running":
        return ("the run stopped before it finished (killed?): the map judges what it kept.",)
    return ()
