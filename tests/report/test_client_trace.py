"""The client's timeline as Trace Event Format JSON: one track per request, its events,
and the server's queue, prefill and decode on it where its span came."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.report.client_trace import client_trace
from infertriage.report.exports import ExportLevel, write_exports
from infertriage.schemas import Chunk, RequestRecord
from infertriage.schemas.exports import ExportFormat
from infertriage.schemas.spans import ServerSpan


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


def test_the_servers_span_lays_its_queue_prefill_and_decode_on_the_request_s_track() -> None:
    anchor = 1_700_000_000.0
    span = ServerSpan(
        trace_id=f"{2:032x}",
        span_id=f"{9:016x}",
        name="llm_request",
        start_ns=round((anchor + 1.05) * 1e9),  # the server's arrival, 50 ms after the send
        end_ns=round((anchor + 1.55) * 1e9),
        attributes={
            "gen_ai.latency.time_to_first_token": 0.15,
            "gen_ai.latency.time_in_queue": 0.02,
            "gen_ai.latency.time_in_model_prefill": 0.1,
            "gen_ai.latency.time_in_model_decode": 0.3,
        },
    )
    document = client_trace([_record(1)], server={span.trace_id: span}, wall_anchor_s=anchor)
    server = {e["name"]: e for e in json.loads(document)["traceEvents"] if e.get("cat") == "server"}
    assert set(server) == {"server queue", "server prefill", "server decode"}
    assert {e["tid"] for e in server.values()} == {1}  # on the request's own track
    assert server["server prefill"]["ts"] == pytest.approx(1.1e6, abs=1)  # first token − prefill
    assert server["server queue"]["ts"] == pytest.approx(1.08e6, abs=1)
    assert server["server queue"]["dur"] == pytest.approx(0.02e6, abs=1)
    assert server["server decode"]["ts"] == pytest.approx(1.2e6, abs=1)
    assert server["server decode"]["dur"] == pytest.approx(0.3e6, abs=1)


def test_export_timeline_writes_one_trace_per_level(tmp_path: Path) -> None:
    level = ExportLevel(
        name="concurrency=2",
        mode="concurrency",
        value=2.0,
        records=(_record(1), _record(2)),
        model="m",
        endpoint="chat",
        wall_anchor_s=0.0,
        generator="infertriage test",
    )
    [path] = write_exports(tmp_path, [level], (ExportFormat.TIMELINE,))
    assert path == tmp_path / "exports" / "timeline" / "concurrency_2.json"
    events = json.loads(path.read_text())["traceEvents"]
    assert {e["args"]["name"] for e in events if e["name"] == "thread_name"} == {"r-1", "r-2"}
