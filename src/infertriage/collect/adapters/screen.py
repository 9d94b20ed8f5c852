"""collect, level 2: one mapped scrape screened before any later stage reads it.

Takes the normalised scalars and histograms `adapt` made of one scrape, and
the engine's table; gives them back with:

- copies read once: one series exported once per process (a label of the
  table's `copy_labels`, Prometheus' multiprocess `pid`) or twice verbatim,
  with one value, counts once, and a note says which value was used; a
  counter's copies that differ are each process's own count, added up with a
  note; a gauge's copies that differ (one engine state, several values) are
  an artefact: which copy is the engine's cannot be told;
- data-parallel ranks named: the table's `rank_label` (vLLM V1 `engine`,
  SGLang `dp_rank`) is copied into the label `dp_rank`, so later stages keep
  each rank's series apart instead of reading them as one engine;
- prefill/decode roles named: the first of the table's `role_labels` (SGLang's
  `engine_type`; for vLLM a relabelled pod label: `engine_type`, `llm_d_ai_role`,
  `role`) whose value is `prefill` or `decode` is copied into the label
  `pd_role`, so later stages read each role's instances apart (a unified
  instance gets none);
- values that cannot be true set aside as `Artefact`s (`schemas.artefacts`):
  a gauge or counter below zero, a fraction above 1 (a KV usage, a hit rate,
  a part above its whole such as prefix hits above queries), a histogram
  whose `_count` is not its `+Inf` bucket or whose buckets shrink. No later
  stage reads the value itself; the artefact is written instead.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infertriage.engines.metrics import PD_ROLES
from infertriage.schemas import VOCABULARY, MetricKind
from infertriage.schemas.artefacts import (
    COPIES_DISAGREE,
    FRACTION_ABOVE_ONE,
    HISTOGRAM_COUNT_MISMATCH,
    HISTOGRAM_NOT_CUMULATIVE,
    NEGATIVE_COUNTER,
    NEGATIVE_GAUGE,
)

if TYPE_CHECKING:
    from infertriage.collect.adapters.base import NormHistogram, NormScalar
    from infertriage.collect.parse import Labels
    from infertriage.engines.metrics import MetricTable

__all__ = ["RANK_LABEL", "ROLE_LABEL", "Artefact", "Screened", "screen", "series_text"]

RANK_LABEL = "dp_rank"  # the normalised label of a data-parallel rank
ROLE_LABEL = "pd_role"  # the normalised label of a prefill/decode role
_MAX_COPY_NOTES = 4  # more duplicated series than this are summed up in one note
_SLACK = 1e-9  # float noise in a fraction or a cumulative count is not an artefact
# (part, whole, the ratio's name): a part above its whole is a ratio above 1
_PARTS = (
    ("prefix_cache.hits", "prefix_cache.queries", "prefix_cache.hit_rate"),
    ("spec.accepted_tokens", "spec.draft_tokens", "spec.acceptance_rate"),
)


@dataclass(frozen=True, slots=True)
class Artefact:
    """A value no server state can produce, set aside: its kind, metric and raw series.

    `value` is in the metric's SI unit (for the histogram kinds, the observations it is
    off by); `said` is what the exporter said, in its own units.
    """

    kind: str
    metric: str
    raw: str
    value: float
    said: str

    @property
    def note(self) -> str:
        return f"{self.raw} reads {self.said}, which cannot be true: it was set aside."


@dataclass(frozen=True, slots=True)
class Screened:
    scalars: tuple[NormScalar, ...]
    histograms: tuple[NormHistogram, ...]
    artefacts: tuple[Artefact, ...]
    notes: tuple[str, ...]


def series_text(labels: Labels, skip: Sequence[str] = ()) -> str:
    """`raw{k="v",…}`: a series as its exporter names it (the `raw` label and `skip` left out)."""
    raw = next((v for k, v in labels if k == "raw"), "")
    shown = [f'{k}="{v}"' for k, v in labels if k not in {"raw", *skip}]
    return raw + ("{" + ",".join(shown) + "}" if shown else "")


def _hidden(table: MetricTable) -> tuple[str, ...]:
    """Labels a series is shown without: its copies', and `dp_rank`, `pd_role` where we
    added them."""
    added = table.rank_label not in ("", RANK_LABEL)
    return (*table.copy_labels, *((RANK_LABEL,) if added else ()), ROLE_LABEL)


def _same(values: Sequence[float]) -> bool:
    return len({"nan" if math.isnan(v) else v for v in values}) == 1


def _with_rank(labels: Labels, rank_label: str) -> Labels:
    if not rank_label or any(k == RANK_LABEL for k, _ in labels):
        return labels
    rank = next((v for k, v in labels if k == rank_label), None)
    return labels if rank is None else (*labels, (RANK_LABEL, rank))


def _with_role(labels: Labels, role_labels: Sequence[str]) -> Labels:
    if not role_labels or any(k == ROLE_LABEL for k, _ in labels):
        return labels
    given = dict(labels)
    for name in role_labels:
        role = PD_ROLES.get(given.get(name, "").strip().lower())
        if role is not None:
            return (*labels, (ROLE_LABEL, role))
    return labels


def _named(labels: Labels, table: MetricTable) -> Labels:
    """The rank and the role a series belongs to, in the normalised labels."""
    return _with_role(_with_rank(labels, table.rank_label), table.role_labels)


def _how(copies: Sequence[NormScalar], table: MetricTable) -> str:
    """`(pid 271, pid 272)`: what tells the copies apart, or `verbatim`."""
    which = sorted({f"{k} {v}" for c in copies for k, v in c.labels if k in table.copy_labels})
    return f"({', '.join(which)})" if which else "verbatim"


def _copy_note(copies: Sequence[NormScalar], table: MetricTable) -> str:
    series, how = series_text(copies[0].labels, _hidden(table)), _how(copies, table)
    values = [c.value for c in copies]
    if _same(values):
        return (
            f"{series} is exported {len(copies)} times {how} with one value: {values[0]:g} was "
            f"used once, not added up to {values[0] * len(copies):g}."
        )
    said = ", ".join(f"{v:g}" for v in values)
    return (
        f"{series} is exported {len(copies)} times {how} ({said}): each process counts its "
        "own, so they were added up."
    )


def _disagreeing(copies: Sequence[NormScalar], table: MetricTable) -> Artefact:
    """Copies of one gauge with different values: which is the engine's cannot be told."""
    values = sorted({c.value for c in copies if math.isfinite(c.value)}, reverse=True)
    counts = ", ".join(f"{v:g} in {sum(c.value == v for c in copies)}" for v in values)
    said = f"{counts} of {len(copies)} copies {_how(copies, table)}"
    raw = series_text(copies[0].labels, _hidden(table))
    return Artefact(COPIES_DISAGREE, copies[0].name, raw, values[0] if values else 0.0, said)


def _read_once(
    scalars: Sequence[NormScalar], table: MetricTable
) -> tuple[list[NormScalar], list[str], list[Artefact]]:
    """One scalar per series: equal copies of it (per process, or repeated) count once; a
    counter's differing copies are added up, a gauge's are an artefact (one engine state)."""
    groups: dict[tuple[str, Labels], list[NormScalar]] = {}
    for scalar in scalars:
        key = tuple((k, v) for k, v in scalar.labels if k not in table.copy_labels)
        groups.setdefault((scalar.name, key), []).append(scalar)
    kept: list[NormScalar] = []
    notes: list[str] = []
    artefacts: list[Artefact] = []
    for (name, _), copies in groups.items():
        if len(copies) == 1 or _same([c.value for c in copies]):
            kept.append(copies[0])
        elif VOCABULARY[name].kind is MetricKind.GAUGE:
            artefacts.append(_disagreeing(copies, table))
            continue
        else:
            kept += copies
        if len(copies) > 1:
            notes.append(_copy_note(copies, table))
    if len(notes) > _MAX_COPY_NOTES:
        rest = len(notes) - _MAX_COPY_NOTES + 1
        notes = [*notes[: _MAX_COPY_NOTES - 1], f"… and {rest} more series exported as copies."]
    return kept, notes, artefacts


def _scalar_artefact(scalar: NormScalar, hidden: Sequence[str]) -> Artefact | None:
    definition = VOCABULARY[scalar.name]
    value = scalar.value
    if not math.isfinite(value):
        return None  # the server exports no number here: said as such, not an artefact
    kind = None
    if value < 0 and definition.kind is MetricKind.GAUGE:
        kind = NEGATIVE_GAUGE
    elif value < 0 and definition.kind is MetricKind.COUNTER:
        kind = NEGATIVE_COUNTER
    elif definition.unit == "fraction" and value > 1 + _SLACK:
        kind = FRACTION_ABOVE_ONE
    if kind is None:
        return None
    return Artefact(kind, scalar.name, series_text(scalar.labels, hidden), value, f"{value:g}")


def _part_artefacts(
    scalars: Sequence[NormScalar], hidden: Sequence[str]
) -> list[tuple[NormScalar, Artefact]]:
    """Parts above their whole in one series (prefix hits above queries): the part is wrong."""
    found = []
    by_key = {(s.name, tuple(kv for kv in s.labels if kv[0] != "raw")): s for s in scalars}
    for part, whole, ratio in _PARTS:
        for (name, key), scalar in by_key.items():
            total = by_key.get((whole, key))
            if name != part or total is None or total.value <= 0:
                continue
            if scalar.value > total.value * (1 + _SLACK):
                raw = f"{series_text(scalar.labels, hidden)} / {series_text(total.labels, hidden)}"
                said = f"{scalar.value:g} / {total.value:g}"
                artefact = Artefact(
                    FRACTION_ABOVE_ONE, ratio, raw, scalar.value / total.value, said
                )
                found.append((scalar, artefact))
    return found


def _histogram_artefact(histogram: NormHistogram, hidden: Sequence[str]) -> Artefact | None:
    raw = series_text(histogram.labels, hidden)
    counts = [count for _, count in histogram.buckets]
    drops = [before - after for before, after in itertools.pairwise(counts)]
    if drops and max(drops) > _SLACK * max(1.0, *counts):
        said = f"a bucket {max(drops):g} observations below the one before it"
        return Artefact(HISTOGRAM_NOT_CUMULATIVE, histogram.name, raw, max(drops), said)
    top = histogram.buckets[-1] if histogram.buckets else None
    if top is None or not math.isinf(top[0]) or not math.isfinite(histogram.count):
        return None
    gap = histogram.count - top[1]
    if abs(gap) > _SLACK * max(1.0, histogram.count):
        said = f"_count {histogram.count:g} against {top[1]:g} in its +Inf bucket"
        return Artefact(HISTOGRAM_COUNT_MISMATCH, histogram.name, raw, gap, said)
    return None


def screen(
    scalars: Sequence[NormScalar], histograms: Sequence[NormHistogram], table: MetricTable
) -> Screened:
    """Copies read once, ranks named, impossible values set aside (see the module docstring)."""
    hidden = _hidden(table)
    ranked = [dataclasses.replace(s, labels=_named(s.labels, table)) for s in scalars]
    once, notes, artefacts = _read_once(ranked, table)
    kept: list[NormScalar] = []
    for scalar in once:
        found = _scalar_artefact(scalar, hidden)
        if found is None:
            kept.append(scalar)
        else:
            artefacts.append(found)
    parts = _part_artefacts(kept, hidden)
    wrong = {id(scalar) for scalar, _ in parts}
    kept = [s for s in kept if id(s) not in wrong]
    artefacts += [artefact for _, artefact in parts]
    good: list[NormHistogram] = []
    for given in histograms:
        histogram = dataclasses.replace(given, labels=_named(given.labels, table))
        found = _histogram_artefact(histogram, hidden)
        if found is None:
            good.append(histogram)
        else:
            artefacts.append(found)
    notes += [a.note for a in artefacts]
    return Screened(tuple(kept), tuple(good), tuple(artefacts), tuple(notes))
