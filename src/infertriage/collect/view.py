"""collect, level 2: the normalised view of one scrape or of a window of scrapes.

Takes the `Scrape`s of a target (each already mapped by its adapters) and
gives a `MetricsView`: for every normalised name of the detected engine and
exporters, its status (`present` / `absent` / `unsupported`), the raw name it
came from, and its value: the last value of a gauge or counter for one
scrape; over a window, gauge spread, counter increase and rate (through
resets), and histogram quantiles from the bucket deltas with their bounds.
This is the result type of the `metrics` command; `report` renders it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from infertriage.analyze.signals.prom import (
    CounterIncrease,
    GaugeStats,
    HistogramWindow,
    QuantileEstimate,
    counter_increase,
    gauge_stats,
    histogram_increase,
    histogram_quantile,
)
from infertriage.collect.adapters import Adapted, Availability, NormHistogram
from infertriage.collect.adapters.dcgm import DCGM_PROFILING
from infertriage.collect.parse import Labels
from infertriage.collect.roles import PD_PREFIXES, role_signals
from infertriage.schemas import VOCABULARY, Layer, MetricKind

if TYPE_CHECKING:  # the run.json models (pydantic): not loaded to read a metrics file
    from infertriage.schemas import RunServerConfig

__all__ = [
    "QUANTILES",
    "DerivedFigure",
    "MetricEntry",
    "MetricsView",
    "Scrape",
    "ServerEvent",
    "build_view",
]

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
_MEAN_UNITS = frozenset({"fraction", "Hz"})
_MAX_NAMES = frozenset({"gpu.xid_errors", "proc.start_time_s", "kv.block_size"})


@dataclass(frozen=True)
class Scrape:
    """One scrape of one target, on the run's clock, as its adapters mapped it."""

    t: float
    target: str  # "engine", "dcgm", …
    source: str  # the URL or the file
    adapted: tuple[Adapted, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """Something the scraper noticed: `restart`, `unreachable` or `recovered`."""

    t: float
    target: str
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class DerivedFigure:
    name: str
    value: float
    unit: str
    formula: str


@dataclass(frozen=True)
class MetricEntry:
    """One normalised name as one source reports it."""

    name: str
    unit: str
    kind: MetricKind
    layer: Layer
    status: Availability
    source: str  # the adapter: vllm, dcgm…
    raw_name: str | None
    note: str
    num_series: int = 0
    value: float | None = None  # gauge: last (across series); counter: last cumulative total
    gauge: GaugeStats | None = None  # over the window
    counter: CounterIncrease | None = None  # over the window, summed over series
    histogram: HistogramWindow | None = None  # window deltas, or cumulative for one scrape
    quantiles: tuple[QuantileEstimate, ...] = ()


@dataclass(frozen=True)
class MetricsView:
    source: str
    engine: str | None
    engine_title: str | None
    exporters: tuple[str, ...]
    window: tuple[float, float] | None  # None: one scrape
    num_scrapes: int
    entries: tuple[MetricEntry, ...]
    derived: tuple[DerivedFigure, ...] = ()
    notes: tuple[str, ...] = ()
    events: tuple[ServerEvent, ...] = ()
    server_config: RunServerConfig | None = None
    # a P/D deployment role by role, its KV transfers, prefix hits per rank (`collect.roles`)
    roles: tuple[DerivedFigure, ...] = ()

    def entry(self, name: str, source: str | None = None) -> MetricEntry | None:
        """The entry for `name`, the present one first when several sources report it."""
        matches = [e for e in self.entries if e.name == name and source in {None, e.source}]
        present = [e for e in matches if e.status is Availability.PRESENT]
        candidates = present or matches
        return candidates[0] if candidates else None

    def value(self, name: str) -> float | None:
        entry = self.entry(name)
        return None if entry is None else entry.value

    @property
    def duration_s(self) -> float | None:
        return None if self.window is None else self.window[1] - self.window[0]


def _combine(name: str, values: Sequence[float]) -> float:
    if name in _MAX_NAMES:
        return max(values)
    if VOCABULARY[name].unit in _MEAN_UNITS:
        return sum(values) / len(values)
    return sum(values)


def _scalar_points(
    scrapes: Sequence[tuple[float, Adapted]], name: str
) -> dict[Labels, list[tuple[float, float]]]:
    series: dict[Labels, list[tuple[float, float]]] = {}
    for t, adapted in scrapes:
        for scalar in adapted.scalars:
            if scalar.name == name:
                series.setdefault(scalar.labels, []).append((t, scalar.value))
    return series


def _merge(windows: Sequence[HistogramWindow]) -> HistogramWindow | None:
    """Add series with the same bucket layout; keep the layout that holds most observations."""
    layouts: dict[tuple[float, ...], list[HistogramWindow]] = {}
    for window in windows:
        layouts.setdefault(tuple(le for le, _ in window.buckets), []).append(window)
    if not layouts:
        return None
    group = max(layouts.values(), key=lambda ws: sum(w.count for w in ws))
    bounds = tuple(le for le, _ in group[0].buckets)
    counts = [sum(w.buckets[i][1] for w in group) for i in range(len(bounds))]
    return HistogramWindow(
        buckets=tuple(zip(bounds, counts, strict=True)),
        sum=sum(w.sum for w in group),
        count=sum(w.count for w in group),
        num_resets=sum(w.num_resets for w in group),
    )


def _as_window(histogram: NormHistogram) -> HistogramWindow:
    return HistogramWindow(histogram.buckets, histogram.sum, histogram.count)


def _histogram_entry(
    scrapes: Sequence[tuple[float, Adapted]], name: str, windowed: bool
) -> tuple[int, HistogramWindow | None]:
    series: dict[Labels, list[NormHistogram]] = {}
    for _, adapted in scrapes:
        for histogram in adapted.histograms:
            if histogram.name == name:
                series.setdefault(histogram.labels, []).append(histogram)
    if not windowed:
        return len(series), _merge([_as_window(h[-1]) for h in series.values()])
    windows = []
    for snapshots in series.values():
        window = histogram_increase([(dict(h.buckets), h.sum, h.count) for h in snapshots])
        if window is not None:
            windows.append(window)
    return len(series), _merge(windows)


def _quantiles(window: HistogramWindow | None) -> tuple[QuantileEstimate, ...]:
    if window is None:
        return ()
    found = (histogram_quantile(q, window.buckets) for q in QUANTILES)
    return tuple(q for q in found if q is not None)


def _counter_window(series: dict[Labels, list[tuple[float, float]]]) -> CounterIncrease | None:
    increases = [c for c in map(counter_increase, series.values()) if c is not None]
    if not increases:
        return None
    return CounterIncrease(
        increase=sum(c.increase for c in increases),
        start_ts=min(c.start_ts for c in increases),
        end_ts=max(c.end_ts for c in increases),
        num_resets=sum(c.num_resets for c in increases),
    )


def _gauge_window(name: str, series: dict[Labels, list[tuple[float, float]]]) -> GaugeStats | None:
    by_time: dict[float, list[float]] = {}
    for points in series.values():
        for t, value in points:
            by_time.setdefault(t, []).append(value)
    return gauge_stats([(t, _combine(name, values)) for t, values in sorted(by_time.items())])


def _scalar_entry(
    base: MetricEntry, scrapes: Sequence[tuple[float, Adapted]], windowed: bool
) -> MetricEntry:
    series = _scalar_points(scrapes, base.name)
    if not series:
        return base
    last = _combine(base.name, [points[-1][1] for points in series.values()])
    entry = replace(base, num_series=len(series), value=last)  # NaN when the server says NaN
    if not windowed:
        return entry
    series = {key: [p for p in points if math.isfinite(p[1])] for key, points in series.items()}
    series = {key: points for key, points in series.items() if points}
    if base.kind is MetricKind.COUNTER:
        return replace(entry, counter=_counter_window(series))
    return replace(entry, gauge=_gauge_window(base.name, series))


def _entries(
    scrapes: Sequence[tuple[float, Adapted]], last: Adapted, windowed: bool
) -> list[MetricEntry]:
    own = [(t, a) for t, a in scrapes if a.engine == last.engine]
    entries = []
    for status in last.statuses:
        definition = VOCABULARY[status.name]
        base = MetricEntry(
            name=status.name,
            unit=definition.unit,
            kind=definition.kind,
            layer=definition.layer,
            status=status.status,
            source=status.source,
            raw_name=status.raw_name,
            note=status.note,
        )
        if status.status is not Availability.PRESENT:
            entries.append(base)
        elif definition.kind is MetricKind.HISTOGRAM:
            num_series, window = _histogram_entry(own, status.name, windowed)
            quantiles = _quantiles(window)
            entries.append(
                replace(base, num_series=num_series, histogram=window, quantiles=quantiles)
            )
        else:
            entries.append(_scalar_entry(base, own, windowed))
    return entries


def _ratio(entries: Sequence[MetricEntry], top: str, bottom: str, windowed: bool) -> float | None:
    def amount(name: str) -> float | None:
        finite = (e for e in entries if e.value is not None and math.isfinite(e.value))
        entry = next((e for e in finite if e.name == name), None)
        if entry is None:
            return None
        if windowed:
            return None if entry.counter is None else entry.counter.increase
        return entry.value

    numerator, denominator = amount(top), amount(bottom)
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _derived(entries: Sequence[MetricEntry], windowed: bool) -> tuple[DerivedFigure, ...]:
    figures = []
    for name, top, bottom in (
        ("prefix_cache.hit_rate", "prefix_cache.hits", "prefix_cache.queries"),
        ("spec.acceptance_rate", "spec.accepted_tokens", "spec.draft_tokens"),
        ("spec.accept_length", "spec.accepted_tokens", "spec.drafts"),
    ):
        value = _ratio(entries, top, bottom, windowed)
        if value is not None:
            unit = "fraction" if name != "spec.accept_length" else "tokens"
            figures.append(DerivedFigure(name, value, unit, f"{top} / {bottom}"))
    return tuple(figures)


def _dcgm_notes(entries: Sequence[MetricEntry]) -> tuple[str, ...]:
    profiling = {name for name, _ in DCGM_PROFILING}
    ours = [e for e in entries if e.source == "dcgm" and e.name in profiling]
    present = [e for e in ours if e.status is Availability.PRESENT]
    notes = []
    absent = [e.name for e in ours if e.status is Availability.ABSENT]
    if absent:
        notes.append(
            "DCGM profiling fields absent (not enabled in dcgm-exporter's counters file): "
            + ", ".join(absent)
            + "."
        )
    if present and all(e.value == 0 for e in present):
        notes.append(
            "Every DCGM profiling field reads exactly 0: normal on an idle GPU; under load it "
            "means DCGM's profiler is not sampling (another profiler attached, or no support)."
        )
    return tuple(notes)


def build_view(
    scrapes: Sequence[Scrape],
    *,
    source: str,
    events: Sequence[ServerEvent] = (),
    server_config: RunServerConfig | None = None,
) -> MetricsView:
    """The view of one scrape (`len(scrapes) == 1` per target) or of a window of them."""
    if not scrapes:
        raise ValueError("build_view needs at least one scrape")
    windowed = len({s.t for s in scrapes}) > 1
    flat = [(s.t, adapted) for s in scrapes for adapted in s.adapted]
    latest: dict[str, Adapted] = {}
    for _, adapted in flat:
        latest[adapted.engine] = adapted
    entries: list[MetricEntry] = []
    notes: list[str] = [note for s in scrapes[:1] for note in s.notes]
    for adapted in latest.values():
        entries += _entries(flat, adapted, windowed)
        notes += [n for n in (*adapted.notes, *adapted.scrape_notes) if n not in notes]
    engine = next((a for a in latest.values() if a.engine != "dcgm"), None)
    if not latest:
        notes.append(
            "No known engine or exporter in these metrics (looked for vllm:, sglang:, tgi_, "
            "nv_trt_llm_, trtllm_, nv_inference_, llamacpp:, DCGM_FI_)."
        )
    notes += _dcgm_notes(entries)
    entries = _without_unused_pd(entries)
    engine_scrapes = [(t, a) for t, a in flat if a.engine != "dcgm"]
    roles = tuple(
        DerivedFigure(s.name, s.value, s.unit, s.source) for s in role_signals(engine_scrapes)
    )
    times = [s.t for s in scrapes]
    return MetricsView(
        source=source,
        engine=engine.engine if engine else None,
        engine_title=engine.title if engine else None,
        exporters=tuple(e for e in latest if e == "dcgm"),
        window=(min(times), max(times)) if windowed else None,
        num_scrapes=len({(s.target, s.t) for s in scrapes}),
        entries=tuple(entries),
        derived=_derived(entries, windowed),
        notes=tuple(notes),
        events=tuple(events),
        server_config=server_config,
        roles=roles,
    )


def _without_unused_pd(entries: list[MetricEntry]) -> list[MetricEntry]:
    """A server that is not disaggregated lacks every P/D metric: none is listed."""
    pd = [e for e in entries if e.name.startswith(PD_PREFIXES)]
    if any(e.status is Availability.PRESENT for e in pd):
        return entries
    return [e for e in entries if not e.name.startswith(PD_PREFIXES)]
