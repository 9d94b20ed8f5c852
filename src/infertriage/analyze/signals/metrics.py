"""analyze.signals, level 1: the signals the diagnosis reads from scraped metrics.

Takes the normalised `Sample`s of metrics.jsonl (server engine metrics, DCGM
and host samples on the run's clock) and the run's phases: the measured
load level, the overload step after it and the drain; gives `Signal`s:
server-side TTFT/ITL quantiles and queue time from histogram deltas over the
measured level, KV usage, preemptions and queue depth up to the end of the
overload step (their peak), queue growth in the overload step, prefix-cache and speculative-decoding
rates, restarts, GPU activity averaged over the load window, the busiest
front-end and engine threads, and how contended the host's CPU was (busy
share, runnable threads per core, the server's wait for a CPU, the load
client's own CPU, whether the server shares the client's host).

A server of several data-parallel ranks exports one series per rank: its queue
depths are their sum at each scrape (the server's), its counters grow by the
sum of each series' growth, its KV usage peaks at the fullest rank's, and the
ranks themselves are read apart (`ranks`), as are a prefill/decode deployment's
roles and KV transfers (`disagg`). A value set aside as impossible
(`schemas.artefacts`) becomes its artefact signal, as does a hit or acceptance
rate above 1, which is then not given.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from infertriage.analyze.signals.disagg import disagg_signals
from infertriage.analyze.signals.offload import offload_signals
from infertriage.analyze.signals.parallel import parallel_signals
from infertriage.analyze.signals.prom import (
    HistogramWindow,
    counter_increase,
    histogram_increase,
    histogram_quantile,
)
from infertriage.analyze.signals.ranks import rank_signals
from infertriage.engines import host_role
from infertriage.schemas import VOCABULARY, Phases, Sample, Signal
from infertriage.schemas.artefacts import (
    ARTEFACT_KINDS,
    ARTEFACT_SAMPLE,
    FRACTION_ABOVE_ONE,
    artefact_name,
    artefact_unit,
    split_artefact,
)

__all__ = ["Phases", "metric_signals"]

_Points = list[tuple[float, float]]
_Key = tuple[tuple[str, str], ...]


class _Series:
    """Samples grouped by name (and by label set for histograms and per-position counters)."""

    def __init__(self, samples: Iterable[Sample]) -> None:
        self.points: dict[str, _Points] = defaultdict(list)
        self.series: dict[str, dict[_Key, _Points]] = defaultdict(lambda: defaultdict(list))
        self.artefacts: list[Sample] = []
        self.hist: dict[str, dict[float, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        self.per_pos: dict[str, _Points] = defaultdict(list)
        self.threads: dict[tuple[str, str], _Points] = defaultdict(list)
        self.engine_apart = False  # the engine core's thread in a process of its own (V1)
        for s in samples:
            self._add(s)

    def _add(self, s: Sample) -> None:
        labels = s.labels
        if "le" in labels or "stat" in labels:
            key = labels.get("le") or labels.get("stat", "")
            self.hist[s.name][s.t][key] = self.hist[s.name][s.t].get(key, 0.0) + s.value
        elif s.name == "spec.accepted_tokens_per_pos":
            self.per_pos[labels.get("position", "0")].append((s.t, s.value))
        elif s.name == "proc.cpu_thread":
            key, role = f"{labels.get('pid', '')}:{labels.get('tid', '')}", _role(labels)
            self.threads[(role, key)].append((s.t, s.value))
            self.engine_apart |= role == "engine" and labels.get("process") == "child"
        elif s.name == ARTEFACT_SAMPLE:
            self.artefacts.append(s)
        else:
            self.points[s.name].append((s.t, s.value))
            self.series[s.name][tuple(sorted(labels.items()))].append((s.t, s.value))

    def within(self, name: str, start: float, end: float) -> _Points:
        """Every series' points of a name in [start, end], together."""
        return [(t, v) for t, v in self.points.get(name, []) if start <= t <= end]

    def total(self, name: str, start: float, end: float) -> _Points:
        """The sum of a name's series at each time in [start, end]: the server's queue when
        each data-parallel rank exports its own."""
        sums: dict[float, float] = defaultdict(float)
        for points in self.series.get(name, {}).values():
            for t, v in points:
                if start <= t <= end:
                    sums[t] += v
        return sorted(sums.items())


def _signal(name: str, value: float | None, unit: str, window: tuple[float, float]) -> list[Signal]:
    if value is None or not np.isfinite(value):
        return []
    return [Signal(name=name, value=float(value), unit=unit, source="metrics", window=window)]


def _increase(
    series: _Series, name: str, start: float, end: float, *, opening: bool = False
) -> float | None:
    """The growth of a counter over [start, end], each series (rank, process) on its own;
    with `opening`, from the last point before `start` (as `_window`'s)."""
    grown = [
        counter_increase(_opened(points, start, end) if opening else _inside(points, start, end))
        for points in series.series.get(name, {}).values()
    ]
    found = [g.increase for g in grown if g is not None]
    return sum(found) if found else None


def _inside(points: _Points, start: float, end: float) -> _Points:
    return [(t, v) for t, v in points if start - 1e-9 <= t <= end + 1e-9]


def _opened(points: _Points, start: float, end: float) -> _Points:
    """The points in [start, end] and the last one before `start`."""
    before = sorted((t, v) for t, v in points if t < start - 1e-9)
    return before[-1:] + _inside(points, start, end)


def _window(
    series: _Series,
    name: str,
    start: float,
    end: float,
    *,
    closing: bool = False,
    opening: bool = False,
) -> HistogramWindow | None:
    """The histogram's increase over the snapshots in [start, end]; with `closing`, also the
    first snapshot after `end`, which holds what was observed in the last scrape interval;
    with `opening`, also the last snapshot before `start`, the counts before the window's
    first observations (a closed loop's first burst gets its first tokens within the first
    scrape interval: without it the server's TTFT leaves them out, the client's keeps them)."""
    times = sorted(series.hist.get(name, {}))
    chosen = [t for t in times if start - 1e-9 <= t <= end + 1e-9]
    before = [t for t in times if t < start - 1e-9]
    after = [t for t in times if t > end + 1e-9]
    if opening and before:
        chosen.insert(0, before[-1])
    if closing and after:
        chosen.append(after[0])
    snapshots = []
    for t in chosen:
        values = series.hist[name][t]
        buckets = {float(k): v for k, v in values.items() if k not in ("sum", "count")}
        snapshots.append((buckets, values.get("sum", 0.0), values.get("count", 0.0)))
    return histogram_increase(snapshots)


def _step_tokens_max(series: _Series, start: float, end: float) -> list[Signal]:
    """The largest engine step's tokens, bounded above by the first bucket that holds every
    step of the window (vLLM's `iteration_tokens_total`): a step budget
    (`max_num_batched_tokens`) below the prompts shows as steps that never grow past it."""
    # from the scrape before the level, as its TTFT: the first burst's prefill steps count
    window = _window(series, "server.step_tokens", start, end, opening=True)
    if window is None or window.count <= 0:
        return []
    bound = next((le for le, n in window.buckets if n >= window.count), None)
    if bound is None or math.isinf(bound):
        return []
    return _signal("server.step_tokens_max", bound, "tokens", (start, end))


def _steps_per_s(series: _Series, start: float, end: float) -> list[Signal]:
    """Engine steps a second over the window: `iteration_tokens_total` counts one a step
    (summed over data-parallel engines), so the budget's throughput is budget × this."""
    counts = series.hist.get("server.step_tokens", {})
    times = sorted(t for t in counts if start - 1e-9 <= t <= end + 1e-9)
    if len(times) < 2 or times[-1] <= times[0]:
        return []
    grown = counts[times[-1]].get("count", 0.0) - counts[times[0]].get("count", 0.0)
    if grown <= 0:
        return []
    return _signal("server.steps_per_s", grown / (times[-1] - times[0]), "1/s", (start, end))


def _histogram(
    series: _Series,
    name: str,
    start: float,
    end: float,
    *,
    closing: bool = False,
    opening: bool = False,
) -> list[Signal]:
    window = _window(series, name, start, end, closing=closing, opening=opening)
    if window is None or window.count <= 0:
        return []
    span = (start, end)
    out = _signal(f"{name}_mean_s", window.mean, "s", span)
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        estimate = histogram_quantile(q, window.buckets)
        out += _signal(f"{name}_{label}_s", None if estimate is None else estimate.value, "s", span)
    return out


def _slope(points: _Points) -> float | None:
    if len(points) < 3:
        return None
    t = np.array([p[0] for p in points])
    v = np.array([p[1] for p in points])
    if float(np.ptp(t)) <= 0:
        return None
    return float(np.polyfit(t, v, 1)[0])


def _server(series: _Series, phases: Phases) -> list[Signal]:
    start, end = phases.load_start_ts, phases.load_end_ts
    out: list[Signal] = []
    # Up to the overload step. vLLM observes queue and prefill time when a request finishes,
    # so the measured level's last requests land in the scrape after its end: a slow level's
    # requests may all finish in that last interval (its first snapshot after the end counts).
    hist_end = phases.overload_start_ts or end
    for name in ("server.ttft", "server.itl"):
        out += _histogram(series, name, start, hist_end, opening=True)
    for name in ("server.queue_time", "server.prefill_time"):
        out += _histogram(series, name, start, min(hist_end, end), closing=True)
    out += _step_tokens_max(series, start, hist_end)
    out += _steps_per_s(series, start, hist_end)
    # The measured level's own queue: what its TTFT waited behind (the overload step after
    # it fills the seats by design, and must not explain the measured level's latency).
    measured = (start, end)
    out += _signal(
        "queue.measured_waiting_max",
        max((v for _, v in series.within("queue.waiting", *measured)), default=None),
        "requests",
        measured,
    )
    out += _signal(
        "queue.measured_running_max",
        max((v for _, v in series.within("queue.running", *measured)), default=None),
        "requests",
        measured,
    )
    # Memory and queues are read up to the end of the overload step, their peak.
    end = max(end, phases.overload_end_ts or end)
    span = (start, end)
    waiting = series.total("queue.waiting", start, end)
    kv = series.within("kv.usage", start, end)  # the fullest rank's is the peak
    out += _signal(
        "queue.waiting_max", max((v for _, v in waiting), default=None), "requests", span
    )
    running = series.total("queue.running", start, end)
    out += _signal(
        "queue.running_max", max((v for _, v in running), default=None), "requests", span
    )
    if phases.overload_start_ts is not None and phases.overload_end_ts is not None:
        over = (phases.overload_start_ts, phases.overload_end_ts)
        overload = series.total("queue.waiting", *over)
        out += _signal("queue.waiting_slope", _slope(overload), "requests/s", over)
    out += _signal("kv.usage_max", max((v for _, v in kv), default=None), "fraction", span)
    out += _signal(
        "kv.usage_mean", float(np.mean([v for _, v in kv])) if kv else None, "fraction", span
    )
    out += _signal("preemptions.total", _increase(series, "preemptions", start, end), "1", span)
    return out


def _drain(series: _Series, phases: Phases) -> list[Signal]:
    if phases.drain_end_ts is None:
        return []
    begin = phases.overload_end_ts or phases.load_end_ts
    after = series.within("kv.usage", begin, phases.drain_end_ts)
    running = series.total("queue.running", begin, phases.drain_end_ts)
    if not after or (running and running[-1][1] > 0):
        return []  # still busy at the end of the drain: no idle reading
    span = (begin, phases.drain_end_ts)
    return _signal("kv.usage_after_drain", after[-1][1], "fraction", span)


def _ratios(series: _Series, phases: Phases) -> list[Signal]:
    start, end = phases.load_start_ts, phases.load_end_ts
    span = (start, end)
    out: list[Signal] = []
    # from the scrape before the window, as the server's TTFT: the prompts judged first (a
    # level's resends of the warm-up's prompts, its hits) are looked up within the first
    # scrape interval, and the client counts their reuse (`workload.prefix_reuse`)
    queries = _increase(series, "prefix_cache.queries", start, end, opening=True)
    hits = _increase(series, "prefix_cache.hits", start, end, opening=True)
    if queries and hits is not None:
        out += _fraction("prefix_cache.hit_rate", hits, queries, span)
    drafted = _increase(series, "spec.draft_tokens", start, end)
    accepted = _increase(series, "spec.accepted_tokens", start, end)
    drafts = _increase(series, "spec.drafts", start, end)
    if drafted and accepted is not None:
        out += _fraction("spec.acceptance_rate", accepted, drafted, span)
    if drafts and accepted is not None:
        out += _signal("spec.mean_accepted_tokens", accepted / drafts, "tokens", span)
    per_pos = {
        int(pos): counter_increase([p for p in points if start - 1e-9 <= p[0] <= end + 1e-9])
        for pos, points in series.per_pos.items()
    }
    grown = [per_pos[k].increase for k in sorted(per_pos) if per_pos[k] is not None]  # type: ignore[union-attr]
    if len(grown) >= 2 and grown[0] > 0:
        out += _signal("spec.acceptance_decay", grown[-1] / grown[0], "fraction", span)
    restarts = series.points.get("server.restart", [])
    out += _signal("server.restarts", float(len(restarts)), "1", span)
    return out


def _fraction(name: str, part: float, whole: float, span: tuple[float, float]) -> list[Signal]:
    """`part / whole`; above 1 (more hits than lookups) it cannot be true: its artefact."""
    value = part / whole
    if value <= 1 + 1e-9:
        return _signal(name, value, "fraction", span)
    source = f"{name} reads {part:g} / {whole:g} (counters' growth over the load)"
    kind = artefact_name(FRACTION_ABOVE_ONE, name)
    return [Signal(name=kind, value=value, unit="fraction", source=source, window=span)]


def _artefacts(series: _Series) -> list[Signal]:
    """One signal per kind of impossible value and metric: the worst reading, and how many."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in series.artefacts:
        if s.labels.get("kind") in ARTEFACT_KINDS:  # a kind this build knows
            groups[artefact_name(s.labels["kind"], s.labels.get("metric", ""))].append(s)
    out = []
    for name, found in groups.items():
        worst = max(found, key=lambda s: abs(s.value))
        more = len({s.labels.get("raw") for s in found}) - 1
        source = f"{worst.labels.get('raw', '')} reads {worst.labels.get('said', '')}"
        source += f" (and {more} more series)" if more else ""
        kind, metric = split_artefact(name) or ("", "")
        unit = artefact_unit(kind, VOCABULARY[metric].unit if metric in VOCABULARY else "1")
        times = [s.t for s in found]
        out.append(Signal(name, worst.value, unit, source, (min(times), max(times))))
    return out


def _mean(points: _Points) -> float | None:
    return float(np.mean([v for _, v in points])) if points else None


def _gpu(series: _Series, phases: Phases) -> list[Signal]:
    start, end = phases.load_start_ts, phases.load_end_ts
    span = (start, end)
    util = series.within("gpu.util", start, end)
    if not util:
        return []
    out = _signal("gpu.util_mean", _mean(util), "fraction", span)
    sm = series.within("gpu.sm_active", start, end)
    out += _signal("gpu.prof_fields_present", 1.0 if sm else 0.0, "bool", span)
    for name in ("sm_active", "tensor_active", "dram_active"):
        out += _signal(
            f"gpu.{name}_mean", _mean(series.within(f"gpu.{name}", start, end)), "fraction", span
        )
    pcie = series.within("gpu.pcie_tx_bytes", start, end)
    out += _signal("gpu.pcie_bytes_per_s", _mean(pcie), "bytes/s", span)
    xid = series.within("gpu.xid_errors", start, end)
    out += _signal("gpu.xid_errors", max((v for _, v in xid), default=None), "1", span)
    used = _mean(series.within("gpu.fb_used_bytes", start, end))
    free = _mean(series.within("gpu.fb_free_bytes", start, end))
    if used is not None and free is not None and used + free > 0:
        out += _signal("gpu.fb_used_fraction", used / (used + free), "fraction", span)
    return out


def _role(labels: dict[str, str]) -> str:
    """What a server's thread does (`engines.host_role`): engine, worker or frontend."""
    return host_role(labels.get("thread", ""), child=labels.get("process") == "child")


def _role_cores(series: _Series, role: str, span: tuple[float, float]) -> float | None:
    """A role's threads' CPU together (its processes'), in cores, averaged over the load:
    the sampler's sum over every thread (`proc.cpu_role`), else the threads it listed."""
    summed = series.series.get("proc.cpu_role", {}).get((("role", role),), [])
    inside = [v for t, v in summed if span[0] <= t <= span[1]]
    if inside:
        return float(np.mean(inside))
    sums: dict[float, float] = defaultdict(float)
    for (found, _key), points in series.threads.items():
        if found == role:
            for t, v in points:
                if span[0] <= t <= span[1]:
                    sums[t] += v
    return float(np.mean(list(sums.values()))) if sums else None


def _token_rate(series: _Series, span: tuple[float, float]) -> float | None:
    """Output tokens the server generated (and streamed) per second over the load."""
    times = [t for t, _ in series.within("tokens.generation", *span)]
    grown = _increase(series, "tokens.generation", *span)
    if grown is None or len(times) < 2 or max(times) <= min(times):
        return None
    return grown / (max(times) - min(times))


def _threads(series: _Series, phases: Phases) -> list[Signal]:
    """The busiest engine and front-end threads, each role's CPU, and the API server's CPU
    per streamed token, over the load.

    With no engine thread to tell them apart (llama.cpp runs HTTP, scheduling and compute
    in one process of like-named threads; vLLM V0), no thread is called the front end.
    """
    span = (phases.load_start_ts, phases.load_end_ts)
    busiest: dict[str, list[float]] = defaultdict(list)
    for (role, _key), points in series.threads.items():
        inside = [v for t, v in points if span[0] <= t <= span[1]]
        if inside:
            busiest[role].append(float(np.median(inside)))
    engine = max(busiest["engine"], default=None)
    if engine is None:
        return []
    frontend = max(busiest["frontend"], default=None)
    out = _signal("proc.engine_thread_cpu", engine, "fraction", span)
    out += _signal("proc.frontend_thread_cpu", frontend, "fraction", span)
    out += _signal("proc.engine_apart", float(series.engine_apart), "bool", span)
    out += _signal("proc.engine_cpu", _role_cores(series, "engine", span), "cores", span)
    api_server = _role_cores(series, "frontend", span)
    out += _signal("proc.frontend_cpu", api_server, "cores", span)
    rate = _token_rate(series, span)
    if api_server is not None and rate:
        out += _signal("proc.frontend_cpu_per_token_s", api_server / rate, "s/token", span)
    return out


def _host(series: _Series, phases: Phases) -> list[Signal]:
    """The host's CPU contention over the load, the server's share of it waiting for a CPU."""
    start, end = phases.load_start_ts, phases.load_end_ts
    span = (start, end)
    cpu = _mean(series.within("host.cpu", start, end))
    if cpu is None:
        return []
    local = max((v for _, v in series.within("host.server_local", start, end)), default=None)
    cores = _mean(series.within("host.cores", start, end))
    queue = _mean(series.within("host.run_queue", start, end))
    wait = _mean(series.within("proc.cpu_wait", start, end))
    used = _mean(series.within("proc.cpu", start, end))
    out = _signal("host.cpu_mean", cpu, "fraction", span)
    out += _signal("host.server_local", local, "bool", span)
    out += _signal("host.cores", cores, "cores", span)
    if cores and queue is not None:
        out += _signal("host.run_queue_per_core", queue / cores, "threads/core", span)
    if wait is not None and used is not None and wait + used > 0:
        out += _signal("proc.cpu_wait_share", wait / (wait + used), "fraction", span)
    if cores and used is not None:
        # CPU that is not the server's: the load client and any other process on the host
        other = max(0.0, cpu * cores - used)
        out += _signal("host.other_cpu_share", other / cores, "fraction", span)
    client = _mean(series.within("host.client_cpu", start, end))
    return out + _signal("host.client_cpu_cores", client, "cores", span)


def metric_signals(samples: Sequence[Sample], phases: Phases) -> list[Signal]:
    series = _Series(samples)
    end = max(phases.load_end_ts, phases.overload_end_ts or phases.load_end_ts)
    return [
        *_server(series, phases),
        *rank_signals(samples, phases.load_start_ts, end, prefix_end=phases.load_end_ts),
        *disagg_signals(samples, phases.load_start_ts, end),
        *offload_signals(samples, phases.load_start_ts, end),
        *_drain(series, phases),
        *_ratios(series, phases),
        *_gpu(series, phases),
        *_threads(series, phases),
        *_host(series, phases),
        *_artefacts(series),
        *parallel_signals(samples, phases.load_start_ts, phases.load_end_ts),
    ]
