"""diagnose, level 3: the run's symptom — which SLOs it missed and by how much.

Takes `Evidence` and `Thresholds`; gives whether TTFT, ITL or the error rate
missed their SLO (the client's view first, the server's when there is no
load), and how far: the symptom that findings explain.
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.schemas import SloProfile, SloResult, Thresholds

__all__ = ["current", "itl_missed", "slo_missed", "slo_results", "ttft_missed"]


def _first(evidence: Evidence, *names: str) -> float | None:
    for name in names:
        value = evidence.get(name)
        if value is not None:
            return value
    return None


def ttft_p95(evidence: Evidence) -> float | None:
    return _first(evidence, "client.ttft_p95_s", "server.ttft_p95_s")


def itl_p95(evidence: Evidence) -> float | None:
    return _first(evidence, "client.itl_p95_s", "server.itl_p95_s")


def ttft_missed(evidence: Evidence, t: Thresholds) -> bool:
    value = ttft_p95(evidence)
    return value is not None and value > t.ttft_p95_s and t.profile is SloProfile.INTERACTIVE


def itl_missed(evidence: Evidence, t: Thresholds) -> bool:
    value = itl_p95(evidence)
    return value is not None and value > t.itl_p95_s and t.profile is SloProfile.INTERACTIVE


def slo_missed(evidence: Evidence, t: Thresholds) -> bool:
    errors = evidence.get("client.error_rate")
    throughput = evidence.get("client.throughput_tok_s")
    low_throughput = (
        t.profile is SloProfile.BATCH
        and throughput is not None
        and throughput < t.min_throughput_tok_s
    )
    return (
        ttft_missed(evidence, t)
        or itl_missed(evidence, t)
        or (errors is not None and errors > t.error_rate)
        or low_throughput
    )


def slo_results(evidence: Evidence, t: Thresholds) -> tuple[SloResult, ...]:
    rows = (
        ("ttft_p95", t.ttft_p95_s, ttft_p95(evidence), "s"),
        ("itl_p95", t.itl_p95_s, itl_p95(evidence), "s"),
        ("error_rate", t.error_rate, evidence.get("client.error_rate"), "fraction"),
    )
    return tuple(
        SloResult(
            name=name,
            target=target,
            measured=measured,
            unit=unit,
            passed=None if measured is None else measured <= target,
        )
        for name, target, measured, unit in rows
    )


def current(evidence: Evidence, name: str, fmt: str = "{:g}") -> str:
    """' (now 256)' when the server reported the setting, else ''."""
    value = evidence.get(name)
    return "" if value is None else f" (now {fmt.format(value)})"
