"""engines, level 0½: vLLM's OpenTelemetry request span, by the names vLLM gives it.

vLLM started with `--otlp-traces-endpoint URL` exports one span per finished
request (`vllm/v1/engine/output_processor.py`, `do_tracing`): named
`llm_request`, of kind SERVER, started at the request's arrival and parented
on the W3C `traceparent` (and `tracestate`) the request came with
(`vllm/tracing.py`, `extract_trace_context`; the default sampler is parent
based, so only a sampled parent, flags `01`, is recorded). Its attributes are
`SpanAttributes` of `vllm/tracing.py`: latencies in seconds, counts in tokens.
Queue time is `scheduled_ts − queued_ts`, prefill `first_token_ts −
scheduled_ts`, decode `last_token_ts − first_token_ts`, inference `last_token_ts
− scheduled_ts`. vLLM's exporter speaks gRPC unless
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`; its endpoint is then the
whole URL, `/v1/traces` included.
"""

from __future__ import annotations

__all__ = ["REQUEST_SPAN", "SERVER_KIND", "TRACE_HEADERS", "VllmSpan"]

REQUEST_SPAN = "llm_request"
SERVER_KIND = 2  # OTLP's SPAN_KIND_SERVER
TRACE_HEADERS = ("traceparent", "tracestate")


class VllmSpan:
    """The attribute names of vLLM's `llm_request` span (`vllm.tracing.SpanAttributes`)."""

    REQUEST_ID = "gen_ai.request.id"
    PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
    COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
    MAX_TOKENS = "gen_ai.request.max_tokens"
    TEMPERATURE = "gen_ai.request.temperature"
    TOP_P = "gen_ai.request.top_p"
    N = "gen_ai.request.n"
    RESPONSE_MODEL = "gen_ai.response.model"
    TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
    TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
    E2E = "gen_ai.latency.e2e"
    TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill"
    TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode"
    TIME_IN_MODEL_INFERENCE = "gen_ai.latency.time_in_model_inference"
