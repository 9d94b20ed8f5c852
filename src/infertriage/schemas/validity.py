"""schemas, level 0: can a measured load level be trusted — its validity block.

Gives `ValidityCheck` (one named constraint: passed or not, the figure it found,
the rule it held it to and, on a failure, what would make it valid) and
`Validity` (a level's checks and its verdict, VALID or INVALID with the
reasons). `loadgen.validity` makes them; bench, diagnose and validate show them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import model_validator

from infertriage.schemas.frozen import FrozenModel

__all__ = ["Validity", "ValidityCheck"]


class ValidityCheck(FrozenModel):
    """One constraint on a measured level, e.g. the sample a p95 TTFT claim needs."""

    name: str  # "duration", "sample: TTFT p95", "rate", "lengths", "steady state", "client"
    passed: bool
    figure: str  # what was found: "36 judged, 2 over 200 ms"
    rule: str  # what it is held to: "≥ 90 requests (LoadGen early stopping, 99 % confidence)"
    fix: str = ""  # on a failure: what would make it valid

    def line(self) -> str:
        """'sample: TTFT p95: need ≥ 90 …; 36 were judged — run ≥ 54 more requests'."""
        head = f"{self.name}: {self.figure}"
        return f"{head}; {self.fix}" if self.fix and not self.passed else head


class Validity(FrozenModel):
    """A measured level's checks; VALID when every one passed, else INVALID with reasons."""

    verdict: Literal["VALID", "INVALID"]
    checks: tuple[ValidityCheck, ...]

    @model_validator(mode="after")
    def _verdict_of_checks(self) -> Validity:
        if (self.verdict == "VALID") != all(check.passed for check in self.checks):
            raise ValueError("a validity is VALID exactly when every check passed")
        return self

    @classmethod
    def of(cls, checks: Sequence[ValidityCheck]) -> Validity:
        verdict: Literal["VALID", "INVALID"] = (
            "VALID" if all(check.passed for check in checks) else "INVALID"
        )
        return cls(verdict=verdict, checks=tuple(checks))

    @property
    def valid(self) -> bool:
        return self.verdict == "VALID"

    @property
    def failed(self) -> tuple[ValidityCheck, ...]:
        return tuple(check for check in self.checks if not check.passed)

    def reasons(self) -> tuple[str, ...]:
        """Each failed check's line: what it found and what would make it valid."""
        return tuple(check.line() for check in self.failed)

    def line(self) -> str:
        """'VALID', or 'INVALID: <reason>; <what would make it valid>' (every failed check)."""
        if self.valid:
            return "VALID"
        return "INVALID: " + " | ".join(self.reasons())
