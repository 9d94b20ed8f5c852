"""schemas, level 0: the records that flow between stages.

`RequestRecord` (one line of requests.jsonl per finished request), `Sample`
(one line of metrics.jsonl per scraped value) and `Signal` (one line of
signals.jsonl per derived figure). They are frozen dataclasses because the
load generator and the scraper make many of them; pydantic validates them
when they are read back from disk (see `rundir`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "Chunk",
    "ErrorKind",
    "RequestRecord",
    "Sample",
    "Signal",
    "TokenSource",
    "http_error_kind",
]


class TokenSource(StrEnum):
    """Where a token count came from, best first."""

    USAGE = "usage"  # the server's `usage` object
    TOKENIZER = "tokenizer"  # the model's tokenizer on the client
    ESTIMATE = "estimate"  # a characters-per-token estimate


class ErrorKind(StrEnum):
    """Why a request failed; `none` when it did not.

    `rejected` and `admission` are not the server failing: a 4xx that refuses the
    request itself (too long for the context, an invalid parameter, an unknown
    model, a missing key) is the workload's fault; a 429 is the server refusing
    load (admission control, a rate limit). Neither counts in the error rate.
    """

    NONE = "none"
    HTTP = "http"  # a non-2xx status the server is to blame for: 5xx, 408
    REJECTED = "rejected"  # a 4xx refusing the request as invalid: 400, 401, 403, 404, 413, 422
    ADMISSION = "admission"  # 429: the server (or a gateway) refused the load
    CONNECT = "connect"  # refused, reset before the response, DNS
    TIMEOUT = "timeout"
    STREAM = "stream"  # broken SSE, reset mid-stream, an error event
    CLIENT = "client"  # the client could not build or send the request


_REQUEST_TIMEOUT, _TOO_MANY_REQUESTS = 408, 429


def http_error_kind(status: int) -> ErrorKind:
    """The kind of a non-200 answer: 429 is admission, another 4xx but 408 a rejection."""
    if status == _TOO_MANY_REQUESTS:
        return ErrorKind.ADMISSION
    if 400 <= status < 500 and status != _REQUEST_TIMEOUT:
        return ErrorKind.REJECTED
    return ErrorKind.HTTP


@dataclass(frozen=True, slots=True)
class Chunk:
    """One content-bearing SSE event: when its bytes arrived and how many tokens it carried."""

    ts: float
    num_tokens: int
    reasoning: bool = False


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """Everything measured about one request, on the run's clock (seconds since start).

    `scheduled_ts` is when the arrival process meant to send it; `sent_ts` when
    it was sent. The gap is the client's dispatch lag, kept so that latency can
    be reported both ways (no coordinated omission); `client_queue_s` is the
    part of it spent waiting for a `--max-concurrency` slot. `last_token_ts` is
    the last content chunk, `end_ts` the end of the stream (`[DONE]` or close).
    A chunk is what arrived in one read: coalesced events share one chunk.
    """

    id: str
    scheduled_ts: float
    sent_ts: float
    first_token_ts: float | None = None
    last_token_ts: float | None = None
    end_ts: float | None = None
    chunks: tuple[Chunk, ...] = ()
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    prompt_tokens_source: TokenSource = TokenSource.ESTIMATE
    output_tokens_source: TokenSource = TokenSource.ESTIMATE
    http_status: int | None = None
    error_kind: ErrorKind = ErrorKind.NONE
    error_text: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    # Added by `bench`: the client-side queue and the finer fault.
    client_queue_s: float = 0.0  # waited for a --max-concurrency slot (part of sent − scheduled)
    max_tokens: int | None = None  # the output budget asked for
    headers_ts: float | None = None  # when the response headers arrived
    chunk_tokens_exact: bool = False  # per-chunk counts from the server (not one per event)
    fault: str = ""  # finer than error_kind: reset, stall, error_event, malformed_event, …
    # What the server calls it: its X-Request-Id response header, else the stream's `id`
    # (vLLM: `chatcmpl-<X-Request-Id>` when it honours the id `bench` sent as `id`).
    server_request_id: str = ""
    # The prompt's prefix, one mark per message: (digest of the messages so far, prompt
    # tokens so far), as `workload.prefix_marks` makes them; read by the prefix-reuse count.
    prompt_prefix: tuple[tuple[str, int], ...] = ()
    # The W3C trace id its `traceparent` header carried: a server's OpenTelemetry spans of
    # the request carry it too (`diagnose --otlp-listen`, `--spans`); "" when none was sent.
    trace_id: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.NONE

    @property
    def ttft_s(self) -> float | None:
        """Time to first token, measured from the send."""
        return None if self.first_token_ts is None else self.first_token_ts - self.sent_ts

    @property
    def dispatch_lag_s(self) -> float:
        return self.sent_ts - self.scheduled_ts


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of one normalised metric at run time `t` (seconds since the run began)."""

    t: float
    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Signal:
    """A derived figure that rules read: e.g. `kv.usage.p95` = 0.97 (fraction) from `metrics`.

    `window` is the `[start_ts, end_ts]` of the data it summarises, or None for
    a figure with no time extent (a plan, a config value).
    """

    name: str
    value: float
    unit: str
    source: str
    window: tuple[float, float] | None = None
