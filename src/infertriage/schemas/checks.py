"""schemas, level 0: one item of the go-live checklist (`validate`).

A `Check` is what a functional probe, a performance SLO or a stability test
found: its group, a dotted name, a status and one sentence of detail (on a
failure, what is wrong and why it matters), with the figures it used (SI).
A `marginal` check passed on its point estimate but its confidence interval
crosses the limit: the run was too small or too close to prove the SLO.
`validity_check` makes the checklist's "sample validity" item of a measured
level's `Validity`: an INVALID level fails it, so the checklist cannot be ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from infertriage.schemas.validity import Validity

__all__ = [
    "SAMPLE_VALIDITY",
    "Check",
    "CheckGroup",
    "CheckStatus",
    "checklist_ready",
    "validity_check",
]

SAMPLE_VALIDITY = "performance.sample_validity"


class CheckGroup(StrEnum):
    FUNCTIONAL = "functional"
    PERFORMANCE = "performance"
    STABILITY = "stability"
    OPERATIONS = "operations"  # cold start, the longest generation through the gateway


class CheckStatus(StrEnum):
    PASS = "pass"
    MARGINAL = "marginal"  # the point estimate holds, its interval does not
    FAIL = "fail"
    WARN = "warn"  # not a go-live blocker, but to fix: `detail` says how
    SKIP = "skip"  # not measurable here; `detail` says why and what would measure it


@dataclass(frozen=True, slots=True)
class Check:
    group: CheckGroup
    name: str
    status: CheckStatus
    detail: str
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status is CheckStatus.FAIL


def checklist_ready(checks: Sequence[Check]) -> bool:
    """Ready means no check failed (marginal and skipped checks are reported, not failed)."""
    return not any(check.failed for check in checks)


def validity_check(validity: Validity | None, level: str = "the performance level") -> Check:
    """The "sample validity" item: PASS on a VALID level, FAIL on an INVALID one, with why."""
    if validity is None:
        why = f"{level} was not measured (interrupted before it), so its sample is not judged."
        return Check(CheckGroup.PERFORMANCE, SAMPLE_VALIDITY, CheckStatus.SKIP, why)
    figures = {
        "num_checks": float(len(validity.checks)),
        "num_failed": float(len(validity.failed)),
    }
    if validity.valid:
        detail = f"{level} is VALID: " + "; ".join(check.line() for check in validity.checks)
        return Check(CheckGroup.PERFORMANCE, SAMPLE_VALIDITY, CheckStatus.PASS, detail, figures)
    detail = f"{level} is {validity.line()}"
    return Check(CheckGroup.PERFORMANCE, SAMPLE_VALIDITY, CheckStatus.FAIL, detail, figures)
