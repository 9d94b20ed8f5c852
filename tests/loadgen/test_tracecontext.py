"""Each request carries a W3C traceparent of its own: version 00, a fresh trace id, sampled."""

from __future__ import annotations

import re

from infertriage.loadgen.tracecontext import new_trace

# W3C Trace Context, 3.2: version-traceid-parentid-traceflags, lowercase hex
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def test_a_traceparent_per_request_with_its_trace_id() -> None:
    seen = set()
    for _ in range(200):
        trace_id, header = new_trace()
        found = TRACEPARENT.match(header)
        assert found is not None and found.group(1) == trace_id
        assert int(trace_id, 16) and int(found.group(2), 16)  # never all zeros
        seen.add(trace_id)
    assert len(seen) == 200
