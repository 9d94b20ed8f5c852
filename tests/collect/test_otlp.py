"""OTLP/HTTP spans: the receiver reads what the OpenTelemetry SDK's own exporter sends
(protobuf), OTLP JSON as the specification writes it, gzip, and the Collector's file export."""

from __future__ import annotations

import gzip
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from infertriage.collect import otlp
from infertriage.collect.otlp import read_span_file, spans_of
from infertriage.collect.otlp_receiver import OtlpReceiver
from infertriage.net.urls import parse_listen
from infertriage.schemas import UserError

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "eee19b7ec3c1b174"
PARENT = "b7ad6b7169203331"

# An ExportTraceServiceRequest in OTLP JSON, as the specification's example writes one:
# ids in hex, int64 in strings, the kind as an integer.
DOCUMENT = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]},
            "scopeSpans": [
                {
                    "scope": {"name": "vllm.llm_engine"},
                    "spans": [
                        {
                            "traceId": TRACE,
                            "spanId": SPAN,
                            "parentSpanId": PARENT,
                            "name": "llm_request",
                            "kind": 2,
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": "1544712661000000000",
                            "attributes": [
                                {
                                    "key": "gen_ai.latency.time_in_queue",
                                    "value": {"doubleValue": 0.25},
                                },
                                {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "512"}},
                                {
                                    "key": "gen_ai.request.id",
                                    "value": {"stringValue": "chatcmpl-1"},
                                },
                                {"key": "flag", "value": {"boolValue": True}},
                                {"key": "list", "value": {"arrayValue": {"values": []}}},
                            ],
                        }
                    ],
                }
            ],
        }
    ]
}


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[OtlpReceiver]:
    with OtlpReceiver("127.0.0.1", 0, tmp_path / "spans.jsonl") as rx:
        yield rx


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_otlp_json_document_gives_its_spans() -> None:
    [span] = spans_of(DOCUMENT)
    assert (span.trace_id, span.span_id, span.parent_span_id) == (TRACE, SPAN, PARENT)
    assert (span.name, span.kind, span.service) == ("llm_request", 2, "vllm")
    assert (span.start_ns, span.end_ns) == (1544712660000000000, 1544712661000000000)
    assert span.number("gen_ai.latency.time_in_queue") == 0.25
    assert span.attributes["gen_ai.usage.prompt_tokens"] == 512
    assert span.attributes["gen_ai.request.id"] == "chatcmpl-1"
    assert span.attributes["flag"] is True
    assert "list" not in span.attributes  # arrays are not a plain value
    assert span.number("gen_ai.request.id") is None


def test_receiver_takes_json_and_gzip_and_keeps_them_as_the_file_exporter_does(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    body = json.dumps(DOCUMENT).encode()
    status, answer = _post(receiver.endpoint, body, {"Content-Type": "application/json"})
    assert (status, json.loads(answer)) == (200, {})
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    assert _post(receiver.endpoint, gzip.compress(body), headers)[0] == 200
    assert [s.trace_id for s in receiver.spans()] == [TRACE, TRACE]
    assert read_span_file(tmp_path / "spans.jsonl") == receiver.spans()


def test_receiver_refuses_what_it_cannot_read(receiver: OtlpReceiver) -> None:
    status, answer = _post(receiver.endpoint, b"<xml/>", {"Content-Type": "text/xml"})
    assert status == 415 and b"application/json" in answer
    status, _ = _post(receiver.endpoint, b"{not json", {"Content-Type": "application/json"})
    assert status == 400
    wrong = receiver.endpoint.replace("/v1/traces", "/v1/metrics")
    assert _post(wrong, b"{}", {"Content-Type": "application/json"})[0] == 404
    assert not receiver.spans() and len(receiver.errors) == 2


def test_protobuf_without_opentelemetry_proto_is_one_clear_refusal(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp, "_protobuf_modules", lambda: None)  # as if it were not installed
    status, answer = _post(
        receiver.endpoint, b"\x0a\x00", {"Content-Type": "application/x-protobuf"}
    )
    assert status == 415
    assert "opentelemetry-proto" in json.loads(answer)["message"]
    assert not otlp.protobuf_supported()


def test_the_sdk_exporter_s_protobuf_spans_arrive_whole(receiver: OtlpReceiver) -> None:
    """The OpenTelemetry SDK's own OTLP/HTTP exporter (protobuf), parented on a traceparent."""
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint)))
    context = TraceContextTextMapPropagator().extract({"traceparent": f"00-{TRACE}-{PARENT}-01"})
    span = provider.get_tracer("test").start_span(
        "llm_request",
        context=context,
        kind=SpanKind.SERVER,
        start_time=1_000_000_000,
        attributes={"gen_ai.latency.time_in_queue": 0.5, "gen_ai.usage.prompt_tokens": 7},
    )
    span.end(end_time=3_000_000_000)
    provider.shutdown()
    [got] = receiver.spans()
    assert (got.trace_id, got.parent_span_id, got.name, got.kind) == (
        TRACE,
        PARENT,
        "llm_request",
        2,
    )
    assert got.span_id == format(span.get_span_context().span_id, "016x")
    assert (got.start_ns, got.end_ns, got.service) == (1_000_000_000, 3_000_000_000, "vllm")
    assert got.attributes == {"gen_ai.latency.time_in_queue": 0.5, "gen_ai.usage.prompt_tokens": 7}


def test_a_file_export_and_its_errors(tmp_path: Path) -> None:
    lines = tmp_path / "export.json"
    lines.write_text(json.dumps(DOCUMENT) + "\n" + json.dumps(DOCUMENT) + "\n")
    assert len(read_span_file(lines)) == 2
    whole = tmp_path / "pretty.json"
    whole.write_text(json.dumps(DOCUMENT, indent=2))
    assert len(read_span_file(whole)) == 1
    broken = tmp_path / "broken.json"
    broken.write_bytes(b"\x0a\x0b not json")
    with pytest.raises(UserError, match="not OTLP JSON"):
        read_span_file(broken)


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:4318") == ("127.0.0.1", 4318)
    assert parse_listen(":0") == ("127.0.0.1", 0)
    for bad in ("4318", "host:port", "h:70000"):
        with pytest.raises(UserError, match="HOST:PORT"):
            parse_listen(bad)


def test_a_cut_gzip_export_is_one_clear_error(tmp_path: Path) -> None:
    cut = tmp_path / "spans.json.gz"
    cut.write_bytes(gzip.compress(json.dumps(DOCUMENT).encode())[:30])
    with pytest.raises(UserError, match="gzip file is broken"):
        read_span_file(cut)


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this host")
def test_receiver_listens_on_an_ipv6_address(tmp_path: Path) -> None:
    """`--otlp-listen [::1]:PORT` binds the address it names (the server class alone binds
    IPv4 and refused it)."""
    with OtlpReceiver("::1", 0, tmp_path / "spans.jsonl") as rx:
        assert rx.endpoint.startswith("http://[::1]:")
        body = json.dumps(DOCUMENT).encode()
        assert _post(rx.endpoint, body, {"Content-Type": "application/json"})[0] == 200
        assert [s.trace_id for s in rx.spans()] == [TRACE]
