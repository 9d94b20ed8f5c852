"""analyze.stats, level 1: the exact (Clopper–Pearson) interval of a rate; the trials to settle it.

Takes counts (k events in n trials) or an observed rate and a limit; gives the
interval as floats, and the number of trials at which an observed rate's
interval would leave the limit out. Pure: no I/O, no clock; stdlib only.

Exact rather than Wilson (`stats.wilson_interval`) because errors are rare: at
one failure in 100 requests Wilson's lower bound is 0.18 % and would call a
0.1 % error-rate SLO broken, though a server at 0.1 % shows one failure in
100 requests one time in ten. Clopper–Pearson inverts the binomial tails
themselves, so its coverage is never below the level asked. The tails are
the regularized incomplete beta, P(X ≥ k) = I_p(k, n − k + 1), evaluated by
its continued fraction (Lentz's method) and inverted by bisection.
"""

from __future__ import annotations

import math

__all__ = ["exact_interval", "regularized_beta", "requests_to_settle"]

_CF_EPS = 1e-15
_CF_TINY = 1e-300
_CF_MAX_TERMS = 20_000  # √(a + b) terms suffice: enough for a billion trials
_BISECTIONS = 64
_MOST_TRIALS = 10**9


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), for x < (a + 1)/(a + b + 2) (Lentz's method)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
    out = d
    for m in range(1, _CF_MAX_TERMS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _CF_TINY else _CF_TINY
            out *= c * d
        if abs(c * d - 1.0) < _CF_EPS:
            break
    return out


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function (the binomial tails' closed form)."""
    return _betainc(a, b, x)


def _at_least(k: float, n: float, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p); k may be fractional (the beta form is continuous)."""
    return 1.0 if k <= 0 else _betainc(k, n - k + 1.0, p)


def _at_most(k: float, n: float, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), as I_{1−p}(n − k, k + 1)."""
    return 1.0 if k >= n else _betainc(n - k, k + 1.0, 1.0 - p)


def _solve(tail: float, k: float, n: float, *, lower: bool) -> float:
    """The p at which P(X ≥ k) (lower) or P(X ≤ k) (upper) equals `tail`, by bisection."""
    low, high = 0.0, 1.0
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2.0
        value = _at_least(k, n, mid) if lower else _at_most(k, n, mid)
        # P(X ≥ k) grows with p, P(X ≤ k) falls: move toward where it equals `tail`
        if (value < tail) == lower:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def exact_interval(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """The Clopper–Pearson interval of a proportion k/n; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"{k} events out of {n} trials")
    tail = (1.0 - level) / 2.0
    low = 0.0 if k == 0 else _solve(tail, k, n, lower=True)
    high = 1.0 if k == n else _solve(tail, k, n, lower=False)
    return low, high


def _leaves_out(rate: float, n: int, limit: float, tail: float) -> bool:
    k = rate * n
    if rate > limit:
        return _at_least(k, n, limit) < tail
    return _at_most(k, n, limit) < tail


def requests_to_settle(rate: float, limit: float, *, level: float = 0.95) -> int | None:
    """The fewest trials at which the exact interval of an observed `rate` leaves `limit` out.

    The count at n trials is taken as rate·n (fractional counts through the
    beta form of the tails). None when no number of trials does: `rate` equal
    to `limit`, a `limit` of 0 or 1, or more than a billion trials.
    """
    if rate == limit or not 0.0 < limit < 1.0 or not 0.0 <= rate <= 1.0:
        return None
    tail = (1.0 - level) / 2.0
    high = 1
    while not _leaves_out(rate, high, limit, tail):
        high *= 2
        if high > _MOST_TRIALS:
            return None
    low = high // 2  # does not settle it (or is 0)
    while high - low > 1:
        mid = (low + high) // 2
        if _leaves_out(rate, mid, limit, tail):
            high = mid
        else:
            low = mid
    return high
