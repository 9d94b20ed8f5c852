"""cli, level 6: `infertriage logs` — parse, call `api.triage_logs`, render."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infertriage.api.logs import triage_logs
from infertriage.api.specs import LogsSpec
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.cli.options import seconds
from infertriage.report.logs import logs_to_json, render_logs


def logs(
    files: list[Path] = typer.Argument(
        ..., help="One server's logs (.log, .gz; rotated parts in any order)."
    ),
    engine: str | None = typer.Option(
        None,
        "--engine",
        metavar="ENGINE",
        help="The engine whose log it is (default: detected from the lines).",
    ),
    since: str | None = typer.Option(
        None,
        "--since",
        metavar="TIME",
        help="From HH:MM[:SS] (the log's first day) or an ISO date and time.",
    ),
    until: str | None = typer.Option(
        None, "--until", metavar="TIME", help="Up to a time, as --since."
    ),
    interval: float | None = typer.Option(
        None,
        "--interval",
        metavar="DURATION",
        parser=seconds,
        help="Timeline rows: 10s, 1m (default: the engine's stats interval, widened to fit).",
    ),
    slo: str | None = flags.slo(),
    json_out: bool = flags.json_out(),
) -> None:
    spec = LogsSpec(
        files=tuple(files), engine=engine, since=since, until=until, interval_s=interval, slo=slo
    )
    triage = triage_logs(spec)
    if json_out:
        print_json(logs_to_json(triage))
        return
    render_logs(triage, Console())
