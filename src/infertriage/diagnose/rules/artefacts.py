"""diagnose, level 3: values that cannot be true — the metric is wrong here, not the server.

One rule, `evidence.metric_artefact`, over the artefact signals of
`schemas.artefacts`: any signal named `<kind>` or `<kind>:<metric>` whose kind
is one of

- `artefact.negative_gauge`: a gauge (requests, tokens, bytes, a usage) below zero;
- `artefact.negative_counter`: a counter below zero;
- `artefact.fraction_above_one`: a fraction above 1 — a KV-cache usage (vLLM's
  `kv_cache_usage_perc` is a fraction despite its name), a prefix-cache hit rate or
  a draft acceptance rate;
- `artefact.histogram_count_mismatch`: a histogram's `_count` unlike its `+Inf` bucket;
- `artefact.histogram_not_cumulative`: a histogram bucket below the one before it;
- `artefact.duplicated_lines`: a server log's records written twice at the same moment
  (a logger with two handlers): counted once, never read as two engines or events;
- `artefact.copies_disagree`: one engine's gauge exported by several processes (`pid`)
  with different values (vLLM's `kv_cache_usage_perc` with `--api-server-count` > 1
  before its `mostrecent` fix): all but one copy are stale.

The signal's value is the impossible value (for the histogram kinds, the
observations it is off by); `<metric>`, a vocabulary name, gives the finding its
layer (memory for `kv.usage`, scheduling for `queue.waiting`); its `source` says
where it was read and what it said (`metrics: vllm:num_requests_waiting{…} reads
-3`, a log's line). A producer — the metrics adapters (`collect.adapters.screen`),
a server log's reader — sets the value itself aside, so no other rule reads it,
and emits the signal instead. The finding says which metric, which value, why it
cannot be true and what to measure instead; it is never a bottleneck and
explains nothing. It needs no signal, so it runs on every evidence, and its
silence says nothing of a layer.
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule
from infertriage.schemas import VOCABULARY, Finding, Layer, Signal, Thresholds
from infertriage.schemas.artefacts import (
    ARTEFACT_KINDS,
    COPIES_DISAGREE,
    DUPLICATED_LINES,
    FRACTION_ABOVE_ONE,
    HISTOGRAM_COUNT_MISMATCH,
    HISTOGRAM_NOT_CUMULATIVE,
    NEGATIVE_COUNTER,
    NEGATIVE_GAUGE,
    split_artefact,
)

__all__ = ["metric_artefact"]

_FALLBACK = Layer.SCHEDULING  # a metric outside the vocabulary; the queue gauges' layer
_SHOWN = 3  # artefacts named in the title; the rest are counted

# what to measure instead, by kind
_INSTEAD = {
    DUPLICATED_LINES: (
        "read each record once (the figures here already are); the engine's logging set-up "
        "adds a second handler — upgrade it or remove the extra handler, so counts and "
        "stalls read from the log are not doubled"
    ),
    COPIES_DISAGREE: (
        "read the gauge another way: the engine's own stats lines in its log (`infertriage "
        "logs FILE`), or a server with one API-server process; a gauge exported once per "
        'process (Prometheus multiprocess mode without `multiprocess_mode="mostrecent"`) '
        "holds the engine's value in one copy only: upgrade the engine"
    ),
    NEGATIVE_GAUGE: (
        "read the queue and KV figures another way: the engine's own stats lines in its log "
        "(`infertriage logs FILE`), or a second scrape (`infertriage metrics URL`); a gauge "
        "below zero is an exporter's fault (a decrement without its increment, or a gauge "
        "file a dead process left in `PROMETHEUS_MULTIPROC_DIR`: empty it at start)"
    ),
    NEGATIVE_COUNTER: (
        "take two scrapes a few seconds apart (`infertriage metrics URL --duration 30`) and "
        "read the counter's growth, not its value; report the exporter"
    ),
    FRACTION_ABOVE_ONE: (
        "measure the fraction another way: KV use from the engine's log (`GPU KV cache "
        "usage: X%`) or GPU memory from DCGM (`--dcgm-url`), a hit or acceptance rate from "
        "its counters' growth over a window (`infertriage metrics URL --duration 60`); check "
        "whether this build exports a percentage where it names a fraction"
    ),
    HISTOGRAM_COUNT_MISMATCH: (
        "read the latency from the client (`infertriage bench --url URL`) or from the "
        "histogram's growth between two scrapes; a scrape torn while the server wrote it, or "
        "a proxy merging two exporters, gives this: scrape the server itself again"
    ),
    HISTOGRAM_NOT_CUMULATIVE: (
        "read the latency from the client (`infertriage bench --url URL`); buckets that "
        "shrink come from a proxy or a hand edit that reordered or merged them: scrape the "
        "server itself"
    ),
}


def _artefacts(ev: Evidence) -> list[tuple[str, str, Signal]]:
    """(kind, metric, signal) of every artefact signal, in the kinds' order, then by name."""
    order = list(ARTEFACT_KINDS)
    found = []
    for name, signal in ev.signals.items():
        split = split_artefact(name)
        if split is not None:
            found.append((split[0], split[1], signal))
    return sorted(found, key=lambda a: (order.index(a[0]), a[2].name))


def _layer(metric: str) -> Layer:
    return VOCABULARY[metric].layer if metric in VOCABULARY else _FALLBACK


def _why(kind: str, metric: str, signal: Signal) -> str:
    """`kv.usage 97 (vllm:kv_cache_usage_perc{…} reads 97): a fraction … cannot exceed 1`."""
    if signal.unit == "fraction":
        value = f"{signal.value:g} (that is {signal.value:.0%})"
    else:
        value = f"{signal.value:g}" + ("" if signal.unit in ("1", "") else f" {signal.unit}")
    return f"{metric or kind} {value} ({signal.source}): {ARTEFACT_KINDS[kind]}"


@rule("evidence.metric_artefact", _FALLBACK, ())
def metric_artefact(ev: Evidence, t: Thresholds) -> Finding | None:
    """Values that cannot be true, set aside: the metric is wrong here (see the docstring)."""
    found = _artefacts(ev)
    if not found:
        return None
    more = f"; and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    shown = "; ".join(s.source for _, _, s in found[:_SHOWN])
    return make_finding(
        "evidence.metric_artefact",
        _layer(found[0][1]),
        bottleneck=False,
        severity=1.0,  # the value is certainly wrong
        explains=0.0,  # and says nothing of where the time goes
        title=f"the metric is wrong here, not the server: {shown}{more}",
        evidence=ev,
        used=tuple((s.name, None) for _, _, s in found),
        explanation=(
            "No server state produces these values: "
            + "; ".join(_why(*artefact) for artefact in found)
            + ". They were set aside: no other finding read them, and a rule that needed "
            "them says so among the missing evidence."
        ),
        next_steps=(
            *dict.fromkeys(_INSTEAD[k] for k, _, _ in found),
            "scrape again to see whether it persists: a value wrong once is a torn or edited "
            "scrape, one wrong every time is the exporter's bug",
        ),
    )
