"""collect, level 2: how a metric table maps a scrape.

An `Adapter` (`engines.MetricTable`: the table lives with its engine in
`infertriage.engines`) gives, for each normalised name of the vocabulary, the
raw names that carry it, the factor to SI units, a label filter, or why the
engine has no such metric. `adapt` applies it to an `Exposition` and gives normalised
scalars and histograms (raw name kept in the `raw` label) and a status for
every name of the adapter's domain: `present`, `absent` (the engine can
export it, this scrape does not) or `unsupported` (the engine has no such
metric). What it maps is screened (`screen`): copies of one series read once,
data-parallel ranks labelled `dp_rank`, and values that cannot be true set
aside as artefacts, with notes on both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from infertriage.collect.adapters.screen import Artefact, screen
from infertriage.collect.parse import Exposition, Labels, RawSample
from infertriage.engines.metrics import (
    ENGINE_DOMAIN,
    MetricMap,
    Product,
    Source,
    metric,
)
from infertriage.engines.metrics import MetricTable as Adapter
from infertriage.schemas import VOCABULARY, MetricKind

__all__ = [
    "ENGINE_DOMAIN",
    "Adapted",
    "Adapter",
    "Artefact",
    "Availability",
    "MetricMap",
    "MetricStatus",
    "NormHistogram",
    "NormScalar",
    "Product",
    "Source",
    "adapt",
    "metric",
]


class Availability(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"  # the engine can export it; this scrape does not have it
    UNSUPPORTED = "unsupported"  # the engine has no such metric


@dataclass(frozen=True, slots=True)
class NormScalar:
    """A gauge or counter value of one series under its normalised name, in SI units."""

    name: str
    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class NormHistogram:
    """One histogram series: cumulative counts per upper bound (SI), sum and count."""

    name: str
    labels: Labels
    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


@dataclass(frozen=True, slots=True)
class MetricStatus:
    name: str
    status: Availability
    source: str  # the adapter that judged it: vllm, dcgm…
    raw_name: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Adapted:
    """What one adapter made of one scrape.

    `notes` are the adapter's own caveats; `scrape_notes` say what this scrape held
    (copies read once, values set aside), and `artefacts` are the values set aside.
    """

    engine: str
    title: str
    scalars: tuple[NormScalar, ...]
    histograms: tuple[NormHistogram, ...]
    statuses: tuple[MetricStatus, ...]
    notes: tuple[str, ...]
    artefacts: tuple[Artefact, ...] = ()
    scrape_notes: tuple[str, ...] = ()

    def status(self, name: str) -> MetricStatus | None:
        return next((s for s in self.statuses if s.name == name), None)

    def values(self, name: str) -> tuple[float, ...]:
        return tuple(s.value for s in self.scalars if s.name == name)


def _matches(sample: RawSample, where: Labels) -> bool:
    return all(sample.label(key) == value for key, value in where)


def _with_raw(labels: Labels, raw: str, drop: tuple[str, ...] = ()) -> Labels:
    kept = tuple((k, v) for k, v in labels if k not in drop)
    return (*kept, ("raw", raw))


def _scalars(exposition: Exposition, name: str, source: Source) -> list[NormScalar]:
    out: list[NormScalar] = []
    for sample in exposition.get(source.raw):
        if not _matches(sample, source.where):
            continue
        if source.from_label is None:
            value = sample.value * source.scale
        else:
            try:
                value = float(sample.label(source.from_label) or "") * source.scale
            except ValueError:  # the label is missing or not a number
                continue
        # NaN and ±Inf are kept: the view shows them as the server said them; the
        # samples written to metrics.jsonl (`samples_of`) and every figure leave them out
        out.append(NormScalar(name, _with_raw(sample.labels, source.display), value))
    return out


def _not_finite_note(scalars: Sequence[NormScalar]) -> str:
    """What the server exports where it exports no number: NaN, +Inf or -Inf."""
    if not scalars or any(math.isfinite(s.value) for s in scalars):
        return ""
    said = sorted({"NaN" if math.isnan(s.value) else f"{s.value:+}".title() for s in scalars})
    return f"the server exports {' and '.join(said)} here, not a number"


def _le(text: str | None, scale: float) -> float:
    if text is None or text in {"+Inf", "Inf"}:
        return math.inf
    return float(text) * scale


def _histograms(exposition: Exposition, name: str, source: Source) -> list[NormHistogram]:
    groups: dict[Labels, dict[float, float]] = {}  # a bucket repeated verbatim counts once
    for sample in exposition.get(f"{source.raw}_bucket"):
        if _matches(sample, source.where):
            key = tuple((k, v) for k, v in sample.labels if k != "le")
            groups.setdefault(key, {})[_le(sample.label("le"), source.scale)] = sample.value
    sums = {s.labels: s.value for s in exposition.get(f"{source.raw}_sum")}
    counts = {s.labels: s.value for s in exposition.get(f"{source.raw}_count")}
    out = []
    for key, buckets in groups.items():
        count = counts.get(key, max(buckets.values()))
        total = sums.get(key, math.nan) * source.scale
        out.append(
            NormHistogram(
                name, _with_raw(key, source.display), tuple(sorted(buckets.items())), total, count
            )
        )
    return out


def _status_note(mapping: MetricMap, used: Source, others: list[Source]) -> str:
    parts = [p for p in (used.note, mapping.note) if p]
    if others:
        parts.append("also exported as " + ", ".join(o.display for o in others))
    return "; ".join(parts)


def _map_one(
    exposition: Exposition, adapter: Adapter, mapping: MetricMap
) -> tuple[MetricStatus, list[NormScalar], list[NormHistogram]]:
    is_histogram = VOCABULARY[mapping.name].kind is MetricKind.HISTOGRAM
    found: list[tuple[Source, list[NormScalar], list[NormHistogram]]] = []
    for source in mapping.sources:
        if is_histogram:
            histograms = _histograms(exposition, mapping.name, source)
            if histograms:
                found.append((source, [], histograms))
        else:
            scalars = _scalars(exposition, mapping.name, source)
            if scalars:
                found.append((source, scalars, []))
    if not found:
        note = "; ".join(p for p in (mapping.note, mapping.enable) if p)
        raws = ", ".join(s.display for s in mapping.sources)
        note = f"not in this scrape (looked for {raws})" + (f"; {note}" if note else "")
        return MetricStatus(mapping.name, Availability.ABSENT, adapter.engine, None, note), [], []
    used, scalars, histograms = found[0]
    note = _status_note(mapping, used, [f[0] for f in found[1:]])
    note = "; ".join(part for part in (_not_finite_note(scalars), note) if part)
    status = MetricStatus(mapping.name, Availability.PRESENT, adapter.engine, used.display, note)
    return status, scalars, histograms


def _products(
    adapter: Adapter, statuses: dict[str, MetricStatus], scalars: list[NormScalar]
) -> None:
    for product in adapter.products:
        current = statuses.get(product.name)
        if current is not None and current.status is Availability.PRESENT:
            continue
        left = [s.value for s in scalars if s.name == product.left]
        right = [s.value for s in scalars if s.name == product.right]
        if len(left) != 1 or len(right) != 1:
            continue
        formula = f"{product.left} × {product.right}"
        scalars.append(NormScalar(product.name, (("raw", formula),), left[0] * right[0]))
        statuses[product.name] = MetricStatus(
            product.name, Availability.PRESENT, adapter.engine, formula, "derived"
        )


def adapt(exposition: Exposition, adapter: Adapter) -> Adapted:
    """Map one scrape through one adapter; every name of the domain gets a status."""
    statuses: dict[str, MetricStatus] = {}
    scalars: list[NormScalar] = []
    histograms: list[NormHistogram] = []
    for mapping in adapter.mappings:
        status, found_scalars, found_histograms = _map_one(exposition, adapter, mapping)
        statuses[mapping.name] = status
        scalars += found_scalars
        histograms += found_histograms
    _products(adapter, statuses, scalars)
    for name in sorted(adapter.domain - statuses.keys()):
        why = adapter.unsupported.get(name, f"{adapter.title} exports no such metric")
        statuses[name] = MetricStatus(name, Availability.UNSUPPORTED, adapter.engine, None, why)
    screened = screen(scalars, histograms, adapter)
    for artefact in screened.artefacts:
        _set_aside(statuses, artefact)
    ordered = tuple(statuses[name] for name in VOCABULARY if name in statuses)
    return Adapted(
        adapter.engine,
        adapter.title,
        screened.scalars,
        screened.histograms,
        ordered,
        adapter.notes,
        screened.artefacts,
        screened.notes,
    )


def _set_aside(statuses: dict[str, MetricStatus], artefact: Artefact) -> None:
    """The status of a metric one of whose values was set aside says so."""
    status = statuses.get(artefact.metric)
    if status is None:
        return
    said = f"{artefact.raw} = {artefact.said} cannot be true: set aside"
    note = "; ".join(part for part in (status.note, said) if part)
    statuses[artefact.metric] = MetricStatus(
        status.name, status.status, status.source, status.raw_name, note
    )
