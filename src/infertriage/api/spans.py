"""api, level 5: `diagnose`'s OpenTelemetry evidence — the server's request spans.

`--otlp-listen HOST:PORT` receives a server's OTLP/HTTP spans during the run
(`collect.otlp_receiver`: vLLM started with `--otlp-traces-endpoint
http://HOST:PORT/v1/traces` and `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`;
a twin the command starts is pointed there itself); `--spans FILE` reads a
Collector's file export instead (or as well, and with `--from-run`). Both
land in the run's raw/ as OTLP JSON lines, so the join is redone from the run.
After the load, `settle_spans` waits briefly for the last batches; the
analysis joins them to the requests by trace id (`api.runspans`: signals for
the rules, the join's summary in diagnosis.json, `with_span_join`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence

from infertriage.api.interrupt import Interrupt
from infertriage.api.runspans import RECEIVED_FILE, add_given_spans, with_span_join
from infertriage.api.specs import DiagnoseSpec
from infertriage.collect.otlp_receiver import OtlpReceiver
from infertriage.net.urls import parse_listen
from infertriage.schemas import RequestRecord, RunDir

__all__ = ["settle_spans", "span_receiver", "with_span_join"]

# The SDK's batch processor exports every 5 s (vLLM keeps it): a little longer than that.
_SETTLE_S = 7.0
_POLL_S = 0.1


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
