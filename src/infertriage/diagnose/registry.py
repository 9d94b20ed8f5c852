"""diagnose, level 3: the rule registry — one small pure function per rule, with its layer.

A rule is `(Evidence, Thresholds) -> Finding | None`, registered with `@rule`
under its id, the layer it belongs to and the signals it needs. The registry
runs a rule only when every needed signal is present; otherwise it reports
the rule as not evaluated, with what would collect the missing signals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.diagnose.evidence import SIGNALS, Evidence
from infertriage.schemas import EvidenceItem, Finding, Layer, Status, Thresholds

__all__ = ["RULES", "Rule", "RuleFn", "make_finding", "rule", "severity_above", "severity_below"]

RuleFn = Callable[[Evidence, Thresholds], Finding | None]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    layer: Layer
    needs: tuple[str, ...]
    fn: RuleFn

    def missing(self, evidence: Evidence) -> tuple[str, ...]:
        return tuple(name for name in self.needs if not evidence.has(name))


RULES: dict[str, Rule] = {}


def rule(rule_id: str, layer: Layer, needs: Sequence[str]) -> Callable[[RuleFn], RuleFn]:
    """Register a rule; its needed signals must be in `SIGNALS` (checked at import)."""
    unknown = [name for name in needs if name not in SIGNALS]
    if unknown:
        raise ValueError(f"rule {rule_id} needs unknown signals {unknown}")

    def register(fn: RuleFn) -> RuleFn:
        if rule_id in RULES:
            raise ValueError(f"rule id {rule_id} registered twice")
        RULES[rule_id] = Rule(rule_id, layer, tuple(needs), fn)
        return fn

    return register


def severity_above(value: float, threshold: float, full_at: float) -> float:
    """0 at the threshold, 1 at `full_at` and beyond (linear between)."""
    if full_at <= threshold:
        return 1.0 if value >= threshold else 0.0
    return max(0.0, min(1.0, (value - threshold) / (full_at - threshold)))


def severity_below(value: float, threshold: float, full_at: float) -> float:
    """0 at the threshold, 1 at `full_at` and below (for signals that are bad when low)."""
    return severity_above(-value, -threshold, -full_at)


def make_finding(
    rule_id: str,
    layer: Layer,
    *,
    bottleneck: bool,
    severity: float,
    explains: float,
    title: str,
    evidence: Evidence,
    used: Sequence[tuple[str, float | None]],
    explanation: str,
    next_steps: Sequence[str],
    caveat: str = "",
) -> Finding:
    """A finding from a rule; `used` pairs each signal with the threshold it was held against.

    A `caveat` (why this run cannot blame the server for it) makes it a warning.
    """
    severity = max(0.0, min(1.0, severity))
    explains = max(0.0, min(1.0, explains))
    items = []
    for name, threshold in used:
        signal = evidence.signals.get(name)
        if signal is not None:
            items.append(
                EvidenceItem(
                    signal=name,
                    value=signal.value,
                    unit=signal.unit,
                    threshold=threshold,
                    source=signal.source,
                )
            )
    return Finding(
        id=rule_id,
        layer=layer,
        status=Status.BOTTLENECK if bottleneck and not caveat else Status.WARNING,
        severity=severity,
        explains=explains,
        score=severity * explains,
        title=title,
        evidence=tuple(items),
        explanation=explanation,
        next_steps=tuple(next_steps),
        caveat=caveat,
    )
