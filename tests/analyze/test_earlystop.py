"""MLPerf LoadGen's early-stopping rule: the counts LoadGen's docs give, and the estimate."""

from __future__ import annotations

import pytest

from infertriage.analyze.stats.earlystop import early_stop, percentile_estimate, requests_needed


@pytest.mark.parametrize(
    ("percentile", "over", "needed"),
    # LoadGen at 99 % confidence: p99 needs 459 / 662 / 838 queries with 0 / 1 / 2 over;
    # p90 needs 44 (mlcommons/inference, loadgen early stopping); p95 and p90 with one over
    # as I_p(h, t + 1) ≤ 0.01 gives them.
    [(0.99, 0, 459), (0.99, 1, 662), (0.99, 2, 838), (0.9, 0, 44), (0.95, 0, 90), (0.9, 1, 64)],
)
def test_requests_needed_matches_loadgen(percentile: float, over: int, needed: int) -> None:
    assert requests_needed(percentile, over) == needed


def test_more_over_the_limit_needs_more_requests() -> None:
    counts = [requests_needed(0.95, t) for t in range(10)]
    assert counts == sorted(counts) and len(set(counts)) == 10


def test_early_stop_counts_over_and_says_what_is_missing() -> None:
    judged = early_stop([0.1] * 35 + [2.0], limit=1.0, percentile=0.95)
    assert (judged.num_over, judged.needed, judged.met) == (1, 130, False)
    assert judged.more == 94
    assert "needs ≥ 130 requests with 1 over the limit; 36 were judged" in judged.describe()
    assert early_stop([0.1] * 90, limit=1.0, percentile=0.95).met


def test_percentile_estimate_discards_the_highest_it_may() -> None:
    samples = [float(i) for i in range(1, 1001)]  # 1 … 1000
    assert percentile_estimate(samples[:40], 0.95) is None  # fewer than 130
    estimate = percentile_estimate(samples, 0.99)
    assert estimate is not None and 990.0 < estimate <= 1000.0  # a bound above the p99


def test_bad_percentile_is_refused() -> None:
    with pytest.raises(ValueError, match="percentile"):
        requests_needed(95, 0)
