"""api, level 5: `diagnose --prometheus URL --selector SEL` — a fleet's metrics from Prometheus.

Takes the Prometheus URL, the selector of the replicas' series, the run and
its phases; before the load, `check_fleet` makes sure Prometheus answers and
the selector matches an engine's series (so no load is wasted on a typo).
After it, `read_fleet` waits for Prometheus to scrape past the drain, then
writes the replicas' merged samples into metrics.jsonl (as if each had been
scraped) and the per-replica view of the measured level to raw/fleet.json,
and gives the server configuration read from the series and the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from infertriage.analyze.signals.metrics import Phases
from infertriage.api.target import Target
from infertriage.collect import collect_fleet, fetch_server_config, fleet_samples, is_url
from infertriage.collect.prometheus_api import (
    PrometheusClient,
    required_matchers,
    selector_matchers,
)
from infertriage.net import open_session
from infertriage.schemas import (
    JsonlWriter,
    RunClock,
    RunDir,
    RunServerConfig,
    UserError,
    write_json,
)

__all__ = ["FLEET_FILE", "check_fleet", "read_fleet"]

FLEET_FILE = "fleet.json"  # under raw/
_CATCH_UP_S = 75.0  # Prometheus scrapes every 15 s to 1 min: wait for one scrape past the drain
_POLL_S = 0.5
_MIN_RATE_WINDOW_S = 15.0


def check_fleet(prometheus_url: str, selector: str) -> None:
    """Prometheus answers and the selector matches series: one sentence and exit 2 otherwise."""
    if not is_url(prometheus_url):
        raise UserError(f"--prometheus {prometheus_url!r} is not an http(s) URL.")
    matchers = required_matchers(selector)

    async def run() -> int:
        async with open_session() as session:
            client = PrometheusClient(session, prometheus_url)
            found = await client.query(f"count({{{matchers}}})", time.time())
            return int(found[0].points[-1][1]) if found and found[0].points else 0

    if asyncio.run(run()) == 0:
        raise UserError(
            f"no series match {selector!r} in Prometheus at {prometheus_url} "
            "(check --selector and that Prometheus scrapes the servers)."
        )


async def _catch_up(client: PrometheusClient, matchers: str, until_unix: float) -> None:
    deadline = time.monotonic() + _CATCH_UP_S
    while time.monotonic() < deadline:
        found = await client.query(f"min(timestamp(up{{{matchers}}}))", time.time())
        if not found or not found[0].points or found[0].points[-1][1] >= until_unix:
            return
        await asyncio.sleep(_POLL_S)


async def _read(run: RunDir, clock: RunClock, target: Target, phases: Phases) -> RunServerConfig:
    prometheus_url, selector = target.prometheus or "", target.selector
    anchor = clock.wall_anchor_s
    end_ts = phases.drain_end_ts or clock.now_ts()
    async with open_session() as session:
        client = PrometheusClient(session, prometheus_url)
        await _catch_up(client, selector_matchers(selector), anchor + end_ts)
        fleet = await fleet_samples(
            session,
            prometheus_url,
            selector,
            start_unix=anchor,
            end_unix=anchor + end_ts,
            anchor_unix=anchor,
        )
        with JsonlWriter(run.metrics) as writer:
            for sample in fleet.samples:
                writer.write(sample)
        window = phases.load_end_ts - phases.load_start_ts
        view = await collect_fleet(
            session,
            prometheus_url,
            selector,
            start_unix=anchor + phases.load_start_ts,
            end_unix=anchor + phases.load_end_ts,
            rate_window_s=max(window, _MIN_RATE_WINDOW_S),
        )
        document = dataclasses.asdict(view)
        document["window_ts"] = [phases.load_start_ts, phases.load_end_ts]
        write_json(run.raw / FLEET_FILE, document)
        config = await fetch_server_config(
            session, target.url, engine=fleet.engine, exposition=fleet.first
        )
    return config


def read_fleet(run: RunDir, clock: RunClock, target: Target, phases: Phases) -> RunServerConfig:
    """The fleet's samples into metrics.jsonl, its view into raw/; the server configuration."""
    return asyncio.run(_read(run, clock, target, phases))
