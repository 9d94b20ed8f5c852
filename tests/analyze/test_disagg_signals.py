"""A prefill/decode deployment read role by role (analyze.signals.disagg), and per-rank
prefix-cache hit rates (analyze.signals.ranks), on hand-made samples as collect writes them
(labels `pd_role`, `instance`, `dp_rank`; histograms as `le` buckets with `stat` sum/count)."""

from __future__ import annotations

import pytest

from infertriage.analyze.signals.disagg import disagg_signals
from infertriage.analyze.signals.ranks import rank_signals
from infertriage.schemas import Sample


def _at(t: float, name: str, value: float, role: str, instance: str, **labels: str) -> Sample:
    return Sample(t, name, value, {"pd_role": role, "instance": instance, "dp_rank": "0", **labels})


def _hist(
    t: float, name: str, role: str, instance: str, buckets: dict[str, float], total: float
) -> list[Sample]:
    out = [_at(t, name, count, role, instance, le=le) for le, count in buckets.items()]
    out.append(_at(t, name, total, role, instance, stat="sum"))
    out.append(_at(t, name, buckets["+Inf"], role, instance, stat="count"))
    return out


def _got(samples: list[Sample], start: float, end: float) -> dict[str, float]:
    return {s.name: s.value for s in disagg_signals(samples, start, end)}


def _pools(t: float) -> list[Sample]:
    """1 prefill instance of two DP ranks, 2 decode instances."""
    return [
        _at(t, "queue.waiting", 6, "prefill", "p0", dp_rank="0"),
        _at(t, "queue.waiting", 2, "prefill", "p0", dp_rank="1"),
        _at(t, "queue.running", 4, "prefill", "p0", dp_rank="0"),
        _at(t, "queue.running", 4, "prefill", "p0", dp_rank="1"),
        _at(t, "kv.usage", 0.5, "prefill", "p0", dp_rank="0"),
        _at(t, "kv.usage", 0.3, "prefill", "p0", dp_rank="1"),
        _at(t, "queue.running", 20, "decode", "d0"),
        _at(t, "queue.running", 30, "decode", "d1"),
        _at(t, "queue.waiting", 0, "decode", "d0"),
        _at(t, "queue.waiting", 0, "decode", "d1"),
        _at(t, "kv.usage", 0.2, "decode", "d0"),
        _at(t, "kv.usage", 0.4, "decode", "d1"),
    ]


def test_each_role_is_read_apart_per_instance() -> None:
    got = _got(_pools(0.0), 0.0, 0.0)
    assert got["pd.prefill_instances"] == 2  # one instance, two data-parallel engines
    assert got["pd.decode_instances"] == 2
    assert got["pd.prefill_waiting"] == 8 and got["pd.prefill_waiting_per_instance"] == 4
    assert got["pd.decode_running_per_instance"] == 25
    assert got["pd.prefill_kv_usage"] == pytest.approx(0.4)
    assert got["pd.decode_kv_usage"] == pytest.approx(0.3)


def test_transfers_grow_over_the_window_and_give_the_achieved_rate() -> None:
    samples = _pools(0.0) + _pools(10.0) + _pools(20.0)
    mib = 2.0**20
    for t, count, secs, size in (
        (0.0, 100, 10.0, 100 * 100 * mib),
        (10.0, 150, 40.0, 150 * 100 * mib),
    ):
        buckets = {"0.1": count * 0.5, "1.0": count, "+Inf": count}
        samples += _hist(t, "kv_transfer.time", "decode", "d0", buckets, secs)
        samples += _hist(t, "kv_transfer.bytes", "decode", "d0", {"+Inf": count}, size)
        samples.append(_at(t, "kv_transfer.failed", count / 50, "decode", "d0"))
    got = _got(samples, 0.0, 10.0)
    assert got["pd.transfer_count"] == 50  # 150 − 100: the window's, not since the start
    assert got["pd.transfer_time_mean_s"] == pytest.approx(30.0 / 50)
    assert got["pd.transfer_bytes_mean"] == pytest.approx(100 * mib)
    assert got["pd.transfer_bytes_per_s"] == pytest.approx(50 * 100 * mib / 30.0)
    assert got["pd.transfer_failures"] == 1  # 3 − 2
    assert got["pd.transfer_failure_share"] == pytest.approx(1 / 51)


def test_one_scrape_reads_the_histograms_since_the_start_and_the_ttft_share() -> None:
    samples = _pools(0.0)
    samples += _hist(0.0, "kv_transfer.time", "decode", "d0", {"0.1": 10, "+Inf": 10}, 0.5)
    samples += _hist(0.0, "server.ttft", "prefill", "p0", {"+Inf": 10}, 2.0)  # 200 ms
    samples += _hist(0.0, "server.ttft", "decode", "d0", {"+Inf": 10}, 0.5)  # 50 ms
    samples += _hist(0.0, "server.queue_time", "prefill", "p0", {"+Inf": 10}, 1.0)
    got = _got(samples, 0.0, 0.0)
    assert got["pd.transfer_count"] == 10 and got["pd.transfer_time_mean_s"] == 0.05
    assert got["pd.ttft_mean_s"] == pytest.approx(0.25)  # both roles added: an upper bound
    assert got["pd.transfer_ttft_share"] == pytest.approx(0.2)
    assert got["pd.prefill_queue_share"] == pytest.approx(0.4)


def test_sglangs_last_transfer_gauges_and_queues_stand_in_for_histograms() -> None:
    samples = [
        *_pools(0.0),
        _at(0.0, "kv_transfer.latency", 0.48, "prefill", "p0"),
        _at(0.0, "kv_transfer.speed", 3e8, "prefill", "p0"),
        _at(0.0, "kv_transfer.last_bytes", 1.5e8, "prefill", "p0"),
        _at(0.0, "pd.prefill_inflight_queue", 20, "prefill", "p0"),
        _at(0.0, "pd.decode_transfer_queue", 12, "decode", "d0"),
        _at(0.0, "pd.decode_transfer_queue", 12, "decode", "d1"),
        _at(0.0, "pd.decode_prealloc_queue", 3, "decode", "d0"),
        _at(0.0, "kv_transfer.failed", 4, "prefill", "p0"),
        _at(0.0, "kv_transfer.bootstrap_failed", 1, "decode", "d0"),
    ]
    got = _got(samples, 0.0, 0.0)
    assert got["pd.transfer_time_mean_s"] == 0.48
    assert got["pd.transfer_bytes_per_s"] == 3e8 and got["pd.transfer_bytes_mean"] == 1.5e8
    assert got["pd.transfer_queue"] == 44 and got["pd.decode_prealloc_queue"] == 3
    assert got["pd.transfer_failures"] == 5
    assert "pd.transfer_count" not in got and "pd.transfer_failure_share" not in got


def test_a_server_that_names_no_role_gives_nothing() -> None:
    plain = [Sample(0.0, "queue.running", 5.0, {"dp_rank": "0"})]
    assert disagg_signals(plain, 0.0, 0.0) == []


def test_one_decode_instance_scraped_alone_gives_its_transfers() -> None:
    """No role label (one pod's /metrics, or SGLang ≤ 0.4 labelling every instance
    `unified`): the transfers are read, the roles and the TTFT share are not."""
    alone = [
        Sample(t, name, value, {"dp_rank": "0", **extra})
        for t in (0.0,)
        for name, value, extra in (
            ("queue.running", 5.0, {}),
            ("kv_transfer.time", 4.0, {"le": "+Inf"}),
            ("kv_transfer.time", 2.0, {"stat": "sum"}),
            ("kv_transfer.time", 4.0, {"stat": "count"}),
        )
    ]
    got = _got(alone, 0.0, 0.0)
    assert got == {"pd.transfer_count": 4.0, "pd.transfer_time_mean_s": 0.5}


def _prefix(t: float, rank: str, queries: float, hits: float) -> list[Sample]:
    labels = {"dp_rank": rank}
    return [
        Sample(t, "queue.running", 10.0, labels),
        Sample(t, "prefix_cache.queries", queries, labels),
        Sample(t, "prefix_cache.hits", hits, labels),
    ]


def test_each_ranks_prefix_hit_rate_over_the_window() -> None:
    samples = _prefix(0.0, "0", 1000, 800) + _prefix(0.0, "1", 1000, 0)
    samples += _prefix(10.0, "0", 2000, 1700) + _prefix(10.0, "1", 2000, 100)
    got = {s.name: s.value for s in rank_signals(samples, 0.0, 10.0)}
    assert got["dp.prefix_hit_rate_by_rank.0"] == pytest.approx(0.9)  # 900 of 1000 grown
    assert got["dp.prefix_hit_rate_by_rank.1"] == pytest.approx(0.1)
    assert got["dp.prefix_hit_rate_spread"] == pytest.approx(0.8)
    assert got["dp.prefix_hit_rate"] == pytest.approx(0.5)  # 1000 of 2000, all ranks


def test_sglangs_hit_rate_gauge_per_rank_and_one_rank_gives_no_spread() -> None:
    gauges = [Sample(0.0, "queue.running", 3.0, {"dp_rank": r}) for r in ("0", "1")] + [
        Sample(0.0, "prefix_cache.hit_rate", v, {"dp_rank": r}) for r, v in (("0", 0.7), ("1", 0.1))
    ]
    got = {s.name: s.value for s in rank_signals(gauges, 0.0, 0.0)}
    assert got["dp.prefix_hit_rate_spread"] == pytest.approx(0.6)
    one = {s.name for s in rank_signals(_prefix(0.0, "0", 1000, 800), 0.0, 0.0)}
    assert not any(name.startswith("dp.prefix_hit_rate") for name in one)


def test_roles_keep_prefill_apart_from_decode_and_two_instances_apart() -> None:
    """Two decode instances each export engine 0: two ranks, not one of their sum."""
    samples = _pools(0.0)
    got = {s.name: s.value for s in rank_signals(samples, 0.0, 0.0)}
    # prefill: 10 and 6 (running + waiting) against decode 20 and 30; the more uneven pair
    assert got["dp.role"] == 1 and got["dp.ranks"] == 2
    assert got["dp.imbalance"] == pytest.approx(10 / 8)


def test_a_light_prefill_pools_chance_skew_does_not_hide_the_decode_pools() -> None:
    """Three prefill instances at one prompt among them (1, 0, 0: 3x the mean, but under a
    request above it) beside two decode instances at 36 and 10 requests: the decode pool's
    figures are the ones kept (before, the larger ratio won and the decode skew was lost)."""
    samples = [
        *(_at(0.0, "queue.running", v, "prefill", f"p{i}") for i, v in enumerate((1, 0, 0))),
        *(_at(0.0, "queue.waiting", 0, "prefill", f"p{i}") for i in range(3)),
        _at(0.0, "queue.running", 30, "decode", "d0"),
        _at(0.0, "queue.waiting", 6, "decode", "d0"),
        _at(0.0, "queue.running", 10, "decode", "d1"),
        _at(0.0, "queue.waiting", 0, "decode", "d1"),
    ]
    got = {s.name: s.value for s in rank_signals(samples, 0.0, 0.0)}
    assert got["dp.role"] == 2 and got["dp.ranks"] == 2
    assert (got["dp.busiest_running"], got["dp.busiest_waiting"]) == (30, 6)
    assert got["dp.imbalance"] == pytest.approx(36 / 23)


def test_each_ranks_prefix_hit_rate_counts_from_the_scrape_before_the_window() -> None:
    # the lookups between the scrape at t=0 and the first inside the window (t=10) count
    samples = _prefix(0.0, "0", 1000, 800) + _prefix(0.0, "1", 1000, 0)
    samples += _prefix(10.0, "0", 2000, 1700) + _prefix(10.0, "1", 2000, 100)
    samples += _prefix(20.0, "0", 2100, 1700) + _prefix(20.0, "1", 2100, 100)
    got = {s.name: s.value for s in rank_signals(samples, 5.0, 20.0)}
    assert got["dp.prefix_hit_rate_by_rank.0"] == pytest.approx(900 / 1100)
    assert got["dp.prefix_hit_rate_by_rank.1"] == pytest.approx(100 / 1100)


def test_a_rank_with_no_scrape_in_the_window_gives_no_hit_rate() -> None:
    """Rank 1's last scrape came before the window (it died, or its scrapes were lost): its
    lifetime counters (98 % hits) say nothing of the window, and made a 0.88 spread."""
    samples = _prefix(9.8, "0", 1000, 900) + _prefix(9.8, "1", 5000, 4900)
    samples += _prefix(20.0, "0", 2100, 1010)
    got = {s.name: s.value for s in rank_signals(samples, 10.0, 20.0)}
    assert "dp.prefix_hit_rate_by_rank.1" not in got
    assert "dp.prefix_hit_rate_spread" not in got


def test_the_ranks_hit_rates_end_where_the_measured_level_does() -> None:
    """The overload level after the measured one (t 10–20) hit its cache far more: the ranks'
    rates are the measured window's (0–10), as the server-wide rate and the client's reuse."""
    samples = _prefix(0.0, "0", 1000, 100) + _prefix(0.0, "1", 1000, 100)
    samples += _prefix(10.0, "0", 2000, 300) + _prefix(10.0, "1", 2000, 200)
    samples += _prefix(20.0, "0", 3000, 1200) + _prefix(20.0, "1", 3000, 1100)
    got = {s.name: s.value for s in rank_signals(samples, 0.0, 20.0, prefix_end=10.0)}
    assert got["dp.prefix_hit_rate_by_rank.0"] == pytest.approx(0.2)
    assert got["dp.prefix_hit_rate_by_rank.1"] == pytest.approx(0.1)
