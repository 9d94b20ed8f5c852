"""collect, level 2: the Text Generation Inference adapter (`tgi_` names).

Takes nothing; gives `TGI`. TGI has no time-to-first-token metric and no
KV-cache metrics; its token totals come from the `_sum` of its per-request
length histograms, so they move only when a request finishes.
"""

from __future__ import annotations

from infertriage.collect.adapters.base import ENGINE_DOMAIN, Adapter, metric

__all__ = ["TGI"]

_ON_FINISH = "the histogram's _sum: moves only when a request finishes"

TGI = Adapter(
    engine="tgi",
    title="TGI",
    prefixes=("tgi_",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.waiting", "tgi_queue_size"),
        metric("queue.running", "tgi_batch_current_size", note="requests in the current batch"),
        metric("requests.finished", "tgi_request_success"),
        metric("requests.failed", "tgi_request_failure"),
        metric("server.queue_time", "tgi_request_queue_duration"),
        metric("server.inference_time", "tgi_request_inference_duration"),
        metric("server.e2e", "tgi_request_duration"),
        metric(
            "server.tpot",
            "tgi_request_mean_time_per_token_duration",
            note="per-request mean; TGI has no per-token histogram",
        ),
        metric("server.prompt_len", "tgi_request_input_length"),
        metric("server.output_len", "tgi_request_generated_tokens"),
        metric("tokens.prompt", "tgi_request_input_length_sum", note=_ON_FINISH),
        metric("tokens.generation", "tgi_request_generated_tokens_sum", note=_ON_FINISH),
        metric(
            "spec.accepted_tokens",
            "tgi_request_skipped_tokens_sum",
            note="tokens speculation let TGI skip",
        ),
    ),
    unsupported={
        "server.ttft": "TGI exports no time-to-first-token metric: measure TTFT on the client",
        "server.itl": "TGI exports only the per-request mean (server.tpot)",
        "kv.usage": "TGI exports no KV-cache metrics",
        "kv.blocks_total": "TGI exports no KV-cache metrics",
        "preemptions": "TGI exports no preemption counter",
    },
)
