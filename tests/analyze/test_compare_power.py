"""The sample plan's formulas against seeded simulation, and the sequential rule's error rate."""

from __future__ import annotations

import numpy as np
import pytest

from infertriage.analyze.compare.comparison import METRICS
from infertriage.analyze.compare.power import (
    detect_n,
    equivalence_n,
    plan_sample,
    rate_detect_n,
)
from infertriage.analyze.compare.sequential import (
    look_alpha,
    planning_alpha,
    schedule,
    spent,
    until_decided,
)
from infertriage.analyze.compare.verdict import Metric, MetricComparison, judge_metric

from .compare_helpers import closed_loop_run

TTFT = METRICS[0]
# The threshold a test of significance alone needs: no practical bar, no minimum change.
_ANY_CHANGE = Metric("ttft", "s", True, 0.0, TTFT.samples)


def _judge(metric: Metric, a: np.ndarray, b: np.ndarray, *, threshold: float, alpha: float,
           seed: int) -> MetricComparison:  # fmt: skip
    # One metric of two statistics: Bonferroni over 2, the metric's miss the whole alpha.
    return judge_metric(metric, a, b, threshold=threshold, alpha=alpha / 2, miss=alpha, seed=seed)


def test_formulas_grow_as_expected() -> None:
    n = detect_n(0.3, 0.1, alpha=0.05, power=0.8)
    # 2 (1.96 + 0.84)² σ² / ln(1.1)² over a median's efficiency 2/π:
    assert n == pytest.approx(2 * 2.8016**2 * 0.09 / np.log(1.1) ** 2 / (2 / np.pi), rel=0.01)
    assert detect_n(0.6, 0.1, alpha=0.05, power=0.8) == pytest.approx(4 * n, rel=0.01)
    assert detect_n(0.3, 0.1, alpha=0.05 / 12, power=0.8) > n
    assert detect_n(0.3, 0.1, alpha=0.05, power=0.9) > n
    # Two one-sided tests at 0.05, both passing 80 % of the time: (1.645 + 1.28)² against 2.80².
    assert equivalence_n(0.3, 0.1, miss=0.05, power=0.8) == pytest.approx(
        n * (2.926 / 2.8016) ** 2, rel=0.01
    )
    assert rate_detect_n(0.0, 0.005, alpha=0.05 / 12, power=0.8) > 2000


@pytest.mark.parametrize("sigma", [0.2, 0.5])
def test_planned_n_detects_the_threshold_change_at_about_the_power(sigma: float) -> None:
    threshold, alpha, power = 0.3, 0.05 / 12, 0.8
    n = detect_n(sigma, threshold, alpha=alpha, power=power)
    rng = np.random.default_rng(7)
    detected = 0
    for i in range(100):
        base = rng.lognormal(0.0, sigma, n)
        run = rng.lognormal(np.log1p(threshold), sigma, n)
        m = judge_metric(TTFT, base, run, threshold=threshold, alpha=alpha, miss=0.05, seed=i)
        detected += m.p_value < alpha and m.p50_diff_ci is not None and m.p50_diff_ci[0] > 0
    assert 0.6 <= detected / 100 <= 0.97  # the power asked, loosely: the formula is approximate


def test_equivalence_n_calls_like_samples_unchanged_at_about_the_power() -> None:
    sigma, threshold, power = 0.3, 0.3, 0.8
    n = equivalence_n(sigma, threshold, miss=0.05, power=power)
    rng = np.random.default_rng(11)
    unchanged = 0
    for i in range(100):
        base, run = rng.lognormal(0.0, sigma, n), rng.lognormal(0.0, sigma, n)
        m = judge_metric(TTFT, base, run, threshold=threshold, alpha=0.05 / 2, miss=0.05, seed=i)
        unchanged += m.verdict == "unchanged"
    assert unchanged / 100 >= 0.6


def test_plan_from_pilot_records_names_every_p50_metric_and_converts_to_requests() -> None:
    pilot = [closed_loop_run(40, seed=1), closed_loop_run(40, seed=2)]
    plan = plan_sample(pilot)
    names = [need.metric for need in plan.needs]
    assert names == ["ttft", "tpot", "itl", "e2e", "output_throughput"]
    assert plan.requests_per_arm == max(need.needed for need in plan.needs) >= 10
    assert plan.pilot_per_arm == 40 and plan.error_needed is not None
    assert "from the pilot's 40 requests per arm" in plan.describe()
    text = plan.describe()
    assert text.startswith(f"planned: ~{plan.requests_per_arm} requests per arm to detect a 10%")
    assert "at 80% power" in text and "p50 TTFT needs" in text
    assert "big enough" in plan.enough(10**6, 10**6)
    assert "too small" in plan.enough(5, 10**6)
    # A wider spread needs more: the same runs with a TTFT spread twice as wide.
    wide = [closed_loop_run(40, seed=1, tail=3.0), closed_loop_run(40, seed=2, tail=3.0)]
    assert plan_sample(wide).needs[0].sigma >= plan.needs[0].sigma


# --- the sequential rule ---------------------------------------------------------------------


def test_spending_sums_to_alpha() -> None:
    assert spent(0.0, 0.05) == 0.0 and spent(1.0, 0.05) == pytest.approx(0.05)
    shares = [
        look_alpha(p, c, 200, 0.05)
        for p, c in zip(range(0, 200, 40), range(40, 240, 40), strict=True)
    ]
    assert sum(shares) == pytest.approx(0.05) and all(s > 0 for s in shares)
    assert look_alpha(160, 400, 200, 0.05) == pytest.approx(0.05 - spent(0.8, 0.05))
    # The look at the plan, a quarter of the default bound, gets α(1/4) − α(1/8).
    assert planning_alpha(100, 400, 0.05) == pytest.approx(spent(0.25, 0.05) - spent(0.125, 0.05))
    assert planning_alpha(100, 400, 0.05) == pytest.approx(0.0081, abs=0.0001)
    # a plan past the bound (--max-requests below it) counts on the look at the bound, never
    # on no alpha at all: 228 planned against 16 once crashed the plan with alpha 0
    assert planning_alpha(228, 16, 0.05) == pytest.approx(0.05)
    assert 0.0 < planning_alpha(100, 120, 0.05) < 0.05
    assert schedule(100, 400) == (25, 50, 100, 200, 400)
    assert schedule(100, 150) == (25, 50, 100, 150)


def _sequential_alarm(seed: int, *, bonus: float = 1.0) -> tuple[bool, int]:
    """Identical distributions, five looks of 40 up to 200 a side: any false change? (`bonus`
    scales each look's alpha: 1 is the rule, a large one every look at the full alpha.)"""
    rng = np.random.default_rng(seed)
    base, run = rng.lognormal(0.0, 0.5, 200), rng.lognormal(0.0, 0.5, 200)
    sizes = iter(range(40, 201, 40))
    current = [0]

    def advance() -> object:
        for block, size in enumerate(sizes, start=1):
            current[0] = size
            yield block, size

    def judge(alpha: float) -> list[MetricComparison]:
        n = current[0]
        level = min(alpha * bonus, 0.05)
        return [_judge(_ANY_CHANGE, base[:n], run[:n], threshold=1e-9, alpha=level, seed=seed)]

    result = until_decided(advance(), judge, bound=200, alpha=0.05)  # type: ignore[arg-type]
    return any(m.verdict in ("regression", "improvement") for m in result.metrics), len(
        result.looks
    )


def test_sequential_false_alarms_stay_within_alpha() -> None:
    """With no practical bar (any significant change counts), 200 seeded comparisons of one
    distribution with itself raise at most alpha false alarms over all five looks; the same
    looks each at the full alpha raise more — the inflation the spending prevents."""
    runs = [_sequential_alarm(seed) for seed in range(200)]
    alarms = sum(alarm for alarm, _ in runs)
    # With no practical bar hardly any metric is "unchanged": most ran all five looks.
    assert sum(looks == 5 for _, looks in runs) >= 150
    assert alarms <= 0.05 * 200
    naive = sum(_sequential_alarm(seed, bonus=1e9)[0] for seed in range(200))
    assert naive > alarms


def test_a_metric_is_frozen_at_the_look_that_decided_it() -> None:
    rng = np.random.default_rng(3)
    base, run = rng.lognormal(0.0, 0.2, 400), rng.lognormal(np.log(1.5), 0.2, 400)
    seen: list[int] = []

    def sizes() -> object:
        for block, size in enumerate((40, 80, 120), start=1):
            seen.append(size)
            yield block, size

    def judge(alpha: float) -> list[MetricComparison]:
        n = seen[-1]
        return [_judge(TTFT, base[:n], run[:n], threshold=0.1, alpha=alpha, seed=0)]

    result = until_decided(sizes(), judge, bound=400, alpha=0.05)  # type: ignore[arg-type]
    assert result.decided and len(result.looks) == 1 and seen == [40]
    assert result.metrics[0].verdict == "regression" and result.metrics[0].run_n == 40
    assert result.looks[0].describe().startswith("look 1 (block 1): 40 requests per arm, alpha ")
