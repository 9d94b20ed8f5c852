"""loadgen, level 2: the W3C trace context each request carries (`traceparent`).

Gives a fresh trace id and its `traceparent` header value, once per request:
version 00, the trace id (16 random bytes in hex), a span id for the client's
side of the request (8 random bytes) and flags 01, sampled, so a server whose
sampler follows its parent (vLLM's, the SDK's default) records its span. The
trace id goes into the request's record; a server's spans carry it, which is
how `diagnose` joins them to the requests (`analyze.signals.spans`).
"""

from __future__ import annotations

import os

__all__ = ["TRACEPARENT", "new_trace"]

TRACEPARENT = "traceparent"


def _nonzero_hex(num_bytes: int) -> str:
    while True:  # an id of all zeros is invalid (W3C Trace Context, 3.2.2.3)
        value = os.urandom(num_bytes)
        if any(value):
            return value.hex()


def new_trace() -> tuple[str, str]:
    """(trace id, traceparent header value) for one request."""
    trace_id = _nonzero_hex(16)
    return trace_id, f"00-{trace_id}-{_nonzero_hex(8)}-01"
