"""`diagnose --otlp-listen`: the twin exports vLLM's request spans through the OpenTelemetry
SDK's real OTLP/HTTP exporter to our loopback receiver, and each request's queue, prefill and
decode time is joined to the client's record by its trace id; `--spans` reads them back from a
file export; `--export timeline` writes the client's timeline as a Chrome/Perfetto trace
with the server's queue, prefill and decode on each request's track."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.collect.otlp import read_span_file
from infertriage.engines.vllm_spans import VllmSpan
from infertriage.schemas import RequestRecord, RunDir

SHORT = "synthetic:input=64,output=16"
pytestmark = pytest.mark.slow  # a whole diagnose of a twin: about 12 s


def test_the_servers_spans_join_each_request_by_trace_id(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = diagnose(
        DiagnoseSpec(
            duration_s=3.0,
            concurrency=4,
            workload=SHORT,
            otlp_listen="127.0.0.1:0",
            exports="timeline",
            out=out,
        )
    )
    run = RunDir.open(out)
    records = [r for r in run.iter_records(run.requests, RequestRecord) if r.ok]
    assert records and all(len(r.trace_id) == 32 for r in records)
    assert len({r.trace_id for r in records}) == len(records)  # one trace per request
    spans = {s.trace_id: s for s in read_span_file(out / "raw" / "otlp-spans.jsonl")}
    for record in records:  # every finished request's span came, under its own trace id
        span = spans[record.trace_id]
        assert span.attributes[VllmSpan.REQUEST_ID] == record.server_request_id
        for key in (
            VllmSpan.TIME_IN_QUEUE,
            VllmSpan.TIME_IN_MODEL_PREFILL,
            VllmSpan.TIME_IN_MODEL_DECODE,
        ):
            value = span.number(key)
            assert value is not None and value >= 0
    join = result.diagnosis.spans
    assert join is not None and join.source == "otlp-listen"
    assert join.num_joined == join.num_requests > 0
    by_id = {r.id: r for r in records}
    for joined in join.slowest:
        record = by_id[joined.id]
        span = spans[record.trace_id]
        assert joined.trace_id == record.trace_id
        assert joined.client_ttft_s == record.ttft_s
        assert joined.queue_s == span.number(VllmSpan.TIME_IN_QUEUE)
        assert joined.prefill_s == span.number(VllmSpan.TIME_IN_MODEL_PREFILL)
        assert joined.decode_s == span.number(VllmSpan.TIME_IN_MODEL_DECODE)
    signals = {json.loads(line)["name"] for line in run.signals.read_text().splitlines()}
    assert {"spans.joined_share", "spans.queue_time_p95_s", "spans.ttft_gap_p50_s"} <= signals
    written = json.loads(run.diagnosis.read_text())
    assert written["spans"]["num_joined"] == join.num_joined
    # the timeline: a track per request, named by its id, with its send, first token, chunks
    files = sorted((out / "exports" / "timeline").glob("*.json"))  # one per load level
    assert len(files) >= 3  # the warm-up level(s), the measured one and the overload step
    events = [e for f in files for e in json.loads(f.read_text())["traceEvents"]]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {r.id for r in records} <= tracks
    names = {e["name"] for e in events}
    assert {"request", "send", "first token", "chunk"} <= names
    assert {"server queue", "server prefill", "server decode"} <= names  # from the spans
    # the same join from a file export, with --from-run
    export = tmp_path / "collector.json"
    export.write_bytes((out / "raw" / "otlp-spans.jsonl").read_bytes())
    (out / "raw" / "otlp-spans.jsonl").unlink()
    again = diagnose(DiagnoseSpec(from_run=out, spans=export)).diagnosis.spans
    assert again is not None and again.source == "spans-file"
    assert again.num_joined == join.num_joined
