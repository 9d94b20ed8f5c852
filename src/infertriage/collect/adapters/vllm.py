"""collect, level 2: the vLLM adapter (V1 names first, then the V0 ones).

Takes nothing; gives `VLLM`, the table from vLLM's `/metrics` names to the
vocabulary. vLLM renamed several metrics between its V0 and V1 engines
(`gpu_cache_usage_perc` → `kv_cache_usage_perc`, `time_per_output_token_seconds`
→ `inter_token_latency_seconds`, `gpu_prefix_cache_*` → `prefix_cache_*`); the
newer name wins when a server exports both, and the status notes the other.
"""

from __future__ import annotations

from infertriage.collect.adapters.base import ENGINE_DOMAIN, Adapter, Product, Source, metric

__all__ = ["VLLM"]

_V0 = "vLLM V0 name"
_SPEC = "exported only with speculative decoding on (--speculative-config)"

VLLM = Adapter(
    engine="vllm",
    title="vLLM",
    prefixes=("vllm:",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.waiting", "vllm:num_requests_waiting"),
        metric("queue.running", "vllm:num_requests_running"),
        metric("queue.swapped", "vllm:num_requests_swapped", note="V0 only; V1 never swaps"),
        metric("server.queue_time", "vllm:request_queue_time_seconds"),
        metric("server.prefill_time", "vllm:request_prefill_time_seconds"),
        metric("server.decode_time", "vllm:request_decode_time_seconds"),
        metric("server.inference_time", "vllm:request_inference_time_seconds"),
        metric("server.step_tokens", "vllm:iteration_tokens_total"),
        metric(
            "kv.usage", "vllm:kv_cache_usage_perc", Source("vllm:gpu_cache_usage_perc", note=_V0)
        ),
        metric("kv.blocks_total", Source("vllm:cache_config_info", from_label="num_gpu_blocks")),
        metric("kv.block_size", Source("vllm:cache_config_info", from_label="block_size")),
        metric("preemptions", "vllm:num_preemptions_total"),
        metric(
            "prefix_cache.queries",
            "vllm:prefix_cache_queries_total",
            Source("vllm:gpu_prefix_cache_queries_total", note="early V1 name"),
            enable="on with --enable-prefix-caching (V1's default)",
        ),
        metric(
            "prefix_cache.hits",
            "vllm:prefix_cache_hits_total",
            Source("vllm:gpu_prefix_cache_hits_total", note="early V1 name"),
            enable="on with --enable-prefix-caching (V1's default)",
        ),
        metric("prefix_cache.hit_rate", Source("vllm:gpu_prefix_cache_hit_rate", note=_V0)),
        metric("tokens.prompt", "vllm:prompt_tokens_total"),
        metric("tokens.generation", "vllm:generation_tokens_total"),
        metric("tokens.prompt_rate", Source("vllm:avg_prompt_throughput_toks_per_s", note=_V0)),
        metric(
            "tokens.generation_rate",
            Source("vllm:avg_generation_throughput_toks_per_s", note=_V0),
        ),
        metric("requests.finished", "vllm:request_success_total"),
        metric("server.ttft", "vllm:time_to_first_token_seconds"),
        metric(
            "server.itl",
            "vllm:inter_token_latency_seconds",
            Source("vllm:time_per_output_token_seconds", note=_V0),
        ),
        metric("server.tpot", "vllm:request_time_per_output_token_seconds"),
        metric("server.e2e", "vllm:e2e_request_latency_seconds"),
        metric("server.prompt_len", "vllm:request_prompt_tokens"),
        metric("server.output_len", "vllm:request_generation_tokens"),
        metric("spec.drafts", "vllm:spec_decode_num_drafts_total", enable=_SPEC),
        metric("spec.draft_tokens", "vllm:spec_decode_num_draft_tokens_total", enable=_SPEC),
        metric("spec.accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total", enable=_SPEC),
        metric(
            "spec.accepted_tokens_per_pos",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            enable=_SPEC,
        ),
        metric("proc.rss_bytes", "process_resident_memory_bytes"),
        metric("proc.start_time_s", "process_start_time_seconds"),
        metric("proc.cpu_seconds", "process_cpu_seconds_total"),
    ),
    unsupported={
        "requests.failed": "vLLM counts no failed requests (aborts appear as finished_reason)",
        "kv.blocks_free": "vLLM exports usage as a fraction (kv.usage), not free blocks",
        "kv.blocks_used": "vLLM exports usage as a fraction (kv.usage), not used blocks",
        "kv.tokens_used": "vLLM exports usage as a fraction (kv.usage), not tokens",
        "server.batch_size": "vLLM exports tokens per step (server.step_tokens) and queue.running",
        "spec.accept_length": "derive it from spec.accepted_tokens / spec.drafts",
    },
    notes=("vLLM's process_* metrics describe the API-server process, not the engine core.",),
    products=(Product("kv.tokens_total", "kv.blocks_total", "kv.block_size"),),
)
