"""workload, level 1: seeded token-length distributions.

Takes a distribution written as on the command line — `512` (fixed),
`uniform(128,1024)`, `normal(512,64)`, `lognormal(512,2048)` (median and p90)
— and gives integer lengths, clipped to `[minimum, cap]`. The same seed gives
the same lengths.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from infertriage.schemas import UserError

__all__ = ["LengthDist", "LengthKind", "parse_length"]

# z-score of the 90th percentile of a standard normal: p90 = median · exp(σ · z90).
Z90 = 1.2815515655446004
_CALL = re.compile(r"^\s*([a-z_]+)\s*\(\s*([^()]*)\)\s*$")


class LengthKind(StrEnum):
    FIXED = "fixed"
    UNIFORM = "uniform"  # integers in [a, b]
    NORMAL = "normal"  # mean a, standard deviation b
    LOGNORMAL = "lognormal"  # median a, 90th percentile b


@dataclass(frozen=True, slots=True)
class LengthDist:
    kind: LengthKind
    a: float
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.a <= 0 and self.kind is not LengthKind.NORMAL:
            raise UserError(f"a {self.kind} length needs a positive first parameter.")
        if self.kind is LengthKind.UNIFORM and self.b < self.a:
            raise UserError(f"uniform({self.a:g},{self.b:g}): the upper bound is below the lower.")
        if self.kind is LengthKind.LOGNORMAL and self.b < self.a:
            raise UserError(f"lognormal({self.a:g},{self.b:g}): the p90 is below the median.")

    @property
    def median(self) -> float:
        if self.kind is LengthKind.UNIFORM:
            return (self.a + self.b) / 2.0
        return self.a

    def sample(
        self, rng: np.random.Generator, n: int, *, cap: int | None = None, minimum: int = 1
    ) -> npt.NDArray[np.int64]:
        if self.kind is LengthKind.FIXED:
            values = np.full(n, self.a)
        elif self.kind is LengthKind.UNIFORM:
            values = rng.integers(round(self.a), round(self.b), n, endpoint=True).astype(float)
        elif self.kind is LengthKind.NORMAL:
            values = rng.normal(self.a, self.b, n)
        else:
            sigma = math.log(self.b / self.a) / Z90
            values = rng.lognormal(math.log(self.a), sigma, n)
        out = np.rint(values).astype(np.int64)
        return np.asarray(np.clip(out, minimum, cap), dtype=np.int64)

    def describe(self) -> str:
        if self.kind is LengthKind.FIXED:
            return f"{self.a:g}"
        return f"{self.kind}({self.a:g},{self.b:g})"


def parse_length(text: str) -> LengthDist:
    """`512`, `uniform(128,1024)`, `normal(512,64)` or `lognormal(512,2048)`."""
    text = text.strip()
    try:
        return LengthDist(LengthKind.FIXED, float(int(text)))
    except ValueError:
        pass
    match = _CALL.match(text.lower())
    if match is None:
        raise UserError(
            f"{text!r} is not a length (use 512, uniform(a,b), normal(m,s) or "
            "lognormal(median,p90))."
        )
    name, args = match.groups()
    try:
        kind = LengthKind(name)
        a, b = (float(part) for part in args.split(","))
    except ValueError:
        raise UserError(
            f"{text!r} is not a length (use 512, uniform(a,b), normal(m,s) or "
            "lognormal(median,p90))."
        ) from None
    if kind is LengthKind.FIXED:
        raise UserError(f"{text!r}: write a fixed length as a bare number.")
    return LengthDist(kind, a, b)
