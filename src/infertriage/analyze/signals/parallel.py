"""analyze.signals, level 1: expert- and pipeline-parallel evidence — the EP ranks' balance
and each GPU's activity, kept apart.

Takes the normalised samples of a scrape or a run and a window; gives:

- `ep.balancedness_mean` (the mean over the window of vLLM's `ep.balancedness_avg`
  gauge, or SGLang's `eplb_balancedness` summary: its sum's growth over its count's)
  and `ep.balancedness_worst` (the lowest `ep.balancedness_min`, vLLM's worst MoE
  layer), each the mean EP rank's routed tokens over the busiest's (1.0: even), and
  `ep.hot_rank_ratio`, the busiest rank's tokens over the mean's (its inverse);
- `gpu.count` and, with two GPUs or more, each GPU's busy share over the window
  (DCGM's SM_ACTIVE where exported, else GR_ENGINE_ACTIVE, else GPU_UTIL: a stage
  waiting in NCCL reads busy to the last two; one GPU is one `UUID`,
  else one `Hostname`+`gpu`; a GPU idle all the window is not the server's and left
  out): their mean `gpu.busy_by_gpu_mean`, the busiest's `gpu.busy_by_gpu_max` and the
  idlest's `gpu.busy_by_gpu_min`;
- `pp.requests_in_flight`, the server's running requests averaged over the window
  (a pipeline of `p` stages needs at least `p` to fill its micro-batches).

Nothing is given for a figure the samples do not hold: no EPLB, one GPU.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence

from infertriage.schemas import Sample, Signal

__all__ = ["parallel_signals"]

_EPS = 1e-9
_IDLE = 0.01  # a GPU busy less than this over the window does not serve
# what reads a GPU's work, best first: a GPU waiting in an NCCL send/receive (a pipeline
# stage waiting for another) spins a kernel that GR_ENGINE_ACTIVE and GPU_UTIL count as busy
# while its SMs stay nearly idle
_BUSY_FIELDS = ("gpu.sm_active", "gpu.gr_engine_active", "gpu.util")
_Points = list[tuple[float, float]]


def _signal(name: str, value: float, unit: str, span: tuple[float, float]) -> Signal:
    return Signal(name=name, value=float(value), unit=unit, source="metrics", window=span)


def _within(samples: Iterable[Sample], name: str, start: float, end: float) -> list[Sample]:
    return [s for s in samples if s.name == name and start - _EPS <= s.t <= end + _EPS]


def _growth(points: _Points) -> float:
    """A counter's growth over its points (a reset counts from zero)."""
    ordered = sorted(points)
    grown = 0.0
    for (_, before), (_, after) in itertools.pairwise(ordered):
        grown += after - before if after >= before else after
    return grown


def _summary_mean(samples: Sequence[Sample], start: float, end: float) -> float | None:
    """SGLang's summary: Σ sum growth / Σ count growth over its series, or, from one scrape,
    its lifetime mean."""
    sums: dict[tuple[tuple[str, str], ...], _Points] = defaultdict(list)
    counts: dict[tuple[tuple[str, str], ...], _Points] = defaultdict(list)
    for s in _within(samples, "ep.balancedness_sum", start, end):
        sums[tuple(sorted(s.labels.items()))].append((s.t, s.value))
    for s in _within(samples, "ep.balancedness_count", start, end):
        counts[tuple(sorted(s.labels.items()))].append((s.t, s.value))
    if not counts:
        return None
    if all(len(points) < 2 for points in counts.values()):  # one scrape: the lifetime mean
        total = sum(max(v for _, v in points) for points in counts.values())
        summed = sum(max(v for _, v in points) for points in sums.values())
        return summed / total if total > 0 else None
    counted = sum(_growth(points) for points in counts.values())
    summed = sum(_growth(points) for key, points in sums.items() if key in counts)
    return summed / counted if counted > 0 else None


def _balance(samples: Sequence[Sample], start: float, end: float) -> list[Signal]:
    span = (start, end)
    out: list[Signal] = []
    avg = [s.value for s in _within(samples, "ep.balancedness_avg", start, end)]
    mean = sum(avg) / len(avg) if avg else _summary_mean(samples, start, end)
    worst = [s.value for s in _within(samples, "ep.balancedness_min", start, end)]
    if worst:
        out.append(_signal("ep.balancedness_worst", min(worst), "fraction", span))
    if mean is not None and 0.0 < mean <= 1.0:
        out.append(_signal("ep.balancedness_mean", mean, "fraction", span))
        out.append(_signal("ep.hot_rank_ratio", 1.0 / mean, "1", span))
    return out


def _gpu_key(labels: dict[str, str]) -> str:
    uuid = labels.get("UUID") or labels.get("uuid")
    if uuid:
        return uuid
    return f"{labels.get('Hostname', '')}/{labels.get('gpu', '')}"


def _gpus(samples: Sequence[Sample], start: float, end: float) -> list[Signal]:
    found: list[Sample] = []
    for name in _BUSY_FIELDS:  # the first the samples hold
        found = found or _within(samples, name, start, end)
    per_gpu: dict[str, list[float]] = defaultdict(list)
    for s in found:
        per_gpu[_gpu_key(s.labels)].append(s.value)
    if not per_gpu:
        return []
    span = (start, end)
    out = [_signal("gpu.count", len(per_gpu), "1", span)]
    if len(per_gpu) < 2:
        return out
    # a GPU idle the whole window is not the server's (a node's spare GPU): left out
    busy = [m for m in (sum(v) / len(v) for v in per_gpu.values()) if m >= _IDLE]
    if len(busy) < 2:
        return out
    return [
        *out,
        _signal("gpu.busy_by_gpu_mean", sum(busy) / len(busy), "fraction", span),
        _signal("gpu.busy_by_gpu_max", max(busy), "fraction", span),
        _signal("gpu.busy_by_gpu_min", min(busy), "fraction", span),
    ]


def _in_flight(samples: Sequence[Sample], start: float, end: float) -> list[Signal]:
    totals: dict[float, float] = defaultdict(float)
    for s in _within(samples, "queue.running", start, end):
        totals[s.t] += s.value
    if not totals:
        return []
    mean = sum(totals.values()) / len(totals)
    return [_signal("pp.requests_in_flight", mean, "requests", (start, end))]


def parallel_signals(samples: Sequence[Sample], start: float, end: float) -> list[Signal]:
    """The EP balance, each GPU's activity and the requests in flight over [start, end]."""
    return [
        *_balance(samples, start, end),
        *_gpus(samples, start, end),
        *_in_flight(samples, start, end),
    ]
