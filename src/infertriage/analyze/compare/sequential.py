"""analyze.compare, level 1: `compare --until-decided`: looks on a schedule, alpha kept.

Takes the block and the requests per arm at each look (an iterator:
advancing it samples up to the next look), a judge (every metric's verdict
at a given alpha), the comparison's `alpha` and the bound (the most requests
per arm); gives a
`SequentialResult`: every metric's verdict, each the one of the first look
that decided it, and the looks. Pure: the sampling is the caller's.
`schedule` says where to look: at the planned sample N and at N/4, N/2, 2N,
4N, … below the bound, and at the bound (by default 4N): five looks, doubling.

The rule is alpha spending (Lan & DeMets, 1983) with the Pocock-type function

    α(t) = α · ln(1 + (e − 1) · t),   t = n / n_max,

the information fraction: the requests per arm so far over the bound. Look k
judges the whole comparison at αₖ = α(tₖ) − α(tₖ₋₁) — shared by Bonferroni
over its statistics as a single comparison is, and its `miss` (the risk of
calling a regression "unchanged") αₖ too; the look at the bound takes what is
left, α − α(tₖ₋₁). A metric's verdict (regression, improvement, unchanged) is
final at the first look that gives it; the undecided ones are judged again at
the next look, and the sampling stops when none is left or at the bound.

Since the αₖ sum to at most α, the union bound over looks and statistics keeps
the chance of any false regression, over every look, at most α — whatever the
correlation of the looks (so it is conservative: a boundary computed for the
correlation would spend less) — and each metric's chance of calling a
regression "unchanged" at most α as well. Few looks keep each one's share
large: at the default schedule the look at N gets α(1/4) − α(1/8), 0.0081 of
α = 0.05, and `planning_alpha` is what the plan counts on there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from infertriage.analyze.compare.verdict import MetricComparison

__all__ = [
    "Look",
    "SequentialResult",
    "look_alpha",
    "planning_alpha",
    "schedule",
    "spent",
    "until_decided",
]

Judge = Callable[[float], Sequence[MetricComparison]]


def spent(t: float, alpha: float) -> float:
    """The alpha spent by information fraction `t` (Pocock-type Lan–DeMets), 0 ≤ t ≤ 1."""
    t = min(max(t, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1.0) * t)


def planning_alpha(planned: int, bound: int, alpha: float) -> float:
    """The alpha the look at the planned sample gets on `schedule`: what is spent from the
    look before it (half the plan) to it — or, when the plan is past the bound, what the
    look at the bound gets."""
    previous = 0
    for point in schedule(planned, bound):
        if point >= min(planned, bound):
            return look_alpha(previous, point, bound, alpha)
        previous = point
    return look_alpha(previous, bound, bound, alpha)  # not reached: the schedule ends at it


def schedule(planned: int, bound: int) -> tuple[int, ...]:
    """The requests per arm to look at: the planned sample times 1/4, 1/2, 1, 2, 4, … below
    the bound, then the bound."""
    points: list[int] = []
    size = max(1, planned // 4)
    while size < bound:
        points.append(size)
        size *= 2
    return (*points, bound)


def look_alpha(previous: int, current: int, bound: int, alpha: float) -> float:
    """A look's share: the alpha spent from `previous` to `current` requests per arm; the
    look at the bound takes the rest."""
    if current >= bound:
        return alpha - spent(previous / bound, alpha)
    return spent(current / bound, alpha) - spent(previous / bound, alpha)


@dataclass(frozen=True, slots=True)
class Look:
    """One look: its number, after which block, the requests per arm, its alpha, the metrics
    still undecided after it."""

    index: int
    block: int
    per_arm: int
    alpha: float
    undecided: tuple[str, ...]

    def describe(self) -> str:
        still = ", ".join(self.undecided) if self.undecided else "none"
        return (
            f"look {self.index} (block {self.block}): {self.per_arm} requests per arm, "
            f"alpha {self.alpha:.2g}; "
            f"undecided: {still}"
        )


@dataclass(frozen=True, slots=True)
class SequentialResult:
    """Each metric's verdict (from the look that decided it, else the last look) and the looks."""

    metrics: tuple[MetricComparison, ...]
    looks: tuple[Look, ...]

    @property
    def decided(self) -> bool:
        return all(m.verdict != "inconclusive" for m in self.metrics)


def until_decided(
    sizes: Iterable[tuple[int, int]],
    judge: Judge,
    *,
    bound: int,
    alpha: float,
    on_look: Callable[[Look], None] | None = None,
) -> SequentialResult:
    """Look at each (block, requests per arm) `sizes` yields, judging at the look's alpha,
    until every metric is decided or the bound is reached (see the module). `on_look` is
    told of each look as it is made."""
    if bound < 1:
        raise ValueError("the bound must be at least one request per arm")
    final: dict[str, MetricComparison] = {}
    order: list[str] = []
    latest: dict[str, MetricComparison] = {}
    looks: list[Look] = []
    previous = 0
    for block, size in sizes:
        if size <= previous:  # no new requests: no look, no alpha spent
            continue
        share = look_alpha(previous, size, bound, alpha)
        previous = size
        for m in judge(share):
            if m.metric not in order:
                order.append(m.metric)
            latest[m.metric] = m
            if m.verdict != "inconclusive" and m.metric not in final:
                final[m.metric] = m
        undecided = tuple(name for name in order if name not in final)
        looks.append(Look(len(looks) + 1, block, size, share, undecided))
        if on_look is not None:
            on_look(looks[-1])
        if not undecided or size >= bound:
            break
    metrics = tuple(final.get(name, latest[name]) for name in order)
    return SequentialResult(metrics, tuple(looks))
