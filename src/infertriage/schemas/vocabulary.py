"""schemas, level 0: the normalised metric vocabulary.

Every engine (vLLM, SGLang, TGI, TensorRT-LLM/Triton, llama.cpp) and every
exporter (DCGM, the host) names the same quantity differently; the collect
adapters map them onto these names. Each entry carries its SI unit, its kind
(gauge, counter, histogram, event) and the layer its evidence belongs to. The
raw engine name stays in a sample's labels (`raw`).

In metrics.jsonl a histogram is written as one sample per bucket (label `le`,
the cumulative count) plus `stat=sum` and `stat=count`; an event (a server
restart the scraper noticed) is a sample of value 1 at the time it was seen.
Rates (`*_rate`, `bytes/s`) are gauges: the exporter already divided by time.
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
    EVENT = "event"  # something the collector noticed at a time, e.g. a server restart


@dataclass(frozen=True, slots=True)
class MetricDef:
    name: str
    unit: str  # SI: "s", "bytes", "fraction", "tokens", "requests", "1" (a plain count)
    kind: MetricKind
    layer: Layer
    description: str


_G, _C, _H = MetricKind.GAUGE, MetricKind.COUNTER, MetricKind.HISTOGRAM
_E = MetricKind.EVENT
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
    MetricDef("server.step_tokens", "tokens", _H, _L.SCHEDULING, "tokens per engine step"),
    MetricDef("server.steps", "1", _C, _L.SCHEDULING, "engine steps (forward passes)"),
    MetricDef("server.inference_time", "s", _H, _L.SCHEDULING, "time running (prefill + decode)"),
    MetricDef("server.queue_seconds", "s", _C, _L.SCHEDULING, "queue time summed over requests"),
    MetricDef("server.prefill_seconds", "s", _C, _L.SCHEDULING, "prefill time summed"),
    MetricDef("server.decode_seconds", "s", _C, _L.SCHEDULING, "decode time summed"),
    MetricDef("server.compute_seconds", "s", _C, _L.SCHEDULING, "model compute time summed"),
    MetricDef("server.request_seconds", "s", _C, _L.APPLICATION, "request time summed"),
    # memory: the KV cache
    MetricDef("kv.usage", "fraction", _G, _L.MEMORY, "fraction of KV-cache blocks in use"),
    MetricDef("kv.blocks_total", "1", _G, _L.MEMORY, "KV-cache blocks the engine allocated"),
    MetricDef("kv.blocks_free", "1", _G, _L.MEMORY, "KV-cache blocks free"),
    MetricDef("kv.blocks_used", "1", _G, _L.MEMORY, "KV-cache blocks in use"),
    MetricDef("kv.block_size", "tokens", _G, _L.MEMORY, "tokens per KV-cache block"),
    MetricDef("kv.tokens_total", "tokens", _G, _L.MEMORY, "KV-cache capacity in tokens"),
    MetricDef("kv.tokens_used", "tokens", _G, _L.MEMORY, "tokens held in the KV cache"),
    MetricDef("preemptions", "1", _C, _L.MEMORY, "requests preempted for lack of KV blocks"),
    MetricDef(
        "prefix_cache.queries", "tokens", _C, _L.MEMORY, "tokens looked up in the prefix cache"
    ),
    MetricDef("prefix_cache.hits", "tokens", _C, _L.MEMORY, "tokens found in the prefix cache"),
    MetricDef(
        "prefix_cache.hit_rate", "fraction", _G, _L.MEMORY, "prefix-cache hits per token looked up"
    ),
    # memory: a KV offload tier or connector beside the GPU's cache (issue 33: vLLM's CPU
    # offloading and KV connectors, LMCache, SGLang HiCache)
    MetricDef(
        "prefix_cache.external_queries", "tokens", _C, _L.MEMORY, "tokens asked of a KV connector"
    ),
    MetricDef("prefix_cache.external_hits", "tokens", _C, _L.MEMORY, "tokens a KV connector gave"),
    MetricDef("tokens.prompt_computed", "tokens", _C, _L.MEMORY, "prompt tokens prefilled"),
    MetricDef("tokens.prompt_local_hit", "tokens", _C, _L.MEMORY, "prompt tokens the GPU held"),
    MetricDef(
        "tokens.prompt_external", "tokens", _C, _L.MEMORY, "prompt tokens loaded from a tier"
    ),
    MetricDef("kv.offload_load_bytes", "bytes", _C, _L.MEMORY, "KV bytes loaded host → GPU"),
    MetricDef("kv.offload_store_bytes", "bytes", _C, _L.MEMORY, "KV bytes stored GPU → host"),
    MetricDef("kv.offload_load_seconds", "s", _C, _L.MEMORY, "time loading KV host → GPU"),
    MetricDef("kv.offload_store_seconds", "s", _C, _L.MEMORY, "time storing KV GPU → host"),
    MetricDef("kv.offload_used_tokens", "tokens", _G, _L.MEMORY, "tokens held in the host tier"),
    MetricDef("kv.offload_total_tokens", "tokens", _G, _L.MEMORY, "the host tier's capacity"),
    MetricDef("kv.offload_used_bytes", "bytes", _G, _L.MEMORY, "bytes held in the host tier"),
    # throughput and latency seen by the server
    MetricDef("tokens.prompt", "tokens", _C, _L.SCHEDULING, "prompt tokens processed"),
    MetricDef("tokens.generation", "tokens", _C, _L.SCHEDULING, "tokens generated"),
    MetricDef("tokens.prompt_rate", "tokens/s", _G, _L.SCHEDULING, "prompt throughput (engine's)"),
    MetricDef(
        "tokens.generation_rate", "tokens/s", _G, _L.SCHEDULING, "generation throughput (engine's)"
    ),
    MetricDef("requests.finished", "requests", _C, _L.APPLICATION, "requests finished"),
    MetricDef("requests.failed", "requests", _C, _L.APPLICATION, "requests that ended in error"),
    MetricDef("server.ttft", "s", _H, _L.APPLICATION, "server-side time to first token"),
    MetricDef("server.itl", "s", _H, _L.APPLICATION, "server-side inter-token latency"),
    MetricDef("server.tpot", "s", _H, _L.APPLICATION, "per-request mean time per output token"),
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
    MetricDef("spec.accept_length", "tokens", _G, _L.SPECULATIVE, "mean tokens accepted per step"),
    # prefill/decode disaggregation: the KV cache moved from a prefill to a decode instance
    MetricDef("kv_transfer.time", "s", _H, _L.PARALLELISM, "time one KV transfer took"),
    MetricDef("kv_transfer.post_time", "s", _H, _L.PARALLELISM, "time to post one KV transfer"),
    MetricDef("kv_transfer.bytes", "bytes", _H, _L.PARALLELISM, "bytes moved by one KV transfer"),
    MetricDef(
        "kv_transfer.descriptors", "1", _H, _L.PARALLELISM, "memory descriptors per KV transfer"
    ),
    MetricDef("kv_transfer.failed", "1", _C, _L.PARALLELISM, "KV transfers that failed"),
    MetricDef(
        "kv_transfer.failed_notifications", "1", _C, _L.PARALLELISM, "transfer notices that failed"
    ),
    MetricDef(
        "kv_transfer.expired", "requests", _C, _L.PARALLELISM, "KV held for decode that expired"
    ),
    MetricDef(
        "kv_transfer.bootstrap_failed", "requests", _C, _L.PARALLELISM, "P/D handshakes that failed"
    ),
    MetricDef("kv_transfer.speed", "bytes/s", _G, _L.PARALLELISM, "the last KV transfer's speed"),
    MetricDef("kv_transfer.latency", "s", _G, _L.PARALLELISM, "the last KV transfer's time"),
    MetricDef(
        "kv_transfer.bootstrap_time", "s", _G, _L.PARALLELISM, "the last P/D handshake's time"
    ),
    MetricDef(
        "kv_transfer.alloc_time", "s", _G, _L.PARALLELISM, "the last wait for decode KV space"
    ),
    MetricDef("kv_transfer.last_bytes", "bytes", _G, _L.PARALLELISM, "the last transfer's bytes"),
    MetricDef(
        "pd.prefill_bootstrap_queue", "requests", _G, _L.PARALLELISM, "prefill: awaiting handshake"
    ),
    MetricDef(
        "pd.prefill_inflight_queue", "requests", _G, _L.PARALLELISM, "prefill: KV being sent"
    ),
    MetricDef(
        "pd.decode_prealloc_queue", "requests", _G, _L.PARALLELISM, "decode: awaiting KV space"
    ),
    MetricDef(
        "pd.decode_transfer_queue", "requests", _G, _L.PARALLELISM, "decode: KV being received"
    ),
    # hardware: DCGM and NVML
    MetricDef("gpu.util", "fraction", _G, _L.HARDWARE, "time any kernel ran (misleading alone)"),
    MetricDef("gpu.gr_engine_active", "fraction", _G, _L.HARDWARE, "graphics engine active"),
    MetricDef("gpu.sm_active", "fraction", _G, _L.HARDWARE, "SMs with at least one warp"),
    MetricDef("gpu.sm_occupancy", "fraction", _G, _L.HARDWARE, "resident warps per SM maximum"),
    MetricDef("gpu.tensor_active", "fraction", _G, _L.HARDWARE, "tensor pipes active"),
    MetricDef("gpu.dram_active", "fraction", _G, _L.HARDWARE, "HBM interface active"),
    # DCGM's PROF_PCIE/NVLINK_*_BYTES are rates (bytes per second), though dcgm-exporter
    # declares them counters; NVML's PCIe throughput is a rate too.
    MetricDef("gpu.pcie_tx_bytes", "bytes/s", _G, _L.HARDWARE, "PCIe bytes sent per second"),
    MetricDef("gpu.pcie_rx_bytes", "bytes/s", _G, _L.HARDWARE, "PCIe bytes received per second"),
    MetricDef("gpu.nvlink_tx_bytes", "bytes/s", _G, _L.PARALLELISM, "NVLink bytes sent per second"),
    MetricDef(
        "gpu.nvlink_rx_bytes", "bytes/s", _G, _L.PARALLELISM, "NVLink bytes received per second"
    ),
    MetricDef("gpu.fb_used_bytes", "bytes", _G, _L.MEMORY, "GPU memory used"),
    MetricDef("gpu.fb_free_bytes", "bytes", _G, _L.MEMORY, "GPU memory free"),
    MetricDef("gpu.fb_total_bytes", "bytes", _G, _L.MEMORY, "GPU memory total"),
    MetricDef("gpu.power_watts", "W", _G, _L.HARDWARE, "board power"),
    MetricDef("gpu.sm_clock_hz", "Hz", _G, _L.HARDWARE, "SM clock"),
    MetricDef("gpu.mem_clock_hz", "Hz", _G, _L.HARDWARE, "memory clock"),
    MetricDef("gpu.xid_errors", "1", _G, _L.HARDWARE, "last XID error code"),
    # expert parallelism: how evenly the EP ranks share the routed tokens (balancedness: the
    # mean rank's tokens over the busiest's, per MoE layer; vLLM and SGLang with EPLB on)
    MetricDef("ep.balancedness_min", "fraction", _G, _L.PARALLELISM, "worst MoE layer's balance"),
    MetricDef("ep.balancedness_avg", "fraction", _G, _L.PARALLELISM, "mean MoE layer's balance"),
    MetricDef("ep.rearrangements", "1", _C, _L.PARALLELISM, "EPLB expert rearrangements"),
    MetricDef("ep.balancedness_sum", "1", _C, _L.PARALLELISM, "balance summed over passes"),
    MetricDef("ep.balancedness_count", "1", _C, _L.PARALLELISM, "forward passes balance observed"),
    # host and the server process
    MetricDef("host.cpu", "fraction", _G, _L.APPLICATION, "host CPU busy, all cores"),
    MetricDef("host.cores", "cores", _G, _L.APPLICATION, "logical CPUs of the host"),
    MetricDef("host.run_queue", "threads", _G, _L.APPLICATION, "threads runnable on the host"),
    MetricDef(
        "host.client_cpu", "cores", _G, _L.APPLICATION, "the load client's CPU (infertriage's)"
    ),
    MetricDef(
        "host.server_local", "bool", _G, _L.APPLICATION, "the server shares the client's host"
    ),
    MetricDef("host.mem_used_bytes", "bytes", _G, _L.HARDWARE, "host RAM used"),
    MetricDef("host.mem_total_bytes", "bytes", _G, _L.HARDWARE, "host RAM total"),
    MetricDef("proc.cpu", "fraction", _G, _L.APPLICATION, "server process CPU, in cores"),
    MetricDef("proc.cpu_seconds", "s", _C, _L.APPLICATION, "server process CPU time"),
    MetricDef(
        "proc.cpu_wait", "cores", _G, _L.APPLICATION, "server threads runnable, waiting for a CPU"
    ),
    MetricDef("proc.cpu_thread", "fraction", _G, _L.SCHEDULING, "one server thread's CPU"),
    MetricDef(
        "proc.cpu_role", "cores", _G, _L.APPLICATION, "server threads' CPU by role (API server…)"
    ),
    MetricDef(
        "proc.cpu_thread_max", "fraction", _G, _L.SCHEDULING, "busiest server thread's CPU (GIL)"
    ),
    MetricDef("proc.rss_bytes", "bytes", _G, _L.MEMORY, "server process resident memory"),
    MetricDef("proc.start_time_s", "s", _G, _L.APPLICATION, "server process start (Unix time)"),
    # what the collector noticed
    MetricDef("server.restart", "1", _E, _L.APPLICATION, "the server restarted"),
    MetricDef("server.unreachable", "1", _E, _L.APPLICATION, "a scrape failed: refused, timeout"),
    # a value that cannot be true, set aside (`schemas.artefacts`): the value as read, with
    # labels `kind`, `metric` (the vocabulary name) and `raw` (the series as exported)
    MetricDef("metric.artefact", "1", _E, _L.APPLICATION, "an impossible value, set aside"),
)

VOCABULARY: dict[str, MetricDef] = {definition.name: definition for definition in _DEFS}


def get_metric(name: str) -> MetricDef:
    try:
        return VOCABULARY[name]
    except KeyError:
        raise UserError(f"{name!r} is not a normalised metric name.") from None
