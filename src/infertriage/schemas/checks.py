"""schemas, level 0: one item of the go-live checklist (`validate`).

A `Check` is what a functional probe, a performance SLO or a stability test
found: its group, a dotted name, a status and one sentence of detail (on a
failure, what is wrong and why it matters), with the figures it used (SI).
A `marginal` check passed on its point estimate but its confidence interval
crosses the limit: the run was too small or too close to prove the SLO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Check", "CheckGroup", "CheckStatus", "checklist_ready"]


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
