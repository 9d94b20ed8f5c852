"""analyze.signals, level 1: a KV offload tier's figures over the load (issue 33).

Takes the normalised samples of a scrape or a run and a window; gives, from the counters'
growth over it: the tokens asked of a KV connector and those it gave
(`offload.external_queries`, `offload.external_hits`, their `offload.hit_share`), the
prompt tokens loaded and prefilled (`offload.loaded_tokens`, `offload.computed_tokens`),
the bytes and seconds of loads and stores (`offload.load_bytes`, `offload.store_bytes`,
`offload.load_seconds`, `offload.store_seconds`), the share of stored bytes that came back
(`offload.returned_share`), a load's seconds per token and the deployment's prefill seconds
per computed token, load time taken out (`offload.load_s_per_token`,
`offload.recompute_s_per_token`), the host tier's fullest moment where the engine says its
size (`offload.host_usage_max`, SGLang HiCache), and `offload.tier` (1) when any figure
says a host tier exists: stores, a host-tier gauge, LMCache's usage. A connector that only
moves KV between instances (prefill/decode) asks and hits, but stores nothing here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from infertriage.analyze.signals.prom import counter_increase
from infertriage.schemas import Sample, Signal

__all__ = ["offload_signals"]

_EPS = 1e-9
_COUNTERS = {
    "prefix_cache.external_queries": ("offload.external_queries", "tokens"),
    "prefix_cache.external_hits": ("offload.external_hits", "tokens"),
    "tokens.prompt_external": ("offload.loaded_tokens", "tokens"),
    "tokens.prompt_computed": ("offload.computed_tokens", "tokens"),
    "kv.offload_load_bytes": ("offload.load_bytes", "bytes"),
    "kv.offload_store_bytes": ("offload.store_bytes", "bytes"),
    "kv.offload_load_seconds": ("offload.load_seconds", "s"),
    "kv.offload_store_seconds": ("offload.store_seconds", "s"),
}
_PREFILL = "server.prefill_time"  # its `stat=sum` series: prefill seconds summed
_GAUGES = ("kv.offload_used_tokens", "kv.offload_total_tokens", "kv.offload_used_bytes")

_Points = list[tuple[float, float]]


def _series(samples: Iterable[Sample], start: float, end: float) -> dict[str, dict[str, _Points]]:
    """name → one series per label set (a rank, a process) → its points in the window."""
    found: dict[str, dict[str, _Points]] = defaultdict(lambda: defaultdict(list))
    wanted = {*_COUNTERS, *_GAUGES, _PREFILL}
    for s in samples:
        if s.name not in wanted or not start - _EPS <= s.t <= end + _EPS:
            continue
        if s.name == _PREFILL and s.labels.get("stat") != "sum":
            continue
        key = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        found[s.name][key].append((s.t, s.value))
    return found


def _grown(series: dict[str, _Points]) -> float | None:
    grown = [counter_increase(sorted(points)) for points in series.values()]
    found = [g.increase for g in grown if g is not None]
    return sum(found) if found else None


def _host_usage_max(series: dict[str, dict[str, _Points]]) -> float | None:
    """The fullest the host tier was: used / total tokens at each scrape, summed over ranks."""
    used: dict[float, float] = defaultdict(float)
    total: dict[float, float] = defaultdict(float)
    for points in series.get("kv.offload_used_tokens", {}).values():
        for t, v in points:
            used[t] += v
    for points in series.get("kv.offload_total_tokens", {}).values():
        for t, v in points:
            total[t] += v
    shares = [used[t] / total[t] for t in used if total.get(t, 0.0) > 0]
    return max(shares) if shares else None


def offload_signals(samples: Iterable[Sample], start: float, end: float) -> list[Signal]:
    """See the module docstring; nothing when the server exports none of these figures."""
    series = _series(samples, start, end)
    span = (start, end)
    values: dict[str, tuple[float, str]] = {}
    for name, (signal, unit) in _COUNTERS.items():
        grown = _grown(series.get(name, {}))
        if grown is not None:
            values[signal] = (grown, unit)

    def got(name: str) -> float:
        return values.get(name, (0.0, ""))[0]

    queries, stored = got("offload.external_queries"), got("offload.store_bytes")
    loaded, computed = got("offload.loaded_tokens"), got("offload.computed_tokens")
    if queries > 0:
        values["offload.hit_share"] = (got("offload.external_hits") / queries, "fraction")
    if stored > 0:
        values["offload.returned_share"] = (got("offload.load_bytes") / stored, "fraction")
    if loaded > 0 and got("offload.load_seconds") > 0:
        values["offload.load_s_per_token"] = (got("offload.load_seconds") / loaded, "s/token")
    prefill = _grown(series.get(_PREFILL, {}))
    if prefill is not None and computed > 0:
        compute_s = max(0.0, prefill - got("offload.load_seconds"))
        values["offload.recompute_s_per_token"] = (compute_s / computed, "s/token")
    usage = _host_usage_max(series)
    if usage is not None:
        values["offload.host_usage_max"] = (usage, "fraction")
    if stored > 0 or usage is not None or "kv.offload_used_bytes" in series:
        values["offload.tier"] = (1.0, "bool")
    return [
        Signal(name=name, value=float(value), unit=unit, source="metrics", window=span)
        for name, (value, unit) in values.items()
    ]
