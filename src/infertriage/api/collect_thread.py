"""api, level 5: the collect stage on a thread of its own, beside a blocking load run.

Takes what `collect.Collector` takes; runs it in a private asyncio loop on a
background thread so the scraper keeps its interval whatever the load
generator's own loops do, and gives the collected server configuration and
environment (`CollectedInfo`, run.json's `server_config` and `environment`)
when stopped. A target that does not answer at
start is a `UserError` raised in the caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from infertriage.collect import Collected, Collector
from infertriage.net import open_session
from infertriage.schemas import RunClock, RunDir, RunEnvironment, RunServerConfig

__all__ = ["CollectedInfo", "CollectorThread"]

_INTERVAL_S = 0.5
_START_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class CollectedInfo:
    """What a collection gives run.json: the server's own configuration and the environment;
    both empty when the collector never ran."""

    server_config: RunServerConfig = field(default_factory=RunServerConfig)
    environment: RunEnvironment = field(default_factory=RunEnvironment)
    notes: tuple[str, ...] = ()


class CollectorThread:
    def __init__(self, run: RunDir, clock: RunClock, **targets: Any) -> None:
        self._collector = Collector(run, clock, interval_s=_INTERVAL_S, **targets)
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._result: Collected | None = None
        self._thread = threading.Thread(target=self._main, name="infertriage-collect", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait(_START_TIMEOUT_S)
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with open_session() as session:
            try:
                await self._collector.start(session)
            except BaseException as err:  # handed to the caller's thread
                self._error = err
                self._started.set()
                return
            self._started.set()
            await self._stop.wait()
            self._result = await self._collector.stop(session)

    def stop(self) -> CollectedInfo:
        """Stop collecting; the server config and environment for run.json."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()
        if self._result is None:
            return CollectedInfo()
        config = self._result.server_config
        return CollectedInfo(
            server_config=config or RunServerConfig(),
            environment=self._result.environment,
            notes=tuple(self._result.notes),
        )
