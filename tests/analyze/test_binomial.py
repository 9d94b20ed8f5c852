"""The exact binomial interval against closed forms, a textbook value and plain binomial sums."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from infertriage.analyze.stats.binomial import exact_interval, requests_to_settle


def _tail_at_least(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k, n + 1))


def _bisect(f: Callable[[float], float], target: float, increasing: bool) -> float:
    low, high = 0.0, 1.0
    for _ in range(80):
        mid = (low + high) / 2
        if (f(mid) < target) == increasing:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _reference(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson by its definition: the p at which each binomial tail is (1 − level)/2."""
    tail = (1 - level) / 2
    low = 0.0 if k == 0 else _bisect(lambda p: _tail_at_least(k, n, p), tail, True)
    high = 1.0 if k == n else _bisect(lambda p: 1 - _tail_at_least(k + 1, n, p), tail, False)
    return low, high


@pytest.mark.parametrize(
    ("k", "n"), [(1, 10), (3, 10), (5, 20), (1, 100), (7, 100), (2, 400), (40, 400), (399, 400)]
)
def test_the_interval_is_where_each_binomial_tail_is_2_5_percent(k: int, n: int) -> None:
    low, high = exact_interval(k, n)
    ref_low, ref_high = _reference(k, n)
    assert low == pytest.approx(ref_low, rel=1e-9, abs=1e-12)
    assert high == pytest.approx(ref_high, rel=1e-9, abs=1e-12)


def test_closed_forms_at_the_edges_and_the_textbook_5_of_20() -> None:
    n = 100
    assert exact_interval(0, n) == (0.0, pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12))
    assert exact_interval(n, n) == (pytest.approx(0.025 ** (1 / n), rel=1e-12), 1.0)
    assert exact_interval(1, n)[0] == pytest.approx(1 - 0.975 ** (1 / n), rel=1e-12)
    # Clopper & Pearson's table, as quoted by every textbook: 5 of 20 → 0.0866–0.4910
    low, high = exact_interval(5, 20)
    assert (round(low, 4), round(high, 4)) == (0.0866, 0.4910)
    assert exact_interval(3, 10, level=0.99)[0] < exact_interval(3, 10)[0]


def test_no_trials_is_the_whole_range_and_bad_counts_are_refused() -> None:
    assert exact_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="11 events out of 10"):
        exact_interval(11, 10)


def test_a_million_trials_is_quick_and_brackets_the_rate() -> None:
    low, high = exact_interval(12_345, 1_000_000)
    assert low < 0.012345 < high and high - low < 5e-4


def test_requests_to_settle_at_the_edges_has_closed_forms() -> None:
    # No failure at all: (1 − limit)^n < 2.5 % once n > ln 0.025 / ln 0.999 = 3,687.03.
    assert requests_to_settle(0.0, 0.001) == 3688
    # Every request failing against a 50 % limit: 0.5^n < 2.5 % once n > 5.32.
    assert requests_to_settle(1.0, 0.5) == 6


def test_requests_to_settle_is_what_the_interval_says() -> None:
    # 1 % observed against 0.1 %: at 179 requests (1.79 failures) the tail is below 2.5 %.
    assert requests_to_settle(0.01, 0.001) == 179
    assert exact_interval(2, 179)[0] > 0.001  # two failures in 179 do prove it
    assert exact_interval(1, 179)[0] < 0.001  # one does not
    assert requests_to_settle(0.004, 0.001) == 908
    # Far from the edges it meets the normal approximation z²·L(1 − L)/(rate − L)².
    normal = 1.959964**2 * 0.001 * 0.999 / 0.0001**2
    assert requests_to_settle(0.0011, 0.001) == pytest.approx(normal, rel=0.08)


def test_requests_to_settle_is_none_where_no_count_settles_it() -> None:
    assert requests_to_settle(0.001, 0.001) is None
    assert requests_to_settle(0.5, 0.0) is None
    assert requests_to_settle(0.5, 1.0) is None
