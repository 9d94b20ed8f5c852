"""analyze.signals, level 1: a server's data-parallel ranks, kept apart.

Takes the normalised samples of a scrape or a run, whose engine series carry
a `dp_rank` label (collect copies it from vLLM V1's `engine` and SGLang's
`dp_rank`), and a window; gives the number of ranks (`dp.ranks`: 1 for a
server that names none), and with two or more: each rank's running, waiting
and KV usage (`dp.running_by_rank.<rank>`, `dp.waiting_by_rank.<rank>`,
`dp.kv_usage_by_rank.<rank>`: its mean over the window), how uneven they are
(`dp.imbalance`: the busiest rank's running + waiting over the mean rank's),
the busiest and the idlest rank with their figures (`dp.busiest_*`,
`dp.idlest_*`), and the most one rank ran at once (`dp.rank_running_max`).
Summed, one rank queueing while the others idle reads as one healthy total.

Each rank's prefix-cache hit rate (`dp.prefix_hit_rate_by_rank.<rank>`: its hits over
its lookups, grown over the window from the scrape before it, or since the server started
where one scrape holds one point; SGLang's own `cache_hit_rate` gauge where no counters are), with
the lowest, the highest and their spread (`dp.prefix_hit_rate_min`, `_max`,
`_spread`), where two or more ranks report one.

A prefill/decode deployment (series labelled `pd_role`, as collect names it) is read
within each role: decode instances against decode instances, never a prefill
instance against a decode one, whose loads differ by design. Each role's ranks are
its instances' engines (told apart by `instance` or `pod` where several instances
share a rank number); the `dp.*` figures are the role's whose ranks are most uneven
(a role whose busiest rank carries a whole request or more above its mean rank before
one whose does not: a light load's ratio, one prompt on one of three prefill instances,
is chance and must not hide the other role's real skew; then the larger ratio), and
`dp.role` says which (1 prefill, 2 decode). The prefix-cache figures are the
prefill role's there: a prompt's prefix is looked up where it is prefilled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from infertriage.analyze.signals.prom import counter_increase
from infertriage.schemas import Sample, Signal

__all__ = ["RANK_FIGURES", "ROLE_NUMBERS", "rank_signals"]

# vocabulary name → the figure's name in the rank signals, and its unit
RANK_FIGURES: Mapping[str, tuple[str, str]] = {
    "queue.running": ("running", "requests"),
    "queue.waiting": ("waiting", "requests"),
    "kv.usage": ("kv_usage", "fraction"),
}
_EPS = 1e-9  # a window's edges, as the other metric signals read them
ROLE_NUMBERS: Mapping[str, float] = {"prefill": 1.0, "decode": 2.0}  # `dp.role`
_PREFIX = ("prefix_cache.hits", "prefix_cache.queries", "prefix_cache.hit_rate")

_ByRank = dict[str, dict[str, dict[float, float]]]
_Series = tuple[tuple[str, str], ...]  # a series' labels  # figure → rank → time → value


def _instance(labels: Mapping[str, str]) -> str:
    return labels.get("instance") or labels.get("pod") or ""


def _rank_names(samples: list[Sample]) -> dict[tuple[str, str], str]:
    """(instance, dp_rank) → the rank's name: its `dp_rank`, or with several instances its
    place among them all (`0`, `1`, …), so two instances' engine 0 stay two ranks."""
    keys = sorted({(_instance(s.labels), s.labels.get("dp_rank", "")) for s in samples})
    if len({instance for instance, _ in keys}) < 2:
        return {key: key[1] for key in keys}
    return {key: str(i) for i, key in enumerate(keys)}


def _per_rank(samples: list[Sample], start: float, end: float) -> _ByRank:
    """Each rank's value of each figure at each time (its series at one time added up)."""
    names = _rank_names(samples)
    found: _ByRank = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for s in samples:
        figure = RANK_FIGURES.get(s.name)
        if figure is not None and start - _EPS <= s.t <= end + _EPS:
            rank = names[(_instance(s.labels), s.labels.get("dp_rank", ""))]
            found[figure[0]][rank][s.t] += s.value
    return found


def _order(rank: str) -> tuple[bool, int, str]:
    return (not rank.isdigit(), int(rank) if rank.isdigit() else 0, rank)


def _means(by_rank: _ByRank, ranks: list[str]) -> dict[str, dict[str, float]]:
    """rank → figure → its mean over the window (figures a rank lacks are left out)."""
    out: dict[str, dict[str, float]] = {rank: {} for rank in ranks}
    for figure, per_rank in by_rank.items():
        for rank, points in per_rank.items():
            if rank in out and points:
                out[rank][figure] = sum(points.values()) / len(points)
    return out


def _load(figures: Mapping[str, float]) -> float:
    return figures.get("running", 0.0) + figures.get("waiting", 0.0)


def _signal(name: str, value: float, unit: str, span: tuple[float, float]) -> Signal:
    return Signal(name=name, value=float(value), unit=unit, source="metrics", window=span)


def _figures(prefix: str, figures: Mapping[str, float], span: tuple[float, float]) -> list[Signal]:
    """`<prefix><figure>` for each figure: `dp.busiest_running`, `dp.running_by_rank.0`…"""
    units = dict(RANK_FIGURES.values())
    return [
        _signal(prefix.replace("{figure}", figure), value, units[figure], span)
        for figure, value in figures.items()
    ]


def _rank_number(rank: str, ranks: list[str]) -> float:
    """The rank as its label says it (vLLM's engine index), else its place among them."""
    return float(rank) if rank.isdigit() else float(ranks.index(rank))


def _group(samples: list[Sample], start: float, end: float) -> list[Signal]:
    """One server's (or one role's) ranks: see the module docstring."""
    by_rank = _per_rank(samples, start, end)
    ranks = sorted({r for f in ("running", "waiting") for r in by_rank.get(f, {})}, key=_order)
    span = (start, end)
    if len(ranks) < 2:
        return [_signal("dp.ranks", 1.0, "1", span)] if ranks else []
    means = _means(by_rank, ranks)
    loads = {rank: _load(means[rank]) for rank in ranks}
    mean_load = sum(loads.values()) / len(loads)
    busiest = max(ranks, key=lambda r: loads[r])
    idlest = min((r for r in ranks if r != busiest), key=lambda r: loads[r])
    running = by_rank.get("running", {}).values()
    out = [
        _signal("dp.ranks", float(len(ranks)), "1", span),
        _signal("dp.imbalance", loads[busiest] / mean_load if mean_load > 0 else 1.0, "1", span),
        _signal(
            "dp.rank_running_max",
            max((max(p.values()) for p in running), default=0.0),
            "requests",
            span,
        ),
        _signal("dp.busiest_rank", _rank_number(busiest, ranks), "1", span),
        _signal("dp.idlest_rank", _rank_number(idlest, ranks), "1", span),
        *_figures("dp.busiest_{figure}", means[busiest], span),
        *_figures("dp.idlest_{figure}", means[idlest], span),
    ]
    for rank in ranks:
        out += _figures(f"dp.{{figure}}_by_rank.{rank}", means[rank], span)
    return out


def _grown(points: list[tuple[float, float]]) -> float:
    """A counter's growth over the window's points; one point: its value (since the start)."""
    grown = counter_increase(sorted(points))
    if grown is not None:
        return grown.increase
    return points[0][1] if points else 0.0


def _opened(points: list[tuple[float, float]], start: float) -> list[tuple[float, float]]:
    """A counter's points from the window's start, and the last one before it: lookups in the
    window's first scrape interval count (the server-wide hit rate's window, `metrics`).
    None when no point lies in the window: a rank that stopped before it (died, or its
    scrapes lost) says nothing of the window, not its lifetime."""
    ordered = sorted(points)
    inside = [p for p in ordered if p[0] >= start - _EPS]
    if not inside:
        return []
    before = [p for p in ordered if p[0] < start - _EPS]
    return before[-1:] + inside


def _hit_rates(
    samples: list[Sample], start: float, end: float
) -> tuple[dict[str, float], float | None]:
    """rank → its prefix-cache hit rate over the window (see the module docstring), and the
    server's: all ranks' hits over all their lookups (their mean where only gauges are)."""
    names = _rank_names([s for s in samples if s.name in _PREFIX])
    points: dict[str, dict[str, dict[_Series, list[tuple[float, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for s in samples:
        if s.name in _PREFIX and s.t <= end + _EPS:
            rank = names[(_instance(s.labels), s.labels.get("dp_rank", ""))]
            series = tuple(sorted(s.labels.items()))
            points[rank][s.name][series].append((s.t, s.value))
    rates: dict[str, float] = {}
    all_hits = all_queries = 0.0
    for rank, found in points.items():
        queries = sum(
            _grown(_opened(p, start)) for p in found.get("prefix_cache.queries", {}).values()
        )
        hits = sum(_grown(_opened(p, start)) for p in found.get("prefix_cache.hits", {}).values())
        gauges = [
            v
            for p in found.get("prefix_cache.hit_rate", {}).values()
            for t, v in p
            if t >= start - _EPS
        ]
        if queries > 0 and 0.0 <= hits <= queries:
            rates[rank] = hits / queries
            all_hits, all_queries = all_hits + hits, all_queries + queries
        elif gauges and "prefix_cache.queries" not in found:
            rates[rank] = sum(gauges) / len(gauges)
    if all_queries > 0:
        return rates, all_hits / all_queries
    return rates, (sum(rates.values()) / len(rates) if rates else None)


def _prefix_signals(samples: list[Sample], start: float, end: float) -> list[Signal]:
    rates, server = _hit_rates(samples, start, end)
    if len(rates) < 2 or server is None:
        return []
    span = (start, end)
    low, high = min(rates.values()), max(rates.values())
    out = [
        _signal("dp.prefix_hit_rate", server, "fraction", span),
        _signal("dp.prefix_hit_rate_min", low, "fraction", span),
        _signal("dp.prefix_hit_rate_max", high, "fraction", span),
        _signal("dp.prefix_hit_rate_spread", high - low, "fraction", span),
    ]
    for rank in sorted(rates, key=_order):
        out.append(_signal(f"dp.prefix_hit_rate_by_rank.{rank}", rates[rank], "fraction", span))
    return out


def _value(signals: list[Signal], name: str) -> float:
    return next((s.value for s in signals if s.name == name), 0.0)


def _unevenness(signals: list[Signal]) -> tuple[bool, float]:
    """How uneven a role's ranks are (see the module docstring): whether the busiest rank
    carries a whole request or more above the mean rank, then the ratio."""
    busy = _value(signals, "dp.busiest_running") + _value(signals, "dp.busiest_waiting")
    ratio = _value(signals, "dp.imbalance")
    excess = busy - busy / ratio if ratio > 0 else 0.0
    return excess >= 1.0, ratio


def rank_signals(
    samples: Iterable[Sample], start: float, end: float, prefix_end: float | None = None
) -> list[Signal]:
    """See the module docstring; no signal when no running or waiting count was scraped. The
    prefix-cache hit rates end at `prefix_end` where given: the window the server-wide hit
    rate and the client's reuse are counted over (the measured level's, not the overload's)."""
    given = list(samples)
    hits_end = end if prefix_end is None else prefix_end
    roles: dict[str, list[Sample]] = defaultdict(list)
    for s in given:
        named = s.labels.get("pd_role", "")
        if named in ROLE_NUMBERS:
            roles[named].append(s)
    if not roles:
        return _group(given, start, end) + _prefix_signals(given, start, hits_end)
    found = {role: _group(group, start, end) for role, group in roles.items()}
    split = [role for role, signals in found.items() if _value(signals, "dp.ranks") >= 2]
    prefix = _prefix_signals(roles.get("prefill", []), start, hits_end)
    if not split:
        one = [_signal("dp.ranks", 1.0, "1", (start, end))] if any(found.values()) else []
        return one + prefix
    worst = max(sorted(split), key=lambda role: _unevenness(found[role]))
    role = _signal("dp.role", ROLE_NUMBERS[worst], "1", (start, end))
    return [*found[worst], role, *prefix]
