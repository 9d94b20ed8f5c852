"""engines, level 0½: the TensorRT-LLM adapter (served by Triton or by `trtllm-serve`).

Its `/metrics` names: `TRTLLM_TRITON_METRICS` (Triton with the TensorRT-LLM
backend's `nv_trt_llm_*` metrics, or `trtllm-serve`'s `trtllm_*` ones) and
`TRITON_METRICS` (Triton's own `nv_inference_*` and `nv_gpu_*` only).
Triton's durations are cumulative microsecond counters summed over
requests, not histograms; its latency histograms
(`nv_inference_first_response_histogram_ms`) are opt-in. The batch and KV
settings the backend reports as `max` gauges, and its settings' names.
"""

from __future__ import annotations

from infertriage.engines.base import EngineAdapter, Knob
from infertriage.engines.metrics import (
    ENGINE_DOMAIN,
    MetricMap,
    MetricTable,
    Product,
    Source,
    metric,
)

__all__ = [
    "KV_BLOCK_METRICS",
    "REQUEST_METRICS",
    "TRITON_METRICS",
    "TRTLLM",
    "TRTLLM_TRITON_METRICS",
]

KV_BLOCK_METRICS = ("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type")  # family, label
REQUEST_METRICS = ("nv_trt_llm_request_metrics", "request_type")

_US = 1e-6
_MS = 1e-3
_OPT_IN = "opt-in: start tritonserver with --metrics-config histogram_latencies=true"


def _req(kind: str) -> Source:
    return Source(REQUEST_METRICS[0], where=((REQUEST_METRICS[1], kind),))


def _kv(kind: str) -> Source:
    return Source(KV_BLOCK_METRICS[0], where=((KV_BLOCK_METRICS[1], kind),))


_TRITON_COMMON: tuple[MetricMap, ...] = (
    metric("server.queue_seconds", Source("nv_inference_queue_duration_us", _US)),
    metric("server.request_seconds", Source("nv_inference_request_duration_us", _US)),
    metric("server.compute_seconds", Source("nv_inference_compute_infer_duration_us", _US)),
    metric("requests.failed", "nv_inference_request_failure"),
    metric("gpu.util", "nv_gpu_utilization"),
    metric("gpu.fb_used_bytes", "nv_gpu_memory_used_bytes"),
    metric("gpu.fb_total_bytes", "nv_gpu_memory_total_bytes"),
    metric("gpu.power_watts", "nv_gpu_power_usage"),
    metric("server.steps", "nv_inference_exec_count", note="model executions (batches)"),
)
_TRITON_GPU = frozenset({"gpu.util", "gpu.fb_used_bytes", "gpu.fb_total_bytes", "gpu.power_watts"})
_TRITON_UNSUPPORTED = {
    "preemptions": "Triton exports no preemption counter",
    "queue.swapped": "Triton does not swap requests",
}

TRTLLM_TRITON_METRICS = MetricTable(
    engine="trtllm_triton",
    title="TensorRT-LLM (Triton)",
    prefixes=("nv_trt_llm_", "trtllm_"),
    domain=ENGINE_DOMAIN | _TRITON_GPU,
    mappings=(
        metric("queue.waiting", _req("waiting"), "nv_inference_pending_request_count"),
        metric("queue.running", _req("active")),
        metric("server.batch_size", _req("scheduled"), note="requests scheduled this iteration"),
        metric("kv.usage", _kv("fraction"), "trtllm_kv_cache_utilization"),
        metric("kv.blocks_total", _kv("max")),
        metric("kv.blocks_free", _kv("free")),
        metric("kv.blocks_used", _kv("used")),
        metric("kv.block_size", _kv("tokens_per")),
        metric("prefix_cache.hit_rate", "trtllm_kv_cache_hit_rate"),
        metric("requests.finished", "trtllm_request_success_total", "nv_inference_request_success"),
        metric(
            "server.ttft",
            "trtllm_time_to_first_token_seconds",
            Source("nv_inference_first_response_histogram_ms", _MS, note=_OPT_IN),
        ),
        metric(
            "server.itl",
            "trtllm_inter_token_latency_seconds",
            "trtllm_time_per_output_token_seconds",
        ),
        metric("server.e2e", "trtllm_e2e_request_latency_seconds"),
        metric("server.queue_time", "trtllm_request_queue_time_seconds"),
        *_TRITON_COMMON,
    ),
    unsupported={
        **_TRITON_UNSUPPORTED,
        "tokens.prompt": "the TensorRT-LLM backend exports per-iteration token gauges only",
        "tokens.generation": "the TensorRT-LLM backend exports per-iteration token gauges only",
    },
    notes=(
        "nv_trt_llm_* values are of the latest iteration, not cumulative.",
        "Triton's *_duration_us are sums over requests; divide by requests for a mean.",
    ),
    products=(
        Product("kv.tokens_total", "kv.blocks_total", "kv.block_size"),
        Product("kv.tokens_used", "kv.blocks_used", "kv.block_size"),
    ),
)

TRITON_METRICS = MetricTable(
    engine="triton",
    title="Triton Inference Server",
    prefixes=("nv_inference_",),
    domain=ENGINE_DOMAIN | _TRITON_GPU,
    mappings=(
        metric("queue.waiting", "nv_inference_pending_request_count"),
        metric("requests.finished", "nv_inference_request_success"),
        metric(
            "server.ttft",
            Source("nv_inference_first_response_histogram_ms", _MS),
            enable=_OPT_IN,
        ),
        *_TRITON_COMMON,
    ),
    unsupported={
        **_TRITON_UNSUPPORTED,
        "kv.usage": "no TensorRT-LLM backend metrics (nv_trt_llm_*) in this scrape",
    },
    notes=("No LLM backend metrics: this is Triton's generic view of its models.",),
)


TRTLLM = EngineAdapter(
    name="trtllm_triton",
    title="TensorRT-LLM",
    metrics=(TRTLLM_TRITON_METRICS, TRITON_METRICS),
    knobs={
        Knob.MAX_SEATS: "--max_batch_size",  # trtllm-serve's spelling; the engine's build setting
        Knob.TOKEN_BUDGET: "--max_num_tokens",
        Knob.MEMORY_FRACTION: "--kv_cache_free_gpu_memory_fraction",
        Knob.MAX_CONTEXT: "--max_seq_len",
        Knob.TENSOR_PARALLEL: "--tp_size",
    },
)
