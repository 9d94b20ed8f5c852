"""The scraper against a real aiohttp server serving the real vLLM capture, values changed live."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from infertriage.collect import Collected, Collector, Scraper, ScrapeTarget, build_view
from infertriage.schemas import JsonlWriter, RunClock, RunDir, Sample, UserError, read_jsonl

GEN = "vllm:generation_tokens_total"
START = "process_start_time_seconds"
TTFT = "vllm:time_to_first_token_seconds"


def _scraper(server: Any, tmp_path: Path | None = None, **kw: object) -> Scraper:
    writer = JsonlWriter(tmp_path / "metrics.jsonl") if tmp_path else None
    return Scraper(
        [ScrapeTarget("engine", server.url + "/metrics")],
        clock=RunClock(),
        writer=writer,
        raw_dir=tmp_path / "raw" if tmp_path else None,
        timeout_s=2.0,
        **kw,  # type: ignore[arg-type]
    )


async def _scrape(scraper: Scraper, session: aiohttp.ClientSession, strict: bool = False) -> None:
    await scraper.scrape_once(session, strict=strict)


def test_window_rates_and_quantiles_from_deltas(shared_fixture, live_server: Any) -> None:  # type: ignore[no-untyped-def]
    base = shared_fixture("metrics/vllm.txt").read_text()
    scraper = _scraper(live_server)

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            live_server.set("/metrics", base)  # generation tokens 7, one TTFT in (0.25, 0.5]
            await _scrape(scraper, session, strict=True)
            await asyncio.sleep(0.2)
            # 100 more tokens; 10 more first tokens, all in (0.04, 0.06].
            changed = live_server.with_values(base, {GEN: 107.0})
            changed = live_server.with_bucket_counts(
                changed,
                TTFT,
                {
                    "0.04": 0.0,
                    "0.06": 10.0,
                    "0.08": 10.0,
                    "0.1": 10.0,
                    "0.25": 10.0,
                    "0.5": 11.0,
                    "0.75": 11.0,
                    "1.0": 11.0,
                    "2.5": 11.0,
                    "5.0": 11.0,
                    "7.5": 11.0,
                    "10.0": 11.0,
                    "+Inf": 11.0,
                },
            )
            live_server.set("/metrics", changed)
            await _scrape(scraper, session)

    asyncio.run(run())
    view = build_view(scraper.scrapes, source=live_server.url)
    assert view.window is not None and view.num_scrapes == 2
    tokens = view.entry("tokens.generation")
    assert tokens is not None and tokens.counter is not None
    assert tokens.counter.increase == 100.0 and tokens.counter.num_resets == 0
    rate = tokens.counter.rate_per_s
    assert rate is not None and rate == pytest.approx(100.0 / view.duration_s)  # type: ignore[operator]
    ttft = view.entry("server.ttft")
    assert ttft is not None and ttft.histogram is not None
    assert ttft.histogram.count == 10.0  # the old observation is not in the window
    p50 = next(q for q in ttft.quantiles if q.q == 0.5)
    assert p50.value == pytest.approx(0.04 + 0.02 * 5 / 10)
    assert (p50.lower, p50.upper) == (0.04, 0.06)
    assert not scraper.events


def test_counter_reset_is_counted_through_and_reported(shared_fixture, live_server: Any) -> None:  # type: ignore[no-untyped-def]
    base = shared_fixture("metrics/vllm.txt").read_text()
    scraper = _scraper(live_server)

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            for tokens in (1000.0, 1500.0, 40.0, 90.0):  # a reset between 1500 and 40
                live_server.set("/metrics", live_server.with_values(base, {GEN: tokens}))
                await _scrape(scraper, session)

    asyncio.run(run())
    view = build_view(scraper.scrapes, source=live_server.url, events=scraper.events)
    tokens = view.entry("tokens.generation")
    assert tokens is not None and tokens.counter is not None
    assert tokens.counter.increase == 500.0 + 40.0 + 50.0
    assert tokens.counter.num_resets == 1
    (event,) = scraper.events
    assert event.kind == "restart" and "tokens.generation" in event.detail


def test_restart_is_detected(shared_fixture, live_server: Any, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = shared_fixture("metrics/vllm.txt").read_text()
    restarted = live_server.with_values(base, {START: 1.7181405583e9 + 3600.0, GEN: 3.0})
    scraper = _scraper(live_server, tmp_path)

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            live_server.set("/metrics", live_server.with_values(base, {GEN: 500.0}))
            await _scrape(scraper, session, strict=True)
            live_server.stop()  # the server goes away: connections are refused
            await _scrape(scraper, session)
            with pytest.raises(UserError, match="connection refused"):
                await _scrape(scraper, session, strict=True)
            live_server.start()  # back on the same port, a new process
            live_server.set("/metrics", restarted)
            await _scrape(scraper, session)
            await scraper.stop(session)

    asyncio.run(run())
    assert scraper.writer is not None
    scraper.writer.close()
    kinds = [e.kind for e in scraper.events]
    assert kinds == ["unreachable", "recovered", "restart"]
    restart = scraper.events[-1]
    assert "process_start_time_seconds" in restart.detail
    raw = tmp_path / "raw"
    assert (raw / "engine.first.txt").read_text() == live_server.with_values(base, {GEN: 500.0})
    assert (raw / "engine.last.txt").read_text() == restarted
    assert (raw / "engine.before-restart-1.txt").exists()
    samples = list(read_jsonl(tmp_path / "metrics.jsonl", Sample))
    events = [s for s in samples if s.name in {"server.restart", "server.unreachable"}]
    assert [s.name for s in events] == ["server.unreachable", "server.restart"]
    assert events[-1].labels["reason"] == "start_time_changed"
    view = build_view(scraper.scrapes, source=live_server.url, events=scraper.events)
    tokens = view.entry("tokens.generation")
    assert tokens is not None and tokens.counter is not None
    assert tokens.counter.increase == 3.0 + 0.0  # 500 → 3 (reset) → 3


def test_samples_land_in_metrics_jsonl_on_the_run_clock(
    shared_fixture, live_server: Any, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    live_server.set("/metrics", shared_fixture("metrics/vllm.txt").read_text())
    scraper = _scraper(live_server, tmp_path, interval_s=0.1)
    started = time.monotonic()

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            scraper.start(session)
            await asyncio.sleep(0.45)
            await scraper.stop(session)

    asyncio.run(run())
    elapsed = time.monotonic() - started
    assert scraper.writer is not None
    scraper.writer.close()
    assert 4 <= len(scraper.scrapes) <= 8  # at 0, .1, .2, .3, .4 and the last at stop
    times = [s.t for s in scraper.scrapes]
    assert times == sorted(times) and times[0] >= 0 and times[-1] <= elapsed
    samples = list(read_jsonl(tmp_path / "metrics.jsonl", Sample))
    assert {s.t for s in samples} == set(times)
    first = [s for s in samples if s.t == times[0]]
    waiting = next(s for s in first if s.name == "queue.waiting")
    assert waiting.labels == {"model_name": "facebook/opt-125m", "raw": "vllm:num_requests_waiting"}
    ttft = [s for s in first if s.name == "server.ttft"]
    assert {s.labels.get("le") for s in ttft if "le" in s.labels} >= {"0.5", "+Inf"}
    assert {s.labels.get("stat") for s in ttft if "stat" in s.labels} == {"sum", "count"}
    assert (tmp_path / "raw" / "engine.first.txt").exists()
    assert (tmp_path / "raw" / "engine.last.txt").exists()


def test_a_slow_scrape_does_not_delay_the_event_loop(shared_fixture, live_server: Any) -> None:  # type: ignore[no-untyped-def]
    live_server.set("/metrics", shared_fixture("metrics/vllm.txt").read_text(), delay_s=0.3)
    scraper = _scraper(live_server, interval_s=0.2)
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:  # stands in for the load generator
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def run() -> None:
        stop = asyncio.Event()
        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(ticker(stop))
            scraper.start(session)
            await asyncio.sleep(0.7)
            await scraper.stop(session)
            stop.set()
            await task

    asyncio.run(run())
    assert len(scraper.scrapes) >= 2
    assert max(gaps) < 0.25


def test_a_body_cut_short_is_one_sentence(live_server: Any) -> None:
    live_server.set("/metrics", "# TYPE x gauge\nx 1\n" * 200, cut=True)
    scraper = _scraper(live_server)

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            await _scrape(scraper, session, strict=True)

    with pytest.raises(UserError, match="cut short"):
        asyncio.run(run())


def test_the_collect_stage_fills_the_run_directory(
    shared_fixture, live_server: Any, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    live_server.set("/metrics", shared_fixture("metrics/vllm.txt").read_text())
    live_server.set("/dcgm/metrics", shared_fixture("metrics/dcgm.txt").read_text())
    live_server.set_json(
        "/v1/models", {"data": [{"id": "facebook/opt-125m", "max_model_len": 2048}]}
    )
    run = RunDir.create(tmp_path / "run")
    collector = Collector(
        run,
        RunClock(),
        url=live_server.url + "/v1",
        dcgm_url=live_server.url + "/dcgm/metrics",
        interval_s=0.1,
        sample_gpus=False,
    )

    async def go() -> Collected:
        async with aiohttp.ClientSession() as session:
            await collector.start(session)
            await asyncio.sleep(0.35)
            return await collector.stop(session)

    collected = asyncio.run(go())
    assert collected.view.engine == "vllm" and collected.view.exporters == ("dcgm",)
    assert collected.view.window is not None
    assert collected.server_config is not None and collected.server_config.max_model_len == 2048
    assert collected.environment.python and collected.host_samples
    # This test's own process serves the port, so its tree is the "server" here.
    assert collected.host_samples[-1].rss_bytes
    names = {s.name for s in read_jsonl(run.metrics, Sample)}
    assert {"queue.waiting", "server.ttft", "gpu.sm_active", "host.cpu", "proc.rss_bytes"} <= names
    assert {p.name for p in run.raw.iterdir()} == {
        "engine.first.txt",
        "engine.last.txt",
        "dcgm.first.txt",
        "dcgm.last.txt",
    }


def test_the_collect_stage_refuses_an_unreachable_server(free_port: int, tmp_path: Path) -> None:
    collector = Collector(
        RunDir.create(tmp_path / "run"), RunClock(), url=f"http://127.0.0.1:{free_port}"
    )

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            await collector.start(session)

    with pytest.raises(UserError, match="connection refused"):
        asyncio.run(go())
