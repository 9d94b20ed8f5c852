"""report, level 4: `plan --traffic` on screen (a rich table) and as JSON.

Takes a `TrafficPlan`; gives the per-interval table (rate, lengths, the
concurrency one replica holds within the SLOs, replicas), the peak and the
trough, and GPU-hours and cost per day autoscaled, fixed at the peak and on
spot. The time labels come from the user's CSV and are shown as data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from infertriage.schemas.text import show_controls, terminal_text
from infertriage.schemas.units import format_seconds

if TYPE_CHECKING:  # annotations only: a plan without --traffic loads no traffic model
    from infertriage.plan.traffic import IntervalPlan, TrafficPlan

__all__ = ["render_traffic", "traffic_to_json"]


def _interval_json(interval: IntervalPlan) -> dict[str, object]:
    c = interval.capacity
    return {
        "time": interval.point.label,
        "start_s": interval.point.time_s,
        "duration_s": interval.duration_s,
        "requests_per_s": interval.point.requests_per_s,
        "input_len": c.input_len,
        "output_len": c.output_len,
        "replicas": interval.replicas,
        "per_replica": {
            "concurrency": c.concurrency,
            "requests_per_s": c.requests_per_s,
            "ttft_s": c.ttft_s,
            "itl_s": c.itl_s,
            "kv_usage": c.kv_usage,
            "limited_by": c.limited_by,
        },
    }


def traffic_to_json(plan: TrafficPlan) -> dict[str, object]:
    day = plan.per_day
    document: dict[str, object] = {
        "headroom": plan.headroom,
        "slo": {"ttft_s": plan.ttft_slo_s, "itl_s": plan.itl_slo_s},
        "gpus_per_replica": plan.gpus_per_replica,
        "lead_time_s": plan.lead_time_s,
        "scale_down_window_s": plan.scale_down_window_s,
        "span_s": plan.span_s,
        "peak": {"time": plan.peak.point.label, "replicas": plan.peak.replicas},
        "trough": {"time": plan.trough.point.label, "replicas": plan.trough.replicas},
        "autoscaled": {
            "gpu_hours_per_day": plan.gpu_hours * day,
            "cost_per_day": _scaled(plan.cost(plan.gpu_hours), day),
        },
        "fixed_at_peak": {
            "gpu_hours_per_day": plan.fixed_gpu_hours * day,
            "cost_per_day": _scaled(plan.cost(plan.fixed_gpu_hours), day),
        },
        "spot": None,
        "intervals": [_interval_json(i) for i in plan.intervals],
        "written": list(plan.written),
    }
    if plan.spot is not None:
        s = plan.spot
        document["spot"] = {
            "cost_per_gpu_hour": s.assumption.cost_per_gpu_hour,
            "interruptions_per_replica_hour": s.assumption.interruptions_per_replica_hour,
            "notice_s": s.assumption.notice_s,
            "spare_replicas": s.spare_replicas,
            "interruptions_per_day": s.interruptions * day,
            "gpu_hours_per_day": s.gpu_hours * day,
            "cost_per_day": s.cost * day,
        }
    return document


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _table(plan: TrafficPlan) -> Table:
    table = Table(title="Replicas over the traffic curve", title_justify="left")
    for name in ("time", "req/s", "in/out tokens", "conc./replica", "req/s/replica"):
        table.add_column(name, justify="right")
    table.add_column("limited by")
    table.add_column("replicas", justify="right")
    peak, trough = plan.peak, plan.trough
    for interval in plan.intervals:
        c = interval.capacity
        mark = " peak" if interval is peak else (" trough" if interval is trough else "")
        table.add_row(
            terminal_text(interval.point.label),
            f"{interval.point.requests_per_s:,.1f}",
            f"{c.input_len}/{c.output_len}",
            str(c.concurrency),
            f"{c.requests_per_s:,.1f}",
            c.limited_by,
            f"{interval.replicas}{mark}",
        )
    return table


def _money(value: float | None) -> str:
    return "" if value is None else f", ${value:,.0f}/day"


def _summary(plan: TrafficPlan) -> Text:
    day = plan.per_day
    text = Text()
    text.append(
        f"Each replica ({plan.gpus_per_replica} GPU) kept within TTFT "
        f"{format_seconds(plan.ttft_slo_s)} and ITL {format_seconds(plan.itl_slo_s)}, "
        f"≥ {plan.headroom:.0%} of its capacity spare.\n"
        f"Peak {plan.peak.replicas} replicas at {terminal_text(plan.peak.point.label)}; "
        f"trough {plan.trough.replicas} at {terminal_text(plan.trough.point.label)}.\n"
    )
    lead = (
        f"scale-ups start {format_seconds(plan.lead_time_s)} early (cold start)"
        if plan.lead_time_s
        else "no cold start measured (give --cold-start or a validate run as --from-run)"
    )
    text.append(
        f"Autoscaled: {plan.gpu_hours * day:,.1f} GPU-hours/day"
        f"{_money(_scaled(plan.cost(plan.gpu_hours), day))} ({lead}; scale-down waits "
        f"{format_seconds(plan.scale_down_window_s)}).\n"
        f"Fixed fleet for the peak: {plan.fixed_gpu_hours * day:,.1f} GPU-hours/day"
        f"{_money(_scaled(plan.cost(plan.fixed_gpu_hours), day))}.\n"
    )
    if plan.spot is not None:
        s, a = plan.spot, plan.spot.assumption
        text.append(
            f"Spot: {s.gpu_hours * day:,.1f} GPU-hours/day, ${s.cost * day:,.0f}/day, "
            f"assuming {a.interruptions_per_replica_hour:g} interruptions per replica-hour "
            f"({s.interruptions * day:,.1f}/day) with {format_seconds(a.notice_s)} notice; "
            f"{s.spare_replicas} spare replica(s) warm, each replacement's load time paid.\n"
        )
    if plan.written:
        text.append(f"Wrote {', '.join(show_controls(path) for path in plan.written)}.\n")
    return text


def render_traffic(plan: TrafficPlan) -> Group:
    return Group(_table(plan), _summary(plan))
