"""collect, level 2: the SGLang adapter (`sglang:` names).

Takes nothing; gives `SGLANG`. Older SGLang names the per-token latency
`time_per_output_token_seconds` (it observes every token, so it is the
inter-token latency); newer builds add `inter_token_latency_seconds`,
queue-time histograms and cached-token counters.
"""

from __future__ import annotations

from infertriage.collect.adapters.base import ENGINE_DOMAIN, Adapter, Source, metric

__all__ = ["SGLANG"]

_NEWER = "newer SGLang builds only"
_SPEC = "exported only with speculative decoding on (--speculative-algorithm)"

SGLANG = Adapter(
    engine="sglang",
    title="SGLang",
    prefixes=("sglang:",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.waiting", "sglang:num_queue_reqs"),
        metric("queue.running", "sglang:num_running_reqs"),
        metric("kv.usage", "sglang:token_usage", note="fraction of the KV token pool in use"),
        metric("kv.tokens_used", "sglang:num_used_tokens"),
        metric(
            "prefix_cache.hit_rate",
            "sglang:cache_hit_rate",
            note="the radix cache's hit rate as SGLang computes it",
        ),
        metric("prefix_cache.hits", "sglang:cached_tokens_total", enable=_NEWER),
        metric("tokens.prompt", "sglang:prompt_tokens_total"),
        metric("tokens.generation", "sglang:generation_tokens_total"),
        metric("tokens.generation_rate", "sglang:gen_throughput"),
        metric("requests.finished", "sglang:num_requests_total", enable=_NEWER),
        metric("requests.failed", "sglang:num_aborted_requests_total", enable=_NEWER),
        metric("server.ttft", "sglang:time_to_first_token_seconds"),
        metric(
            "server.itl",
            "sglang:inter_token_latency_seconds",
            Source("sglang:time_per_output_token_seconds", note="older name, observed per token"),
        ),
        metric("server.e2e", "sglang:e2e_request_latency_seconds"),
        metric("server.queue_time", "sglang:queue_time_seconds", enable=_NEWER),
        metric("spec.accept_length", "sglang:spec_accept_length", enable=_SPEC),
        metric("proc.rss_bytes", "process_resident_memory_bytes"),
        metric("proc.start_time_s", "process_start_time_seconds"),
        metric("proc.cpu_seconds", "process_cpu_seconds_total"),
    ),
    unsupported={
        "preemptions": "SGLang retracts requests instead of preempting; it logs retractions",
        "queue.swapped": "SGLang does not swap requests to CPU",
        "prefix_cache.queries": "SGLang exports the hit rate (prefix_cache.hit_rate) instead",
    },
    notes=("SGLang's metrics need --enable-metrics on the server.",),
)
