"""analyze.compare, level 1: `compare --until-decided`: a look after each block, alpha kept.

Takes the requests per arm at each look (an iterator: advancing it samples the
next block), a judge (every metric's verdict at a given alpha), the
comparison's `alpha` and the bound (the most requests per arm); gives a
`SequentialResult`: every metric's verdict, each the one of the first look
that decided it, and the looks. Pure: the sampling is the caller's.

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
regression "unchanged" at most α as well. Pocock-type spending spends early
(a third of α by a quarter of the bound), so a clear verdict stops early: the
point of sampling until decided. `planning_alpha` is the alpha a plan that
reaches a fraction t of the bound can count on: α(t).
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
    "spent",
    "until_decided",
]

Judge = Callable[[float], Sequence[MetricComparison]]


def spent(t: float, alpha: float) -> float:
    """The alpha spent by information fraction `t` (Pocock-type Lan–DeMets), 0 ≤ t ≤ 1."""
    t = min(max(t, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1.0) * t)


def planning_alpha(t: float, alpha: float) -> float:
    """The alpha a plan reaching a fraction `t` of the bound can count on: all of `spent(t)`."""
    return spent(t, alpha)


def look_alpha(previous: int, current: int, bound: int, alpha: float) -> float:
    """A look's share: the alpha spent from `previous` to `current` requests per arm; the
    look at the bound takes the rest."""
    if current >= bound:
        return alpha - spent(previous / bound, alpha)
    return spent(current / bound, alpha) - spent(previous / bound, alpha)


@dataclass(frozen=True, slots=True)
class Look:
    """One look: after which block, the requests per arm, its alpha, the metrics still open."""

    block: int
    per_arm: int
    alpha: float
    undecided: tuple[str, ...]

    def describe(self) -> str:
        still = ", ".join(self.undecided) if self.undecided else "none"
        return (
            f"look {self.block}: {self.per_arm} requests per arm, alpha {self.alpha:.2g}; "
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
    sizes: Iterable[int],
    judge: Judge,
    *,
    bound: int,
    alpha: float,
    on_look: Callable[[Look], None] | None = None,
) -> SequentialResult:
    """Look after each size `sizes` yields (requests per arm), judging at the look's alpha,
    until every metric is decided or the bound is reached (see the module). `on_look` is
    told of each look as it is made."""
    if bound < 1:
        raise ValueError("the bound must be at least one request per arm")
    final: dict[str, MetricComparison] = {}
    order: list[str] = []
    latest: dict[str, MetricComparison] = {}
    looks: list[Look] = []
    previous = 0
    for block, size in enumerate(sizes, start=1):
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
        looks.append(Look(block, size, share, undecided))
        if on_look is not None:
            on_look(looks[-1])
        if not undecided or size >= bound:
            break
    metrics = tuple(final.get(name, latest[name]) for name in order)
    return SequentialResult(metrics, tuple(looks))
