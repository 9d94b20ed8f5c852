"""After the load, `diagnose --otlp-listen` waits for the last spans, and says when none came."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest

from infertriage.api.spans import settle_spans
from infertriage.api.specs import DiagnoseSpec
from infertriage.collect.otlp_receiver import OtlpReceiver
from infertriage.schemas import JsonlWriter, RequestRecord, RunDir, UserError

TRACE = f"{7:032x}"


def _run(tmp_path: Path) -> RunDir:
    run = RunDir.create(tmp_path / "run")
    with JsonlWriter(run.requests) as writer:
        writer.write(
            RequestRecord(id="r-0", scheduled_ts=0.0, sent_ts=0.0, end_ts=1.0, trace_id=TRACE)
        )
    return run


def _export() -> bytes:
    span = {
        "traceId": TRACE,
        "spanId": f"{1:016x}",
        "name": "llm_request",
        "startTimeUnixNano": "1",
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def test_no_span_at_all_is_said_with_the_flags_that_send_them(tmp_path: Path) -> None:
    run = _run(tmp_path)
    with OtlpReceiver("127.0.0.1", 0) as receiver:
        notes = settle_spans(receiver, run, settle_s=0.2)
    assert len(notes) == 1
    assert receiver.endpoint in notes[0] and "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" in notes[0]


def test_it_waits_for_a_late_batch_then_stops_waiting(tmp_path: Path) -> None:
    run = _run(tmp_path)
    with OtlpReceiver("127.0.0.1", 0) as receiver:
        request = urllib.request.Request(
            receiver.endpoint, data=_export(), headers={"Content-Type": "application/json"}
        )
        late = threading.Timer(0.3, lambda: urllib.request.urlopen(request, timeout=30).close())
        late.start()
        notes = settle_spans(receiver, run, settle_s=60.0)  # returns once the span is in
        late.join()
    assert notes == [] and [s.trace_id for s in receiver.spans()] == [TRACE]


@pytest.mark.parametrize(
    ("field", "flag"),
    [
        ("otlp_listen", "--otlp-listen"),
        ("spans", "--spans"),
    ],
)
def test_span_flags_need_a_run_not_one_scrape(field: str, flag: str, tmp_path: Path) -> None:
    value = "127.0.0.1:0" if field == "otlp_listen" else tmp_path / "x.json"
    with pytest.raises(UserError, match=f"{flag} needs a run"):
        DiagnoseSpec.model_validate({"metrics_file": tmp_path / "m.txt", field: value})


def test_a_bad_listen_address_fails_before_any_work() -> None:
    with pytest.raises(UserError, match="HOST:PORT"):
        DiagnoseSpec(otlp_listen="4318")
