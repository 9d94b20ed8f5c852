"""cli, level 6: `infertriage monitor-config` — rules, alerts and a dashboard for one engine."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from infertriage.api.monitor import monitor_config as make_config
from infertriage.api.specs import MonitorConfigSpec
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.cli.options import seconds
from infertriage.engines import engine_choices
from infertriage.report.monitoring.render import monitor_to_json, render_monitor
from infertriage.schemas import load_thresholds

# `--engine`'s values, `engines.engine_choices()` as the CLI is built (mypy reads a str)
if TYPE_CHECKING:
    _Engine = str
else:
    _Engine = StrEnum("_Engine", [(choice, choice) for choice in engine_choices()])


def monitor_config(
    engine: _Engine = typer.Option(..., "--engine", help="The engine the rules read."),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Folder to write the files to."),
    from_run: Path | None = typer.Option(
        None, "--from-run", metavar="DIR", help="Thresholds from this run's measurements."
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        metavar="NAME",
        help="Thresholds from this saved baseline (`baseline save`).",
    ),
    store: Path | None = flags.store(),
    slo: str | None = flags.slo(),
    selector: str = flags.selector(),
    gpu_selector: str = typer.Option(
        "",
        "--gpu-selector",
        metavar="MATCHERS",
        help='Label matchers of dcgm-exporter\'s series, e.g. job="dcgm".',
    ),
    rate_window: float = typer.Option(
        "5m",
        "--rate-window",
        metavar="DURATION",
        parser=seconds,
        help="Window of rates and quantiles (5m).",
    ),
    for_scale: float = typer.Option(
        1.0, "--for-scale", metavar="FACTOR", help="Multiply every `for:` (demos: 0.01)."
    ),
    evaluation_interval: float = typer.Option(
        "30s",
        "--evaluation-interval",
        metavar="DURATION",
        parser=seconds,
        help="Rule groups' interval.",
    ),
    force: bool = flags.force(),
    json_out: bool = flags.json_out(),
) -> None:
    spec = MonitorConfigSpec(
        engine=str(engine),
        out=out,
        from_run=from_run,
        baseline=baseline,
        store=store,
        thresholds=load_thresholds(slo) if slo else None,
        selector=selector,
        gpu_selector=gpu_selector,
        rate_window_s=rate_window,
        for_scale=for_scale,
        evaluation_interval_s=evaluation_interval,
        force=force,
    )
    result = make_config(spec)
    if json_out:
        print_json(monitor_to_json(result.config, result.written))
    else:
        render_monitor(result.config, result.written, Console())
