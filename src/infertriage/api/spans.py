"""api, level 5: `diagnose`'s OpenTelemetry evidence — the server's request spans.

`--otlp-listen HOST:PORT` receives a server's OTLP/HTTP spans during the run
(`collect.otlp_receiver`: vLLM started with `--otlp-traces-endpoint
http://HOST:PORT/v1/traces` and `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`;
a twin the command starts is pointed there itself); `--spans FILE` reads a
Collector's file export instead (or as well, and with `--from-run`). Both
land in the run's raw/ as OTLP JSON lines, so the join is redone from the run.
After the load, `settle_spans` waits briefly for the last batches; the
analysis joins them to the requests by trace id (`analyze.signals.spans`):
signals for the rules and the join's summary in diagnosis.json.
`--export timeline` writes the client's timeline, with the spans' queue,
prefill and decode on each request's track, as a Chrome/Perfetto trace
(`api.exports`, `report.client_trace`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from infertriage.analyze.signals.spans import (
    SpanJoinResult,
    join_spans,
    merge_span_signals,
    request_spans,
    span_signals,
)
from infertriage.api.interrupt import Interrupt
from infertriage.api.specs import DiagnoseSpec
from infertriage.collect.otlp import read_span_file
from infertriage.collect.otlp_receiver import OtlpReceiver
from infertriage.net.urls import parse_listen
from infertriage.schemas import Diagnosis, RequestRecord, RunDir, Signal
from infertriage.schemas.spans import ServerSpan

__all__ = [
    "RECEIVED_FILE",
    "add_given_spans",
    "run_request_spans",
    "run_span_signals",
    "settle_spans",
    "span_receiver",
    "with_span_join",
]

RECEIVED_FILE = "otlp-spans.jsonl"  # under raw/: what --otlp-listen received
GIVEN_FILE = "otlp-spans-file.jsonl"  # under raw/: the --spans file
# The SDK's batch processor exports every 5 s (vLLM keeps it): a little longer than that.
_SETTLE_S = 7.0
_POLL_S = 0.1


def add_given_spans(spans: Path | None, run: RunDir) -> None:
    """Copy a `--spans` file into the run (read first: a file that is not OTLP JSON fails)."""
    if spans is None:
        return
    read_span_file(spans)
    run.raw.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(spans, run.raw / GIVEN_FILE)


@contextlib.contextmanager
def span_receiver(spec: DiagnoseSpec, run: RunDir) -> Iterator[OtlpReceiver | None]:
    """The `--otlp-listen` receiver for the run (None without it); `--spans` copied first."""
    add_given_spans(spec.spans, run)
    if spec.otlp_listen is None:
        yield None
        return
    host, port = parse_listen(spec.otlp_listen)
    run.raw.mkdir(parents=True, exist_ok=True)
    with OtlpReceiver(host, port, run.raw / RECEIVED_FILE) as receiver:
        yield receiver


def _waiting(receiver: OtlpReceiver, records: Sequence[RequestRecord]) -> int:
    have = {span.trace_id for span in receiver.spans()}
    return sum(1 for r in records if r.ok and r.trace_id and r.trace_id not in have)


def settle_spans(
    receiver: OtlpReceiver | None,
    run: RunDir,
    interrupt: Interrupt | None = None,
    settle_s: float = _SETTLE_S,
) -> list[str]:
    """Wait until every finished request's span has come, or `settle_s`, or Ctrl-C; notes on
    what did not come."""
    if receiver is None:
        return []
    records = list(run.iter_records(run.requests, RequestRecord))
    deadline = time.monotonic() + settle_s
    while _waiting(receiver, records) and time.monotonic() < deadline:
        if interrupt is None:
            time.sleep(_POLL_S)
        elif interrupt.wait(_POLL_S):  # Ctrl-C: what came is kept, no more wait
            break
    notes = [f"--otlp-listen: an export was refused: {error}" for error in receiver.errors]
    if not receiver.num_exports:
        notes.append(
            f"--otlp-listen: no span arrived at {receiver.endpoint}; start vLLM with "
            f"--otlp-traces-endpoint {receiver.endpoint} and "
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf (gRPC is not received)."
        )
    return notes


_Source = Literal["otlp-listen", "spans-file"]


def _run_spans(run: RunDir) -> tuple[list[ServerSpan], _Source] | None:
    """The spans kept in the run and where they came from; None when it holds none."""
    received, given = run.raw / RECEIVED_FILE, run.raw / GIVEN_FILE
    spans: list[ServerSpan] = []
    for path in (received, given):
        if path.is_file():
            spans += read_span_file(path)
    if not received.is_file() and not given.is_file():
        return None
    return spans, "otlp-listen" if received.is_file() else "spans-file"


def _join(run: RunDir, records: Sequence[RequestRecord]) -> tuple[SpanJoinResult, _Source] | None:
    found = _run_spans(run)
    return None if found is None else (join_spans(records, found[0]), found[1])


def run_span_signals(
    run: RunDir, records: Sequence[RequestRecord], signals: Sequence[Signal]
) -> list[Signal]:
    """The run's signals with the spans' figures added (the metrics' own kept first)."""
    joined = _join(run, records)
    if joined is None:
        return list(signals)
    return merge_span_signals(signals, span_signals(joined[0], records))


def with_span_join(
    diagnosis: Diagnosis, run: RunDir, records: Sequence[RequestRecord]
) -> Diagnosis:
    """The diagnosis with the join's summary (`spans`), when the run holds spans."""
    joined = _join(run, records)
    if joined is None:
        return diagnosis
    return diagnosis.model_copy(update={"spans": joined[0].summary(joined[1])})


def run_request_spans(run: RunDir) -> dict[str, ServerSpan]:
    """The server's request spans the run keeps, by trace id (none: empty)."""
    found = _run_spans(run)
    return request_spans(found[0]) if found is not None else {}
