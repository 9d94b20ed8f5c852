"""collect, level 2: the `metrics` view's figures of a disaggregated or data-parallel server.

Takes the mapped scrapes of one view (`(t, Adapted)` pairs); gives the signals of
`analyze.signals.disagg` (each prefill/decode role's instances, queues and KV usage, the
KV transfers) and the per-rank prefix-cache figures of `analyze.signals.ranks`, over the
scrapes' window (one scrape: as they stand since the server started), so `infertriage
metrics` shows a P/D deployment role by role instead of one sum. Nothing for a server
whose series name no role and no two ranks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infertriage.analyze.signals.disagg import disagg_signals
from infertriage.analyze.signals.ranks import rank_signals
from infertriage.collect.adapters import Adapted
from infertriage.schemas import Sample, Signal

__all__ = ["PD_PREFIXES", "role_signals"]

PD_PREFIXES = ("kv_transfer.", "pd.")  # the vocabulary's disaggregation names
_SHOWN_RANKS = ("dp.role", "dp.prefix_hit_rate")  # rank figures the view adds


def _samples(scrapes: Sequence[tuple[float, Adapted]]) -> list[Sample]:
    out: list[Sample] = []
    for t, adapted in scrapes:
        for scalar in adapted.scalars:
            if math.isfinite(scalar.value):
                out.append(Sample(t, scalar.name, scalar.value, dict(scalar.labels)))
        for histogram in adapted.histograms:
            labels = dict(histogram.labels)
            for le, count in histogram.buckets:
                le_text = "+Inf" if math.isinf(le) else repr(le)
                out.append(Sample(t, histogram.name, count, {**labels, "le": le_text}))
            for stat, value in (("sum", histogram.sum), ("count", histogram.count)):
                if math.isfinite(value):
                    out.append(Sample(t, histogram.name, value, {**labels, "stat": stat}))
    return out


def role_signals(scrapes: Sequence[tuple[float, Adapted]]) -> tuple[Signal, ...]:
    """See the module docstring."""
    if not scrapes:
        return ()
    samples = _samples(scrapes)
    start, end = min(t for t, _ in scrapes), max(t for t, _ in scrapes)
    pd = disagg_signals(samples, start, end)
    ranks = [s for s in rank_signals(samples, start, end) if s.name.startswith(_SHOWN_RANKS)]
    return (*pd, *ranks)
