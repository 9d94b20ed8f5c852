"""collect, level 2: Prometheus text → samples, with prometheus-client's parser.

Takes the text of one `/metrics` response (or file) and gives an
`Exposition`: every sample with its labels, indexed by sample name, and the
declared type of each family. Text that is not Prometheus exposition (HTML, JSON,
garbage), empty, or visibly truncated (a histogram cut before its `+Inf`
bucket or its `_count`) is a `UserError` of one sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infertriage.schemas import UserError

__all__ = ["Exposition", "RawSample", "parse_metrics_text", "read_metrics_file"]

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class RawSample:
    """One line of the exposition: sample name (with `_total`, `_bucket`…), labels, value."""

    name: str
    labels: Labels
    value: float

    def label(self, key: str) -> str | None:
        for name, value in self.labels:
            if name == key:
                return value
        return None


@dataclass(frozen=True)
class Exposition:
    """A parsed scrape: samples by name, family types, and notes on what looked odd.

    `get` finds a counter under its name with or without `_total`.
    """

    source: str
    samples: tuple[RawSample, ...]
    family_types: Mapping[str, str]  # family name → counter, gauge, histogram, summary, unknown
    notes: tuple[str, ...] = ()
    by_name: Mapping[str, tuple[RawSample, ...]] = field(default_factory=dict)

    def get(self, name: str) -> tuple[RawSample, ...]:
        return self.by_name.get(name, ())

    def has(self, name: str) -> bool:
        return name in self.by_name

    @property
    def names(self) -> frozenset[str]:
        """Sample names as the parser gives them (counters always end in `_total`)."""
        return frozenset(sample.name for sample in self.samples)


def _what_it_is(text: str) -> str | None:
    head = text.lstrip()[:200].lower()
    if head.startswith(("<!doctype", "<html", "<?xml", "<")):
        return "HTML, not Prometheus metrics text (is this the server's /metrics URL?)"
    if head.startswith(("{", "[")):
        return "JSON, not Prometheus metrics text (is this the server's /metrics URL?)"
    return None


def _short(message: str) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= 80 else message[:77] + "..."


def _check_histograms(
    source: str, index: Mapping[str, list[RawSample]], types: Mapping[str, str]
) -> None:
    for family, kind in types.items():
        buckets = index.get(f"{family}_bucket")
        if kind != "histogram" or not buckets:
            continue
        if not any(s.label("le") == "+Inf" for s in buckets):
            raise UserError(f"{source} looks truncated: histogram {family} has no +Inf bucket.")
        if f"{family}_count" not in index:
            raise UserError(f"{source} looks truncated: histogram {family} has no _count.")


def _alias_counters(index: dict[str, list[RawSample]], types: Mapping[str, str]) -> None:
    # The parser renames a counter `x` to `x_total` (the OpenMetrics form); engines such as
    # Triton, TGI and dcgm-exporter name counters without `_total`, so both names must find it.
    for family, kind in types.items():
        if kind == "counter" and f"{family}_total" in index:
            index.setdefault(family, index[f"{family}_total"])


def read_metrics_file(path: Path) -> str:
    """A saved scrape's text; a `UserError` when it cannot be read as text (binary, a folder)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{path} is not a text file of Prometheus metrics.") from err
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}.") from err


def parse_metrics_text(text: str, source: str) -> Exposition:
    """Parse exposition text; `source` (a URL or a path) names it in errors."""
    if not text.strip():
        raise UserError(f"{source} returned no metrics (the text is empty).")
    kind = _what_it_is(text)
    if kind is not None:
        raise UserError(f"{source} returned {kind}.")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as err:
        raise UserError(
            f"{source} is not valid Prometheus metrics text ({_short(str(err))})."
        ) from err
    samples: list[RawSample] = []
    types: dict[str, str] = {}
    for family in families:
        types[str(family.name)] = str(family.type)
        for parsed in family.samples:
            labels = tuple(sorted((str(k), str(v)) for k, v in parsed.labels.items()))
            samples.append(RawSample(str(parsed.name), labels, float(parsed.value)))
    if not samples:
        raise UserError(f"{source} returned no metrics (only comments).")
    index: dict[str, list[RawSample]] = {}
    for sample in samples:
        index.setdefault(sample.name, []).append(sample)
    _check_histograms(source, index, types)
    _alias_counters(index, types)
    notes: tuple[str, ...] = ()
    if not text.endswith("\n"):
        notes = (f"{source} does not end with a newline, as the format requires: it may be cut.",)
    return Exposition(
        source=source,
        samples=tuple(samples),
        family_types=types,
        notes=notes,
        by_name={name: tuple(group) for name, group in index.items()},
    )
