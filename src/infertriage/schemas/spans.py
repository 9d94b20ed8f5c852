"""schemas, level 0: a server's OpenTelemetry spans and their join to the client's requests.

`ServerSpan` is one span as an OTLP exporter sent it (vLLM's `llm_request`
among them): W3C trace and span ids in lowercase hex, wall-clock times in
Unix nanoseconds, attributes as plain values. `JoinedRequest` is one request
the client measured beside the server's span with its trace id: the server's
queue, prefill and decode time next to the client's TTFT; `SpanJoin` sums up
a run's join for diagnosis.json (the slowest requests, and how many joined).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from infertriage.schemas.frozen import FrozenModel

__all__ = ["AttrValue", "JoinedRequest", "ServerSpan", "SpanJoin"]

AttrValue = str | bool | int | float


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """One span a server exported; `service` is its resource's `service.name` ("" if none)."""

    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    name: str
    start_ns: int  # Unix nanoseconds
    end_ns: int
    parent_span_id: str = ""
    kind: int = 0  # OTLP's SpanKind: 2 is SERVER
    service: str = ""
    attributes: dict[str, AttrValue] = field(default_factory=dict)

    def number(self, key: str) -> float | None:
        """A numeric attribute as a float; None when absent or not a number."""
        value = self.attributes.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)


class JoinedRequest(FrozenModel):
    """One request, measured by the client and by the server's span (seconds).

    `ttft_gap_s` is the client's TTFT less the server's: what lies in front of the
    engine (the API server's work, a gateway, the network, the client itself).
    """

    id: str  # the request's id in requests.jsonl
    trace_id: str
    client_ttft_s: float | None
    client_e2e_s: float | None
    server_request_id: str = ""  # the span's gen_ai.request.id
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    server_ttft_s: float | None = None
    server_e2e_s: float | None = None
    ttft_gap_s: float | None = None


class SpanJoin(FrozenModel):
    """A run's requests joined to the server's spans by W3C trace id."""

    source: Literal["otlp-listen", "spans-file"]
    num_requests: int  # the measured level's traced requests that succeeded or have a span
    num_joined: int  # of them, those with a server span
    num_spans: int  # request spans received (vLLM's `llm_request`), joined or not
    slowest: tuple[JoinedRequest, ...] = ()  # the joined requests with the longest client TTFT

    def describe(self) -> str:
        """'server spans: 48 of 50 requests joined by trace id (52 … received in the run)'."""
        return (
            f"server spans: {self.num_joined} of {self.num_requests} requests joined by trace "
            f"id ({self.num_spans} request spans received in the run)"
        )
