"""api, level 5: the server's request spans a run keeps, read back and joined to its requests.

A run keeps what `diagnose --otlp-listen` received (raw/otlp-spans.jsonl) and
the `--spans` file it was given (raw/otlp-spans-file.jsonl), both OTLP JSON
lines as the Collector's file exporter writes them; gives the spans by trace
id (the `--export timeline` tracks' server phases), the join's signals for
the rules and its summary for diagnosis.json (`analyze.signals.spans`), so a
live run and `--from-run` read the same files the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from infertriage.analyze.signals.spans import (
    SpanJoinResult,
    join_spans,
    merge_span_signals,
    request_spans,
    span_signals,
)
from infertriage.collect.otlp import load_span_file, read_span_file
from infertriage.schemas import Diagnosis, RequestRecord, RunDir, Signal, UserError
from infertriage.schemas.spans import ServerSpan

__all__ = [
    "GIVEN_FILE",
    "RECEIVED_FILE",
    "add_given_spans",
    "run_request_spans",
    "run_span_signals",
    "with_span_join",
]

RECEIVED_FILE = "otlp-spans.jsonl"  # under raw/: what --otlp-listen received
GIVEN_FILE = "otlp-spans-file.jsonl"  # under raw/: the --spans file


def add_given_spans(spans: Path | None, run: RunDir) -> None:
    """Copy a `--spans` file into the run (read first: a file that is not OTLP JSON fails)."""
    if spans is None:
        return
    data = load_span_file(spans)[0]  # read once: `--spans <(…)` is a pipe
    try:
        run.raw.mkdir(parents=True, exist_ok=True)
        (run.raw / GIVEN_FILE).write_bytes(data)
    except OSError as err:
        raise UserError(f"--spans: cannot keep a copy in {run.raw}: {err.strerror}.") from err


_Source = Literal["otlp-listen", "spans-file"]


def _run_spans(run: RunDir) -> tuple[list[ServerSpan], _Source] | None:
    """The spans kept in the run and where they came from; None when it holds none."""
    received, given = run.raw / RECEIVED_FILE, run.raw / GIVEN_FILE
    spans: list[ServerSpan] = []
    for path in (received, given):  # the run's own files: the receiver's grows with the run
        if path.is_file():
            spans += read_span_file(path, bounded=False)
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
