"""report.html, level 4: the run's time series — throughput, queue, KV cache, GPU, host.

Takes the run's request records and the normalised `Sample`s of
metrics.jsonl; gives `Chart`s on the run's clock: throughput (the client's
output tokens per second in 1 s bins, and the server's generation and
prompt token rates), requests (the client's in flight; the engine's
running and waiting), KV-cache use and preemptions, GPU activity, GPU
memory and host CPU. A chart with no data is left out. Several label sets
of one name at one scrape (GPUs, replicas) are one line: counters and
counts summed, fractions averaged. Counter rates go through the
Prometheus math of `analyze.signals.prom` (resets counted).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from infertriage.analyze.signals.prom import counter_increase
from infertriage.report.html.model import Band, Chart, Series
from infertriage.schemas import RequestRecord, Sample

__all__ = ["level_bands", "run_charts", "span_of"]

_BIN_S = 1.0
# (chart title, unit, [(metric, line name, is a counter)])
_GROUPS: tuple[tuple[str, str, tuple[tuple[str, str, bool], ...]], ...] = (
    (
        "Requests",
        "requests",
        (
            ("queue.running", "running (server)", False),
            ("queue.waiting", "waiting (server)", False),
        ),
    ),
    ("KV cache", "fraction", (("kv.usage", "KV cache used", False),)),
    ("Preemptions", "1/s", (("preemptions", "preemptions per second", True),)),
    (
        "GPU activity",
        "fraction",
        (
            ("gpu.util", "GPU util", False),
            ("gpu.sm_active", "SM active", False),
            ("gpu.tensor_active", "tensor active", False),
            ("gpu.dram_active", "DRAM (HBM) active", False),
        ),
    ),
    ("GPU memory", "bytes", (("gpu.fb_used_bytes", "GPU memory used", False),)),
    (
        "Host CPU",
        "fraction",
        (
            ("host.cpu", "host CPU busy", False),
            ("host.client_cpu", "load client CPU", False),
            ("proc.cpu_thread_max", "busiest server thread", False),
        ),
    ),
)
_AVERAGED = {"fraction"}


def _points(samples: Iterable[Sample], name: str, unit: str) -> list[tuple[float, float]]:
    """One value per scrape time: the label sets summed (averaged for fractions)."""
    by_t: dict[float, list[float]] = defaultdict(list)
    for s in samples:
        if s.name == name and "le" not in s.labels and "stat" not in s.labels:
            by_t[s.t].append(s.value)
    average = unit in _AVERAGED
    return [
        (t, sum(vs) / len(vs) if average else sum(vs))
        for t, vs in sorted(by_t.items())
        if all(math.isfinite(v) for v in vs)
    ]


def _rates(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Per-second growth between consecutive scrapes, at each interval's end."""
    out: list[tuple[float, float]] = []
    for before, after in itertools.pairwise(points):
        grown = counter_increase([before, after])
        if grown is not None and grown.rate_per_s is not None:
            out.append((after[0], grown.rate_per_s))
    return out


def _client_throughput(records: Sequence[RequestRecord]) -> list[tuple[float, float]]:
    """Output tokens per second as the client received them, in 1 s bins."""
    bins: dict[int, float] = defaultdict(float)
    for record in records:
        for chunk in record.chunks:
            bins[int(chunk.ts // _BIN_S)] += chunk.num_tokens
    if not bins:
        return []
    first, last = min(bins), max(bins)
    return [((i + 0.5) * _BIN_S, bins.get(i, 0.0) / _BIN_S) for i in range(first, last + 1)]


def _in_flight(records: Sequence[RequestRecord]) -> list[tuple[float, float]]:
    """Requests sent and not yet ended, as a step line over every send and end."""
    events = sorted(
        [(r.sent_ts, 1) for r in records]
        + [(r.end_ts, -1) for r in records if r.end_ts is not None]
    )
    out: list[tuple[float, float]] = []
    count = 0
    for t, step in events:
        if out:
            out.append((t, float(count)))
        count += step
        out.append((t, float(count)))
    return out


def _throughput_chart(records: Sequence[RequestRecord], samples: Sequence[Sample]) -> Chart:
    series = [Series("output tokens/s (client)", tuple(_client_throughput(records)))]
    for name, line in (
        ("tokens.generation", "generation tokens/s (server)"),
        ("tokens.prompt", "prompt tokens/s (server)"),
    ):
        rates = _rates(_points(samples, name, "tokens"))
        if rates:
            series.append(Series(line, tuple(rates)))
    return Chart("Throughput", "tokens/s", tuple(s for s in series if s.points))


def run_charts(records: Sequence[RequestRecord], samples: Sequence[Sample]) -> tuple[Chart, ...]:
    """Every chart the run has data for, throughput first."""
    charts = [_throughput_chart(records, samples)]
    flight = Series("in flight (client)", tuple(_in_flight(records)))
    for title, unit, metrics in _GROUPS:
        series = [flight] if title == "Requests" and flight.points else []
        for name, line, counter in metrics:
            points = _points(samples, name, unit)
            points = _rates(points) if counter else points
            if points and (not counter or any(v > 0 for _, v in points)):
                series.append(Series(line, tuple(points)))
        charts.append(Chart(title, unit, tuple(series)))
    return tuple(chart for chart in charts if chart.series)


def span_of(records: Sequence[RequestRecord], samples: Sequence[Sample]) -> tuple[float, float]:
    """The run's clock from its first event to its last (0 to 1 s for an empty run)."""
    times = [r.sent_ts for r in records] + [r.end_ts for r in records if r.end_ts is not None]
    times += [s.t for s in samples]
    if not times:
        return (0.0, 1.0)
    start, end = min(0.0, *times), max(times)
    return (start, end if end > start else start + 1.0)


def level_bands(groups: dict[str, list[RequestRecord]]) -> tuple[Band, ...]:
    """One band per load level (or phase): its first send to its last end, in time order."""
    bands = []
    for name, records in groups.items():
        ends = [r.end_ts for r in records if r.end_ts is not None]
        start = min(r.sent_ts for r in records)
        bands.append(Band(name or "requests", start, max(ends, default=start)))
    return tuple(sorted(bands, key=lambda b: b.start_ts))
