"""engines, level 0½: the Text Generation Inference adapter — every TGI-specific fact.

Its `/metrics` names (`tgi_`; no time-to-first-token metric and no KV-cache
metrics; its token totals come from the `_sum` of its per-request length
histograms, so they move only when a request finishes); `/info` (version,
`model_id`, `max_total_tokens`, `max_input_tokens` or the older
`max_input_length`, `max_concurrent_requests`, `max_batch_total_tokens`);
and its launcher's flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infertriage.engines.base import Endpoint, EngineAdapter, Knob, SaidLimit, as_int, positive
from infertriage.engines.metrics import ENGINE_DOMAIN, MetricTable, metric

__all__ = ["TGI", "TGI_METRICS"]

_ON_FINISH = "the histogram's _sum: moves only when a request finishes"

TGI_METRICS = MetricTable(
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


def _read_info(document: Mapping[str, Any], found: dict[str, Any]) -> None:
    found["version"] = document.get("version")
    found["model"] = found.get("model") or document.get("model_id")
    found["max_model_len"] = found.get("max_model_len") or as_int(document.get("max_total_tokens"))
    found["max_num_seqs"] = as_int(document.get("max_concurrent_requests"))
    found["kv_tokens_total"] = as_int(document.get("max_batch_total_tokens"))
    found["max_num_batched_tokens"] = positive(document.get("max_batch_prefill_tokens"))


def _read_limit(document: Mapping[str, Any]) -> SaidLimit | None:
    total = positive(document.get("max_total_tokens"))
    prompt = positive(document.get("max_input_tokens")) or positive(
        document.get("max_input_length")
    )
    return SaidLimit(total, "/info max_total_tokens", prompt) if total is not None else None


TGI = EngineAdapter(
    name="tgi",
    title="TGI",
    metrics=(TGI_METRICS,),
    endpoints=(Endpoint("/info", read_config=_read_info, read_limit=_read_limit),),
    knobs={
        Knob.MAX_SEATS: "--max-concurrent-requests",
        Knob.TOKEN_BUDGET: "--max-batch-prefill-tokens",
        Knob.MEMORY_FRACTION: "--cuda-memory-fraction",
        Knob.MAX_CONTEXT: "--max-total-tokens",
        Knob.TENSOR_PARALLEL: "--num-shard",
    },
)
