"""collect, level 2: a fleet's engine metrics as the run's samples, read from Prometheus.

Takes a Prometheus URL, a series selector (`job="vllm"`), the run's window in
Unix time and the run's wall-clock anchor; gives `FleetSamples`: what
scraping every selected replica at each query step would have written to
metrics.jsonl, on the run's clock. One range query fetches every series the
selector matches; at each step the values form an `Exposition` that the
engine's adapter maps as it maps a scrape. Replicas are then merged so the
diagnosis reads one server: counters and histogram buckets are summed (the
fleet's work), gauges are taken at their highest replica (the worst KV use,
the longest queue). A replica whose `process_start_time_seconds` changes
restarted: that is a `server.restart` sample, as the scraper writes. How
evenly the replicas share the load is `collect_fleet`'s job.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import aiohttp

from infertriage.collect.adapters import adapt_scrape, detect
from infertriage.collect.parse import Exposition, RawSample
from infertriage.collect.prometheus_api import PrometheusClient, PromSeries, required_matchers
from infertriage.collect.scraper import samples_of
from infertriage.schemas import VOCABULARY, MetricKind, Sample, UserError

__all__ = ["FleetSamples", "exposition_at", "fleet_samples", "merge_replicas"]

# Labels that say what a sample is; every other label (instance, job, pod…) says where.
_KEPT_LABELS = frozenset({"raw", "le", "stat", "position"})
_MAX_POINTS = 1000  # per series; Prometheus refuses more than 11,000


@dataclass(frozen=True)
class FleetSamples:
    engine: str
    instances: tuple[str, ...]
    samples: tuple[Sample, ...]  # merged over replicas, on the run's clock
    first: Exposition  # the first step's series, for the server's configuration
    step_s: float


def exposition_at(series: Sequence[PromSeries], at_unix: float, source: str) -> Exposition | None:
    """The value of every series at one query step, as one scrape of all replicas."""
    samples: list[RawSample] = []
    for one in series:
        value = next((v for t, v in one.points if abs(t - at_unix) < 1e-3), None)
        name = one.labels.get("__name__")
        if value is None or not name:
            continue
        labels = tuple(sorted((k, v) for k, v in one.labels.items() if k != "__name__"))
        samples.append(RawSample(name, labels, value))
    if not samples:
        return None
    index: dict[str, list[RawSample]] = defaultdict(list)
    for sample in samples:
        index[sample.name].append(sample)
    # Prometheus keeps names as exposed: a counter is found with and without `_total`.
    for name in list(index):
        alias = name.removesuffix("_total") if name.endswith("_total") else f"{name}_total"
        index.setdefault(alias, index[name])
    return Exposition(
        source=source,
        samples=tuple(samples),
        family_types={},
        by_name={name: tuple(group) for name, group in index.items()},
    )


def merge_replicas(samples: Iterable[Sample]) -> list[Sample]:
    """One sample per name and meaning at each time: counters summed, gauges at their maximum."""
    groups: dict[tuple[float, str, tuple[tuple[str, str], ...]], list[float]] = defaultdict(list)
    for s in samples:
        kept = tuple(sorted((k, v) for k, v in s.labels.items() if k in _KEPT_LABELS))
        groups[(s.t, s.name, kept)].append(s.value)
    merged = []
    for (t, name, labels), values in groups.items():
        definition = VOCABULARY.get(name)
        summed = definition is not None and definition.kind is not MetricKind.GAUGE
        value = sum(values) if summed else max(values)
        merged.append(Sample(t, name, value, {**dict(labels), "replicas": str(len(values))}))
    return merged


def _restarts(per_instance: dict[str, list[tuple[float, float]]]) -> list[Sample]:
    out = []
    for instance, starts in per_instance.items():
        for (_, before), (t, after) in itertools.pairwise(starts):
            if abs(after - before) > 1.0:
                went = f"went from {before:.0f} to {after:.0f}"
                detail = f"{instance}: process_start_time_seconds {went}"
                labels = {"target": "engine", "reason": "start_time_changed", "detail": detail}
                out.append(Sample(t, "server.restart", 1.0, labels))
    return out


def _step_of(start_unix: float, end_unix: float, step_s: float | None) -> float:
    wanted = step_s or 1.0
    return max(wanted, (end_unix - start_unix) / _MAX_POINTS)


async def fleet_samples(
    session: aiohttp.ClientSession,
    prometheus_url: str,
    selector: str,
    *,
    start_unix: float,
    end_unix: float,
    anchor_unix: float,
    step_s: float | None = None,
) -> FleetSamples:
    """Every selected series over the window, mapped and merged; see the module docstring."""
    matchers = required_matchers(selector)
    if end_unix <= start_unix:
        raise UserError("the fleet window is empty (its end is not after its start).")
    client = PrometheusClient(session, prometheus_url)
    step = _step_of(start_unix, end_unix, step_s)
    series = await client.query_range(f"{{{matchers}}}", start_unix, end_unix, step)
    steps = sorted({t for one in series for t, _ in one.points})
    samples: list[Sample] = []
    starts: dict[str, list[tuple[float, float]]] = defaultdict(list)
    first: Exposition | None = None
    engine = None
    for at in steps:
        exposition = exposition_at(series, at, prometheus_url)
        if exposition is None:
            continue
        detection = detect(exposition)
        if detection.engine is None:
            continue
        first = first or exposition
        engine = engine or detection.engine.engine
        t = at - anchor_unix
        for raw in exposition.get("process_start_time_seconds"):
            starts[raw.label("instance") or "?"].append((t, raw.value))
        samples += samples_of(t, adapt_scrape(exposition, detection))
    if first is None or engine is None:
        raise UserError(
            f"no engine metrics match {selector!r} in Prometheus at {prometheus_url} over the run "
            "(check --selector and that Prometheus scrapes the servers)."
        )
    instances = sorted({s.label("instance") or "?" for s in first.samples})
    merged = merge_replicas(s for s in samples if math.isfinite(s.value))
    return FleetSamples(
        engine=engine,
        instances=tuple(instances),
        samples=tuple(sorted(merged + _restarts(starts), key=lambda s: s.t)),
        first=first,
        step_s=step,
    )
