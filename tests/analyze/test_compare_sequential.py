"""`sequential.planning_alpha` when the planned sample is past `--max-requests` (issue 34)."""

from __future__ import annotations

import pytest

from infertriage.analyze.compare.sequential import look_alpha, planning_alpha, schedule


@pytest.mark.parametrize(("planned", "bound"), [(290, 1), (290, 5), (40, 10), (250, 300)])
def test_the_plan_counts_on_the_look_that_covers_it_never_on_zero(planned: int, bound: int) -> None:
    alpha = planning_alpha(planned, bound, 0.05)
    assert 0 < alpha <= 0.05
    points = schedule(planned, bound)
    at = next(p for p in points if p >= min(planned, bound))
    before = max((p for p in points if p < at), default=0)
    assert alpha == pytest.approx(look_alpha(before, at, bound, 0.05))


def test_a_plan_past_the_bound_has_the_one_look_at_the_bound() -> None:
    assert schedule(290, 5) == (5,)
    assert planning_alpha(290, 5, 0.05) == pytest.approx(0.05)
