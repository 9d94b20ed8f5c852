"""Prometheus math: counter increases through resets, histogram_quantile with its bounds."""

from __future__ import annotations

import math

import pytest

from infertriage.analyze.signals.prom import (
    counter_increase,
    gauge_stats,
    histogram_increase,
    histogram_quantile,
)
from infertriage.collect import adapt_scrape, parse_metrics_text

INF = math.inf


def test_counter_increase_and_rate() -> None:
    result = counter_increase([(0.0, 10.0), (1.0, 15.0), (2.0, 20.0)])
    assert result is not None
    assert result.increase == 10.0 and result.num_resets == 0
    assert result.rate_per_s == pytest.approx(5.0)


def test_counter_increase_counts_through_a_reset() -> None:
    # 100 → 120 (+20), restart: 5 counted from zero (+5), 5 → 25 (+20)
    result = counter_increase([(0.0, 100.0), (1.0, 120.0), (2.0, 5.0), (3.0, 25.0)])
    assert result is not None
    assert result.increase == 45.0 and result.num_resets == 1
    assert result.rate_per_s == pytest.approx(15.0)


def test_counter_increase_needs_two_points() -> None:
    assert counter_increase([(0.0, 1.0)]) is None
    zero_length = counter_increase([(1.0, 1.0), (1.0, 2.0)])
    assert zero_length is not None and zero_length.rate_per_s is None


def test_gauge_stats() -> None:
    stats = gauge_stats([(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)])
    assert stats is not None
    assert (stats.last, stats.mean, stats.min, stats.max) == (2.0, 2.0, 1.0, 3.0)
    assert gauge_stats([]) is None


BUCKETS = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0)]


@pytest.mark.parametrize(
    ("q", "value", "lower", "upper"),
    [
        (0.5, 0.3, 0.1, 0.5),  # rank 20: 10 below, 20 in (0.1, 0.5] → 0.1 + 0.4 × 10/20
        (0.9, 0.8, 0.5, 1.0),  # rank 36: 30 below, 10 in (0.5, 1] → 0.5 + 0.5 × 6/10
        (0.05, 0.02, 0.0, 0.1),  # rank 2 in the first bucket, which starts at 0
        (1.0, 1.0, 0.5, 1.0),
    ],
)
def test_histogram_quantile_hand_computed(
    q: float, value: float, lower: float, upper: float
) -> None:
    estimate = histogram_quantile(q, BUCKETS)
    assert estimate is not None
    assert estimate.value == pytest.approx(value)
    assert (estimate.lower, estimate.upper) == (lower, upper)
    assert not estimate.open_ended
    assert estimate.error_bound == pytest.approx(max(value - lower, upper - value))


def test_quantile_in_the_inf_bucket_is_a_floor() -> None:
    estimate = histogram_quantile(0.99, [(0.1, 10.0), (0.5, 30.0), (INF, 40.0)])
    assert estimate is not None
    assert estimate.value == 0.5 and estimate.lower == 0.5 and estimate.open_ended


def test_quantile_is_nan_where_prometheus_says_nan() -> None:
    assert histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None  # no observations
    assert histogram_quantile(0.5, [(0.1, 1.0), (0.5, 2.0)]) is None  # no +Inf bucket
    assert histogram_quantile(0.5, [(INF, 3.0)]) is None  # one bucket
    assert histogram_quantile(1.5, BUCKETS) is None


def test_quantile_makes_skewed_buckets_monotonic() -> None:
    skewed = [(0.1, 10.0), (0.5, 9.0), (1.0, 20.0), (INF, 20.0)]
    estimate = histogram_quantile(0.25, skewed)
    assert estimate is not None and estimate.value == pytest.approx(0.05)


def test_histogram_increase_subtracts_the_first_scrape() -> None:
    first = ({0.1: 5.0, 0.5: 8.0, INF: 10.0}, 2.0, 10.0)
    last = ({0.1: 5.0, 0.5: 18.0, INF: 20.0}, 5.5, 20.0)
    window = histogram_increase([first, last])
    assert window is not None
    assert window.buckets == ((0.1, 0.0), (0.5, 10.0), (INF, 10.0))
    assert (window.count, window.sum, window.num_resets) == (10.0, 3.5, 0)
    estimate = histogram_quantile(0.5, window.buckets)  # all 10 new ones in (0.1, 0.5]
    assert estimate is not None and estimate.value == pytest.approx(0.3)


def test_histogram_increase_through_a_reset() -> None:
    first = ({0.1: 50.0, INF: 100.0}, 20.0, 100.0)
    after_restart = ({0.1: 2.0, INF: 3.0}, 0.4, 3.0)
    later = ({0.1: 4.0, INF: 6.0}, 0.9, 6.0)
    window = histogram_increase([first, after_restart, later])
    assert window is not None
    assert window.buckets == ((0.1, 4.0), (INF, 6.0))
    assert window.count == 6.0 and window.num_resets == 1
    assert window.sum == pytest.approx(0.9)


def test_quantile_of_the_real_sglang_itl_histogram(shared_fixture) -> None:  # type: ignore[no-untyped-def]
    text = shared_fixture("metrics/sglang.txt").read_text()
    (adapted,) = adapt_scrape(parse_metrics_text(text, "sglang.txt"))
    (itl,) = [h for h in adapted.histograms if h.name == "server.itl"]
    estimate = histogram_quantile(0.5, itl.buckets)
    # 7,400,757 observations; rank 3,700,378.5 falls in (0.075, 0.1] between 433,413 and 4,950,195.
    expected = 0.075 + 0.025 * (3_700_378.5 - 433_413) / (4_950_195 - 433_413)
    assert estimate is not None
    assert estimate.value == pytest.approx(expected, rel=1e-12)
    assert (estimate.lower, estimate.upper) == (0.075, 0.1)
    ttft = next(h for h in adapted.histograms if h.name == "server.ttft")
    p50 = histogram_quantile(0.5, ttft.buckets)  # 8,495 of 11,008 waited over 30 s
    assert p50 is not None and p50.open_ended and p50.value == 30.0
