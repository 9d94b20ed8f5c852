"""Data-parallel ranks kept apart (analyze.signals.ranks) and read beside the server's totals
(analyze.signals.metrics), on hand-made samples as collect writes them (label `dp_rank`)."""

from __future__ import annotations

import pytest

from infertriage.analyze.signals.metrics import Phases, metric_signals
from infertriage.analyze.signals.ranks import rank_signals
from infertriage.schemas import Sample


def _rank(t: float, name: str, rank: str, value: float, **labels: str) -> Sample:
    return Sample(t, name, value, {"dp_rank": rank, "raw": name, **labels})


def _scrape(t: float, running: dict[str, float], waiting: dict[str, float]) -> list[Sample]:
    return [_rank(t, "queue.running", r, v) for r, v in running.items()] + [
        _rank(t, "queue.waiting", r, v) for r, v in waiting.items()
    ]


def _by_name(samples: list[Sample], phases: Phases) -> dict[str, float]:
    return {s.name: s.value for s in metric_signals(samples, phases)}


ONE_SCRAPE = Phases(load_start_ts=0.0, load_end_ts=0.0)


def test_one_rank_queueing_while_the_other_idles_is_read_apart() -> None:
    samples = _scrape(0.0, {"0": 64, "1": 2}, {"0": 30, "1": 0})
    samples += [_rank(0.0, "kv.usage", "0", 0.97), _rank(0.0, "kv.usage", "1", 0.05)]
    got = {s.name: s.value for s in rank_signals(samples, 0.0, 0.0)}
    assert got["dp.ranks"] == 2
    assert got["dp.imbalance"] == pytest.approx(94 / 48)  # max over mean of running + waiting
    assert (got["dp.busiest_rank"], got["dp.busiest_running"], got["dp.busiest_waiting"]) == (
        0,
        64,
        30,
    )
    assert (got["dp.idlest_rank"], got["dp.idlest_running"], got["dp.idlest_kv_usage"]) == (
        1,
        2,
        0.05,
    )
    assert got["dp.running_by_rank.0"] == 64 and got["dp.waiting_by_rank.1"] == 0
    assert got["dp.kv_usage_by_rank.0"] == 0.97
    assert got["dp.rank_running_max"] == 64


def test_ranks_are_averaged_over_the_window_and_ordered_as_numbers() -> None:
    samples = []
    for t, busy in ((0.0, 10.0), (5.0, 30.0), (10.0, 20.0), (20.0, 99.0)):  # t=20 is outside
        running = {str(rank): 1.0 for rank in range(11)} | {"10": busy}
        samples += _scrape(t, running, {})
    got = {s.name: s.value for s in rank_signals(samples, 0.0, 10.0)}
    assert got["dp.ranks"] == 11
    assert got["dp.busiest_rank"] == 10  # "10" is rank ten, not between "1" and "2"
    assert got["dp.busiest_running"] == pytest.approx(20.0)  # mean of 10, 30, 20
    assert got["dp.rank_running_max"] == 30.0


def test_one_engine_is_one_rank_and_no_queue_is_no_signal() -> None:
    plain = [Sample(0.0, "queue.running", 5.0, {"raw": "llamacpp:requests_processing"})]
    assert [(s.name, s.value) for s in rank_signals(plain, 0.0, 0.0)] == [("dp.ranks", 1.0)]
    assert rank_signals([Sample(0.0, "kv.usage", 0.5, {})], 0.0, 0.0) == []


def test_an_idle_server_of_two_ranks_is_even() -> None:
    got = {s.name: s.value for s in rank_signals(_scrape(0.0, {"0": 0, "1": 0}, {}), 0.0, 0.0)}
    assert got["dp.imbalance"] == 1.0


def test_the_servers_queues_are_the_sum_of_its_ranks() -> None:
    got = _by_name(_scrape(0.0, {"0": 64, "1": 2}, {"0": 30, "1": 0}), ONE_SCRAPE)
    assert got["queue.running_max"] == 66 and got["queue.waiting_max"] == 30
    assert got["dp.rank_running_max"] == 64


def test_the_sum_is_taken_at_each_scrape_before_the_peak() -> None:
    # rank 0 peaks first, rank 1 later: the server never ran 50 + 50 at once
    samples = _scrape(1.0, {"0": 50, "1": 10}, {}) + _scrape(2.0, {"0": 10, "1": 50}, {})
    got = _by_name(samples, Phases(load_start_ts=0.0, load_end_ts=3.0))
    assert got["queue.running_max"] == 60


def test_counters_grow_per_rank_and_the_growths_add_up() -> None:
    samples = []
    for t, (a, b) in enumerate(((100.0, 1000.0), (110.0, 1010.0), (130.0, 1015.0))):
        samples += [
            _rank(float(t), "prefix_cache.queries", "0", a * 10),
            _rank(float(t), "prefix_cache.queries", "1", b * 10),
            _rank(float(t), "prefix_cache.hits", "0", a),
            _rank(float(t), "prefix_cache.hits", "1", b),
        ]
    got = _by_name(samples, Phases(load_start_ts=0.0, load_end_ts=2.0))
    # interleaved as one series, rank 1's 10,000 after rank 0's 1,000 would read as resets
    assert got["prefix_cache.hit_rate"] == pytest.approx(0.1)
