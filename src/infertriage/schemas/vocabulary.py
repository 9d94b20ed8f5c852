"""schemas, level 0: the normalised metric vocabulary.

Every engine (vLLM, SGLang, TGI, TensorRT-LLM/Triton, llama.cpp) and every
exporter (DCGM, the host) names the same quantity differently; the collect
adapters map them onto these names. Each entry carries its SI unit, its kind
(gauge, counter, histogram) and the layer its evidence belongs to. The raw
engine name stays in a sample's labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from infertriage.schemas.errors import UserError
from infertriage.schemas.layers import Layer

__all__ = ["VOCABULARY", "MetricDef", "MetricKind", "get_metric"]


class MetricKind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class MetricDef:
    name: str
    unit: str  # SI: "s", "bytes", "fraction", "tokens", "requests", "1" (a plain count)
    kind: MetricKind
    layer: Layer
    description: str


_G, _C, _H = MetricKind.GAUGE, MetricKind.COUNTER, MetricKind.HISTOGRAM
_L = Layer

_DEFS: tuple[MetricDef, ...] = (
    # scheduling: the engine core's queues
    MetricDef("queue.waiting", "requests", _G, _L.SCHEDULING, "requests waiting to be scheduled"),
    MetricDef("queue.running", "requests", _G, _L.SCHEDULING, "requests in the running batch"),
    MetricDef("queue.swapped", "requests", _G, _L.MEMORY, "requests swapped to CPU (vLLM V0)"),
    MetricDef("server.queue_time", "s", _H, _L.SCHEDULING, "time a request waited in the queue"),
    MetricDef("server.prefill_time", "s", _H, _L.SCHEDULING, "time spent in prefill"),
    MetricDef("server.decode_time", "s", _H, _L.SCHEDULING, "time spent in decode"),
    MetricDef("server.batch_size", "requests", _G, _L.SCHEDULING, "sequences per engine step"),
    # memory: the KV cache
    MetricDef("kv.usage", "fraction", _G, _L.MEMORY, "fraction of KV-cache blocks in use"),
    MetricDef("kv.blocks_total", "1", _G, _L.MEMORY, "KV-cache blocks the engine allocated"),
    MetricDef("kv.blocks_free", "1", _G, _L.MEMORY, "KV-cache blocks free"),
    MetricDef("kv.block_size", "tokens", _G, _L.MEMORY, "tokens per KV-cache block"),
    MetricDef("kv.tokens_total", "tokens", _G, _L.MEMORY, "KV-cache capacity in tokens"),
    MetricDef("preemptions", "1", _C, _L.MEMORY, "requests preempted for lack of KV blocks"),
    MetricDef(
        "prefix_cache.queries", "tokens", _C, _L.MEMORY, "tokens looked up in the prefix cache"
    ),
    MetricDef("prefix_cache.hits", "tokens", _C, _L.MEMORY, "tokens found in the prefix cache"),
    # throughput and latency seen by the server
    MetricDef("tokens.prompt", "tokens", _C, _L.SCHEDULING, "prompt tokens processed"),
    MetricDef("tokens.generation", "tokens", _C, _L.SCHEDULING, "tokens generated"),
    MetricDef("requests.finished", "requests", _C, _L.APPLICATION, "requests finished"),
    MetricDef("requests.failed", "requests", _C, _L.APPLICATION, "requests that ended in error"),
    MetricDef("server.ttft", "s", _H, _L.APPLICATION, "server-side time to first token"),
    MetricDef("server.itl", "s", _H, _L.APPLICATION, "server-side inter-token latency"),
    MetricDef("server.e2e", "s", _H, _L.APPLICATION, "server-side end-to-end request latency"),
    MetricDef("server.prompt_len", "tokens", _H, _L.APPLICATION, "prompt length per request"),
    MetricDef("server.output_len", "tokens", _H, _L.APPLICATION, "output length per request"),
    # speculative decoding
    MetricDef("spec.drafts", "1", _C, _L.SPECULATIVE, "draft proposals"),
    MetricDef("spec.draft_tokens", "tokens", _C, _L.SPECULATIVE, "draft tokens proposed"),
    MetricDef("spec.accepted_tokens", "tokens", _C, _L.SPECULATIVE, "draft tokens accepted"),
    MetricDef(
        "spec.accepted_tokens_per_pos",
        "tokens",
        _C,
        _L.SPECULATIVE,
        "accepted draft tokens by position",
    ),
    # hardware: DCGM and NVML
    MetricDef("gpu.util", "fraction", _G, _L.HARDWARE, "time any kernel ran (misleading alone)"),
    MetricDef("gpu.gr_engine_active", "fraction", _G, _L.HARDWARE, "graphics engine active"),
    MetricDef("gpu.sm_active", "fraction", _G, _L.HARDWARE, "SMs with at least one warp"),
    MetricDef("gpu.sm_occupancy", "fraction", _G, _L.HARDWARE, "resident warps per SM maximum"),
    MetricDef("gpu.tensor_active", "fraction", _G, _L.HARDWARE, "tensor pipes active"),
    MetricDef("gpu.dram_active", "fraction", _G, _L.HARDWARE, "HBM interface active"),
    MetricDef("gpu.pcie_tx_bytes", "bytes", _C, _L.HARDWARE, "bytes sent over PCIe"),
    MetricDef("gpu.pcie_rx_bytes", "bytes", _C, _L.HARDWARE, "bytes received over PCIe"),
    MetricDef("gpu.nvlink_tx_bytes", "bytes", _C, _L.PARALLELISM, "bytes sent over NVLink"),
    MetricDef("gpu.nvlink_rx_bytes", "bytes", _C, _L.PARALLELISM, "bytes received over NVLink"),
    MetricDef("gpu.fb_used_bytes", "bytes", _G, _L.MEMORY, "GPU memory used"),
    MetricDef("gpu.fb_free_bytes", "bytes", _G, _L.MEMORY, "GPU memory free"),
    MetricDef("gpu.power_watts", "W", _G, _L.HARDWARE, "board power"),
    MetricDef("gpu.sm_clock_hz", "Hz", _G, _L.HARDWARE, "SM clock"),
    MetricDef("gpu.xid_errors", "1", _G, _L.HARDWARE, "last XID error code"),
    # host and the server process
    MetricDef("host.cpu", "fraction", _G, _L.APPLICATION, "host CPU busy, all cores"),
    MetricDef("host.mem_used_bytes", "bytes", _G, _L.HARDWARE, "host RAM used"),
    MetricDef("proc.cpu", "fraction", _G, _L.APPLICATION, "server process CPU, in cores"),
    MetricDef(
        "proc.cpu_thread_max", "fraction", _G, _L.SCHEDULING, "busiest server thread's CPU (GIL)"
    ),
    MetricDef("proc.rss_bytes", "bytes", _G, _L.MEMORY, "server process resident memory"),
    MetricDef("proc.start_time_s", "s", _G, _L.APPLICATION, "server process start (Unix time)"),
)

VOCABULARY: dict[str, MetricDef] = {definition.name: definition for definition in _DEFS}


def get_metric(name: str) -> MetricDef:
    try:
        return VOCABULARY[name]
    except KeyError:
        raise UserError(f"{name!r} is not a normalised metric name.") from None
