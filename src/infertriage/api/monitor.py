"""api, level 5: `monitor-config` — Prometheus rules, Alertmanager route, Grafana dashboard.

Takes a `MonitorConfigSpec`; gives a `MonitorResult` (the `MonitorConfig`
made and the files written under `spec.out`). The alert limits are
`--slo`'s (or the defaults), or, with `--from-run` or `--baseline`, the
measured run's: its TTFT and ITL p95 with headroom and a floor under its
output tokens/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infertriage.analyze.stats.latency import summarize
from infertriage.api.runview import measured_view
from infertriage.api.specs import MonitorConfigSpec
from infertriage.engines import engine_choices
from infertriage.report.monitoring import AlertLimits, MonitorConfig, Timing, make_monitor_config
from infertriage.schemas import BaselineStore, RunDir, Thresholds, UserError

__all__ = ["MonitorResult", "monitor_config"]


@dataclass(frozen=True)
class MonitorResult:
    config: MonitorConfig
    out: Path
    written: tuple[Path, ...]


def _limits(spec: MonitorConfigSpec) -> AlertLimits:
    thresholds = spec.thresholds or Thresholds()
    limits = AlertLimits.of(thresholds, "defaults" if spec.thresholds is None else "--slo")
    if spec.from_run is not None and spec.baseline is not None:
        raise UserError("give --from-run or --baseline, not both.")
    if spec.from_run is not None:
        run, origin = RunDir.open(spec.from_run), f"the run {spec.from_run}"
    elif spec.baseline is not None:
        run, origin = BaselineStore(spec.store).get(spec.baseline), f"baseline {spec.baseline!r}"
    else:
        return limits
    summary = summarize(measured_view(run).records)
    ttft = summary.ttft.p95 if summary.ttft is not None else None
    itl = summary.itl.p95 if summary.itl is not None else None
    return limits.with_baseline(ttft, itl, summary.output_throughput, origin)


def _write(out: Path, files: dict[str, str], force: bool) -> tuple[Path, ...]:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder.")
    there = [name for name in files if (out / name).exists()]
    if there and not force:
        raise UserError(f"{out} already holds {there[0]}: add --force to replace it.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as err:
        raise UserError(f"cannot write to {out}: {err.strerror}.") from err
    return tuple(out / name for name in files)


def monitor_config(spec: MonitorConfigSpec) -> MonitorResult:
    """Make the files for `spec.engine` and write them under `spec.out`."""
    for flag, value in (
        ("--rate-window", spec.rate_window_s),
        ("--evaluation-interval", spec.evaluation_interval_s),
    ):
        if not value > 0:
            raise UserError(f"{flag} must be above 0, not {value:g} s.")
    if not spec.for_scale >= 0:
        raise UserError(f"--for-scale must be 0 or more, not {spec.for_scale:g}.")
    timing = Timing(spec.rate_window_s, spec.for_scale, spec.evaluation_interval_s)
    config = make_monitor_config(
        engine_choices()[spec.engine], _limits(spec), timing, spec.selector, spec.gpu_selector
    )
    return MonitorResult(config, spec.out, _write(spec.out, config.files, spec.force))
