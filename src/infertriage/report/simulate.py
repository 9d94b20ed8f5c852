"""report, level 4: a `simulate` result on screen (rich); the scenario and workload shown as data.

Takes a `SimulationResult`; prints, in `bench`'s terms and units (latencies in ms, TTFT,
ITL, TPOT, E2E, ok/err, req/s, output tok/s), one table per load stage when there are
several (each request counted in the stage it arrived in), then the run's table, with
the engine's queue time, the engine and GPU figures, and the twin's measured error under
load on the scenario's GPU (`plan.serving_fidelity`).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from infertriage.schemas.text import terminal_text
from infertriage.twin.results import LatencyPercentiles, SimulationResult, StageSummary

__all__ = ["render_simulation"]

_STATS = ("mean", "p50", "p90", "p95", "p99")


def _ms(summary: LatencyPercentiles) -> list[str]:
    if summary.count == 0:
        return ["–"] * len(_STATS)
    values = (summary.mean_s, summary.p50_s, summary.p90_s, summary.p95_s, summary.p99_s)
    return [f"{v * 1e3:,.1f}" for v in values]


def _latency_table(title: str, rows: list[tuple[str, LatencyPercentiles]]) -> Table:
    table = Table(title=terminal_text(title), title_justify="left")
    table.add_column("latency (ms)")
    for name in _STATS:
        table.add_column(name, justify="right")
    for name, summary in rows:
        table.add_row(name, *_ms(summary))
    return table


def _outcome(num_ok: int, num_failed: int, num_timed_out: int) -> str:
    timed_out = f", {num_timed_out} timed out" if num_timed_out else ""
    return f"ok/err {num_ok}/{num_failed}{timed_out}"


def _stage_table(stage: StageSummary) -> Table:
    title = (
        f"stage {stage.index + 1}: {stage.rate_rps:g} req/s for {stage.duration_s:g} s from "
        f"{stage.start_ts:g} s — {stage.num_requests} sent (achieved "
        f"{stage.achieved_rate_rps:.2f} req/s), "
        f"{_outcome(stage.num_completed, stage.num_failed, stage.num_timed_out)}; "
        f"{stage.request_throughput_rps:,.2f} req/s, {stage.output_throughput_tok_s:,.0f} tok/s"
    )
    rows = [("TTFT", stage.ttft), ("ITL", stage.itl), ("TPOT", stage.tpot), ("E2E", stage.e2e)]
    return _latency_table(title, rows)


def _run_title(result: SimulationResult) -> str:
    load = (
        f"{len(result.stages)} stages"
        if len(result.stages) > 1
        else f"{result.num_requests} requests at {result.rate_rps:g} req/s"
    )
    timeout = f", time-out {result.timeout_s:g} s" if result.timeout_s is not None else ""
    num_failed = result.num_errors + result.num_rejected + result.num_timed_out
    return (
        f"simulate {result.scenario}: {load} ({result.arrivals}), workload {result.workload}"
        f"{timeout} — {_outcome(result.num_completed, num_failed, result.num_timed_out)}"
    )


def render_simulation(result: SimulationResult, console: Console) -> None:
    if len(result.stages) > 1:
        for stage in result.stages:
            console.print(_stage_table(stage))
    rows = [
        ("TTFT", result.ttft),
        ("ITL", result.itl),
        ("TPOT", result.tpot),
        ("E2E", result.e2e),
        ("queue time", result.queue_time),
    ]
    console.print(_latency_table(_run_title(result), rows))
    spec = (
        f"; draft acceptance {result.spec_acceptance_rate:.0%}"
        if result.spec_acceptance_rate is not None
        else ""
    )
    if result.offload_hit_rate is not None:  # a CPU offload tier (issue 33)
        spec += (
            f"; offload tier hits {result.offload_hit_rate:.0%} of the GPU's misses "
            f"({result.offload_stored_blocks:,} blocks stored, "
            f"{result.offload_loaded_blocks:,} loaded)"
        )
    console.print(
        f"throughput {result.output_throughput_tok_s:,.0f} output tok/s, "
        f"{result.request_throughput_rps:.2f} req/s; queue {result.queue_share_of_ttft:.0%} of "
        f"TTFT; preemptions {result.num_preemptions}; KV usage mean {result.kv_usage_mean:.0%} "
        f"max {result.kv_usage_max:.0%}; prefix hits {result.prefix_cache_hit_rate:.0%}{spec}\n"
        f"GPU_UTIL {result.gpu_util:.0%}, SM active {result.sm_active:.0%}; communication "
        f"{result.comm_share:.0%} of step time; front end busy {result.frontend_busy:.0%}\n"
        f"{result.duration_s:.1f} s simulated in {result.wall_s:.2f} s ({result.speedup:.0f}×)"
    )
    console.print(terminal_text(f"Twin error: {result.fidelity}"))
