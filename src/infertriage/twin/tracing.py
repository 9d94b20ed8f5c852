"""twin, level 2: the twin's OpenTelemetry request spans, as vLLM exports them.

Takes an OTLP/HTTP endpoint (the twin's `--otlp-traces-endpoint`, vLLM's flag)
and, for each finished request, its `RequestTimings`, the request's trace
headers and its id; exports one `llm_request` span of kind SERVER with vLLM's
attributes (`engines.vllm_spans`) through the OpenTelemetry SDK's own OTLP
protobuf exporter, parented on the request's W3C `traceparent` and started
at its arrival. The SDK is imported only here and only when the option is
given: a twin without it serves as before. Spans go out in batches every
half second (vLLM keeps the SDK's 5 s), so a short run's spans arrive before
it ends; `shutdown` sends what is left.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from infertriage.engines.vllm_spans import REQUEST_SPAN, TRACE_HEADERS, VllmSpan
from infertriage.schemas import UserError
from infertriage.twin.request import RequestTimings

__all__ = ["RequestSpans"]

_BATCH_DELAY_MS = 500
_NEEDS = (
    "the twin's --otlp-traces-endpoint exports through the OpenTelemetry SDK: pip install "
    "'infertriage[otel]' (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
)


def _check_endpoint(endpoint: str) -> None:
    """`UserError` unless `endpoint` is an http(s) URL with a host: the SDK would take any
    text, and say why each batch failed only when it is sent."""
    try:
        host = urlsplit(endpoint).hostname
    except ValueError:  # a bracket left open
        host = None
    if not endpoint.startswith(("http://", "https://")) or not host or " " in endpoint:
        raise UserError(
            f"--otlp-traces-endpoint takes an OTLP/HTTP URL "
            f"(http://127.0.0.1:4318/v1/traces), not {endpoint!r}."
        )


class RequestSpans:
    """One tracer provider with a batching OTLP/HTTP exporter; `emit` per finished request."""

    def __init__(self, endpoint: str, service: str = "infertriage-twin") -> None:
        _check_endpoint(endpoint)
        # the SDK only when spans are asked for (PLC0415): a twin without it serves as before
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )
            from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
            from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
            from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
            from opentelemetry.trace import SpanKind  # noqa: PLC0415
            from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
                TraceContextTextMapPropagator,
            )
        except ImportError as err:
            raise UserError(f"{_NEEDS} ({err}).") from err
        self._provider = TracerProvider(resource=Resource.create({"service.name": service}))
        exporter = OTLPSpanExporter(endpoint=endpoint)
        processor = BatchSpanProcessor(exporter, schedule_delay_millis=_BATCH_DELAY_MS)
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("infertriage.twin")
        self._propagator = TraceContextTextMapPropagator()
        self._server_kind = SpanKind.SERVER

    def emit(
        self,
        timings: RequestTimings,
        headers: Mapping[str, str],
        *,
        request_id: str,
        engine_now_s: float,
        max_tokens: int | None = None,
    ) -> None:
        """The span of one finished request; `engine_now_s` is the engine's clock now, to
        place its times (on the engine's clock) on the wall clock the span carries."""
        carrier = {name: headers[name] for name in TRACE_HEADERS if name in headers}
        context = self._propagator.extract(carrier) if carrier else None
        wall_now_ns = time.time_ns()

        def wall_ns(ts: float) -> int:
            return wall_now_ns - round((engine_now_s - ts) * 1e9)

        span = self._tracer.start_span(
            REQUEST_SPAN,
            context=context,
            kind=self._server_kind,
            start_time=wall_ns(timings.arrival_ts),
            attributes=_attributes(timings, request_id, max_tokens),
        )
        span.end(end_time=wall_ns(timings.finished_ts))

    def shutdown(self) -> None:
        """Export the spans still batched, then stop the exporter."""
        self._provider.shutdown()


def _attributes(timings: RequestTimings, request_id: str, max_tokens: int | None) -> dict[str, Any]:
    """vLLM's `do_tracing` attributes: the latencies it has, the counts, the request's id."""
    scheduled = timings.first_scheduled_ts
    last = timings.output_event_ts[-1] if timings.output_event_ts else None
    values: dict[str, float | int | str | None] = {
        VllmSpan.TIME_TO_FIRST_TOKEN: timings.ttft_s,
        VllmSpan.E2E: timings.e2e_s,
        VllmSpan.TIME_IN_QUEUE: timings.queue_s,
        VllmSpan.PROMPT_TOKENS: timings.num_prompt_tokens,
        VllmSpan.COMPLETION_TOKENS: timings.num_output_tokens,
        VllmSpan.TIME_IN_MODEL_PREFILL: timings.prefill_s,
        VllmSpan.TIME_IN_MODEL_DECODE: timings.decode_s,
        VllmSpan.TIME_IN_MODEL_INFERENCE: (
            last - scheduled if last is not None and scheduled is not None else None
        ),
        VllmSpan.REQUEST_ID: request_id,
        VllmSpan.MAX_TOKENS: max_tokens,
    }
    return {key: value for key, value in values.items() if value is not None}
