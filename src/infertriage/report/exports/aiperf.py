"""report.exports, level 4: one load level as AIPerf's `profile_export_aiperf.json` and
`profile_export.jsonl`.

Takes an `ExportLevel`; gives the summary document (`aiperf_summary`: AIPerf's
`JsonExportData`, schema 1.4, one `JsonMetricResult` per metric tag) and one
record per request (`aiperf_records`: AIPerf's `MetricRecordInfo`: `metadata`,
`metrics` of `{value, unit}`, `error`), as AIPerf 0.13.0 writes them
(`aiperf/common/models/export_models.py`, `record_models.py`,
`error_models.py`; the metric tags, units and formulas of `aiperf/metrics/types/`).
Each metric keeps AIPerf's definition, computed from our records: times in
milliseconds, `inter_token_latency` (latency − TTFT) / (OSL − 1) (our TPOT),
`inter_chunk_latency` the gaps between content chunks (a read of ours may hold
several SSE events), `benchmark_duration` first send to last finish, throughputs
per second of it, request counts of successful requests. Timestamps are Unix
nanoseconds from the run's wall-clock anchor. What AIPerf measures and we do not
(reasoning and non-reasoning token split, HTTP trace timings, the input config) is
left out. `docs/exports.md` maps every field.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

import numpy as np

from infertriage.analyze.stats.latency import e2e_s, tpot_s
from infertriage.analyze.stats.outcomes import is_incomplete
from infertriage.report.exports.level import (
    ExportLevel,
    chunk_gaps_s,
    finished_ts,
    level_span,
    output_len,
    second_token_s,
)
from infertriage.schemas import RequestRecord

__all__ = ["AIPERF_SCHEMA_VERSION", "JSONL_FILE", "JSON_FILE", "aiperf_records", "aiperf_summary"]

AIPERF_SCHEMA_VERSION = "1.4"  # `JsonExportData.SCHEMA_VERSION` of AIPerf 0.13.0
JSON_FILE = "profile_export_aiperf.json"
JSONL_FILE = "profile_export.jsonl"
_PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
_MS, _NS = 1e3, 1e9
_MILLIS, _TOKENS, _REQUESTS = "ms", "tokens", "requests"


def _dist(values: Sequence[float], unit: str) -> dict[str, object] | None:
    """A record metric's `JsonMetricResult`: avg, p1…p99, min, max, std, count, sum."""
    if not values:
        return None
    data = np.asarray(values, dtype=np.float64)
    out: dict[str, object] = {"unit": unit, "avg": float(data.mean())}
    for p, value in zip(_PERCENTILES, np.percentile(data, _PERCENTILES), strict=True):
        out[f"p{p}"] = float(value)
    out.update(
        min=float(data.min()),
        max=float(data.max()),
        std=float(data.std()),
        count=int(data.size),
        sum=float(data.sum()),
    )
    return out


def _scalar(value: float, unit: str) -> dict[str, object]:
    """A derived or aggregate metric's `JsonMetricResult`: its value as `avg`."""
    return {"unit": unit, "avg": float(value)}


def _wall_ns(level: ExportLevel, ts: float) -> int:
    return round((level.wall_anchor_s + ts) * _NS)


def _record_metrics(record: RequestRecord) -> dict[str, dict[str, object]]:
    """A successful request's record metrics in AIPerf's display units; a failed one's
    input length as `error_isl`."""
    if not record.ok:
        if record.prompt_tokens is None:
            return {}
        return {"error_isl": {"value": record.prompt_tokens, "unit": _TOKENS}}
    out: dict[str, dict[str, object]] = {}
    if record.prompt_tokens is not None:
        out["input_sequence_length"] = {"value": record.prompt_tokens, "unit": _TOKENS}
    timed = (
        ("time_to_first_token", record.ttft_s),
        ("time_to_second_token", second_token_s(record)),
        ("request_latency", e2e_s(record)),
    )
    for tag, seconds in timed:
        if seconds is not None:
            out[tag] = {"value": seconds * _MS, "unit": _MILLIS}
    gaps = chunk_gaps_s(record)
    if gaps:
        out["inter_chunk_latency"] = {"value": [g * _MS for g in gaps], "unit": _MILLIS}
    out["output_sequence_length"] = {"value": output_len(record), "unit": _TOKENS}
    itl = tpot_s(record)
    if itl is not None:
        out["inter_token_latency"] = {"value": itl * _MS, "unit": _MILLIS}
        if itl > 0:
            out["output_token_throughput_per_user"] = {"value": 1 / itl, "unit": "tokens/sec/user"}
    return out


def _error(record: RequestRecord) -> dict[str, object] | None:
    """AIPerf's `ErrorDetails`: the HTTP status as `code`, our error kind as `type`."""
    if record.ok:
        return None
    return {
        "code": record.http_status,
        "type": record.fault or record.error_kind.value,
        "message": record.error_text or record.error_kind.value,
    }


def aiperf_records(level: ExportLevel) -> Iterator[dict[str, object]]:
    """One `MetricRecordInfo` per request, in send order (`profile_export.jsonl`)."""
    for index, record in enumerate(level.records):
        cancelled = is_incomplete(record)
        metadata: dict[str, object] = {
            "session_num": index,
            "x_request_id": record.id,
            "request_start_ns": _wall_ns(level, record.sent_ts),
            "request_ack_ns": None
            if record.headers_ts is None
            else _wall_ns(level, record.headers_ts),
            "request_end_ns": _wall_ns(level, finished_ts(record)),
            "worker_id": "infertriage",
            "record_processor_id": "infertriage",
            "benchmark_phase": "profiling",
            "was_cancelled": cancelled,
            "cancellation_time_ns": _wall_ns(level, finished_ts(record)) if cancelled else None,
        }
        yield {"metadata": metadata, "metrics": _record_metrics(record), "error": _error(record)}


def _values(per_record: Sequence[dict[str, dict[str, object]]], tag: str) -> list[float]:
    """The values of one record metric over the records given (ICL flattened)."""
    out: list[float] = []
    for metrics in per_record:
        metric = metrics.get(tag)
        if metric is None:
            continue
        value = metric["value"]
        if isinstance(value, list):
            out.extend(float(v) for v in value)
        elif isinstance(value, int | float):
            out.append(float(value))
    return out


_RECORD_TAGS = (
    ("time_to_first_token", _MILLIS),
    ("time_to_second_token", _MILLIS),
    ("request_latency", _MILLIS),
    ("inter_token_latency", _MILLIS),
    ("inter_chunk_latency", _MILLIS),
    ("output_token_throughput_per_user", "tokens/sec/user"),
    ("output_sequence_length", _TOKENS),
    ("input_sequence_length", _TOKENS),
)


def _error_summary(records: Sequence[RequestRecord]) -> list[dict[str, object]]:
    """AIPerf's `ErrorDetailsCount`s: each distinct (code, type, message) and its count."""
    counts: dict[tuple[object, object, object], int] = {}
    for record in records:
        error = _error(record)
        if error is not None:
            key = (error["code"], error["type"], error["message"])
            counts[key] = counts.get(key, 0) + 1
    return [
        {"error_details": {"code": code, "type": kind, "message": message}, "count": count}
        for (code, kind, message), count in counts.items()
    ]


def aiperf_summary(level: ExportLevel) -> dict[str, object]:
    """The level's `profile_export_aiperf.json` (see the module docstring)."""
    records = level.records
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    start, end = level_span(records)
    duration = max(end - start, 1e-9)
    out: dict[str, object] = {"schema_version": AIPERF_SCHEMA_VERSION}
    per_record = [_record_metrics(r) for r in ok]
    for tag, unit in _RECORD_TAGS:
        if (dist := _dist(_values(per_record, tag), unit)) is not None:
            out[tag] = dist
    total_osl = sum(output_len(r) for r in ok)
    out.update(
        request_count=_scalar(len(ok), _REQUESTS),
        request_throughput=_scalar(len(ok) / duration, "requests/sec"),
        output_token_throughput=_scalar(total_osl / duration, "tokens/sec"),
        benchmark_duration=_scalar(duration, "sec"),
        total_osl=_scalar(total_osl, _TOKENS),
        total_isl=_scalar(sum(r.prompt_tokens or 0 for r in ok), _TOKENS),
    )
    if failed:
        out["error_request_count"] = _scalar(len(failed), _REQUESTS)
    if level.slos:  # AIPerf's --goodput: requests meeting every SLO
        good = sum(1 for r in ok if all(slo.met(r) for slo in level.slos))
        out["good_request_count"] = _scalar(good, _REQUESTS)
        out["goodput"] = _scalar(good / duration, "requests/sec")
    out["was_cancelled"] = level.interrupted
    if failed:
        out["error_summary"] = _error_summary(failed)
    out["start_time"] = datetime.fromtimestamp(level.wall_anchor_s + start).isoformat()
    out["end_time"] = datetime.fromtimestamp(level.wall_anchor_s + end).isoformat()
    out["metadata"] = {"generator": level.generator, "level": level.name, "model": level.model}
    return out
