"""report, level 4: the monitoring config's types — its rules, its alerts, its limits.

Takes nothing; gives `Recorded` (the names the recording rules give their
series — stable: the HPA manifest and user dashboards read them), `Recording`
and `Alert` (one rule each), `AlertLimits` (every threshold an alert compares
with, in SI units, and where it came from: the defaults, `--slo` or a
baseline run), `Timing` (the rate window and the scale of every `for:`), and
`LeftOut` (an alert or panel the engine cannot feed, and why).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infertriage.schemas import Layer, Thresholds
from infertriage.schemas.recorded import Recorded

__all__ = ["Alert", "AlertLimits", "LeftOut", "Recorded", "Recording", "Timing"]


@dataclass(frozen=True, slots=True)
class Recording:
    record: Recorded
    expr: str
    source: str  # the normalised name it reads (`kv.usage`), for the README's table


@dataclass(frozen=True, slots=True)
class Alert:
    """`signal op threshold` (and `guard`), held `for_s`; `layer` and `next_step` go into
    its runbook annotation."""

    name: str
    layer: Layer
    signal: str  # PromQL of the quantity alone: the capture checks select it
    op: str
    threshold: float
    for_s: float
    summary: str
    next_step: str  # the infertriage command to run next
    guard: str = ""  # `and …`: when the comparison alone would fire on an idle server
    severity: str = "warning"
    unit: str = ""  # of the threshold: s, fraction, tokens/s, …

    @property
    def expr(self) -> str:
        core = f"({self.signal}) {self.op} {self.threshold:.6g}"
        return f"{core} {self.guard}" if self.guard else core


@dataclass(frozen=True, slots=True)
class AlertLimits:
    """Every alert threshold, SI units; `of` takes the SLO ones from `Thresholds`. `origin`
    says where they came from (the defaults, `--slo`, a baseline run)."""

    ttft_p95_s: float  # Thresholds.alert_ttft_p95_s (default 500 ms), or the baseline's
    itl_p95_s: float
    slo_ttft_p95_s: float  # the SLO lines on the dashboard
    slo_itl_p95_s: float
    error_rate: float  # failed requests over requests
    kv_full: float
    kv_leak_residue: float  # KV in use with nothing running
    replica_imbalance: float  # the busiest replica over the mean one
    min_excess_requests: float  # in flight on the busiest replica over the mean one, at least
    min_throughput_tok_s: float  # 0: no baseline, no throughput alert
    origin: str = "defaults"
    # the monitoring's own: sustained growth of the queue, preemptions, the "util lies" pair
    # (a kernel ran this share of the time while the SMs were active less than that share)
    # and GPU memory growing (1 MiB a minute for half an hour)
    queue_growth_per_s: float = 0.0
    preemptions_per_s: float = 0.0
    gpu_busy: float = 0.90
    sm_idle: float = 0.40
    fb_growth_bytes_per_s: float = 1024.0 * 1024.0 / 60.0
    # from a baseline run: latency alerts at this many times its p95, throughput below this
    # share of its tokens/s
    baseline_latency_headroom: float = 1.5
    baseline_throughput_floor: float = 0.8

    def with_baseline(
        self, ttft_p95_s: float | None, itl_p95_s: float | None, tok_s: float, origin: str
    ) -> AlertLimits:
        """The limits a baseline run sets: its p95s with headroom, its throughput's floor."""
        ttft = (
            self.ttft_p95_s if ttft_p95_s is None else ttft_p95_s * self.baseline_latency_headroom
        )
        itl = self.itl_p95_s if itl_p95_s is None else itl_p95_s * self.baseline_latency_headroom
        floor = tok_s * self.baseline_throughput_floor
        return replace(
            self, ttft_p95_s=ttft, itl_p95_s=itl, min_throughput_tok_s=floor, origin=origin
        )

    @classmethod
    def of(cls, t: Thresholds, origin: str = "defaults") -> AlertLimits:
        return cls(
            ttft_p95_s=t.alert_ttft_p95_s,
            itl_p95_s=t.itl_p95_s,
            slo_ttft_p95_s=t.ttft_p95_s,
            slo_itl_p95_s=t.itl_p95_s,
            error_rate=t.error_rate,
            kv_full=t.kv_full,
            kv_leak_residue=t.kv_drain_residue,
            replica_imbalance=t.replica_imbalance,
            min_excess_requests=t.min_excess_requests,
            min_throughput_tok_s=t.min_throughput_tok_s,
            origin=origin,
        )


@dataclass(frozen=True, slots=True)
class Timing:
    """The window of every rate and quantile, and the scale of every `for:` (tests and
    demos shorten them; the defaults are for production)."""

    rate_window_s: float = 300.0
    for_scale: float = 1.0
    evaluation_interval_s: float = 30.0


@dataclass(frozen=True, slots=True)
class LeftOut:
    what: str  # an alert name or a panel title
    reason: str
