"""cli, level 6: `infertriage metrics URL|FILE` — parse, call `scrape_metrics`, render.

With `--prometheus P --selector SEL` it shows a fleet instead: the replicas'
figures side by side from Prometheus (`fleet_metrics`), imbalance flagged.
"""

from __future__ import annotations

import typer
from rich.console import Console

from infertriage.api.metrics import fleet_metrics, scrape_metrics
from infertriage.cli import flags
from infertriage.cli.common import print_json
from infertriage.cli.options import positive, seconds
from infertriage.report.metrics import metrics_to_json, render_metrics
from infertriage.schemas import UserError

_FLEET_WINDOW_S = 300.0


def metrics(
    source: str | None = typer.Argument(
        None, help="The server's URL (its /metrics is scraped) or a file of Prometheus text."
    ),
    duration: float | None = typer.Option(
        None,
        "--duration",
        metavar="DURATION",
        parser=seconds,
        callback=positive,
        help="Scrape for this long (e.g. 30s) and show rates and quantiles.",
    ),
    prometheus: str | None = flags.prometheus(),
    selector: str = flags.selector(),
    json_out: bool = flags.json_out(),
) -> None:
    if prometheus is not None:
        # a fleet is read over HTTP (aiohttp): imported here, so `metrics FILE` starts without it
        from infertriage.api.specs_offline import FleetSpec  # noqa: PLC0415
        from infertriage.collect.prometheus_api import required_matchers  # noqa: PLC0415
        from infertriage.report.fleet import fleet_to_json, render_fleet  # noqa: PLC0415

        if source is not None:
            raise UserError("give a URL or file, or --prometheus with --selector, not both.")
        required_matchers(selector)
        window = duration or _FLEET_WINDOW_S
        fleet = fleet_metrics(
            FleetSpec(prometheus_url=prometheus, selector=selector, window_s=window)
        )
        if json_out:
            print_json(fleet_to_json(fleet))
        else:
            render_fleet(fleet, Console())
        return
    if source is None:
        raise UserError("give the server's URL or a metrics file (or --prometheus P --selector S).")
    view = scrape_metrics(source, duration)
    if json_out:
        print_json(metrics_to_json(view))
    else:
        render_metrics(view, Console())
