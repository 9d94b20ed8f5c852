"""collect, level 2: the scraper, an asyncio task that samples `/metrics` at an interval.

Takes scrape targets (the engine's `/metrics`, a dcgm-exporter), the run's
`RunClock`, and optionally the run's `metrics.jsonl` writer and `raw/`
folder. Gives `Scrape`s on the run's clock, normalised `Sample`s appended to
metrics.jsonl as each scrape lands, the raw text of the first and last
scrape of each target under raw/ (and the last one before each restart),
and `ServerEvent`s when the server restarts mid-run: its
`process_start_time_seconds` changed, its counters went backwards, or it
stopped answering (and came back). Parsing runs in a worker thread so a
large scrape never delays the load generator sharing the event loop.

In metrics.jsonl a histogram is one sample per bucket (label `le`) plus
`stat=sum` and `stat=count`; an event is a sample of `server.restart` or
`server.unreachable` with value 1 and labels `target` and `reason`; a value
set aside as impossible is a sample of `metric.artefact` holding it, with
labels `kind`, `metric`, `raw` and `said` (`schemas.artefacts`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from infertriage.collect.adapters import Adapted, Detection, adapt_scrape, detect
from infertriage.collect.http import fetch
from infertriage.collect.parse import Exposition, Labels, parse_metrics_text
from infertriage.collect.view import Scrape, ServerEvent
from infertriage.schemas import VOCABULARY, JsonlWriter, MetricKind, RunClock, Sample, UserError
from infertriage.schemas.artefacts import ARTEFACT_SAMPLE

__all__ = ["ScrapeTarget", "Scraper", "samples_of"]

_log = logging.getLogger(__name__)

_START_SLACK_S = 1.0  # process_start_time_seconds is rounded; a real restart moves it more


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    name: str  # "engine", "dcgm"
    url: str


@dataclass
class _TargetState:
    detection: Detection | None = None
    reachable: bool | None = None
    start_time_s: float | None = None
    counters: dict[tuple[str, Labels], float] = field(default_factory=dict)
    first_text: str | None = None
    first_exposition: Exposition | None = None
    last_text: str | None = None
    num_ok: int = 0
    num_failed: int = 0
    num_restarts: int = 0


def _label_dict(labels: Labels, **extra: str) -> dict[str, str]:
    return {**dict(labels), **extra}


def samples_of(t: float, adapted: Sequence[Adapted]) -> list[Sample]:
    """The metrics.jsonl records of one mapped scrape (non-finite values are left out)."""
    out: list[Sample] = []
    for one in adapted:
        for scalar in one.scalars:
            out.append(Sample(t, scalar.name, scalar.value, dict(scalar.labels)))
        for histogram in one.histograms:
            for le, count in histogram.buckets:
                le_text = "+Inf" if math.isinf(le) else repr(le)
                out.append(
                    Sample(t, histogram.name, count, _label_dict(histogram.labels, le=le_text))
                )
            for stat, value in (("sum", histogram.sum), ("count", histogram.count)):
                if math.isfinite(value):
                    labels = _label_dict(histogram.labels, stat=stat)
                    out.append(Sample(t, histogram.name, value, labels))
        for artefact in one.artefacts:
            labels = {"kind": artefact.kind, "metric": artefact.metric, "raw": artefact.raw}
            out.append(
                Sample(t, ARTEFACT_SAMPLE, artefact.value, {**labels, "said": artefact.said})
            )
    return [s for s in out if math.isfinite(s.value)]


def _cumulative(adapted: Sequence[Adapted]) -> dict[tuple[str, Labels], float]:
    values: dict[tuple[str, Labels], float] = {}
    for one in adapted:
        for scalar in one.scalars:
            if VOCABULARY[scalar.name].kind is MetricKind.COUNTER and math.isfinite(scalar.value):
                values[(scalar.name, scalar.labels)] = scalar.value
        for histogram in one.histograms:
            values[(histogram.name, histogram.labels)] = histogram.count
    return values


def _start_time(adapted: Sequence[Adapted]) -> float | None:
    values = [v for one in adapted for v in one.values("proc.start_time_s") if math.isfinite(v)]
    return max(values) if values else None


class Scraper:
    """Scrapes its targets every `interval_s` until stopped; see the module docstring."""

    def __init__(
        self,
        targets: Sequence[ScrapeTarget],
        *,
        clock: RunClock,
        interval_s: float = 1.0,
        timeout_s: float = 5.0,
        writer: JsonlWriter | None = None,
        raw_dir: Path | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.targets = tuple(targets)
        self.clock = clock
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.writer = writer
        self.raw_dir = raw_dir
        self.scrapes: list[Scrape] = []
        self.events: list[ServerEvent] = []
        self._state = {target.name: _TargetState() for target in self.targets}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def state_of(self, target: str) -> _TargetState:
        return self._state[target]

    async def scrape_once(
        self, session: aiohttp.ClientSession, *, strict: bool = False
    ) -> list[Scrape]:
        """Scrape every target once, concurrently; with `strict`, a failure raises."""
        results = await asyncio.gather(
            *(self._scrape_target(session, target, strict) for target in self.targets)
        )
        return [scrape for scrape in results if scrape is not None]

    async def _scrape_target(
        self, session: aiohttp.ClientSession, target: ScrapeTarget, strict: bool
    ) -> Scrape | None:
        state = self._state[target.name]
        t = self.clock.now_ts()
        try:
            fetched = await fetch(session, target.url, timeout_s=self.timeout_s, what="metrics")
            exposition = await asyncio.to_thread(parse_metrics_text, fetched.text, target.url)
        except UserError as err:  # a FetchError, or text that is not metrics
            self._failed(t, target, state, str(err))
            if strict:
                raise
            return None
        state.detection = state.detection or detect(exposition)
        state.first_exposition = state.first_exposition or exposition
        adapted = await asyncio.to_thread(adapt_scrape, exposition, state.detection)
        self._observe(t, target, state, adapted, fetched.text)
        scrape = Scrape(t, target.name, target.url, adapted, exposition.notes)
        _log.debug("scraped %s: %d series", target.url, len(adapted))
        self.scrapes.append(scrape)
        if self.writer is not None:
            for sample in samples_of(t, adapted):
                self.writer.write(sample)
        return scrape

    def _event(self, t: float, target: ScrapeTarget, kind: str, reason: str, detail: str) -> None:
        _log.info("%s %s: %s (%s)", target.name, kind, detail, reason)
        event = ServerEvent(t, target.name, kind, detail)
        self.events.append(event)
        name = {"restart": "server.restart", "unreachable": "server.unreachable"}.get(kind)
        if self.writer is not None and name is not None:
            labels = {"target": target.name, "reason": reason, "detail": detail}
            self.writer.write(Sample(t, name, 1.0, labels))

    def _failed(self, t: float, target: ScrapeTarget, state: _TargetState, message: str) -> None:
        state.num_failed += 1
        if state.reachable is not False:
            self._event(t, target, "unreachable", "scrape_failed", message)
        state.reachable = False

    def _observe(
        self,
        t: float,
        target: ScrapeTarget,
        state: _TargetState,
        adapted: Sequence[Adapted],
        text: str,
    ) -> None:
        if state.reachable is False:
            self._event(t, target, "recovered", "scrape_ok", f"{target.url} answers again")
        state.reachable = True
        start = _start_time(adapted)
        counters = _cumulative(adapted)
        self._check_restart(t, target, state, start, counters)
        state.start_time_s = start if start is not None else state.start_time_s
        state.counters = counters
        state.num_ok += 1
        state.last_text = text
        if state.first_text is None:
            state.first_text = text
            self._write_raw(f"{target.name}.first.txt", text)

    def _check_restart(
        self,
        t: float,
        target: ScrapeTarget,
        state: _TargetState,
        start: float | None,
        counters: dict[tuple[str, Labels], float],
    ) -> None:
        previous = state.start_time_s
        if start is not None and previous is not None and abs(start - previous) > _START_SLACK_S:
            detail = f"process_start_time_seconds went from {previous:.0f} to {start:.0f}"
            self._restarted(t, target, state, "start_time_changed", detail)
            return
        went_back = sorted(
            {
                name
                for (name, labels), value in counters.items()
                if value < state.counters.get((name, labels), 0.0)
            }
        )
        if went_back:
            detail = "counters went backwards: " + ", ".join(went_back[:6])
            self._restarted(t, target, state, "counters_reset", detail)

    def _restarted(
        self, t: float, target: ScrapeTarget, state: _TargetState, reason: str, detail: str
    ) -> None:
        state.num_restarts += 1
        self._event(t, target, "restart", reason, detail)
        if state.last_text is not None:
            self._write_raw(
                f"{target.name}.before-restart-{state.num_restarts}.txt", state.last_text
            )

    def _write_raw(self, name: str, text: str) -> None:
        if self.raw_dir is None:
            return
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        path = self.raw_dir / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)

    async def run(self, session: aiohttp.ClientSession, *, scrape_first: bool = True) -> None:
        """Scrape at `interval_s` (on a fixed schedule, skipping missed ticks) until `stop`."""
        start = self.clock.now_ts()
        tick = 0
        if scrape_first:
            await self.scrape_once(session)
        while True:
            tick = max(tick + 1, math.ceil((self.clock.now_ts() - start) / self.interval_s))
            delay = max(start + tick * self.interval_s - self.clock.now_ts(), 0.0)
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=delay)
            except TimeoutError:
                await self.scrape_once(session)
                continue
            return

    def start(
        self, session: aiohttp.ClientSession, *, scrape_first: bool = True
    ) -> asyncio.Task[None]:
        """Run as its own task; `stop()` ends it with a final scrape."""
        self._stop.clear()
        self._task = asyncio.create_task(
            self.run(session, scrape_first=scrape_first), name="infertriage-scraper"
        )
        return self._task

    async def stop(self, session: aiohttp.ClientSession) -> None:
        """Stop the task, take the last scrape, and keep its raw text."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.scrape_once(session)
        for target in self.targets:
            text = self._state[target.name].last_text
            if text is not None:
                self._write_raw(f"{target.name}.last.txt", text)
