"""api, level 5: the `metrics` command's entry point, and the fleet query.

`scrape_metrics` takes a server URL (its `/metrics` is scraped; a base URL or
one ending in `/v1` is accepted) or a file of Prometheus text, and gives a
`MetricsView`: the detected engine and the normalised view of one scrape, or
with `duration_s` of a window of scrapes as rates and quantiles, with the
server's own configuration and any restart seen. `fleet_metrics` queries a
Prometheus server for the replicas a selector matches (a `FleetSpec`). Errors
the user can fix are `UserError`s.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from infertriage.collect import (
    MetricsView,
    Scrape,
    adapt_scrape,
    build_view,
    is_url,
    parse_metrics_text,
    read_metrics_file,
)
from infertriage.schemas import RunClock, UserError
from infertriage.schemas.inputs import why_missing

if TYPE_CHECKING:
    from infertriage.api.specs_offline import FleetSpec
    from infertriage.collect import FleetView

__all__ = ["FleetSpec", "fleet_metrics", "scrape_metrics"]


def __getattr__(name: str) -> object:
    """`FleetSpec`, re-exported on first use: a metrics file needs no spec (nor pydantic)."""
    if name == "FleetSpec":
        from infertriage.api.specs_offline import FleetSpec  # noqa: PLC0415

        return FleetSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _read_file(source: str) -> str:
    path = Path(source)
    if not path.exists() and path.is_symlink():  # a link that leads nowhere: why
        raise UserError(f"{source} {why_missing(path)}.")
    if not path.exists():  # a folder, a FIFO or a device is refused by the reader, by name
        raise UserError(f"{source} is neither a URL (http://…) nor an existing file.")
    return read_metrics_file(path)


def _from_file(source: str) -> MetricsView:
    exposition = parse_metrics_text(_read_file(source), source)
    scrape = Scrape(0.0, "engine", source, adapt_scrape(exposition), exposition.notes)
    return build_view([scrape], source=source)


async def _from_url(
    url: str, duration_s: float | None, interval_s: float, timeout_s: float
) -> MetricsView:
    # a file needs none of the HTTP side (aiohttp, asyncio): it is imported for a URL only
    import asyncio  # noqa: PLC0415

    from infertriage.collect import (  # noqa: PLC0415
        Scraper,
        ScrapeTarget,
        base_url_of,
        fetch_server_config,
        metrics_url_of,
    )
    from infertriage.net import open_session  # noqa: PLC0415

    target = ScrapeTarget("engine", metrics_url_of(url))
    scraper = Scraper([target], clock=RunClock(), interval_s=interval_s, timeout_s=timeout_s)
    async with open_session() as session:
        await scraper.scrape_once(session, strict=True)
        state = scraper.state_of("engine")
        engine = state.detection.engine if state.detection else None
        config_task = asyncio.create_task(
            fetch_server_config(
                session,
                base_url_of(url),
                engine=engine.engine if engine else None,
                exposition=state.first_exposition,
                timeout_s=min(timeout_s, 3.0),
            )
        )
        if duration_s:
            scraper.start(session, scrape_first=False)
            await asyncio.sleep(duration_s)
            await scraper.stop(session)
        config = await config_task
    return build_view(
        scraper.scrapes, source=target.url, events=scraper.events, server_config=config
    )


def scrape_metrics(
    source: str,
    duration_s: float | None = None,
    *,
    interval_s: float = 1.0,
    timeout_s: float = 5.0,
) -> MetricsView:
    """The `metrics` command: one scrape of a URL or file, or a window of `duration_s` seconds."""
    if duration_s is not None and duration_s <= 0:
        raise UserError(f"--duration must be positive (got {duration_s:g} s).")
    if not is_url(source):
        if duration_s is not None:
            raise UserError("--duration needs a URL: a file holds a single scrape.")
        return _from_file(source)
    interval = min(interval_s, duration_s / 2) if duration_s else interval_s
    import asyncio  # noqa: PLC0415  # see _from_url

    return asyncio.run(_from_url(source, duration_s, interval, timeout_s))


def fleet_metrics(spec: FleetSpec) -> FleetView:
    """Per-replica figures over the last `window_s` seconds from Prometheus, imbalance flagged."""
    if not is_url(spec.prometheus_url):
        raise UserError(f"--prometheus {spec.prometheus_url!r} is not an http(s) URL.")
    end = spec.end_unix_s if spec.end_unix_s is not None else time.time()
    import asyncio  # noqa: PLC0415  # see _from_url

    from infertriage.collect import collect_fleet  # noqa: PLC0415  # see _from_url
    from infertriage.net import open_session  # noqa: PLC0415

    async def run() -> FleetView:
        async with open_session() as session:
            return await collect_fleet(
                session,
                spec.prometheus_url,
                spec.selector,
                start_unix=end - spec.window_s,
                end_unix=end,
                step_s=spec.step_s,
                rate_window_s=spec.rate_window_s,
                imbalance_ratio=spec.imbalance_ratio,
            )

    return asyncio.run(run())
