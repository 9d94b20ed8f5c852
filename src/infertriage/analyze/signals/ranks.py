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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from infertriage.schemas import Sample, Signal

__all__ = ["RANK_FIGURES", "rank_signals"]

# vocabulary name → the figure's name in the rank signals, and its unit
RANK_FIGURES: Mapping[str, tuple[str, str]] = {
    "queue.running": ("running", "requests"),
    "queue.waiting": ("waiting", "requests"),
    "kv.usage": ("kv_usage", "fraction"),
}
_EPS = 1e-9  # a window's edges, as the other metric signals read them

_ByRank = dict[str, dict[str, dict[float, float]]]  # figure → rank → time → value


def _per_rank(samples: Iterable[Sample], start: float, end: float) -> _ByRank:
    """Each rank's value of each figure at each time (its series at one time added up)."""
    found: _ByRank = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for s in samples:
        figure = RANK_FIGURES.get(s.name)
        if figure is not None and start - _EPS <= s.t <= end + _EPS:
            found[figure[0]][s.labels.get("dp_rank", "")][s.t] += s.value
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


def rank_signals(samples: Iterable[Sample], start: float, end: float) -> list[Signal]:
    """See the module docstring; no signal when no running or waiting count was scraped."""
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
