"""analyze.signals, level 1: a prefill/decode (P/D) deployment, read role by role.

Takes the normalised samples of a scrape or a run, whose series carry the label
`pd_role` (`prefill` or `decode`: collect copies it from SGLang's `engine_type`, or
from the pod label a vLLM deployment's Prometheus relabelled), and a window; gives,
where some series names a role or is a KV transfer's:

- each role's instances and load: `pd.<role>_instances` (its engines: an instance per
  `instance`/`pod`, and per data-parallel rank), `pd.<role>_waiting` and
  `pd.<role>_running` (the role's total, its mean over the window's scrapes), the
  same per instance (`pd.<role>_waiting_per_instance`, `_running_per_instance`), and
  its KV usage (`pd.<role>_kv_usage`: the mean instance's mean);
- the KV transfers, with or without roles (vLLM's NIXL histograms, SGLang's per-stage
  histogram and its last-transfer gauges): `pd.transfer_count`, `pd.transfer_time_mean_s`,
  `pd.transfer_time_p90_s`, `pd.transfer_bytes_mean`, the achieved rate
  `pd.transfer_bytes_per_s` (bytes over time, both summed; SGLang's own speed gauge
  where no byte histogram is), failures (`pd.transfer_failures`: failed transfers,
  failed handshakes and KV that expired waiting to be read; `pd.transfer_failure_share`
  of the transfers tried) and the requests queued for a transfer
  (`pd.transfer_queue`: SGLang's decode transfer queue and prefill in-flight queue,
  `pd.decode_prealloc_queue`: decode requests waiting for KV space);
- how much of TTFT that is: `pd.ttft_mean_s`, the prefill role's server TTFT mean
  plus the decode role's (an upper bound of a request's TTFT: each engine counts at
  least one of them from the request's arrival), `pd.transfer_ttft_share` (the mean
  transfer over it) and `pd.prefill_queue_share` (the prefill role's mean queue time
  over it).

Histograms and counters grow over the window; where it holds a single scrape they
are read as they stand, since the server started (a dump pasted once).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from infertriage.analyze.signals.prom import (
    HistogramWindow,
    counter_increase,
    histogram_increase,
    histogram_quantile,
)
from infertriage.schemas import Sample, Signal

__all__ = ["ROLES", "disagg_signals"]

ROLES = ("prefill", "decode")
_EPS = 1e-9
_FAILURES = (
    "kv_transfer.failed",
    "kv_transfer.bootstrap_failed",
    "kv_transfer.expired",
)
_QUEUES = ("pd.decode_transfer_queue", "pd.prefill_inflight_queue")
_Snapshot = dict[str, float]  # le or stat → cumulative value


class _Window:
    """The role-labelled samples of one window, grouped for reading."""

    def __init__(self, samples: Iterable[Sample], start: float, end: float) -> None:
        self.start, self.end = start, end
        # (name, role) → time → instance → summed value (gauges and counters)
        self.points: dict[tuple[str, str], dict[float, dict[str, float]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(float))
        )
        # name → series → (time, value): counters, each series on its own
        self.counters: dict[str, dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]] = (
            defaultdict(lambda: defaultdict(list))
        )
        # (name, role) → time → le/stat → summed cumulative value
        self.hist: dict[tuple[str, str], dict[float, _Snapshot]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(float))
        )
        self.roles: set[str] = set()
        self.transfers = False  # a KV-transfer or P/D queue series, with or without a role
        for s in samples:
            if start - _EPS <= s.t <= end + _EPS:
                self._add(s)

    def _add(self, s: Sample) -> None:
        role = s.labels.get("pd_role", "")
        if role in ROLES:
            self.roles.add(role)
        self.transfers |= s.name.startswith(("kv_transfer.", "pd."))
        key = s.labels.get("le") or s.labels.get("stat")
        if key is not None:
            self.hist[(s.name, role)][s.t][key] += s.value
            return
        where = f"{s.labels.get('instance') or s.labels.get('pod') or ''}/"
        self.points[(s.name, role)][s.t][where + s.labels.get("dp_rank", "")] += s.value
        if s.name in _FAILURES:
            series = tuple(sorted((k, v) for k, v in s.labels.items() if k != "raw"))
            self.counters[s.name][series].append((s.t, s.value))

    def instances(self, role: str) -> set[str]:
        found: set[str] = set()
        for name in ("queue.running", "queue.waiting"):
            for per in self.points.get((name, role), {}).values():
                found |= set(per)
        return found

    def total_mean(self, name: str, role: str) -> float | None:
        """The role's total at each scrape (its instances added), averaged over the scrapes."""
        times = self.points.get((name, role))
        if not times:
            return None
        return sum(sum(per.values()) for per in times.values()) / len(times)

    def instance_mean(self, name: str, role: str) -> float | None:
        """The mean instance's value at each scrape, averaged over the scrapes."""
        times = self.points.get((name, role))
        if not times:
            return None
        return sum(sum(per.values()) / len(per) for per in times.values()) / len(times)

    def any_mean(self, name: str) -> float | None:
        """A gauge's mean over every series of every role (SGLang's last-transfer gauges)."""
        values = [
            v
            for (n, _), t in self.points.items()
            if n == name
            for p in t.values()
            for v in p.values()
        ]
        return sum(values) / len(values) if values else None

    def grown(self, name: str) -> float | None:
        """A counter's growth over the window (one scrape: its value), each series apart."""
        series = self.counters.get(name)
        if not series:
            return None
        total = 0.0
        for points in series.values():
            grown = counter_increase(sorted(points))
            total += grown.increase if grown is not None else sorted(points)[-1][1]
        return total

    def histogram(self, name: str, roles: Iterable[str]) -> HistogramWindow | None:
        """The histogram over the window, the given roles' series added up."""
        merged: dict[float, _Snapshot] = defaultdict(lambda: defaultdict(float))
        for role in roles:
            for t, snapshot in self.hist.get((name, role), {}).items():
                for key, value in snapshot.items():
                    merged[t][key] += value
        snapshots = [
            (
                {float(k): v for k, v in merged[t].items() if k not in ("sum", "count")},
                merged[t].get("sum", 0.0),
                merged[t].get("count", 0.0),
            )
            for t in sorted(merged)
        ]
        if len(snapshots) == 1:  # one scrape: everything observed since the server started
            buckets, total, count = snapshots[0]
            return HistogramWindow(tuple(sorted(buckets.items())), total, count)
        return histogram_increase(snapshots)


def _mean(window: HistogramWindow | None) -> float | None:
    return window.mean if window is not None else None


class _Out:
    def __init__(self, span: tuple[float, float]) -> None:
        self.span = span
        self.signals: list[Signal] = []

    def add(self, name: str, value: float | None, unit: str) -> None:
        if value is not None:
            self.signals.append(
                Signal(name=name, value=float(value), unit=unit, source="metrics", window=self.span)
            )


def _roles(w: _Window, out: _Out) -> None:
    for role in sorted(w.roles):
        count = len(w.instances(role))
        out.add(f"pd.{role}_instances", float(count) if count else None, "1")
        for figure, name in (("waiting", "queue.waiting"), ("running", "queue.running")):
            total = w.total_mean(name, role)
            out.add(f"pd.{role}_{figure}", total, "requests")
            if total is not None and count:
                out.add(f"pd.{role}_{figure}_per_instance", total / count, "requests")
        out.add(f"pd.{role}_kv_usage", w.instance_mean("kv.usage", role), "fraction")


def _transfers(w: _Window, out: _Out) -> float | None:
    """The transfer figures; gives the mean transfer time, where known."""
    everywhere = ("", *ROLES)
    times = w.histogram("kv_transfer.time", everywhere)
    sizes = w.histogram("kv_transfer.bytes", everywhere)
    mean = _mean(times) if times is not None and times.count > 0 else None
    if times is not None and times.count > 0:
        out.add("pd.transfer_count", times.count, "1")
        p90 = histogram_quantile(0.9, times.buckets)
        out.add("pd.transfer_time_p90_s", p90.value if p90 is not None else None, "s")
    if mean is None:  # SGLang without the per-stage histogram: the last transfers' gauge
        mean = w.any_mean("kv_transfer.latency")
    out.add("pd.transfer_time_mean_s", mean, "s")
    rate = None
    if sizes is not None and sizes.count > 0 and times is not None and times.sum > 0:
        out.add("pd.transfer_bytes_mean", sizes.mean, "bytes")
        rate = sizes.sum / times.sum
    out.add("pd.transfer_bytes_per_s", rate or w.any_mean("kv_transfer.speed"), "bytes/s")
    if rate is None:
        out.add("pd.transfer_bytes_mean", w.any_mean("kv_transfer.last_bytes"), "bytes")
    failures = [g for g in (w.grown(name) for name in _FAILURES) if g is not None]
    if failures:
        failed = sum(failures)
        out.add("pd.transfer_failures", failed, "1")
        if times is not None and times.count + failed > 0:
            out.add("pd.transfer_failure_share", failed / (times.count + failed), "fraction")
    queued = [q for q in (_all_mean(w, name) for name in _QUEUES) if q is not None]
    out.add("pd.transfer_queue", sum(queued) if queued else None, "requests")
    out.add("pd.decode_prealloc_queue", _all_mean(w, "pd.decode_prealloc_queue"), "requests")
    return mean


def _all_mean(w: _Window, name: str) -> float | None:
    """A queue's total over every instance (any role), averaged over the scrapes."""
    totals = [w.total_mean(name, role) for role in ("", *ROLES)]
    found = [t for t in totals if t is not None]
    return sum(found) if found else None


def _ttft(w: _Window, out: _Out, transfer: float | None) -> None:
    means = [_mean(w.histogram("server.ttft", (role,))) for role in ROLES]
    known = [m for m in means if m is not None]
    if not known:
        return
    ttft = sum(known)
    out.add("pd.ttft_mean_s", ttft, "s")
    if ttft <= 0:
        return
    if transfer is not None:
        out.add("pd.transfer_ttft_share", min(1.0, transfer / ttft), "fraction")
    queue = _mean(w.histogram("server.queue_time", ("prefill",)))
    if queue is not None:
        out.add("pd.prefill_queue_share", min(1.0, queue / ttft), "fraction")


def disagg_signals(samples: Iterable[Sample], start: float, end: float) -> list[Signal]:
    """See the module docstring; nothing where no series names a prefill or decode role
    and none is a KV transfer's (one instance scraped alone, an older SGLang that labels
    every instance `unified`: its transfers without the roles)."""
    w = _Window(samples, start, end)
    if not w.roles and not w.transfers:
        return []
    out = _Out((start, end))
    _roles(w, out)
    transfer = _transfers(w, out)
    _ttft(w, out, transfer)
    return out.signals
