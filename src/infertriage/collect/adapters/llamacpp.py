"""collect, level 2: the llama.cpp server adapter (`llamacpp:` names).

Takes nothing; gives `LLAMACPP`. llama-server needs `--metrics`. Its token
counters move only when a request finishes, and its `*_tokens_seconds`
throughput gauges are reset on every read of `/metrics` (so each scrape sees
only what finished since the previous read, by anyone). It has no latency
histograms; `kv_cache_usage_ratio` was dropped by newer upstream builds.
"""

from __future__ import annotations

from infertriage.collect.adapters.base import ENGINE_DOMAIN, Adapter, metric

__all__ = ["LLAMACPP"]

_ON_FINISH = "moves only when a request finishes"
_RESETS = "reset on every read of /metrics: covers only what finished since the last read"
_NO_HISTOGRAMS = "llama.cpp exports no latency histograms: measure it on the client"

LLAMACPP = Adapter(
    engine="llamacpp",
    title="llama.cpp",
    prefixes=("llamacpp:",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.running", "llamacpp:requests_processing"),
        metric("queue.waiting", "llamacpp:requests_deferred"),
        metric(
            "kv.usage",
            "llamacpp:kv_cache_usage_ratio",
            note="dropped by newer upstream builds",
        ),
        metric("kv.tokens_used", "llamacpp:kv_cache_tokens"),
        metric("tokens.prompt", "llamacpp:prompt_tokens_total", note=_ON_FINISH),
        metric("tokens.generation", "llamacpp:tokens_predicted_total", note=_ON_FINISH),
        metric("server.prefill_seconds", "llamacpp:prompt_seconds_total", note=_ON_FINISH),
        metric("server.decode_seconds", "llamacpp:tokens_predicted_seconds_total", note=_ON_FINISH),
        metric("tokens.prompt_rate", "llamacpp:prompt_tokens_seconds", note=_RESETS),
        metric("tokens.generation_rate", "llamacpp:predicted_tokens_seconds", note=_RESETS),
        metric("server.steps", "llamacpp:n_decode_total", note="llama_decode() calls"),
        metric(
            "prefix_cache.hits",
            "llamacpp:prompt_tokens_cached_total",
            note="prompt tokens a slot reused from its cache; " + _ON_FINISH,
        ),
        metric("spec.drafts", "llamacpp:spec_decode_num_drafts_total"),
        metric("spec.draft_tokens", "llamacpp:spec_decode_num_draft_tokens_total"),
        metric("spec.accepted_tokens", "llamacpp:spec_decode_num_accepted_tokens_total"),
    ),
    unsupported={
        "server.ttft": _NO_HISTOGRAMS,
        "server.itl": _NO_HISTOGRAMS,
        "server.e2e": _NO_HISTOGRAMS,
        "server.queue_time": _NO_HISTOGRAMS,
        "kv.blocks_total": "llama.cpp has no paged KV blocks; see /props n_ctx for its capacity",
    },
    notes=(
        "llama.cpp's token counters move only when a request finishes.",
        "llama.cpp resets its *_tokens_seconds gauges on every read of /metrics.",
    ),
)
