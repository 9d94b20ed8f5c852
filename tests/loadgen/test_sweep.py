"""Sweeps: the stability verdict, the knee, and a sweep against a queue-bound server."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.analyze.stats.latency import LatencySummary, steady_window, summarize
from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.loadgen.results import ClientDiagnostics, LevelResult
from infertriage.loadgen.sweep import find_knee, judge_stable, sweep_rates, ttft_growth
from infertriage.schemas import Chunk, RequestRecord
from infertriage_testing.testserver import Behavior, serve_in_process


def _records(ttft_of: list[float], gap: float = 0.1) -> list[RequestRecord]:
    out = []
    for i, ttft in enumerate(ttft_of):
        t = i * gap
        chunks = (Chunk(t + ttft, 1), Chunk(t + ttft + 0.01, 1))
        out.append(RequestRecord(id=str(i), scheduled_ts=t, sent_ts=t, first_token_ts=t + ttft,
                                 last_token_ts=t + ttft + 0.01, end_ts=t + ttft + 0.01,
                                 chunks=chunks, output_tokens=2))  # fmt: skip
    return out


def test_flat_ttft_is_stable_and_growing_ttft_is_not() -> None:
    flat = _records([0.05] * 40)
    assert ttft_growth(flat) == pytest.approx((0.0, 1.0))
    assert judge_stable(flat, steady_window(flat))
    growing = _records([0.05 + 0.02 * i for i in range(40)])
    slope, ratio = ttft_growth(growing)
    assert slope == pytest.approx(0.2) and ratio > 3
    assert not judge_stable(growing, steady_window(growing))


def _level(rate: float, stable: bool) -> LevelResult:
    summary: LatencySummary = summarize([])
    client = ClientDiagnostics(1, True, 0.0, 0.0, 0.0, None, 0, None, False, False, ())
    return LevelResult(f"rate={rate}", "rate", rate, summary, client, False, stable=stable)


def test_knee_is_the_highest_stable_rate_below_the_trailing_unstable_run() -> None:
    def knee_of(pairs: list[tuple[float, bool]]) -> float | None:
        return find_knee(10.0, [_level(r, s) for r, s in pairs]).knee_rate

    assert knee_of([(4, True), (1, True), (9, False), (6, True), (8, False)]) == 6
    assert knee_of([(1, True), (2, False), (4, True), (6, True), (8, False)]) == 6  # a blip
    everything = find_knee(10.0, [_level(1, True), _level(2, True)])
    assert everything.knee_rate == 2 and everything.criterion.startswith("no probed rate")
    assert knee_of([(1, False), (2, False)]) is None
    assert "TTFT" in find_knee(10.0, [_level(1, True)]).criterion
    assert sweep_rates(10.0) == [2.5, 5.0, 7.5, 9.0, 10.0, 11.0, 12.5]


@pytest.mark.slow
def test_sweep_finds_the_knee_of_a_queue_bound_server(tmp_path: Path) -> None:
    # Two slots, each request 10 ms to first token then 9 × 4 ms: capacity 2 / 46 ms ≈ 43/s.
    behavior = Behavior(ttft_s=0.010, itl_s=0.004, num_tokens=10)
    capacity = 2 / (0.010 + 9 * 0.004)
    with serve_in_process(behavior, capacity=2) as url:
        result = run_bench(
            BenchSpec(
                url=url,
                sweep=True,
                max_concurrency=8,
                duration_s=1.0,
                drain_timeout_s=0.4,
                workload="synthetic:input=8,output=10",
                arrival="constant",
                out=tmp_path / "run",
            )
        )
    assert result.knee is not None
    assert result.knee.max_throughput == pytest.approx(capacity, rel=0.15)
    assert result.knee.knee_rate is not None
    assert result.knee.knee_rate == pytest.approx(capacity, rel=0.15)
    assert result.levels[2].stable  # half of capacity
    assert result.levels[-1].stable is False  # 1.25× capacity queues without bound
