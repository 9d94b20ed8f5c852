"""report, level 4: `bench` results on screen, as one JSON document and as CSV.

Takes a `BenchResult` (and the records, for the per-request CSV); gives a rich
summary table with each level's validity block (the live view while it runs is
`report.live`), `bench_to_json`
(schema `infertriage.bench/v1`; each level's figures use
vLLM's `bench serve` field names with `_s` for its `_ms`: `mean_ttft_s`,
`p99_itl_s`, `request_throughput`, `output_throughput`, …) and `write_csv`
(requests.csv, one row per request, and summary.csv, one row per level).
Milliseconds appear only on screen. The model, URL, level names, warnings
and error kinds are shown as data (`schemas.text`): never markup, never
terminal control.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.analyze.stats.distribution import Distribution
from infertriage.analyze.stats.latency import LatencySummary, e2e_s, tpot_s, ttfo_s
from infertriage.loadgen.results import (
    BenchResult,
    ClientDiagnostics,
    Knee,
    LevelResult,
    TokenCheck,
)
from infertriage.loadgen.saturation import Saturation
from infertriage.report.maxrate import max_rate_headline, max_rate_table, max_rate_to_json
from infertriage.schemas import RequestRecord, SloResult, Thresholds, Validity
from infertriage.schemas.text import show_controls, terminal_text

__all__ = ["BENCH_SCHEMA", "bench_to_json", "level_slos", "render_bench", "write_csv"]

BENCH_SCHEMA = "infertriage.bench/v1"
# Our metric → the stem vLLM's `bench serve` uses in its result JSON.
_VLLM_STEMS = {
    "ttft": "ttft",
    "ttft_intended": "ttft_intended",
    "ttfo": "ttfo",
    "tpot": "tpot",
    "itl": "itl",
    "icl": "icl",
    "e2e": "e2el",
    "e2e_intended": "e2el_intended",
    "dispatch_lag": "dispatch_lag",
    "client_queue": "client_queue",
}


def _dist_fields(stem: str, dist: Distribution | None) -> dict[str, object]:
    if dist is None:
        return {}
    out: dict[str, object] = {
        f"mean_{stem}_s": dist.mean,
        f"median_{stem}_s": dist.p50,
        f"std_{stem}_s": dist.std,
        f"min_{stem}_s": dist.min,
        f"max_{stem}_s": dist.max,
        f"p90_{stem}_s": dist.p90,
        f"p95_{stem}_s": dist.p95,
        f"p99_{stem}_s": dist.p99,
        f"p99.9_{stem}_s": dist.p999,
    }
    if dist.mean_ci is not None:
        out[f"mean_{stem}_ci95_s"] = list(dist.mean_ci)
    return out


def _summary_json(s: LatencySummary) -> dict[str, object]:
    out: dict[str, object] = {
        "completed": s.num_ok,
        "failed": s.num_failed,
        "incomplete": s.num_incomplete,
        "num_requests": s.num_requests,
        "duration": s.window.duration_s,
        "window": {
            "start_ts": s.window.start_ts,
            "end_ts": s.window.end_ts,
            "basis": s.window.basis,
        },
        "total_input_tokens": s.total_input_tokens,
        "total_output_tokens": s.total_output_tokens,
        "request_throughput": s.request_throughput,
        "request_goodput": s.goodput,
        "goodput_slos": {slo.metric: slo.limit_s for slo in s.slos},
        "output_throughput": s.output_throughput,
        "total_token_throughput": s.total_token_throughput,
        "error_rate": s.error_rate,
        "errors": dict(s.errors),
        # not the server's errors: refused as invalid (4xx) and for load (429)
        "rejected": s.rejections.num_rejected,
        "rejected_rate": s.rejections.share,
        "rejected_causes": dict(s.rejections.causes),
        "rejected_fix": s.rejections.fix or None,
        "refused": s.num_refused,
        "admission_rate": s.admission_rate,
        "resent": s.num_resent,  # sent a second time: the kept-alive connection was closed
        "itl_token_level": s.itl_token_level,
        "num_short_outputs": s.num_short_outputs,
        "output_ratio": s.output_ratio,
    }
    for name, stem in _VLLM_STEMS.items():
        out.update(_dist_fields(stem, getattr(s, name)))
    if s.tokens_per_chunk is not None:
        out["mean_tokens_per_chunk"] = s.tokens_per_chunk.mean
        out["max_tokens_per_chunk"] = s.tokens_per_chunk.max
    return out


def _client_json(c: ClientDiagnostics) -> dict[str, object]:
    return {
        "client_bound": c.client_bound,
        "host_busy": c.host_busy,
        "reasons": list(c.reasons),
        "num_workers": c.num_workers,
        "uvloop": c.uvloop,
        "cpu_s": c.cpu_s,
        "wall_s": c.wall_s,
        "cpu_busiest": c.cpu_busiest,
        "cpu_s_per_10k_chunks": c.cpu_s_per_10k_chunks,
        "num_chunks": c.num_chunks,
        "events_per_read": c.events_per_read,
        "loop_lag_p50_s": c.loop_lag.p50 if c.loop_lag else None,
        "loop_lag_p99_s": c.loop_lag.p99 if c.loop_lag else None,
        "loop_lag_max_s": c.loop_lag.max if c.loop_lag else None,
    }


def level_slos(s: LatencySummary, t: Thresholds) -> tuple[SloResult, ...]:
    """A level's SLOs (TTFT p95, ITL p95, error rate) against `t`; `passed` None unmeasured."""
    checks = [
        ("ttft_p95", t.ttft_p95_s, s.ttft.p95 if s.ttft else None, "s"),
        ("itl_p95", t.itl_p95_s, s.itl.p95 if s.itl else None, "s"),
        ("error_rate", t.error_rate, s.error_rate if s.num_requests else None, "fraction"),
    ]
    return tuple(
        SloResult(
            name=name,
            target=target,
            measured=measured,
            unit=unit,
            passed=None if measured is None else measured <= target,
        )
        for name, target, measured, unit in checks
    )


def _slo_json(s: LatencySummary, t: Thresholds) -> list[dict[str, object]]:
    return [slo.model_dump(mode="json") for slo in level_slos(s, t)]


def level_to_json(level: LevelResult, thresholds: Thresholds) -> dict[str, object]:
    return {
        "name": level.name,
        "mode": level.mode,
        "value": level.value,
        "interrupted": level.interrupted,
        "backoffs": level.num_backoffs,  # closed loop: waits after a fast failure
        "stable": level.stable,
        "over_saturated": level.saturation is not None,  # stopped early (`saturation`)
        **_summary_json(level.summary),
        "slo": _slo_json(level.summary, thresholds),
        "client": _client_json(level.client),
        "valid": level.validity.valid if level.validity is not None else None,
        "validity": level.validity.model_dump(mode="json") if level.validity else None,
        "saturation": _saturation_json(level.saturation),
    }


def _saturation_json(verdict: Saturation | None) -> dict[str, object] | None:
    """An over-saturated level's verdict and evidence (seconds from the level's start)."""
    if verdict is None:
        return None
    return {
        "verdict": "over-saturated",
        "rule": verdict.rule,
        "at_s": verdict.at_s,
        "window_s": verdict.window_s,
        "queue_start": verdict.queue_start,
        "queue_end": verdict.queue_end,
        "queue_slope": verdict.queue_slope,
        "in_flight_start": verdict.in_flight_start,
        "in_flight_end": verdict.in_flight_end,
        "achieved_rate": verdict.achieved_rate,
        "target_rate": verdict.target_rate,
        "ttft_slope": verdict.ttft_slope,
        "num_due": verdict.num_due,
        "num_finished": verdict.num_finished,
        "describe": verdict.describe(),
    }


def _knee_json(knee: Knee | None) -> dict[str, object] | None:
    if knee is None:
        return None
    return {
        "max_throughput": knee.max_throughput,
        "knee_rate": knee.knee_rate,
        "criterion": knee.criterion,
    }


def _token_check_json(check: TokenCheck | None) -> dict[str, object] | None:
    if check is None:
        return None

    def off(measured: int | None, reference: int | None) -> float | None:
        return measured / reference - 1 if measured is not None and reference else None

    return {
        "tokenize": check.form,
        "num_prompts": check.num_prompts,
        "intended_prompt_tokens": check.intended_tokens,
        "tokenize_prompt_tokens": check.server_tokens,
        "tokenize_vs_intended": off(check.server_tokens, check.intended_tokens),
        "usage_prompt_tokens": check.usage_tokens,
        "tokenize_request_tokens": check.request_tokens,
        "usage_vs_tokenize": off(check.usage_tokens, check.request_tokens),
    }


def bench_to_json(result: BenchResult, thresholds: Thresholds | None = None) -> dict[str, object]:
    """The whole run as one JSON document (what `--json` prints and run.json summarises)."""
    t = thresholds or result.thresholds
    return {
        "schema": BENCH_SCHEMA,
        "run_dir": str(result.run_dir),
        "url": result.spec.url,
        "model": result.spec.client.model,
        "endpoint": result.spec.client.endpoint.value,
        "interrupted": result.interrupted,
        "client_bound": any(level.client.client_bound for level in result.levels),
        "levels": [level_to_json(level, t) for level in result.levels],
        "knee": _knee_json(result.knee),
        "token_check": _token_check_json(result.token_check),
        "workload_fit": result.workload_fit.to_json() if result.workload_fit else None,
        "max_rate": max_rate_to_json(result.max_rate),
        "warnings": list(result.warnings),
    }


# --- CSV ------------------------------------------------------------------------------------

_REQUEST_COLUMNS = (
    "id",
    "level",
    "scheduled_ts",
    "sent_ts",
    "client_queue_s",
    "headers_ts",
    "first_token_ts",
    "last_token_ts",
    "end_ts",
    "ttft_s",
    "ttft_intended_s",
    "ttfo_s",
    "tpot_s",
    "e2e_s",
    "num_chunks",
    "prompt_tokens",
    "output_tokens",
    "max_tokens",
    "output_tokens_source",
    "http_status",
    "error_kind",
    "fault",
    "error_text",
)


def _request_row(r: RequestRecord) -> list[object]:
    ttft_intended = None if r.first_token_ts is None else r.first_token_ts - r.scheduled_ts
    return [
        r.id,
        r.labels.get("level", ""),
        r.scheduled_ts,
        r.sent_ts,
        r.client_queue_s,
        r.headers_ts,
        r.first_token_ts,
        r.last_token_ts,
        r.end_ts,
        r.ttft_s,
        ttft_intended,
        ttfo_s(r),
        tpot_s(r),
        e2e_s(r),
        len(r.chunks),
        r.prompt_tokens,
        r.output_tokens,
        r.max_tokens,
        r.output_tokens_source.value,
        r.http_status,
        r.error_kind.value,
        r.fault,
        r.error_text,
    ]


def _cell(value: object) -> object:
    return "" if value is None else value


def write_csv(root: Path, result: BenchResult, records: Sequence[RequestRecord]) -> None:
    """requests.csv (one row per request) and summary.csv (one row per level) in `root`."""
    with (root / "requests.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(_REQUEST_COLUMNS)
        for record in records:
            writer.writerow([_cell(v) for v in _request_row(record)])
    rows = [level_to_json(level, result.thresholds) for level in result.levels]
    flat = [{k: v for k, v in row.items() if not isinstance(v, dict | list)} for row in rows]
    columns = list(dict.fromkeys(key for row in flat for key in row))
    with (root / "summary.csv").open("w", newline="", encoding="utf-8") as handle:
        dict_writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        dict_writer.writeheader()
        for row in flat:
            dict_writer.writerow({k: _cell(v) for k, v in row.items()})


# --- screen -----------------------------------------------------------------------------------


def _ms(dist: Distribution | None, stat: str) -> str:
    if dist is None:
        return "–"
    return f"{getattr(dist, stat) * 1e3:,.1f}"


def _levels_table(result: BenchResult) -> Table:
    table = Table(title="bench (latencies in ms)", title_justify="left")
    table.add_column("level")
    for name in ("ok/err", "req/s", "tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p99"):
        table.add_column(name, justify="right")
    for level in result.levels:
        s = level.summary
        table.add_row(
            terminal_text(level.name),
            f"{s.num_ok}/{s.num_failed}",
            f"{s.request_throughput:,.2f}",
            f"{s.output_throughput:,.0f}",
            _ms(s.ttft, "p50"),
            _ms(s.ttft, "p99"),
            _ms(s.tpot, "p50"),
            _ms(s.itl, "p99"),
        )
    return table


def _level_lines(level: LevelResult, text: Text) -> None:
    s, c = level.summary, level.client
    notes = [
        note
        for flag, note in (
            (level.saturation is not None, "over-saturated, stopped early"),
            (level.stable is False, "unstable"),
            (c.client_bound, "client-bound"),
        )
        if flag
    ]
    head = f"{show_controls(level.name)}{' (' + ', '.join(notes) + ')' if notes else ''}:"
    text.append(
        f"{head} goodput {s.goodput:,.2f} req/s; E2E p99 {_ms(s.e2e, 'p99')} ms; TTFT from "
        f"intended start p99 {_ms(s.ttft_intended, 'p99')} ms; dispatch lag p99 "
        f"{_ms(s.dispatch_lag, 'p99')} ms",
        style="yellow" if notes else "",
    )
    if s.client_queue is not None and s.client_queue.max > 0:
        text.append(f"; client queue p99 {_ms(s.client_queue, 'p99')} ms")
    text.append(
        f"; client CPU {c.cpu_busiest:.0%} of a core, loop lag p99 {_ms(c.loop_lag, 'p99')} ms"
        f"{'' if c.uvloop else ' (no uvloop)'}\n"
    )
    if s.errors:
        kinds = show_controls(", ".join(f"{kind} {count}" for kind, count in s.errors))
        text.append(f"  errors: {kinds}\n", style="red")
    if level.saturation is not None:
        text.append(f"  {show_controls(level.saturation.describe())}\n", style="yellow")
    reuse = level.prefix_reuse
    if reuse is not None and (reuse.reused_tokens or reuse.by_session):
        text.append(f"  {show_controls(reuse.describe())}\n")
    _validity_lines(level.validity, text)


def _validity_lines(validity: Validity | None, text: Text) -> None:
    """'  VALID' or '  INVALID: <reason>; <what would make it valid>', then each check."""
    if validity is None:
        return
    failed = validity.failed
    if not failed:
        text.append("  VALID\n", style="green")
    else:
        more = f" (+{len(failed) - 1} more below)" if len(failed) > 1 else ""
        text.append(f"  INVALID: {show_controls(failed[0].line())}{more}\n", style="red")
    for check in validity.checks:
        mark = "✓" if check.passed else "✗"
        line = check.line() if check.passed else f"{check.line()} (rule: {check.rule})"
        text.append(f"    {mark} {show_controls(line)}\n", style="" if check.passed else "red")


def _token_check_line(check: TokenCheck | None, text: Text) -> None:
    if check is None:
        return
    if check.form == "none" or check.server_tokens is None:
        why = "has no /tokenize" if check.form == "none" else "did not answer /tokenize"
        text.append(f"Prompt tokens: the server {why}; not cross-checked.\n")
        return
    line = (
        f"Prompt tokens ({check.num_prompts} prompts, /tokenize {check.form}): "
        f"{check.server_tokens:,} counted vs {check.intended_tokens:,} intended"
    )
    if check.usage_tokens is not None and check.request_tokens is not None:
        line += f"; usage {check.usage_tokens:,} vs /tokenize {check.request_tokens:,}"
    text.append(line + "\n")


def render_bench(result: BenchResult, console: Console) -> None:
    console.print(terminal_text(f"{result.spec.client.model} at {result.spec.url}", "bold"))
    console.print(_levels_table(result))
    text = Text()
    for level in result.levels:
        _level_lines(level, text)
    if result.knee is not None:
        k = result.knee
        at = f"{k.knee_rate:.3g} req/s" if k.knee_rate is not None else "none found"
        text.append(f"Knee: {at} (max throughput {k.max_throughput:.3g} req/s)\n", style="bold")
        text.append(f"  criterion: {show_controls(k.criterion)}\n")
    if result.max_rate is not None:
        console.print(max_rate_table(result.max_rate))
        text.append_text(max_rate_headline(result.max_rate))
    _token_check_line(result.token_check, text)
    for warning in result.warnings:
        text.append(f"warning: {show_controls(warning)}\n", style="yellow")
    if result.interrupted:
        text.append("Interrupted: the summary covers the requests measured so far.\n", style="red")
    text.append(f"Run directory: {show_controls(str(result.run_dir))}\n")
    console.print(text)
