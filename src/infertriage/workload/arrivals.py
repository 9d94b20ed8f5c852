"""workload, level 1: arrival processes as absolute deadlines.

Takes an `Arrivals` description (constant, Poisson, gamma with burstiness, a
linear ramp) and a bound (a count, a duration or both); gives the intended
start of every request in seconds after the load begins. Offsets are computed
once, up front, as a cumulative sum in float64: the runner sleeps until
`start + offset`, so lateness never accumulates (no drift). Seeded: the same
seed gives the same schedule. Trace replay takes its offsets from the trace
(see `sources`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from infertriage.schemas import UserError

__all__ = ["ArrivalKind", "Arrivals", "make_offsets", "parse_arrivals"]

# Generating a duration-bounded schedule in blocks keeps memory flat for long runs.
_BLOCK = 4096
# A schedule longer than this is a mistake in the flags, not a load test.
MAX_REQUESTS = 10_000_000


class ArrivalKind(StrEnum):
    CONSTANT = "constant"  # one request every 1/rate seconds
    POISSON = "poisson"  # exponential gaps, mean 1/rate
    GAMMA = "gamma"  # gamma gaps, shape = burstiness (1 is Poisson, < 1 burstier)
    RAMP = "ramp"  # rate rises linearly from `ramp_from` to `rate` over the duration


@dataclass(frozen=True, slots=True)
class Arrivals:
    kind: ArrivalKind
    rate: float  # requests per second (the end rate of a ramp)
    burstiness: float = 1.0
    ramp_from: float = 0.0

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise UserError(f"the request rate must be a positive number, not {self.rate}.")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise UserError(f"burstiness must be a positive number, not {self.burstiness}.")
        if not (self.ramp_from >= 0 and math.isfinite(self.ramp_from)):
            raise UserError(f"a ramp must start at a rate of 0 or more, not {self.ramp_from}.")


def parse_arrivals(text: str, rate: float) -> Arrivals:
    """`--arrival`: `poisson`, `constant`, `gamma:0.5` (burstiness) or `ramp:1` (start rate)."""
    name, _, arg = text.partition(":")
    try:
        kind = ArrivalKind(name.strip().lower())
    except ValueError:
        known = ", ".join(k.value for k in ArrivalKind)
        raise UserError(f"unknown arrival process {name!r} (use one of {known}).") from None
    try:
        value = float(arg) if arg else None
    except ValueError:
        raise UserError(f"--arrival {text!r}: {arg!r} is not a number.") from None
    if kind is ArrivalKind.GAMMA:
        return Arrivals(kind, rate, burstiness=1.0 if value is None else value)
    if kind is ArrivalKind.RAMP:
        return Arrivals(kind, rate, ramp_from=0.0 if value is None else value)
    if value is not None:
        raise UserError(f"--arrival {name} takes no argument (got {arg!r}).")
    return Arrivals(kind, rate)


def _gaps(arrivals: Arrivals, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
    if arrivals.kind is ArrivalKind.CONSTANT:
        return np.full(n, 1.0 / arrivals.rate)
    if arrivals.kind is ArrivalKind.POISSON:
        return rng.exponential(1.0 / arrivals.rate, n)
    shape = arrivals.burstiness
    return rng.gamma(shape, 1.0 / (arrivals.rate * shape), n)


def _ramp_offsets(arrivals: Arrivals, n: int, duration_s: float) -> npt.NDArray[np.float64]:
    # Cumulative intensity Λ(t) = r0·t + (r1 − r0)·t²/(2T); request i starts where Λ(t) = i.
    r0, r1, horizon = arrivals.ramp_from, arrivals.rate, duration_s
    counts = np.arange(n, dtype=np.float64)
    slope = (r1 - r0) / horizon
    if abs(slope) < 1e-12:
        return counts / r0
    return (-r0 + np.sqrt(r0 * r0 + 2.0 * slope * counts)) / slope


def make_offsets(
    arrivals: Arrivals,
    *,
    num_requests: int | None = None,
    duration_s: float | None = None,
    seed: int = 0,
) -> npt.NDArray[np.float64]:
    """Intended start offsets (seconds, ascending, the first at 0) bounded by count and/or time."""
    if num_requests is None and duration_s is None:
        raise UserError("give --num-requests or --duration to bound the run.")
    if arrivals.kind is ArrivalKind.RAMP:
        if duration_s is None or duration_s <= 0:
            raise UserError("a ramp needs --duration: it rises over the run's duration.")
        mean_rate = (arrivals.ramp_from + arrivals.rate) / 2.0
        n = math.floor(mean_rate * duration_s) + 1
        if num_requests is not None:
            n = min(n, num_requests)
        return _ramp_offsets(arrivals, min(n, MAX_REQUESTS), duration_s)
    rng = np.random.default_rng(seed)
    limit = MAX_REQUESTS if num_requests is None else min(num_requests, MAX_REQUESTS)
    blocks: list[npt.NDArray[np.float64]] = []
    total, last = 0, 0.0
    while total < limit:
        size = min(_BLOCK, limit - total)
        gaps = _gaps(arrivals, rng, size)
        gaps[0] += last
        block = np.cumsum(gaps)
        blocks.append(block)
        total += size
        last = float(block[-1])
        if duration_s is not None and last >= duration_s:
            break
    # The first request starts the load at 0; every later one keeps its absolute gap.
    offsets = np.concatenate(blocks) if blocks else np.zeros(0)
    offsets = np.concatenate(([0.0], offsets[:-1])) if len(offsets) else offsets
    if duration_s is not None:
        offsets = offsets[offsets < duration_s]
    return offsets
