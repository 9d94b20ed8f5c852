"""collect, level 2: an OTLP/HTTP trace receiver on this host, for the length of a run.

Takes an address (`127.0.0.1:4318`; port 0 picks a free one) and a file to
keep what arrives in; serves `POST /v1/traces` on a thread of its own (the
load's event loop never waits on it) and gives the spans received. Each
export is written to the file as one OTLP JSON line, as the OpenTelemetry
Collector's file exporter writes them, so `--spans` (and `--from-run`) read
it back the same way. What it decodes is `collect.otlp`'s: JSON, and
protobuf where `opentelemetry-proto` is importable; an export it cannot
read is answered 400 or 415 with the reason, which it also keeps (`errors`).
"""

from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Self

import orjson

from infertriage.collect.otlp import (
    JSON_TYPE,
    PROTOBUF_TYPE,
    OtlpError,
    decode_export,
    spans_of,
)
from infertriage.schemas import UserError
from infertriage.schemas.spans import ServerSpan

__all__ = ["TRACES_PATH", "OtlpReceiver"]

TRACES_PATH = "/v1/traces"
_MAX_BODY = 64 * 1024**2
_MAX_ERRORS = 5


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        if self.path.split("?")[0] != TRACES_PATH:
            self._answer(404, JSON_TYPE, b'{"message":"OTLP traces are posted to /v1/traces"}')
            return
        length_text = self.headers.get("Content-Length") or ""
        if not length_text.isdigit():  # a chunked body is not read: the SDKs send a length
            self._answer(411, JSON_TYPE, b'{"message":"an export carries its Content-Length"}')
            return
        length = int(length_text)
        if length > _MAX_BODY:
            self._answer(413, JSON_TYPE, b'{"message":"the export is too large"}')
            return
        body = self.rfile.read(length)
        content_type = self.headers.get("Content-Type", "")
        try:
            document = decode_export(body, content_type, self.headers.get("Content-Encoding", ""))
        except OtlpError as err:
            self.server.receiver.take_error(err.message)
            self._answer(err.status, JSON_TYPE, orjson.dumps({"message": err.message}))
            return
        try:
            self.server.receiver.take(document)
        except OSError as err:  # its file cannot be written: 503, which the exporter retries
            message = f"an export could not be kept: {err.strerror or err}"
            self.server.receiver.take_error(message)
            self._answer(503, JSON_TYPE, orjson.dumps({"message": message}))
            return
        # an empty ExportTraceServiceResponse, in the encoding the export came in
        if content_type.split(";", maxsplit=1)[0].strip().lower() == PROTOBUF_TYPE:
            self._answer(200, PROTOBUF_TYPE, b"")
        else:
            self._answer(200, JSON_TYPE, b"{}")

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # no access log on the command's stderr


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], receiver: OtlpReceiver) -> None:
        # the host's own family (an IPv6 literal such as ::1 too), as http.server's CLI picks
        # it; the class default binds IPv4 only
        self.address_family = socket.getaddrinfo(*address, type=socket.SOCK_STREAM)[0][0]
        super().__init__(address, _Handler)
        self.receiver = receiver

    def handle_error(self, request: object, client_address: object) -> None:
        # an export that could not be taken (its file not writable): a note on the run, not
        # a traceback on the command's stderr
        error = sys.exc_info()[1]
        self.receiver.take_error(f"an export could not be taken: {error}")


class OtlpReceiver:
    """`with OtlpReceiver("127.0.0.1", 0, run.raw / "otlp-spans.jsonl") as rx: … rx.endpoint`"""

    def __init__(self, host: str, port: int, sink: Path | None = None) -> None:
        self.host, self.port, self.sink = host, port, sink
        self._spans: list[ServerSpan] = []
        self.errors: list[str] = []
        self.num_exports = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The URL an OTLP/HTTP exporter is given (vLLM's `--otlp-traces-endpoint`)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{TRACES_PATH}"

    def spans(self) -> list[ServerSpan]:
        with self._lock:
            return list(self._spans)

    def take(self, document: dict[str, object]) -> None:
        spans = spans_of(document)
        with self._lock:
            if self.sink is not None:  # kept on disk first: what is counted is in the file
                with self.sink.open("ab") as out:
                    out.write(orjson.dumps(document) + b"\n")
            self.num_exports += 1
            self._spans += spans

    def take_error(self, message: str) -> None:
        with self._lock:
            if len(self.errors) < _MAX_ERRORS and message not in self.errors:
                self.errors.append(message)

    def start(self) -> str:
        try:
            self._server = _Server((self.host, self.port), self)
        except OSError as err:
            where = f"{self.host}:{self.port}"
            raise UserError(f"--otlp-listen cannot listen on {where}: {err.strerror}.") from err
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-receiver", daemon=True
        )
        self._thread.start()
        return self.endpoint

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
