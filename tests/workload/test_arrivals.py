"""Arrival processes: absolute deadlines, seeded, bounded; each process has its shape."""

from __future__ import annotations

import numpy as np
import pytest

from infertriage.schemas import UserError
from infertriage.workload import ArrivalKind, Arrivals, make_offsets, parse_arrivals


def test_constant_offsets_are_absolute_deadlines_without_drift() -> None:
    offsets = make_offsets(Arrivals(ArrivalKind.CONSTANT, 7.0), num_requests=10_000)
    assert offsets[0] == 0.0
    # Each deadline is i/rate up to float rounding: no error accumulates over 10,000 requests.
    assert np.max(np.abs(offsets - np.arange(10_000) / 7.0)) < 1e-9


def test_poisson_mean_gap_and_exponential_shape() -> None:
    offsets = make_offsets(Arrivals(ArrivalKind.POISSON, 50.0), num_requests=40_000, seed=3)
    gaps = np.diff(offsets)
    assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)  # CV of an exponential


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_sets_the_variability(burstiness: float) -> None:
    arrivals = Arrivals(ArrivalKind.GAMMA, 20.0, burstiness=burstiness)
    gaps = np.diff(make_offsets(arrivals, num_requests=40_000, seed=1))
    assert gaps.mean() == pytest.approx(1 / 20.0, rel=0.03)
    assert (gaps.std() / gaps.mean()) ** 2 == pytest.approx(1 / burstiness, rel=0.08)


def test_same_seed_same_schedule_other_seed_other() -> None:
    arrivals = Arrivals(ArrivalKind.POISSON, 5.0)
    a = make_offsets(arrivals, num_requests=100, seed=7)
    assert np.array_equal(a, make_offsets(arrivals, num_requests=100, seed=7))
    assert not np.array_equal(a, make_offsets(arrivals, num_requests=100, seed=8))


def test_duration_bounds_the_schedule() -> None:
    offsets = make_offsets(Arrivals(ArrivalKind.POISSON, 100.0), duration_s=30.0, seed=0)
    assert offsets.max() < 30.0
    assert len(offsets) == pytest.approx(3000, rel=0.05)
    both = make_offsets(Arrivals(ArrivalKind.POISSON, 100.0), duration_s=30.0, num_requests=50)
    assert len(both) == 50


def test_ramp_rises_linearly() -> None:
    arrivals = Arrivals(ArrivalKind.RAMP, 20.0, ramp_from=0.0)
    offsets = make_offsets(arrivals, duration_s=10.0)
    assert len(offsets) == pytest.approx(100, abs=1)  # mean rate 10/s over 10 s
    first_half = np.sum(offsets < 5.0)
    assert first_half == pytest.approx(25, abs=1)  # ∫0..5 of 2t dt = 25
    flat = make_offsets(Arrivals(ArrivalKind.RAMP, 4.0, ramp_from=4.0), duration_s=5.0)
    assert np.allclose(np.diff(flat), 0.25)


def test_parse_arrivals_and_its_errors() -> None:
    assert parse_arrivals("gamma:0.5", 3.0) == Arrivals(ArrivalKind.GAMMA, 3.0, burstiness=0.5)
    assert parse_arrivals("ramp:2", 8.0).ramp_from == 2.0
    assert parse_arrivals("constant", 1.0).kind is ArrivalKind.CONSTANT
    for bad, match in [
        ("uniform", "unknown arrival"),
        ("gamma:x", "not a number"),
        ("poisson:3", "takes no argument"),
        ("gamma:0", "burstiness"),
    ]:
        with pytest.raises(UserError, match=match):
            parse_arrivals(bad, 1.0)
    with pytest.raises(UserError, match="positive"):
        Arrivals(ArrivalKind.POISSON, 0.0)
    with pytest.raises(UserError, match="bound the run"):
        make_offsets(Arrivals(ArrivalKind.POISSON, 1.0))
    with pytest.raises(UserError, match="needs --duration"):
        make_offsets(Arrivals(ArrivalKind.RAMP, 1.0), num_requests=5)
