"""The client's timeline as Trace Event Format JSON: one track per request, its events."""

from __future__ import annotations

import json

from infertriage.report.client_trace import client_trace
from infertriage.schemas import Chunk, RequestRecord


def _record(n: int, *, late: float = 0.0) -> RequestRecord:
    return RequestRecord(
        id=f"r-{n}",
        scheduled_ts=n - late,
        sent_ts=float(n),
        first_token_ts=n + 0.2,
        last_token_ts=n + 0.5,
        end_ts=n + 0.6,
        chunks=(Chunk(n + 0.2, 1), Chunk(n + 0.3, 2), Chunk(n + 0.5, 1)),
        output_tokens=4,
        http_status=200,
        trace_id=f"{n + 1:032x}",
    )


def test_one_track_per_request_with_send_first_token_and_each_chunk() -> None:
    events = json.loads(client_trace([_record(2), _record(1, late=0.25)]))["traceEvents"]
    tracks = {e["args"]["name"]: e["tid"] for e in events if e["name"] == "thread_name"}
    assert tracks == {"r-1": 1, "r-2": 2}  # in the order they were sent
    mine = [e for e in events if e.get("tid") == tracks["r-1"] and e["ph"] != "M"]
    request = next(e for e in mine if e["name"] == "request")
    assert (request["ts"], request["dur"]) == (1e6, 0.6e6)
    assert request["args"]["trace_id"] == f"{2:032x}" and request["args"]["ttft_ms"] == 200.0
    lag = next(e for e in mine if e["name"] == "dispatch lag")
    assert (lag["ts"], lag["dur"]) == (0.75e6, 0.25e6)
    chunks = [(e["ts"], e["args"]["tokens"]) for e in mine if e["name"] == "chunk"]
    assert chunks == [(1.2e6, 1), (1.3e6, 2), (1.5e6, 1)]
    assert [e["ts"] for e in mine if e["name"] in {"send", "first token"}] == [1e6, 1.2e6]
