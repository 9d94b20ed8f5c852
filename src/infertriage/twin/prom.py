"""twin, level 2: the twin's `/metrics` in vLLM V1's names, types, labels and buckets.

Takes the engine's `SchedulerStats` snapshots (gauges now, counters
cumulative) and each finished request's `RequestTimings`; gives Prometheus
text from a registry of its own (never the process-global one). Bucket
boundaries are vLLM's (`vllm/v1/metrics/loggers.py`); the labels are
`model_name` and `engine` (the engine index, "0" with one engine, as vLLM V1's
`PrometheusStatLogger` labels every series), plus `finished_reason` and
`position` where vLLM has them. The deprecated V0-era aliases vLLM still serves
(`gpu_cache_usage_perc`, `gpu_prefix_cache_*`) are served too.

Several engines share one registry (`add_engine`: data-parallel ranks, P/D
instances), each series labelled with its engine. With prefill/decode
disaggregation every series also carries `engine_type` ("prefill" or
"decode"), the label SGLang gives an instance's P/D role
(`python/sglang/srt/managers/scheduler_metrics_mixin.py`, `engine_type`);
decode instances add the NIXL connector's series with vLLM's names and
buckets (`NixlPromMetrics` in vllm/distributed/kv_transfer/kv_connector/v1/
nixl_connector.py, moved to `.../v1/nixl/stats.py` in later releases).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
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
    "EngineMetrics",
    "NixlMetrics",
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
# vLLM V1 labels every engine series with both, `engine` "0" for a lone engine
_LABELS = ("model_name", "engine")
_ROLE_LABEL = "engine_type"  # SGLang's label of a P/D instance's role
# NixlPromMetrics' buckets: transfer time (the first dropped), post time, bytes (2 KiB-8 GiB)
_NIXL_TIME_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
_NIXL_BYTES_BUCKETS = tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))


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
    """Gauges and counters read from each engine's latest `SchedulerStats` at scrape time."""

    def __init__(self, names: Sequence[str], info: CacheConfigInfo) -> None:
        self._names = tuple(names)
        self._values: list[str] = []
        self._engines: list[tuple[list[str], Callable[[], SchedulerStats]]] = []
        self._info = info

    def add(self, values: Sequence[str], snapshot: Callable[[], SchedulerStats]) -> None:
        self._engines.append((list(values), snapshot))

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=self._names)
        family.add_metric(self._values, value)
        return family

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=self._names)
        family.add_metric(self._values, value)
        return family

    def collect(self) -> Iterator[Metric]:
        """Each engine's families, merged: one family per name with every engine's series."""
        merged: dict[str, Metric] = {}
        for values, snapshot in self._engines:
            self._values = values
            for family in self._engine_families(snapshot()):
                if family.name in merged:
                    merged[family.name].samples.extend(family.samples)
                else:
                    merged[family.name] = family
        yield from merged.values()

    def _engine_families(self, s: SchedulerStats) -> Iterator[Metric]:
        labels = {
            **self._info.labels(),
            **dict(zip(self._names[1:], self._values[1:], strict=True)),
        }
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=list(labels),
        )
        info.add_metric(list(labels.values()), 1.0)
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
                labels=[*self._names, "position"],
            )
            for position, count in enumerate(spec.num_accepted_tokens_per_pos):
                per_pos.add_metric([*self._values, str(position)], count)
            yield per_pos
        yield from offload_families(s, self._names, self._values)  # issue 33: the offload tier


class VllmMetrics:
    """One twin's metrics registry: `add_engine` per engine (a `snapshot` given here is
    engine "0"), `render` per scrape.

    `roles` adds the `engine_type` label (P/D instances); without it the labels are
    vLLM V1's (`model_name`, `engine`)."""

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        info: CacheConfigInfo,
        snapshot: Callable[[], SchedulerStats] | None = None,
        *,
        roles: bool = False,
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # vLLM serves no _created
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        self.names = (*_LABELS, _ROLE_LABEL) if roles else _LABELS
        self._snapshots = _SnapshotCollector(self.names, info)
        self.registry.register(self._snapshots)
        token_buckets = build_1_2_5_buckets(max_model_len)
        names = self.names

        def histogram(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, labelnames=names, buckets=buckets, registry=self.registry)

        self._families = {
            "ttft": histogram(
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                TTFT_BUCKETS,
            ),
            "itl": histogram(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                ITL_BUCKETS,
            ),
            "tpot": histogram(
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                ITL_BUCKETS,
            ),
            "e2e": histogram(
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                REQUEST_LATENCY_BUCKETS,
            ),
            "queue": histogram(
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
                REQUEST_LATENCY_BUCKETS,
            ),
            "inference": histogram(
                "vllm:request_inference_time_seconds",
                "Histogram of time spent in RUNNING phase for request.",
                REQUEST_LATENCY_BUCKETS,
            ),
            "prefill": histogram(
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
                REQUEST_LATENCY_BUCKETS,
            ),
            "decode": histogram(
                "vllm:request_decode_time_seconds",
                "Histogram of time spent in DECODE phase for request.",
                REQUEST_LATENCY_BUCKETS,
            ),
            "prompt_len": histogram(
                "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
            ),
            "output_len": histogram(
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
                token_buckets,
            ),
            "max_tokens": histogram(
                "vllm:request_params_max_tokens",
                "Histogram of the max_tokens request parameter.",
                token_buckets,
            ),
            "iteration": histogram(
                "vllm:iteration_tokens_total",
                "Histogram of number of tokens per engine_step.",
                tuple(float(b) for b in ITERATION_TOKEN_BUCKETS),
            ),
        }
        self._success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labelnames=[*names, "finished_reason"],
            registry=self.registry,
        )
        self._nixl: tuple[Histogram, Histogram, Histogram, Counter] | None = None
        if snapshot is not None:  # one engine, "0"
            self.add_engine(snapshot)

    def add_engine(
        self, snapshot: Callable[[], SchedulerStats], index: int = 0, role: str | None = None
    ) -> EngineMetrics:
        """One engine's series (`engine` = its index; `engine_type` = its role with `roles`)."""
        values = (self.model_name, str(index), *((role or "",) if len(self.names) > 2 else ()))
        self._snapshots.add(values, snapshot)
        children = {key: family.labels(*values) for key, family in self._families.items()}
        for reason in ("stop", "length", "abort"):
            self._success.labels(*values, reason)
        return EngineMetrics(children, self._success, values)

    def add_nixl(self, index: int, role: str = "decode") -> NixlMetrics:
        """An instance's NIXL connector series (vLLM's `NixlPromMetrics`, one per transfer)."""
        if self._nixl is None:
            names = self.names
            registry = self.registry
            self._nixl = (
                Histogram(
                    "vllm:nixl_xfer_time_seconds",
                    "Histogram of transfer duration for NIXL KV Cache transfers.",
                    labelnames=names,
                    buckets=_NIXL_TIME_BUCKETS[1:],
                    registry=registry,
                ),
                Histogram(
                    "vllm:nixl_post_time_seconds",
                    "Histogram of transfer post time for NIXL KV Cache transfers.",
                    labelnames=names,
                    buckets=_NIXL_TIME_BUCKETS,
                    registry=registry,
                ),
                Histogram(
                    "vllm:nixl_bytes_transferred",
                    "Histogram of bytes transferred per NIXL KV Cache transfers.",
                    labelnames=names,
                    buckets=_NIXL_BYTES_BUCKETS,
                    registry=registry,
                ),
                Counter(
                    "vllm:nixl_num_failed_transfers",
                    "Number of failed NIXL KV Cache transfers.",
                    labelnames=names,
                    registry=registry,
                ),
            )
        values = (self.model_name, str(index), *((role,) if len(self.names) > 2 else ()))
        xfer, post, size, failed = self._nixl
        failed.labels(*values)
        return NixlMetrics(xfer.labels(*values), post.labels(*values), size.labels(*values))

    def render(self) -> bytes:
        return generate_latest(self.registry)


@dataclass(frozen=True, slots=True)
class NixlMetrics:
    """One decode instance's NIXL transfer histograms."""

    xfer_time: Histogram
    post_time: Histogram
    bytes_transferred: Histogram

    def observe_transfer(self, duration_s: float, post_s: float, num_bytes: float) -> None:
        self.xfer_time.observe(duration_s)
        self.post_time.observe(post_s)
        self.bytes_transferred.observe(num_bytes)


class EngineMetrics:
    """One engine's histograms and counters: `observe_*` from its driver thread."""

    def __init__(
        self, children: dict[str, Histogram], success: Counter, values: Sequence[str]
    ) -> None:
        self._h = children
        self._success = success
        self._values = tuple(values)

    def observe_first_token(self, ttft_s: float) -> None:
        """At the step that sampled a request's first token, as vLLM's iteration stats do."""
        self._h["ttft"].observe(ttft_s)

    def observe_token_gap(self, gap_s: float) -> None:
        self._h["itl"].observe(gap_s)

    def observe_step(self, num_scheduled_tokens: int) -> None:
        if num_scheduled_tokens:
            self._h["iteration"].observe(num_scheduled_tokens)

    def observe_finished(self, timings: RequestTimings, max_tokens: int) -> None:
        """Record one finished request as vLLM's `PrometheusStatLogger.record` does.

        TTFT and inter-token gaps are recorded when they happen, not here: observing them at
        the finish would hide the requests still waiting when a window closes."""
        h = self._h
        if timings.finish_reason is not FinishReason.ERROR:
            self._success.labels(*self._values, str(timings.finish_reason)).inc()
        e2e = timings.finished_ts - timings.arrival_ts
        h["e2e"].observe(e2e)
        if timings.queue_s is not None:
            h["queue"].observe(timings.queue_s)
            h["inference"].observe(timings.finished_ts - (timings.first_scheduled_ts or 0.0))
        if timings.prefill_s is not None:
            h["prefill"].observe(timings.prefill_s)
        if timings.decode_s is not None:
            h["decode"].observe(timings.decode_s)
            if timings.num_output_tokens > 1:
                h["tpot"].observe(timings.decode_s / (timings.num_output_tokens - 1))
        h["prompt_len"].observe(timings.num_prompt_tokens)
        h["output_len"].observe(timings.num_output_tokens)
        h["max_tokens"].observe(max_tokens)
