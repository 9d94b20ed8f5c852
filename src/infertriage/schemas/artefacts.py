"""schemas, level 0: the names of values that cannot be true (an exporter's or a log's artefact).

A scrape or a log can hold a number no server state could produce: a count of
requests below zero, a KV-cache usage fraction above 1, a histogram whose
`_count` is not its `+Inf` bucket. Such a value says the metric is wrong here,
not that the server is slow; it is set aside where it is read and reported as
an artefact signal instead, which only the `evidence.metric_artefact` rule reads.

An artefact signal is named `<kind>:<metric>`: one of `ARTEFACT_KINDS` and the
vocabulary name of the quantity (`artefact.negative_gauge:queue.waiting`), or
the bare kind when no vocabulary name fits. Its value is the impossible value
(in the metric's SI unit; for the histogram kinds, the number of observations
it is off by: `artefact_unit`), its `source` says where it was read and what
it said (`vllm:num_requests_waiting{engine="1"} reads -3`, a log's line).
Producers on any side (scraped metrics, server logs) use these names and
`artefact_name`; the rule reads them back with `split_artefact`.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = [
    "ARTEFACT_KINDS",
    "ARTEFACT_SAMPLE",
    "COPIES_DISAGREE",
    "DUPLICATED_LINES",
    "FRACTION_ABOVE_ONE",
    "HISTOGRAM_COUNT_MISMATCH",
    "HISTOGRAM_NOT_CUMULATIVE",
    "NEGATIVE_COUNTER",
    "NEGATIVE_GAUGE",
    "artefact_name",
    "artefact_unit",
    "split_artefact",
]

NEGATIVE_GAUGE = "artefact.negative_gauge"
NEGATIVE_COUNTER = "artefact.negative_counter"
FRACTION_ABOVE_ONE = "artefact.fraction_above_one"
HISTOGRAM_COUNT_MISMATCH = "artefact.histogram_count_mismatch"
HISTOGRAM_NOT_CUMULATIVE = "artefact.histogram_not_cumulative"
COPIES_DISAGREE = "artefact.copies_disagree"
DUPLICATED_LINES = "artefact.duplicated_lines"  # a log's records written twice

# kind → why no server state can produce it (one clause, for the finding's text)
ARTEFACT_KINDS = MappingProxyType(
    {
        NEGATIVE_GAUGE: "a gauge of requests, tokens, bytes or usage cannot be below zero",
        NEGATIVE_COUNTER: "a counter only grows from zero, so it cannot be below zero",
        FRACTION_ABOVE_ONE: "a fraction (a usage, a hit or acceptance rate) cannot exceed 1",
        HISTOGRAM_COUNT_MISMATCH: (
            "a histogram's `_count` is by definition its `+Inf` bucket, every observation"
        ),
        HISTOGRAM_NOT_CUMULATIVE: (
            "a histogram's buckets are cumulative, so no bucket can hold fewer than the one "
            "below it"
        ),
        DUPLICATED_LINES: (
            "a record repeated word for word at the same moment is a logger writing it twice "
            "(two handlers on one logger), not two events or two engines"
        ),
        COPIES_DISAGREE: (
            "one engine's gauge has one value at a time, so copies of it exported by several "
            "processes cannot disagree: all but one are stale"
        ),
    }
)

# the metrics.jsonl record of an artefact (a vocabulary event): labels `kind`, `metric`, `raw`
ARTEFACT_SAMPLE = "metric.artefact"


def artefact_unit(kind: str, metric_unit: str) -> str:
    """The unit of an artefact's value: the metric's, or observations for the histogram kinds."""
    return "1" if kind in (HISTOGRAM_COUNT_MISMATCH, HISTOGRAM_NOT_CUMULATIVE) else metric_unit


def artefact_name(kind: str, metric: str = "") -> str:
    """The signal name of one artefact: `kind:metric`, or the bare kind."""
    if kind not in ARTEFACT_KINDS:
        raise KeyError(f"{kind} is not an artefact kind")
    return f"{kind}:{metric}" if metric else kind


def split_artefact(name: str) -> tuple[str, str] | None:
    """(kind, metric) of an artefact signal's name (metric "" when bare); None for others."""
    kind, _, metric = name.partition(":")
    return (kind, metric) if kind in ARTEFACT_KINDS else None
