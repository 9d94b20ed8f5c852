"""plan, level 1: replicas over a traffic curve — the fleet a day of real traffic needs.

Takes a traffic curve (`parse_traffic_csv`: time, requests/s, optional prompt
and output lengths per row), the base `PlanInputs` of one replica, the SLOs
(TTFT and ITL limits) and the headroom; gives a `TrafficPlan`: for each
interval the largest concurrency one replica holds within the SLOs and the KV
cache (`replica_capacity`), the requests/s it serves there and the replicas
the interval needs with the headroom kept; the peak and the trough; the
GPU-hours of an autoscaled fleet (scale-ups start one lead time early,
scale-downs wait out the stabilisation window) against a fixed fleet sized
for the peak; and, given prices, the cost per day on demand and on spot
instances under a stated interruption assumption. Pure functions; no I/O.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from infertriage.plan.capacity import CapacityPlan, PlanInputs, make_capacity_plan
from infertriage.schemas.errors import UserError

__all__ = [
    "TRAFFIC_COLUMNS",
    "IntervalPlan",
    "ReplicaCapacity",
    "SpotAssumption",
    "SpotPlan",
    "TrafficPlan",
    "TrafficPoint",
    "make_traffic_plan",
    "parse_traffic_csv",
    "replica_capacity",
]

TRAFFIC_COLUMNS = ("time", "requests_per_s", "input_tokens", "output_tokens")
SECONDS_PER_DAY = 86_400.0
KUBERNETES_DEFAULT_SCALE_DOWN_S = 300.0  # the HPA's own default stabilisation window
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?$")


@dataclass(frozen=True, slots=True)
class TrafficPoint:
    """One row of the curve: from `time_s` on, `requests_per_s` arrive (until the next row)."""

    line: int  # in the file, for messages
    label: str  # the time as written
    time_s: float  # seconds from the curve's first row
    requests_per_s: float
    input_len: int | None = None
    output_len: int | None = None


def _time_of(text: str) -> tuple[str, float]:
    """(kind, seconds): seconds as a number, HH:MM[:SS] from midnight, or ISO 8601 (epoch)."""
    try:
        return "seconds", float(text)
    except ValueError:
        pass
    clock = _CLOCK.match(text)
    if clock:
        hours, minutes, seconds = int(clock[1]), int(clock[2]), float(clock[3] or 0)
        if hours > 24 or minutes > 59 or seconds >= 60:
            raise ValueError(text)
        return "clock", hours * 3600 + minutes * 60 + seconds
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return "iso", moment.timestamp()


def _cell(row: dict[str, str | None], column: str) -> str:
    return (row.get(column) or "").strip()


def _length(row: dict[str, str | None], column: str, where: str) -> int | None:
    text = _cell(row, column)
    if not text:
        return None
    try:
        value = int(float(text))
    except ValueError:
        raise UserError(f"{where}: {column} {text!r} is not a number of tokens.") from None
    if value < 1:
        raise UserError(f"{where}: {column} must be at least 1, not {text!r}.")
    return value


def _point(row: dict[str, str | None], line: int, name: str) -> tuple[str, TrafficPoint]:
    where = f"{name} line {line}"
    label, rate_text = _cell(row, "time"), _cell(row, "requests_per_s")
    try:
        kind, time_s = _time_of(label)
    except ValueError:
        raise UserError(
            f"{where}: time {label!r} is not seconds, HH:MM or an ISO 8601 time."
        ) from None
    try:
        rate = float(rate_text)
    except ValueError:
        raise UserError(f"{where}: requests_per_s {rate_text!r} is not a number.") from None
    if not rate >= 0 or math.isinf(rate):
        raise UserError(f"{where}: requests_per_s must be a finite number ≥ 0, not {rate_text!r}.")
    input_len = _length(row, "input_tokens", where)
    output_len = _length(row, "output_tokens", where)
    return kind, TrafficPoint(line, label, time_s, rate, input_len, output_len)


def _rows(text: str, name: str) -> Iterator[tuple[int, dict[str, str | None]]]:
    """The CSV's rows that hold a value, each with its line; the header checked first."""
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = [column.strip() for column in reader.fieldnames or []]
        missing = [c for c in TRAFFIC_COLUMNS[:2] if c not in header]
        if missing:
            raise UserError(f"{name} line 1: the header lacks {' and '.join(missing)}.")
        reader.fieldnames = header
        for row in reader:
            if any((value or "").strip() for value in row.values() if isinstance(value, str)):
                yield reader.line_num, row
    except csv.Error as err:  # a field past the csv module's limit (128 KiB), a stray quote
        raise UserError(f"{name} line {reader.reader.line_num} is not CSV ({err}).") from None


def parse_traffic_csv(text: str, name: str = "the traffic curve") -> tuple[TrafficPoint, ...]:
    """The rows of a traffic CSV, times made relative to the first; `UserError` names the line.

    Columns (a header row is required, extra columns are ignored): `time`
    (seconds, HH:MM[:SS] or ISO 8601; one kind per file, increasing),
    `requests_per_s`, and optionally `input_tokens` and `output_tokens`.
    """
    points: list[TrafficPoint] = []
    kinds: set[str] = set()
    for line, row in _rows(text, name):
        kind, point = _point(row, line, name)
        kinds.add(kind)
        if len(kinds) > 1:
            raise UserError(f"{name} line {line}: times mix formats; use one kind per file.")
        if points and point.time_s <= points[-1].time_s:
            raise UserError(f"{name} line {line}: time {point.label!r} does not increase.")
        points.append(point)
    if len(points) < 2:
        raise UserError(f"{name} needs at least two rows (a curve, not one rate).")
    start = points[0].time_s
    return tuple(
        TrafficPoint(p.line, p.label, p.time_s - start, p.requests_per_s, p.input_len, p.output_len)
        for p in points
    )


# --- one replica -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaCapacity:
    """What one replica serves at the largest concurrency that meets the SLOs and fits."""

    input_len: int
    output_len: int
    concurrency: int
    requests_per_s: float  # output tokens/s at `concurrency` ÷ output tokens per request
    ttft_s: float  # the roofline's prefill plus one decode step it waits for
    itl_s: float
    kv_usage: float  # of the usable KV blocks, at `concurrency`
    limited_by: str  # "itl SLO", "ttft SLO", "KV cache with headroom" or "max-num-seqs"


def _estimate(plan: CapacityPlan) -> tuple[float, float]:
    """(TTFT, ITL) at the plan's batch: a new request's prefill rides after one decode step."""
    roofline = plan.roofline
    return roofline.ttft_s + roofline.itl_s, roofline.itl_s


def replica_capacity(inputs: PlanInputs, ttft_slo_s: float, itl_slo_s: float) -> ReplicaCapacity:
    """The largest concurrency per replica whose estimated TTFT and ITL meet the SLOs while
    its requests fit in the KV cache with the headroom kept, and the requests/s it serves."""
    input_len, output_len = inputs.input_len or 1, inputs.output_len or 1
    base = make_capacity_plan(inputs.replace(concurrency=1))
    ceiling, limited_by = base.max_concurrency, "KV cache with headroom"
    if inputs.max_num_seqs < ceiling:
        ceiling, limited_by = inputs.max_num_seqs, "max-num-seqs"
    if ceiling < 1:
        raise UserError(
            f"one request of {input_len + output_len} tokens does not fit a replica's KV cache "
            "with the headroom kept; use more GPUs per replica (--tp) or shorter requests."
        )

    def meets(concurrency: int) -> tuple[bool, str]:
        ttft, itl = _estimate(make_capacity_plan(inputs.replace(concurrency=concurrency)))
        if itl > itl_slo_s:
            return False, "itl SLO"
        return (False, "ttft SLO") if ttft > ttft_slo_s else (True, "")

    ok, why = meets(1)
    if not ok:
        raise UserError(
            f"one request alone misses the {why} on this replica ({input_len} prompt tokens); "
            "no number of replicas meets it: use a faster GPU, more --tp or a looser --slo."
        )
    low, high = 1, ceiling
    if not meets(high)[0]:
        limited_by = meets(high)[1]
        while high - low > 1:  # ITL and TTFT grow with the batch: the largest that meets
            middle = (low + high) // 2
            low, high = (middle, high) if meets(middle)[0] else (low, middle)
        high = low
    plan = make_capacity_plan(inputs.replace(concurrency=high))
    ttft, itl = _estimate(plan)
    blocks = -(-inputs.tokens_per_request // inputs.block_size)
    return ReplicaCapacity(
        input_len=input_len,
        output_len=output_len,
        concurrency=high,
        requests_per_s=plan.roofline.throughput_tok_s / output_len,
        ttft_s=ttft,
        itl_s=itl,
        kv_usage=high * blocks / max(1, plan.kv.usable_blocks),
        limited_by=limited_by,
    )


# --- the fleet over the curve ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IntervalPlan:
    point: TrafficPoint
    duration_s: float
    capacity: ReplicaCapacity
    replicas: int  # with the headroom kept; 0 when no traffic


@dataclass(frozen=True, slots=True)
class SpotAssumption:
    """Spot prices and how often a replica is taken back; the notice a provider gives."""

    cost_per_gpu_hour: float
    interruptions_per_replica_hour: float = 0.05
    notice_s: float = 120.0  # AWS gives two minutes; GCP 30 s


@dataclass(frozen=True, slots=True)
class SpotPlan:
    assumption: SpotAssumption
    spare_replicas: int  # kept warm beyond the need: interruptions within one cold start
    gpu_hours: float  # over the curve, spares and replacement load time included
    cost: float  # over the curve
    interruptions: float  # expected over the curve


@dataclass(frozen=True, slots=True)
class TrafficPlan:
    intervals: tuple[IntervalPlan, ...]
    gpus_per_replica: int
    headroom: float
    ttft_slo_s: float
    itl_slo_s: float
    lead_time_s: float  # a new replica's start to its first token
    scale_down_window_s: float
    span_s: float
    gpu_hours: float  # autoscaled, over the curve
    fixed_gpu_hours: float  # a fleet sized for the peak, over the curve
    gpu_hour_cost: float | None = None
    spot: SpotPlan | None = None
    written: tuple[str, ...] = ()  # the autoscaler's files (`--hpa`), as given

    @property
    def peak(self) -> IntervalPlan:
        return max(self.intervals, key=lambda i: (i.replicas, i.point.requests_per_s))

    @property
    def trough(self) -> IntervalPlan:
        return min(self.intervals, key=lambda i: (i.replicas, i.point.requests_per_s))

    @property
    def per_day(self) -> float:
        """Multiply a figure over the curve by this to get it per day."""
        return SECONDS_PER_DAY / self.span_s

    def cost(self, gpu_hours: float) -> float | None:
        return None if self.gpu_hour_cost is None else gpu_hours * self.gpu_hour_cost


def _durations(points: tuple[TrafficPoint, ...]) -> list[float]:
    steps = [b.time_s - a.time_s for a, b in itertools.pairwise(points)]
    return [*steps, statistics.median(steps)]  # the last row lasts a typical step


def _transition_s(replicas: list[int], durations: list[float], lead: float, window: float) -> float:
    """Replica-seconds beyond the need: new replicas load one lead time before their interval
    (paid in the one before), and replicas removed wait out the stabilisation window."""
    extra = 0.0
    for i in range(len(replicas) - 1):
        change = replicas[i + 1] - replicas[i]
        if change > 0:
            extra += change * min(lead, durations[i])
        else:
            extra += -change * min(window, durations[i + 1])
    return extra


def _spot(
    assumption: SpotAssumption, replica_hours: float, peak: int, lead_s: float, gpus: int
) -> tuple[int, float, float]:
    """(spares, GPU-hours, interruptions): a replacement loads for `lead_s` after the notice;
    enough spares stay warm to cover the interruptions expected within that gap at the peak."""
    gap_h = max(0.0, lead_s - assumption.notice_s) / 3600
    rate = assumption.interruptions_per_replica_hour
    spares = math.ceil(peak * rate * gap_h - 1e-9) if peak else 0
    interruptions = replica_hours * rate
    replica_hours_total = replica_hours + interruptions * lead_s / 3600
    return spares, replica_hours_total * gpus, interruptions


def make_traffic_plan(
    inputs: PlanInputs,
    points: tuple[TrafficPoint, ...],
    slo_s: tuple[float, float],
    *,
    lead_time_s: float = 0.0,
    scale_down_window_s: float | None = None,
    gpu_hour_cost: float | None = None,
    spot: SpotAssumption | None = None,
) -> TrafficPlan:
    """Replicas per interval of `points` for one replica of `inputs` within `slo_s` (TTFT, ITL)."""
    ttft_slo_s, itl_slo_s = slo_s
    # a replica removed in a dip shorter than a cold start would be missed by the next rise
    window = scale_down_window_s or max(KUBERNETES_DEFAULT_SCALE_DOWN_S, lead_time_s)
    capacity_of = _capacity_cache(inputs, ttft_slo_s, itl_slo_s)
    durations = _durations(points)
    intervals = []
    for point, duration in zip(points, durations, strict=True):
        capacity = capacity_of(point)
        usable = capacity.requests_per_s * (1 - inputs.headroom)
        replicas = math.ceil(point.requests_per_s / usable - 1e-9) if point.requests_per_s else 0
        intervals.append(IntervalPlan(point, duration, capacity, replicas))
    counts = [i.replicas for i in intervals]
    gpus = inputs.gpus_per_instance
    replica_s = sum(r * d for r, d in zip(counts, durations, strict=True))
    replica_s += _transition_s(counts, durations, lead_time_s, window)
    span = sum(durations)
    spot_plan = None
    if spot is not None:
        spares, hours, interruptions = _spot(spot, replica_s / 3600, max(counts), lead_time_s, gpus)
        hours += spares * span / 3600 * gpus
        spot_plan = SpotPlan(spot, spares, hours, hours * spot.cost_per_gpu_hour, interruptions)
    return TrafficPlan(
        intervals=tuple(intervals),
        gpus_per_replica=gpus,
        headroom=inputs.headroom,
        ttft_slo_s=ttft_slo_s,
        itl_slo_s=itl_slo_s,
        lead_time_s=lead_time_s,
        scale_down_window_s=window,
        span_s=span,
        gpu_hours=replica_s / 3600 * gpus,
        fixed_gpu_hours=max(counts) * span / 3600 * gpus,
        gpu_hour_cost=gpu_hour_cost,
        spot=spot_plan,
    )


def _capacity_cache(
    inputs: PlanInputs, ttft_slo_s: float, itl_slo_s: float
) -> Callable[[TrafficPoint], ReplicaCapacity]:
    """One capacity per (prompt, output) length pair of the curve."""
    cache: dict[tuple[int, int], ReplicaCapacity] = {}

    def capacity_of(point: TrafficPoint) -> ReplicaCapacity:
        input_len = point.input_len or inputs.input_len
        output_len = point.output_len or inputs.output_len
        if input_len is None or output_len is None:
            raise UserError(
                f"line {point.line} of the traffic curve has no input_tokens/output_tokens; "
                "add those columns, --input-len and --output-len, or --from-run."
            )
        key = (input_len, output_len)
        if key not in cache:
            changed = inputs.replace(input_len=input_len, output_len=output_len)
            cache[key] = replica_capacity(changed, ttft_slo_s, itl_slo_s)
        return cache[key]

    return capacity_of
