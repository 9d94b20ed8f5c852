"""collect, level 2: OTLP trace documents — decoded from OTLP/HTTP bodies and files, as spans.

Takes the body of an OTLP/HTTP export (`POST /v1/traces`) with its
`Content-Type` and `Content-Encoding`, or a file of the OpenTelemetry
Collector's file exporter (one OTLP JSON document per line); gives the
document in OTLP JSON (`ExportTraceServiceRequest`: `resourceSpans` →
`scopeSpans` → `spans`, ids in hex, enums as integers) and its spans as
`ServerSpan`s. Supported: OTLP JSON (`application/json`) always; OTLP protobuf
(`application/x-protobuf`, what the Python and Go SDKs' HTTP exporters send)
when `opentelemetry-proto` is importable (it comes with
`opentelemetry-exporter-otlp-proto-http`), else one clear error (415); gzip
bodies either way. OTLP over gRPC is not received.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import importlib
import io
import math
import os
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from infertriage.schemas import UserError
from infertriage.schemas.spans import AttrValue, ServerSpan

__all__ = [
    "JSON_TYPE",
    "PROTOBUF_TYPE",
    "OtlpError",
    "decode_export",
    "load_span_file",
    "protobuf_supported",
    "read_span_file",
    "spans_of",
]

JSON_TYPE = "application/json"
PROTOBUF_TYPE = "application/x-protobuf"
_TRACE_HEX, _SPAN_HEX = 32, 16
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
# an export's body, inflated, is at most this: a small gzip body must not fill the memory
MAX_INFLATED = 256 * 1024**2
_NO_WAIT = getattr(os, "O_NONBLOCK", 0)  # not on Windows, which has no FIFO files


class OtlpError(Exception):
    """An export that cannot be read: `status` is the HTTP answer to it (400, 415)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _protobuf_modules() -> tuple[Any, Any, Any] | None:
    """(trace_service_pb2, json_format, message) of opentelemetry-proto and protobuf, or None."""
    try:
        return (
            importlib.import_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2"),
            importlib.import_module("google.protobuf.json_format"),
            importlib.import_module("google.protobuf.message"),
        )
    except ImportError:
        return None


def protobuf_supported() -> bool:
    """Can OTLP protobuf bodies be decoded here (`opentelemetry-proto` importable)?"""
    return _protobuf_modules() is not None


_NO_PROTOBUF = (
    "this receiver reads OTLP/HTTP JSON; OTLP protobuf needs the opentelemetry-proto package "
    "(pip install 'infertriage[otel]'), or have the exporter send JSON "
    "(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json)"
)


def decode_export(body: bytes, content_type: str, content_encoding: str = "") -> dict[str, Any]:
    """One OTLP/HTTP trace export as an OTLP JSON document; `OtlpError` when it cannot be."""
    body = _inflate(body, content_encoding.strip().lower())
    media = content_type.split(";", maxsplit=1)[0].strip().lower()
    if media == JSON_TYPE:
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise OtlpError(400, f"the body is not JSON: {err}") from err
        if not isinstance(document, dict):
            raise OtlpError(400, "an OTLP JSON export is an object with `resourceSpans`")
        return document
    if media == PROTOBUF_TYPE:
        return _protobuf_document(body)
    raise OtlpError(415, f"unsupported Content-Type {media or '(none)'!r}: send {JSON_TYPE}")


def _inflate(body: bytes, encoding: str) -> bytes:
    if encoding in {"", "identity"}:
        return body
    if encoding == "gzip":
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # one gzip member
        try:
            data = inflater.decompress(body, MAX_INFLATED)
        except zlib.error as err:
            raise OtlpError(400, f"the gzip body is broken: {err}") from err
        if inflater.unconsumed_tail:
            raise OtlpError(413, f"the gzip body inflates past {MAX_INFLATED // 1024**2} MiB")
        if not inflater.eof:
            raise OtlpError(400, "the gzip body is broken: it ends before its end")
        return data
    raise OtlpError(415, f"unsupported Content-Encoding {encoding!r}: send gzip or none")


def _protobuf_document(body: bytes) -> dict[str, Any]:
    modules = _protobuf_modules()
    if modules is None:
        raise OtlpError(415, _NO_PROTOBUF)
    service, json_format, protobuf_message = modules
    message = service.ExportTraceServiceRequest()
    try:
        message.ParseFromString(body)
    except protobuf_message.DecodeError as err:
        raise OtlpError(400, f"the body is not an OTLP protobuf export: {err}") from err
    document: dict[str, Any] = json_format.MessageToDict(message, use_integers_for_enums=True)
    # protobuf's JSON mapping writes bytes in base64; OTLP JSON writes trace and span ids in hex
    for span in _raw_spans(document):
        for key in _ID_KEYS:
            if isinstance(span.get(key), str):
                span[key] = _base64_hex(span[key])
    return document


def _base64_hex(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


def _raw_spans(document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for _, spans in _scoped(document):
        yield from spans


def _scoped(document: Mapping[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(service.name, spans) of each scope of each resource in the document."""
    for resource_spans in _dicts(document.get("resourceSpans")):
        resource = resource_spans.get("resource")
        attrs = _attributes(resource.get("attributes") if isinstance(resource, dict) else None)
        service = attrs.get("service.name", "")
        # `instrumentationLibrarySpans`: OTLP's name for `scopeSpans` before 0.15
        scopes = resource_spans.get("scopeSpans") or resource_spans.get(
            "instrumentationLibrarySpans"
        )
        for scope in _dicts(scopes):
            yield str(service), list(_dicts(scope.get("spans")))


def _dicts(value: object) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _any_value(value: object) -> AttrValue | None:
    """An OTLP `AnyValue` as a plain value; arrays, maps and bytes are left out."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:  # an int64: a string in OTLP JSON, a number from some writers
        try:
            integer = int(value["intValue"])
        except (TypeError, ValueError, OverflowError):
            return None
        return integer if -(2**63) <= integer < 2**63 else None  # past it: not a float either
    if "doubleValue" in value:  # NaN and infinities are no measure: left out
        try:
            number = float(value["doubleValue"])
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None
    return None


def _attributes(value: object) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for item in _dicts(value):
        key, plain = item.get("key"), _any_value(item.get("value"))
        if isinstance(key, str) and plain is not None:
            out[key] = plain
    return out


def _hex_id(value: object, digits: int) -> str:
    """A trace or span id in lowercase hex ("" when it is none); base64 ones are turned."""
    if not isinstance(value, str) or not value:
        return ""
    text = value.lower()
    if len(text) == digits and all(c in "0123456789abcdef" for c in text):
        return text
    turned = _base64_hex(value)
    return turned if len(turned) == digits else ""


def _nanos(value: object) -> int | None:
    """A fixed64 time in Unix nanoseconds; None when it is none, or not one."""
    try:
        nanos = int(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
    except ValueError:
        return None
    return nanos if nanos is not None and 0 <= nanos < 2**64 else None


def spans_of(document: Mapping[str, Any]) -> list[ServerSpan]:
    """The spans of one OTLP JSON document; a span without a valid trace id is left out."""
    out: list[ServerSpan] = []
    for service, spans in _scoped(document):
        for raw in spans:
            trace_id = _hex_id(raw.get("traceId"), _TRACE_HEX)
            start, end = _nanos(raw.get("startTimeUnixNano")), _nanos(raw.get("endTimeUnixNano"))
            if not trace_id or start is None:
                continue
            kind = raw.get("kind", 0)
            out.append(
                ServerSpan(
                    trace_id=trace_id,
                    span_id=_hex_id(raw.get("spanId"), _SPAN_HEX),
                    name=str(raw.get("name", "")),
                    start_ns=start,
                    end_ns=end if end is not None else start,
                    parent_span_id=_hex_id(raw.get("parentSpanId"), _SPAN_HEX),
                    kind=kind if isinstance(kind, int) and not isinstance(kind, bool) else 0,
                    service=service,
                    attributes=_attributes(raw.get("attributes")),
                )
            )
    return out


def read_span_file(path: Path, flag: str = "--spans", *, bounded: bool = True) -> list[ServerSpan]:
    """The spans of an OTLP JSON file: the Collector's file exporter (one document a line),
    or one document; `UserError` when it is not OTLP JSON (its protobuf form included).
    `bounded`: a file the user gave holds at most `MAX_INFLATED` bytes; a run's own file
    (the receiver's, which grows with the run) is read whole."""
    return load_span_file(path, flag, bounded=bounded)[1]


def _read_once(path: Path, flag: str, limit: int | None) -> bytes:
    """At most one byte past `limit` (/dev/zero never ends). A FIFO is opened without
    waiting for a writer: `<(…)` has one already, a FIFO nothing writes to reads as empty."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | _NO_WAIT), "rb") as stream:
            if _NO_WAIT:  # open did not wait; the reads wait for the writer's bytes
                os.set_blocking(stream.fileno(), True)
            data = stream.read(-1 if limit is None else limit + 1)
    except OSError as err:
        raise UserError(f"{flag} {path}: {err.strerror or err}.") from err
    if not data and not path.is_file():
        raise UserError(
            f"{flag} {path} gave no bytes: nothing had written to it, nor held it open, when "
            "it was read (start the writer first, or give `<(…)`)."
        )
    return data


def load_span_file(
    path: Path, flag: str = "--spans", *, bounded: bool = True
) -> tuple[bytes, list[ServerSpan]]:
    """The file's bytes, read once (a pipe, `<(…)`, reads only once), and its spans
    (`bounded`: see `read_span_file`)."""
    limit = MAX_INFLATED if bounded else None
    given = data = _read_once(path, flag, limit)
    if limit is not None and len(data) > limit:
        raise UserError(
            f"{flag} {path} is larger than {limit >> 20} MiB; a run's spans take a few "
            "MiB, so it is likely the wrong file."
        )
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as inflated:  # every member
                data = inflated.read(-1 if limit is None else limit + 1)  # a bomb stops there
        except (OSError, EOFError, zlib.error) as err:
            raise UserError(f"{flag} {path}: the gzip file is broken ({err}).") from err
        if limit is not None and len(data) > limit:
            raise UserError(f"{flag} {path} inflates past {limit >> 20} MiB: a gzip bomb?")
    documents = _documents(data)
    if documents is None:
        try:
            documents = [orjson.loads(data)]
        except orjson.JSONDecodeError as err:
            raise UserError(
                f"{flag} {path} is not OTLP JSON (the Collector's file exporter with "
                f"`format: json` writes it; its proto format is not read): {err}."
            ) from err
    if any(not isinstance(document, dict) for document in documents):
        raise UserError(f"{flag} {path} is not OTLP JSON: each line is an object with spans.")
    out: list[ServerSpan] = []
    for document in documents:
        out += spans_of(document)
    return given, out


def _documents(data: bytes) -> list[Any] | None:
    """The file's JSON lines; a last line cut short (its writer stopped mid-line: no newline
    after it) is left out, the complete ones kept. None when another line is not JSON."""
    lines = [line for line in data.splitlines() if line.strip()]
    documents: list[Any] = []
    for number, line in enumerate(lines, start=1):
        try:
            documents.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            cut_short = number == len(lines) > 1 and not data.rstrip(b" \t").endswith(b"\n")
            return documents if cut_short else None
    return documents
