"""collect, level 2: the collect stage of a run, everything at once beside the load.

Takes the run directory, the run's clock and what to watch (the engine's
`/metrics`, a dcgm-exporter, the server's pid or its URL); `Collector.start`
checks that the metrics answer (a `UserError` when they do not), then runs,
as background tasks that never block the load generator, the scraper and a
sampler of the host process tree and local GPUs (NVML) writing into
metrics.jsonl. `Collector.stop` takes the last scrape and gives a
`Collected`: the window's `MetricsView` (with restart events), the server's
configuration and the environment snapshot for run.json, and notes on what
could not be collected.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import aiohttp

from infertriage.collect.environment import snapshot_environment
from infertriage.collect.gpu import NvmlSampler, open_nvml
from infertriage.collect.host import HostSample, HostSampler, find_server_process, is_local_url
from infertriage.collect.http import base_url_of, metrics_url_of
from infertriage.collect.scraper import Scraper, ScrapeTarget
from infertriage.collect.server_config import fetch_server_config
from infertriage.collect.view import MetricsView, build_view
from infertriage.schemas import (
    JsonlWriter,
    RunClock,
    RunDir,
    RunEnvironment,
    RunServerConfig,
    UserError,
)

__all__ = ["Collected", "Collector"]


@dataclass(frozen=True)
class Collected:
    view: MetricsView
    server_config: RunServerConfig | None
    environment: RunEnvironment
    host_samples: tuple[HostSample, ...]
    notes: tuple[str, ...]


class Collector:
    """Scrapes and samples for the length of a run; see the module docstring."""

    def __init__(
        self,
        run: RunDir,
        clock: RunClock,
        *,
        url: str | None = None,
        metrics_url: str | None = None,
        dcgm_url: str | None = None,
        server_pid: int | None = None,
        interval_s: float = 1.0,
        sample_host: bool = True,
        sample_gpus: bool = True,
        scrape_engine: bool = True,  # False: `url` only finds the server's process
    ) -> None:
        self.run, self.clock, self.url = run, clock, url
        self.interval_s = interval_s
        targets = []
        if metrics_url or (url and scrape_engine):
            targets.append(ScrapeTarget("engine", metrics_url or metrics_url_of(url or "")))
        if dcgm_url:
            targets.append(ScrapeTarget("dcgm", dcgm_url))
        self.writer = JsonlWriter(run.metrics)
        self.scraper = Scraper(
            targets, clock=clock, interval_s=interval_s, writer=self.writer, raw_dir=run.raw
        )
        self._server_pid, self._sample_host, self._sample_gpus = (
            server_pid,
            sample_host,
            sample_gpus,
        )
        self._host: HostSampler | None = None
        self._nvml: NvmlSampler | None = None
        self._host_samples: list[HostSample] = []
        self._notes: list[str] = []
        self._stop = asyncio.Event()
        self._sampler: asyncio.Task[None] | None = None
        self._config: asyncio.Task[RunServerConfig] | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        """Check the targets answer (raises a `UserError` when one does not), then run."""
        if self.scraper.targets:
            try:
                await self.scraper.scrape_once(session, strict=True)
            except UserError:
                self.writer.close()
                raise
            self.scraper.start(session, scrape_first=False)
            self._config = asyncio.create_task(self._fetch_config(session))
        if self._sample_host:
            process, note = find_server_process(self.url, self._server_pid)
            self._notes += [note] if note else []
            # a loopback URL is this host even when its process cannot be seen (another user's)
            local = process is not None or is_local_url(self.url)
            self._host = HostSampler(self.clock, process, server_local=local)
        if self._sample_gpus:
            self._nvml, note = open_nvml()
            self._notes += [note] if note else []
        if self._host is not None or self._nvml is not None:
            self._sampler = asyncio.create_task(self._sample_loop(), name="infertriage-host")

    async def _fetch_config(self, session: aiohttp.ClientSession) -> RunServerConfig:
        state = self.scraper.state_of("engine")
        engine = state.detection.engine if state.detection else None
        return await fetch_server_config(
            session,
            base_url_of(self.url or self.scraper.targets[0].url),
            engine=engine.engine if engine else None,
            exposition=state.first_exposition,
        )

    def _sample_now(self) -> None:
        if self._host is not None:
            sample = self._host.sample()
            self._host_samples.append(sample)
            for record in sample.to_samples():
                self.writer.write(record)
        if self._nvml is not None:
            for record in self._nvml.samples(self.clock):
                self.writer.write(record)

    async def _sample_loop(self) -> None:
        while not self._stop.is_set():
            await asyncio.to_thread(self._sample_now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval_s)

    async def stop(self, session: aiohttp.ClientSession) -> Collected:
        """End the tasks, take the last scrape, and gather what run.json needs."""
        self._stop.set()
        if self._sampler is not None:
            await self._sampler
        if self.scraper.targets:
            await self.scraper.stop(session)
        config = await self._config if self._config is not None else None
        if self._nvml is not None:
            self._nvml.close()
        if self._host is not None:
            self._notes += self._host.notes
        self.writer.close()
        environment = await asyncio.to_thread(
            snapshot_environment,
            engine=config.engine if config else None,
            engine_version=config.version if config else None,
        )
        source = self.scraper.targets[0].url if self.scraper.targets else "host"
        if self.scraper.scrapes:
            scrapes, events = self.scraper.scrapes, self.scraper.events
            view = build_view(scrapes, source=source, events=events, server_config=config)
        else:
            view = MetricsView(source, None, None, (), None, 0, (), notes=("nothing scraped.",))
        return Collected(
            view=view,
            server_config=config,
            environment=environment,
            host_samples=tuple(self._host_samples),
            notes=tuple(self._notes),
        )
