"""report, level 4: a `simulate` result on screen (rich); the scenario's name shown as data."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from infertriage.schemas.text import terminal_text
from infertriage.twin.results import LatencyPercentiles, SimulationResult

__all__ = ["render_simulation"]


def _ms(summary: LatencyPercentiles) -> list[str]:
    return [f"{v * 1e3:,.1f}" for v in (summary.p50_s, summary.p90_s, summary.p95_s, summary.p99_s)]


def render_simulation(result: SimulationResult, console: Console) -> None:
    title = (
        f"simulate {result.scenario}: {result.num_requests} requests at {result.rate_rps:g} "
        f"req/s ({result.arrivals})"
    )
    table = Table(title=terminal_text(title), title_justify="left")
    table.add_column("latency (ms)")
    for name in ("p50", "p90", "p95", "p99"):
        table.add_column(name, justify="right")
    for name, summary in (
        ("TTFT", result.ttft),
        ("ITL", result.itl),
        ("E2E", result.e2e),
        ("queue time", result.queue_time),
    ):
        table.add_row(name, *_ms(summary))
    console.print(table)
    spec = (
        f"; draft acceptance {result.spec_acceptance_rate:.0%}"
        if result.spec_acceptance_rate is not None
        else ""
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
