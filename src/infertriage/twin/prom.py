"""twin, level 2: the twin's `/metrics` in vLLM V1's names, types, labels and buckets.

Takes the engine's `SchedulerStats` snapshots (gauges now, counters
cumulative) and each finished request's `RequestTimings`; gives Prometheus
text from a registry of its own (never the process-global one). Bucket
boundaries are vLLM's (`vllm/v1/metrics/loggers.py`); the labels are
`model_name` and `engine`, plus `finished_reason` and `position` where vLLM
has them. The deprecated V0-era aliases vLLM still serves
(`gpu_cache_usage_perc`, `gpu_prefix_cache_*`) are served too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from infertriage.twin.prom_offload import offload_families
from infertriage.twin.request import FinishReason, RequestTimings
from infertriage.twin.scheduler import SchedulerStats

__all__ = [
    "ITL_BUCKETS",
    "REQUEST_LATENCY_BUCKETS",
    "TTFT_BUCKETS",
    "CacheConfigInfo",
    "VllmMetrics",
    "build_1_2_5_buckets",
]

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# The labels of the vLLM capture in shared/fixtures (one engine per server); vLLM with
# data parallelism adds `engine`.
_LABELS = ("model_name",)


def build_1_2_5_buckets(max_value: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, … up to `max_value`, as vLLM builds its token-count buckets."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(buckets)
            buckets.append(float(value))
        exponent += 1


@dataclass(frozen=True, slots=True)
class CacheConfigInfo:
    """What `vllm:cache_config_info` reports (string labels, value 1)."""

    block_size: int
    num_gpu_blocks: int
    gpu_memory_utilization: float
    enable_prefix_caching: bool
    cache_dtype: str = "auto"

    def labels(self) -> dict[str, str]:
        return {
            "block_size": str(self.block_size),
            "cache_dtype": self.cache_dtype,
            "cpu_kvcache_space_bytes": "0",
            "enable_prefix_caching": str(self.enable_prefix_caching),
            "gpu_memory_utilization": str(self.gpu_memory_utilization),
            "num_cpu_blocks": "0",
            "num_gpu_blocks": str(self.num_gpu_blocks),
            "num_gpu_blocks_override": "None",
            "sliding_window": "None",
            "swap_space_bytes": "0",
        }


class _SnapshotCollector(Collector):
    """Gauges and counters read from the latest `SchedulerStats` at scrape time."""

    def __init__(
        self, model_name: str, snapshot: Callable[[], SchedulerStats], info: CacheConfigInfo
    ) -> None:
        self._values = [model_name]
        self._snapshot = snapshot
        self._info = info

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=_LABELS)
        family.add_metric(self._values, value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=_LABELS)
        family.add_metric(self._values, value)
        return family

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=list(self._info.labels()),
        )
        info.add_metric(list(self._info.labels().values()), 1.0)
        yield info
        yield self._gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            s.num_running_reqs,
        )
        yield self._gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            s.num_waiting_reqs,
        )
        yield self._gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            s.kv_cache_usage,
        )
        yield self._gauge(
            "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use "
            "vllm:kv_cache_usage_perc instead.",
            s.kv_cache_usage,
        )
        yield from self._counters(s)

    def _counters(self, s: SchedulerStats) -> Iterator[Metric]:
        yield self._counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            s.prefix_cache_queries,
        )
        yield self._counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            s.prefix_cache_hits,
        )
        yield self._counter(
            "vllm:gpu_prefix_cache_queries",
            "GPU prefix cache queries. DEPRECATED: Use vllm:prefix_cache_queries instead.",
            s.prefix_cache_queries,
        )
        yield self._counter(
            "vllm:gpu_prefix_cache_hits",
            "GPU prefix cache hits. DEPRECATED: Use vllm:prefix_cache_hits instead.",
            s.prefix_cache_hits,
        )
        yield self._counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            s.num_preemptions,
        )
        yield self._counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", s.num_prompt_tokens
        )
        yield self._counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            s.num_generation_tokens,
        )
        spec = s.spec_decode
        if spec.num_drafts or spec.num_accepted_tokens_per_pos:
            yield self._counter(
                "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", spec.num_drafts
            )
            yield self._counter(
                "vllm:spec_decode_num_draft_tokens",
                "Number of draft tokens.",
                spec.num_draft_tokens,
            )
            yield self._counter(
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                spec.num_accepted_tokens,
            )
            per_pos = CounterMetricFamily(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                labels=[*_LABELS, "position"],
            )
            for position, count in enumerate(spec.num_accepted_tokens_per_pos):
                per_pos.add_metric([*self._values, str(position)], count)
            yield per_pos
        yield from offload_families(s, _LABELS, self._values)  # issue 33: the offload tier


class VllmMetrics:
    """One twin's metrics registry; `observe_finished` per request, `render` per scrape."""

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        info: CacheConfigInfo,
        snapshot: Callable[[], SchedulerStats],
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # vLLM serves no _created
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_SnapshotCollector(model_name, snapshot, info))
        values = (model_name,)
        token_buckets = build_1_2_5_buckets(max_model_len)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(
                name, doc, labelnames=_LABELS, buckets=buckets, registry=self.registry
            ).labels(*values)

        self._ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self._itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self._tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self._e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self._queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self._inference = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self._prefill = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self._decode = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self._prompt_len = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self._output_len = histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            token_buckets,
        )
        self._max_tokens = histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            token_buckets,
        )
        self._iteration = histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            tuple(float(b) for b in ITERATION_TOKEN_BUCKETS),
        )
        self._success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labelnames=[*_LABELS, "finished_reason"],
            registry=self.registry,
        )
        for reason in ("stop", "length", "abort"):
            self._success.labels(*values, reason)
        self._values = values

    def observe_first_token(self, ttft_s: float) -> None:
        """At the step that sampled a request's first token, as vLLM's iteration stats do."""
        self._ttft.observe(ttft_s)

    def observe_token_gap(self, gap_s: float) -> None:
        self._itl.observe(gap_s)

    def observe_step(self, num_scheduled_tokens: int) -> None:
        if num_scheduled_tokens:
            self._iteration.observe(num_scheduled_tokens)

    def observe_finished(self, timings: RequestTimings, max_tokens: int) -> None:
        """Record one finished request as vLLM's `PrometheusStatLogger.record` does.

        TTFT and inter-token gaps are recorded when they happen, not here: observing them at
        the finish would hide the requests still waiting when a window closes."""
        if timings.finish_reason is not FinishReason.ERROR:
            self._success.labels(*self._values, str(timings.finish_reason)).inc()
        e2e = timings.finished_ts - timings.arrival_ts
        self._e2e.observe(e2e)
        if timings.queue_s is not None:
            self._queue.observe(timings.queue_s)
            self._inference.observe(timings.finished_ts - (timings.first_scheduled_ts or 0.0))
        if timings.prefill_s is not None:
            self._prefill.observe(timings.prefill_s)
        if timings.decode_s is not None:
            self._decode.observe(timings.decode_s)
            if timings.num_output_tokens > 1:
                self._tpot.observe(timings.decode_s / (timings.num_output_tokens - 1))
        self._prompt_len.observe(timings.num_prompt_tokens)
        self._output_len.observe(timings.num_output_tokens)
        self._max_tokens.observe(max_tokens)

    def render(self) -> bytes:
        return generate_latest(self.registry)
