"""twin.tally.SampledSeries: a run's per-finish series kept in bounded memory, evenly
thinned, its shape (a series that falls throughout) and its latest point kept."""

from __future__ import annotations

import itertools

from infertriage.twin.scenario_model import Scenario
from infertriage.twin.simulate import simulate
from infertriage.twin.tally import SampledSeries


def _series(values: list[int]) -> SampledSeries:
    series = SampledSeries()
    for i, value in enumerate(values):
        series.add(float(i), value)
    return series


def test_a_short_series_is_kept_whole() -> None:
    values = [5, 3, 4, 1]
    assert _series(values).points() == [(float(i), v) for i, v in enumerate(values)]
    assert SampledSeries().points() == []


def test_a_long_series_is_bounded_evenly_thinned_and_ends_with_its_latest_point() -> None:
    count = 20 * SampledSeries.MAX_POINTS + 7
    points = _series(list(range(count, 0, -1))).points()
    assert SampledSeries.MAX_POINTS // 2 <= len(points) <= SampledSeries.MAX_POINTS
    assert points[0] == (0.0, count) and points[-1] == (float(count - 1), 1)
    steps = {b[0] - a[0] for a, b in itertools.pairwise(points[:-1])}
    assert len(steps) == 1  # one stride between the kept points but the last
    assert all(b[1] < a[1] for a, b in itertools.pairwise(points))  # still falls throughout


def test_simulate_gives_its_free_block_series_in_finish_order() -> None:
    result = simulate(Scenario(), rate=8, num_requests=40, workload="synthetic:input=64,output=8")
    series = result.free_blocks_trajectory
    assert len(series) == result.num_completed == 40  # one point a finish, all kept
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(series))
