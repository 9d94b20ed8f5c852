"""twin, level 2: the prompt-source and KV-offload families of the twin's `/metrics`.

Takes a `SchedulerStats` snapshot, the label names and values of the twin's other families;
gives Prometheus families named, typed and labelled as vLLM serves them:

- always (vLLM `PrometheusStatLogger`, `vllm/v1/metrics/loggers.py`, with `PromptTokenStats`
  of `vllm/v1/metrics/stats.py`): `vllm:prompt_tokens_by_source{source=local_compute|
  local_cache_hit|external_kv_transfer}`, `vllm:prompt_tokens_cached`,
  `vllm:prompt_tokens_recomputed`, and the KV connector's prefix-cache counters
  `vllm:external_prefix_cache_queries` / `vllm:external_prefix_cache_hits` (0 without one);
- with an offload tier (vLLM's `OffloadPromMetrics`,
  `vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py`):
  `vllm:kv_offload_total_bytes{transfer_type=CPU_to_GPU|GPU_to_CPU}` and
  `vllm:kv_offload_total_time{transfer_type=…}` (seconds).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric

from infertriage.twin.scheduler import SchedulerStats

__all__ = ["offload_families"]


def _counter(
    name: str, doc: str, labels: Sequence[str], rows: Sequence[tuple[Sequence[str], float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=list(labels))
    for values, value in rows:
        family.add_metric(list(values), value)
    return family


def offload_families(
    s: SchedulerStats, labels: Sequence[str], values: Sequence[str]
) -> Iterator[Metric]:
    """See the module docstring."""
    src = s.prompt_sources
    by_source = (
        ("local_compute", src.local_compute),
        ("local_cache_hit", src.local_cache_hit),
        ("external_kv_transfer", src.external_kv_transfer),
    )
    yield _counter(
        "vllm:prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        [*labels, "source"],
        [([*values, source], count) for source, count in by_source],
    )
    yield _counter(
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        labels,
        [(values, src.cached)],
    )
    yield _counter(
        "vllm:prompt_tokens_recomputed",
        "Number of cached tokens recomputed for forward pass.",
        labels,
        [(values, src.recomputed)],
    )
    tier = s.offload
    yield _counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in "
        "terms of number of queried tokens.",
        labels,
        [(values, tier.external_queries if tier else 0)],
    )
    yield _counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
        "of number of cached tokens.",
        labels,
        [(values, tier.external_hits if tier else 0)],
    )
    if tier is None:
        return
    directions = [*labels, "transfer_type"]
    yield _counter(
        "vllm:kv_offload_total_bytes",
        "Number of bytes offloaded by KV connector",
        directions,
        [([*values, "CPU_to_GPU"], tier.load_bytes), ([*values, "GPU_to_CPU"], tier.store_bytes)],
    )
    yield _counter(
        "vllm:kv_offload_total_time",
        "Total time measured by all KV offloading operations",
        directions,
        [([*values, "CPU_to_GPU"], tier.load_s), ([*values, "GPU_to_CPU"], tier.store_s)],
    )
