"""report, level 4: MLPerf LoadGen's summary block for a `--standard mlperf` level.

Takes `loadgen.standards.ServerVerdict`s; gives the "MLPerf Results Summary" block in
LoadGen's shape (`summary_text`: mlcommons/inference loadgen/results.cc `LogSummary` at
7ad9af18733e34e2599dee5c155a780329e3b3ac, the Server scenario with token latencies —
latencies in ns, rates with two decimals — then its "Test Parameters Used", where
`ttft_latency (ns)` and `tpot_latency (ns)` are added to LoadGen's list), the file of
all levels (`summary_file`, what bench writes as mlperf_log_summary.txt), its JSON form
(`verdict_json`) and a bench document with each level's verdict under `mlperf`
(`with_verdicts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infertriage.loadgen.standards import MODE, SCENARIO, LatencyStats, ServerVerdict

__all__ = ["SUMMARY_FILE", "summary_file", "summary_text", "verdict_json", "with_verdicts"]

SUMMARY_FILE = "mlperf_log_summary.txt"
_RULE = "=" * 48


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _yes(met: bool) -> str:
    return "Yes" if met else "NO"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _stats(stats: LatencyStats | None, name: str, pct: str, width: int) -> list[str]:
    if stats is None:
        return [f"{name}: none finished"]
    lines = [
        f"{f'Min {name} (ns)':<{width}}: {_ns(stats.min_s)}",
        f"{f'Max {name} (ns)':<{width}}: {_ns(stats.max_s)}",
        f"{f'Mean {name} (ns)':<{width}}: {_ns(stats.mean_s)}",
    ]
    lines += [
        f"{p * 100:.2f} percentile {pct} (ns)   : {_ns(value)}" for p, value in stats.percentiles
    ]
    return lines


def summary_text(verdict: ServerVerdict) -> str:
    """One level's block, as LoadGen writes mlperf_log_summary.txt."""
    v, s = verdict, verdict.settings
    lines = [
        _RULE,
        "MLPerf Results Summary",
        _RULE,
        f"SUT name : {v.sut_name}",
        f"Scenario : {SCENARIO}",
        f"Mode     : {MODE}",
        f"Completed samples per second    : {_rate(v.completed_samples_per_s)}",
        f"Completed tokens per second: {_rate(v.completed_tokens_per_s)}",
        f"Result is : {'VALID' if v.valid else 'INVALID'}",
        f"  Performance constraints satisfied : {_yes(v.performance_met)}",
        f"  Min duration satisfied : {_yes(v.min_duration_met)}",
        f"  Min queries satisfied : {_yes(v.min_queries_met)}",
        f"  Early stopping satisfied: {_yes(v.early_stopping_met)}",
    ]
    if not v.valid:
        lines.append("Recommendations:")
        lines += [f" * {line}" for line in v.recommendations()]
    lines += [
        "TTFT Early Stopping Result:",
        v.early_stopping_text(v.early_ttft),
        "TPOT Early Stopping Result:",
        v.early_stopping_text(v.early_tpot),
        "",
        _RULE,
        "Additional Stats",
        _RULE,
        f"Scheduled samples per second : {_rate(v.scheduled_samples_per_s)}",
        *_stats(v.latency, "latency", "latency", 32),
        "",
        f"{'Completed tokens per second':<44}: {_rate(v.completed_tokens_per_s)}",
        *_stats(v.ttft, "First Token latency", "first token latency", 44),
        "",
        *_stats(v.tpot, "Time to Output Token", "time to output token", 45),
        "",
        _RULE,
        "Test Parameters Used",
        _RULE,
        "samples_per_query : 1",
        f"target_qps : {s.target_qps:g}",
        "target_latency (ns): 0",
        f"ttft_latency (ns): {_ns(s.ttft_limit_s)}",
        f"tpot_latency (ns): {_ns(s.tpot_limit_s)}",
        "max_async_queries : 0",
        f"min_duration (ms): {round(s.min_duration_s * 1e3)}",
        "max_duration (ms): 0",
        f"min_query_count : {s.min_query_count}",
        "max_query_count : 0",
        f"qsl_rng_seed : {s.qsl_rng_seed}",
        f"sample_index_rng_seed : {s.sample_index_rng_seed}",
        f"schedule_rng_seed : {s.schedule_rng_seed}",
    ]
    return "\n".join(lines) + "\n"


def summary_file(verdicts: Sequence[ServerVerdict]) -> str:
    """Every level's block, each headed by its level (bench's mlperf_log_summary.txt)."""
    return "\n".join(f"# level {v.level}\n{summary_text(v)}" for v in verdicts)


def _stats_json(stats: LatencyStats | None) -> dict[str, Any] | None:
    if stats is None:
        return None
    return {
        "min_s": stats.min_s,
        "max_s": stats.max_s,
        "mean_s": stats.mean_s,
        "percentiles": {f"p{p * 100:g}": value for p, value in stats.percentiles},
    }


def _finite(value: float) -> float | None:
    return value if value != float("inf") else None


def verdict_json(verdict: ServerVerdict) -> dict[str, Any]:
    """The verdict as JSON (run.json's level `mlperf`, bench's `--json`)."""
    v, s = verdict, verdict.settings
    early = {
        name: {
            "met": e.met,
            "num_over": e.num_over,
            "needed": e.needed,
            "more": e.more,
            "text": v.early_stopping_text(e).strip(),
        }
        for name, e in (("ttft", v.early_ttft), ("tpot", v.early_tpot))
    }
    return {
        "standard": "mlperf",
        "scenario": SCENARIO,
        "model": s.model,
        "sut_name": v.sut_name,
        "result": "VALID" if v.valid else "INVALID",
        "performance_constraints_met": v.performance_met,
        "min_duration_met": v.min_duration_met,
        "min_queries_met": v.min_queries_met,
        "early_stopping_met": v.early_stopping_met,
        "recommendations": v.recommendations(),
        "early_stopping": early,
        "num_queries": v.num_queries,
        "num_tokens": v.num_tokens,
        "final_scheduled_s": v.final_scheduled_s,
        "completed_samples_per_s": v.completed_samples_per_s,
        "completed_tokens_per_s": v.completed_tokens_per_s,
        "scheduled_samples_per_s": v.scheduled_samples_per_s,
        "ttft_p99_s": _finite(v.ttft_p_s),
        "tpot_p99_s": _finite(v.tpot_p_s),
        "latency": _stats_json(v.latency),
        "ttft": _stats_json(v.ttft),
        "tpot": _stats_json(v.tpot),
        "settings": {
            "target_qps": s.target_qps,
            "ttft_limit_s": s.ttft_limit_s,
            "tpot_limit_s": s.tpot_limit_s,
            "percentile": s.percentile,
            "confidence": s.confidence,
            "min_duration_s": s.min_duration_s,
            "min_query_count": s.min_query_count,
            "qsl_rng_seed": s.qsl_rng_seed,
            "sample_index_rng_seed": s.sample_index_rng_seed,
            "schedule_rng_seed": s.schedule_rng_seed,
        },
    }


def with_verdicts(document: dict[str, Any], verdicts: Sequence[ServerVerdict]) -> dict[str, Any]:
    """bench's JSON document with each judged level's verdict under the level's `mlperf`."""
    if not verdicts:
        return document
    by_level = {v.level: verdict_json(v) for v in verdicts}
    levels = [
        {**level, "mlperf": by_level[level["name"]]}
        if isinstance(level, dict) and level.get("name") in by_level
        else level
        for level in document.get("levels", [])
    ]
    return {**document, "levels": levels}
