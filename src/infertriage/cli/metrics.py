"""cli, level 6: `infertriage metrics URL|FILE` — parse, call `scrape_metrics`, render."""

from __future__ import annotations

import typer
from rich.console import Console

from infertriage.api.metrics import scrape_metrics
from infertriage.cli.common import print_json
from infertriage.report.metrics import metrics_to_json, render_metrics
from infertriage.schemas import parse_duration


def metrics(
    source: str = typer.Argument(
        ..., help="The server's URL (its /metrics is scraped) or a file of Prometheus text."
    ),
    duration: str | None = typer.Option(
        None, "--duration", help="Scrape for this long (e.g. 30s) and show rates and quantiles."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    view = scrape_metrics(source, parse_duration(duration) if duration else None)
    if json_out:
        print_json(metrics_to_json(view))
    else:
        render_metrics(view, Console())
